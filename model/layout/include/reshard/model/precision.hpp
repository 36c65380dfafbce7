// A precision change on the way: BF16 training weights served as FP8 (docs/design.md, "Precision
// change"). A scenario's `destination.precision` names a format and the tensor classes it applies
// to; the 2-D weights of those classes end up on the destination as FP8 E4M3 with scales:
//   fp8_block  one FP32 scale per bn x bk block (DeepSeek-V3 `weight_block_size: [128, 128]`):
//              scale tensor `<name>_scale_inv` [ceil(out / bn), ceil(in / bk)], s = amax / 448
//   mxfp8      one E8M0 scale per 32 consecutive elements of a row (OCP MX):
//              scale tensor `<name>_scale` [out, ceil(in / 32)], s = 2^(floor(log2 amax) - 8)
//   mxfp4      OCP MX FP4: E2M1 values (largest 6), one E8M0 scale per 32 elements of a row,
//              s = 2^(floor(log2 amax) - 2); two values a byte, so a weight quantised at the source
//              travels as [out, in / 2] bytes (DType FP4x2, Quantization::packed 2: its boxes in
//              bytes, 16 a block) with `<name>_scale` [out, ceil(in / 32)] -- gpt-oss's released
//              experts (`*_blocks`, `*_scales`), which vLLM and SGLang serve as they are
// A block at the end of a dimension that is not a multiple of the block is partial and has a
// scale of its own (DeepSeek-V3's kv_a_proj_with_mqa, 576 rows: 5 block rows).
//
// Where the conversion runs (`quantize_at`):
//   source       a weight every source shard of which holds whole blocks is quantised by the source
//                GPUs and travels as FP8 with its scale tensor (sharded as the weight: a shard with
//                box B holds the scale blocks that B covers); a weight some source shard cuts a
//                block of cannot (that block's scale needs elements the shard lacks): it travels
//                in its model dtype and the destination converts it;
//   destination  every quantised weight travels in its model dtype; the destination converts.
// So for every transfer the bytes on the network are exact: a source-quantised piece of e elements
// moves e bytes of FP8 (e / 2 of FP4), and the scale pieces move 4 bytes (fp8_block) or 1 byte
// (mxfp8, mxfp4) per block.
// Destination shards must hold whole blocks (vLLM refuses a tensor-parallel split that cuts a
// block); apply_precision refuses a layout that does not.
//
// Conversion cost, per GPU g that converts (memory-bound elementwise work):
//   bytes(g) = sum over the shards it holds of converted weights of
//              elements * (size(model dtype) + 1) + blocks * size(scale dtype)   (FP8)
//              elements * size(model dtype) + elements / 2 + blocks              (MXFP4)
//   t(g)     = bytes(g) / memory_bandwidth(g)          (Topology::gpu_memory_bandwidth)
//   T_convert_source = max over source GPUs, T_convert_destination = max over destination GPUs;
// the source converts before it sends and the destination after it has received, so both add to
// the transfer time (model/cost.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reshard/model/layout.hpp"

namespace reshard::model {

struct PrecisionSpec {
  QuantFormat format = QuantFormat::None;  // `format: bf16` keeps the model dtype
  std::int64_t block_rows = 128, block_cols = 128;  // fp8_block: `weight_block_size`
  std::vector<TensorClass> classes;                  // the classes quantised (2-D weights only)
  QuantSite site = QuantSite::Source;                // `quantize_at`
};
const char* to_string(QuantFormat f);  // "bf16", "fp8_block", "mxfp8", "mxfp4"

// The scale blocks a box of a quantised weight covers, as a box of its scale tensor:
// [floor(lo / b), ceil(hi / b)) per dimension (b the block's extent in that dimension).
Box scale_box(const Box& weight_box, const Quantization& q);
// Whether a box holds whole blocks: every bound a multiple of the block or the tensor's extent.
bool block_aligned(const Box& box, const TensorInfo& t, std::int64_t block_rows, std::int64_t block_cols);

// Turns the model's inventory and layouts into what travels: quantised weights marked (and at the
// source given FP8 and a scale tensor, appended after the model's tensors and sharded as their
// weight on both sides). No change when the format is None. Throws PlanError naming the tensor, the
// destination shard and the block when a destination shard cuts a block.
void apply_precision(const PrecisionSpec& spec, Inventory& inv, ShardMap& src, ShardMap& dst);

// The conversion work of each GPU, in memory bytes read and written (see above), sorted by GPU;
// GPUs without any are absent.
struct ConversionWork {
  std::vector<std::pair<GpuId, Bytes>> source, destination;
  Bytes source_bytes, destination_bytes;  // sums over the GPUs
  std::int64_t source_tensors = 0, destination_tensors = 0;  // weights converted at each side
};
ConversionWork conversion_work(const Inventory& inv, const ShardMap& src, const ShardMap& dst);

// What a precision change did to an inventory apply_precision returned: weights quantised at each
// side, and the model's bytes in its own dtype (scale tensors left out) beside the bytes that
// travel (FP8 payload + scales for source-quantised weights).
struct PrecisionSummary {
  std::int64_t at_source = 0, at_destination = 0;
  Bytes model_bytes, wire_bytes;
};
PrecisionSummary summarize_precision(const Inventory& inv);

}  // namespace reshard::model

// A precision change on the way (see precision.hpp for the formats, the rule for where a weight is
// converted and the conversion's cost).
#include "reshard/model/precision.hpp"

#include <algorithm>
#include <map>

#include "reshard/model/errors.hpp"

namespace reshard::model {

const char* to_string(QuantFormat f) {
  switch (f) {
    case QuantFormat::None: return "bf16";
    case QuantFormat::Fp8Block: return "fp8_block";
    case QuantFormat::Mxfp8: return "mxfp8";
    case QuantFormat::Mxfp4: return "mxfp4";
  }
  return "?";
}

namespace {

std::int64_t block_of(const Quantization& q, std::size_t dim) { return dim == 0 ? q.block_rows : q.block_cols; }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Blocks of a box: the product of the block ranges it touches.
std::int64_t blocks_in(const Box& box, const Quantization& q) { return scale_box(box, q).elements(); }

}  // namespace

Box scale_box(const Box& weight_box, const Quantization& q) {
  Box b;
  for (std::size_t d = 0; d < weight_box.dims.size(); ++d) {
    const std::int64_t k = block_of(q, d);
    b.dims.push_back({weight_box.dims[d].lo / k, ceil_div(weight_box.dims[d].hi, k)});
  }
  return b;
}

bool block_aligned(const Box& box, const TensorInfo& t, std::int64_t block_rows, std::int64_t block_cols) {
  for (std::size_t d = 0; d < box.dims.size(); ++d) {
    const std::int64_t k = d == 0 ? block_rows : block_cols;
    const Interval& iv = box.dims[d];
    if (iv.lo % k != 0 || (iv.hi % k != 0 && iv.hi != t.shape[d])) return false;
  }
  return true;
}

namespace {
// A weight vLLM loads into a merged column-parallel layer (q/k/v_proj -> qkv_proj, gate/up_proj ->
// gate_up_proj), where it tolerates a TP split that cuts an FP8 block.
bool in_merged_column_layer(const std::string& name) {
  for (const char* part : {".q_proj.", ".k_proj.", ".v_proj.", ".gate_proj.", ".up_proj."})
    if (name.find(part) != std::string::npos) return true;
  return false;
}
}  // namespace

void apply_precision(const PrecisionSpec& spec, Inventory& inv, ShardMap& src, ShardMap& dst) {
  if (spec.format == QuantFormat::None) return;
  const bool mx = spec.format == QuantFormat::Mxfp8 || spec.format == QuantFormat::Mxfp4;
  const bool fp4 = spec.format == QuantFormat::Mxfp4;
  const std::int64_t br = mx ? 1 : spec.block_rows;
  const std::int64_t bc = mx ? 32 : spec.block_cols;
  std::vector<TensorInfo> tensors = inv.tensors();
  std::vector<TensorInfo> scales;
  const auto model_tensors = static_cast<std::int32_t>(tensors.size());
  for (TensorInfo& t : tensors) {
    if (t.shape.size() != 2 || std::find(spec.classes.begin(), spec.classes.end(), t.cls) == spec.classes.end() ||
        (t.dtype != DType::BF16 && t.dtype != DType::FP16 && t.dtype != DType::FP32))
      continue;
    for (const Shard& sh : dst.shards(t.id))
      if (!block_aligned(sh.box, t, br, bc))
        throw PlanError("tensor '" + t.name + "': destination shard " + to_string(sh.box) + " cuts the " +
                        std::to_string(br) + " x " + std::to_string(bc) + " scale blocks of " + to_string(spec.format) +
                        (in_merged_column_layer(t.name)
                             ? " (vLLM accepts this in its merged qkv_proj / gate_up_proj layers, "
                               "_maybe_allow_fp8_block_shape_mismatch, where a scale block then straddles two "
                               "ranks' rows and the block's scale belongs to neither; reshard refuses it: every "
                               "shard bound must be a multiple of the block or the tensor's end)"
                             : " (every shard bound must be a multiple of the block or the tensor's end, as vLLM "
                               "requires of a tensor-parallel split)"));
    bool source_whole = spec.site == QuantSite::Source;
    for (const Shard& sh : src.shards(t.id)) source_whole = source_whole && block_aligned(sh.box, t, br, bc);
    Quantization& q = t.quant;
    q.format = spec.format;
    q.block_rows = br;
    q.block_cols = bc;
    q.model_dtype = t.dtype;
    q.site = source_whole ? QuantSite::Source : QuantSite::Destination;
    if (!source_whole) continue;
    // Quantised by the source: FP8 (or packed FP4 pairs) on the wire, with its scale tensor.
    TensorInfo s = t;
    s.name = t.name + (spec.format == QuantFormat::Fp8Block ? "_scale_inv" : "_scale");  // x.weight_scale_inv
    s.shape = {ceil_div(t.shape[0], br), ceil_div(t.shape[1], bc)};
    s.dtype = spec.format == QuantFormat::Fp8Block ? DType::FP32 : DType::E8M0;
    s.fused = FusedPart::None;
    s.column_parts.clear();
    s.tp_groups = 0;
    s.quant.scale_of = t.id;
    s.quant.scale = -1;
    t.dtype = DType::FP8;
    if (fp4) {
      // Two E2M1 values a byte, along the row: the payload is [out, in / 2] bytes, each box's columns
      // halved (block-aligned bounds are even: a multiple of 32 or the row's end, which must be even).
      if (t.shape[1] % 2 != 0)
        throw PlanError("tensor '" + t.name + "': mxfp4 packs two values a byte along a row of " +
                        std::to_string(t.shape[1]) + " elements, an odd count");
      t.dtype = DType::FP4x2;
      t.shape[1] /= 2;
      q.packed = 2;
      q.block_cols = bc / 2;
      for (ShardMap* map : {&src, &dst})
        map->map_boxes(t.id, [](const Box& b) {
          Box h = b;
          h.dims[1] = {b.dims[1].lo / 2, b.dims[1].hi / 2};
          return h;
        });
    }
    q.scale = model_tensors + static_cast<std::int32_t>(scales.size());
    scales.push_back(std::move(s));
  }
  for (auto& s : scales) tensors.push_back(std::move(s));
  const auto added = static_cast<std::int32_t>(tensors.size()) - model_tensors;
  src.add_tensors(added);
  dst.add_tensors(added);
  for (std::int32_t id = model_tensors; id < static_cast<std::int32_t>(tensors.size()); ++id) {
    const TensorInfo& w = tensors[static_cast<std::size_t>(tensors[static_cast<std::size_t>(id)].quant.scale_of)];
    for (ShardMap* map : {&src, &dst})
      for (const Shard& sh : map->shards(w.id)) map->add_shard(id, scale_box(sh.box, w.quant), sh.ranks);
  }
  inv = inv.with_tensors(std::move(tensors));
}

ConversionWork conversion_work(const Inventory& inv, const ShardMap& src, const ShardMap& dst) {
  std::map<GpuId, Bytes> at_source, at_destination;
  ConversionWork w;
  for (const TensorInfo& t : inv.tensors()) {
    const Quantization& q = t.quant;
    if (!q.converted()) continue;
    const bool source = q.site == QuantSite::Source;
    (source ? w.source_tensors : w.destination_tensors) += 1;
    const ShardMap& map = source ? src : dst;
    auto& per_gpu = source ? at_source : at_destination;
    const std::int64_t scale_size = q.format == QuantFormat::Fp8Block ? 4 : 1;
    for (const Shard& sh : map.shards(t.id)) {
      // Read in the model dtype, written as FP8 (1 byte) or FP4 (half a byte) with the scales.
      const std::int64_t elements = sh.box.elements() * q.packed;
      const std::int64_t written = q.format == QuantFormat::Mxfp4 ? (elements + 1) / 2 : elements;
      const Bytes b{elements * dtype_size(q.model_dtype) + written + blocks_in(sh.box, q) * scale_size};
      map.rank_set(sh.ranks).for_each([&](Rank r) { per_gpu[map.gpu_of(r)] += b; });
    }
  }
  for (const auto& [g, b] : at_source) {
    w.source.emplace_back(g, b);
    w.source_bytes += b;
  }
  for (const auto& [g, b] : at_destination) {
    w.destination.emplace_back(g, b);
    w.destination_bytes += b;
  }
  return w;
}

PrecisionSummary summarize_precision(const Inventory& inv) {
  PrecisionSummary s;
  s.wire_bytes = inv.bytes();
  for (const TensorInfo& t : inv.tensors()) {
    const Quantization& q = t.quant;
    if (q.scale_of >= 0) continue;
    s.model_bytes += Bytes{t.elements() * q.packed * dtype_size(q.converted() ? q.model_dtype : t.dtype)};
    if (q.converted()) (q.site == QuantSite::Source ? s.at_source : s.at_destination) += 1;
  }
  return s;
}

}  // namespace reshard::model

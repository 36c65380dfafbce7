// The host side of a precision change (model/precision.hpp): the quantiser the source and the
// destination run on a shard, and the reference the check compares with, element by element.
//
// FP8 E4M3 (OCP, "FN": no infinity): 1 sign, 4 exponent (bias 7), 3 mantissa bits; normal values
// 2^(e-7) (1 + m/8), subnormal m 2^-9, largest 448, NaN S.1111.111. A float converts by rounding
// to the nearest representable value, ties to even mantissa, and saturates to +-448 (so no value
// becomes NaN).
// Scales, with amax the largest |v| of a block:
//   fp8_block  as DeepGEMM's per_block_cast_to_fp8, the quantiser vLLM and SGLang ship: amax
//              clamped at 1e-4; q = e4m3(v * (448 / amax)) (FP32), ties to even as torch's
//              float8_e4m3fn cast; scale s = amax / 448 (FP32); a weight is q * s
//   mxfp8      as the OCP MX reference: X = floor(log2 amax) - 8 (8: E4M3's largest exponent),
//              clamped to [-127, 127] (-127 when amax is 0); scale byte X + 127 (E8M0);
//              q = e4m3(v * 2^-X), ties away from zero
// Source values: weight_bf16 (pattern.hpp) of the weight's global element index.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "reshard/model/precision.hpp"

namespace reshard::exec::detail {

// How a value halfway between two E4M3 values rounds.
enum class Ties : std::uint8_t { ToEven, AwayFromZero };
std::uint8_t e4m3(float x, Ties ties = Ties::ToEven);  // round to nearest, saturating
float e4m3_value(std::uint8_t q);    // the value of an E4M3 byte (NaN for S.1111.111)
float bf16_value(std::uint16_t b);

// The scale of a block of largest magnitude amax: the factor its values are multiplied by before
// the E4M3 conversion, the FP32 scale a weight is recovered with (fp8_block) and the E8M0 byte
// (mxfp8).
struct BlockScale {
  float factor = 1;  // q = e4m3(v * factor)
  float scale = 1;   // fp8_block: v ~ q * scale
  std::uint8_t exponent_byte = 127;
};

// One weight's quantiser over a box holding whole blocks: `values` are the box's elements in
// row-major order; writes the E4M3 bytes (same order) to `payload` and the scales of the blocks the
// box covers (model::scale_box order, 4 bytes FP32 or 1 byte E8M0 each) to `scales`.
void quantize_box(const model::TensorInfo& w, const model::Box& box, const std::vector<float>& values,
                  unsigned char* payload, std::vector<unsigned char>& scales);

// The reference: what every byte of a quantised weight and of its scale tensor must be, from the
// source values of the whole block (each block's scale computed once, on first use).
class ReferenceQuantizer {
 public:
  explicit ReferenceQuantizer(const model::TensorInfo& weight) : w_(weight) {}
  std::uint8_t payload(std::int64_t index);                  // E4M3 byte of weight element `index`
  void scale_bytes(std::int64_t block, unsigned char* out);  // scale `block` (row-major in the scale tensor)

 private:
  const BlockScale& scale(std::int64_t block_row, std::int64_t block_col);
  model::TensorInfo w_;
  std::unordered_map<std::int64_t, BlockScale> scales_;
};

// The bytes element `index` of tensor t must hold where a precision change touches it (a weight
// quantised at the source: E4M3; its scale tensor: the scale; a weight quantised at the
// destination: its BF16 source value on the wire); false for any other tensor (pattern_bytes).
// `quantizers` caches a reference per weight.
bool converted_bytes(const model::Inventory& inv, const model::TensorInfo& t, std::int64_t index,
                     std::unordered_map<std::int32_t, ReferenceQuantizer>& quantizers, unsigned char* out);

}  // namespace reshard::exec::detail

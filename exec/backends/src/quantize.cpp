// The quantiser and its reference (quantize.hpp has the formats and the rounding rule).
#include "quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "reshard/exec/pattern.hpp"
#include "reshard/exec/executor.hpp"

namespace reshard::exec::detail {

using namespace reshard::model;

std::uint8_t e4m3(float x, Ties ties) {
  if (std::isnan(x)) return 0x7F;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 448.0) return sign | 0x7E;  // saturate
  // Nearest integer of a non-negative v: ties to even (the default rounding mode) or away from 0.
  const auto nearest = [ties](double v) { return ties == Ties::ToEven ? std::nearbyint(v) : std::floor(v + 0.5); };
  if (a < std::ldexp(1.0, -6)) {
    // Subnormal: m 2^-9, m = 0..7; m = 8 rounds up to the smallest normal, whose byte is 8 too.
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(nearest(std::ldexp(a, 9))));
  }
  int e = 0;
  const double f = std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  int exponent = e - 1;                 // a = (2f) 2^(e - 1), 2f in [1, 2)
  int mantissa = static_cast<int>(nearest((2 * f - 1) * 8));
  if (mantissa == 8) {
    mantissa = 0;
    ++exponent;
  }
  // a < 448 keeps exponent <= 8 and, at 8, mantissa <= 6.
  return static_cast<std::uint8_t>(sign | ((exponent + 7) << 3) | mantissa);
}

float e4m3_value(std::uint8_t q) {
  const int e = (q >> 3) & 15, m = q & 7;
  if (e == 15 && m == 7) return std::nanf("");
  const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(1.0 + m / 8.0, e - 7);
  return static_cast<float>((q & 0x80) ? -v : v);
}

float bf16_value(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

namespace {

// fp8_block as DeepGEMM's per_block_cast_to_fp8 (the quantiser vLLM and SGLang ship): amax clamped
// at 1e-4, factor 448 / amax, scale amax / 448, both in FP32.
constexpr float kFp8BlockAmaxFloor = 1e-4f;

BlockScale block_scale(QuantFormat f, float amax) {
  BlockScale s;
  if (f == QuantFormat::Fp8Block) {
    const float a = std::max(amax, kFp8BlockAmaxFloor);
    s.factor = 448.0f / a;
    s.scale = a / 448.0f;
    return s;
  }
  int x = -127;
  if (amax > 0) {
    int e = 0;
    std::frexp(amax, &e);  // amax = f 2^e, f in [0.5, 1): floor(log2 amax) = e - 1
    x = std::clamp(e - 1 - 8, -127, 127);
  }
  s.factor = std::ldexp(1.0f, -x);
  s.scale = std::ldexp(1.0f, x);
  s.exponent_byte = static_cast<std::uint8_t>(x + 127);
  return s;
}

// fp8_block rounds as torch's float8_e4m3fn cast (ties to even); mxfp8 as the OCP MX reference
// (ties away from zero).
std::uint8_t quantize(QuantFormat f, float v, float factor) {
  return e4m3(v * factor, f == QuantFormat::Fp8Block ? Ties::ToEven : Ties::AwayFromZero);
}

void write_scale(QuantFormat f, const BlockScale& s, unsigned char* out) {
  if (f == QuantFormat::Fp8Block) std::memcpy(out, &s.scale, 4);  // FP32, little-endian host
  else out[0] = s.exponent_byte;
}

std::int64_t scale_size(QuantFormat f) { return f == QuantFormat::Fp8Block ? 4 : 1; }

}  // namespace

void quantize_box(const TensorInfo& w, const Box& box, const std::vector<float>& values, unsigned char* payload,
                  std::vector<unsigned char>& scales) {
  const Quantization& q = w.quant;
  if (!block_aligned(box, w, q.block_rows, q.block_cols))
    throw ExecError("tensor '" + w.name + "': box " + to_string(box) + " does not hold whole scale blocks", -1, -1);
  const Box sb = scale_box(box, q);
  const Interval rows = box.dims[0], cols = box.dims[1];
  const std::int64_t width = cols.size();
  scales.assign(static_cast<std::size_t>(sb.elements() * scale_size(q.format)), 0);
  std::int64_t k = 0;
  for (std::int64_t bi = sb.dims[0].lo; bi < sb.dims[0].hi; ++bi)
    for (std::int64_t bj = sb.dims[1].lo; bj < sb.dims[1].hi; ++bj, ++k) {
      const std::int64_t r0 = bi * q.block_rows, r1 = std::min(r0 + q.block_rows, rows.hi);
      const std::int64_t c0 = bj * q.block_cols, c1 = std::min(c0 + q.block_cols, cols.hi);
      auto at = [&](std::int64_t r, std::int64_t c) {
        return static_cast<std::size_t>((r - rows.lo) * width + (c - cols.lo));
      };
      float amax = 0;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(values[at(r, c)]));
      const BlockScale s = block_scale(q.format, amax);
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) payload[at(r, c)] = quantize(q.format, values[at(r, c)], s.factor);
      write_scale(q.format, s, scales.data() + k * scale_size(q.format));
    }
}

const BlockScale& ReferenceQuantizer::scale(std::int64_t block_row, std::int64_t block_col) {
  const std::int64_t cols = w_.shape[1];
  const std::int64_t key = block_row * (cols / w_.quant.block_cols + 1) + block_col;
  auto it = scales_.find(key);
  if (it != scales_.end()) return it->second;
  const std::int64_t r0 = block_row * w_.quant.block_rows, r1 = std::min(r0 + w_.quant.block_rows, w_.shape[0]);
  const std::int64_t c0 = block_col * w_.quant.block_cols, c1 = std::min(c0 + w_.quant.block_cols, cols);
  float amax = 0;
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t c = c0; c < c1; ++c)
      amax = std::max(amax, std::fabs(bf16_value(weight_bf16(pattern_word(w_.id, r * cols + c)))));
  return scales_.emplace(key, block_scale(w_.quant.format, amax)).first->second;
}

std::uint8_t ReferenceQuantizer::payload(std::int64_t index) {
  const std::int64_t cols = w_.shape[1], r = index / cols, c = index % cols;
  const BlockScale& s = scale(r / w_.quant.block_rows, c / w_.quant.block_cols);
  return quantize(w_.quant.format, bf16_value(weight_bf16(pattern_word(w_.id, index))), s.factor);
}

void ReferenceQuantizer::scale_bytes(std::int64_t block, unsigned char* out) {
  const std::int64_t scale_cols = (w_.shape[1] + w_.quant.block_cols - 1) / w_.quant.block_cols;
  const BlockScale& s = scale(block / scale_cols, block % scale_cols);
  write_scale(w_.quant.format, s, out);
}

bool converted_bytes(const Inventory& inv, const TensorInfo& t, std::int64_t index,
                     std::unordered_map<std::int32_t, ReferenceQuantizer>& quantizers, unsigned char* out) {
  const Quantization& q = t.quant;
  if (q.format == QuantFormat::None) return false;
  const std::int32_t weight = q.scale_of >= 0 ? q.scale_of : t.id;
  auto ref = [&]() -> ReferenceQuantizer& {
    return quantizers.try_emplace(weight, inv.tensor(weight)).first->second;
  };
  if (q.scale_of >= 0) {
    ref().scale_bytes(index, out);
  } else if (q.site == QuantSite::Source) {
    out[0] = ref().payload(index);
  } else {
    const std::uint16_t v = weight_bf16(pattern_word(t.id, index));
    std::memcpy(out, &v, 2);  // little-endian host
  }
  return true;
}

}  // namespace reshard::exec::detail

// The fill pattern, shared by host code and CUDA kernels (see executor.hpp).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define RESHARD_HD __host__ __device__ inline
#else
#define RESHARD_HD inline
#endif

namespace reshard::exec::detail {

// splitmix64's finaliser over a mix of the tensor id and the element index.
RESHARD_HD std::uint64_t pattern_word(std::int32_t tensor, std::int64_t index) {
  std::uint64_t x = static_cast<std::uint64_t>(index) * 0x9E3779B97F4A7C15ULL +
                    (static_cast<std::uint64_t>(tensor) + 1) * 0xD1B54A32D192ED03ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Byte i (< 8) of the element's value; byte 0 has its low bit set so no element is all zero.
RESHARD_HD unsigned char pattern_byte(std::uint64_t word, int i) {
  const unsigned char b = static_cast<unsigned char>(word >> (8 * i));
  return i == 0 ? static_cast<unsigned char>(b | 1u) : b;
}

// The BF16 value of element `index` of a weight that a precision change quantises
// (model/precision.hpp), in place of pattern_byte's raw bytes (which include NaN and values 2^127
// apart, meaningless to quantise): sign from bit 15, exponent 2^-8 .. 2^7 from bits 8-11, mantissa
// from bits 0-6, so every value is finite, non-zero and |v| in [2^-8, 2^8).
RESHARD_HD std::uint16_t weight_bf16(std::uint64_t word) {
  const std::uint16_t sign = static_cast<std::uint16_t>((word >> 15) & 1u) << 15;
  const std::uint16_t exponent = static_cast<std::uint16_t>(127 - 8 + ((word >> 8) & 15u)) << 7;
  return static_cast<std::uint16_t>(sign | exponent | (word & 0x7Fu));
}

}  // namespace reshard::exec::detail

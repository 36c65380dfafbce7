// The piece digest's arithmetic (exec/verify.hpp, piece_digest), shared by the host and the GPU
// backends' digest kernel (exec/backends/src/kernels.cu):
//   h = n + sum_i w_i (2 i + 1)  mod 2^64
// n the piece's byte count, w_i the i-th little-endian 64-bit word of its bytes in row-major order
// (the last word zero-padded). Each term depends on one word and its index only, so any split of
// the bytes adds up to the same h, in any order: byte j alone contributes
// b_j 2^(8 (j mod 8)) (2 floor(j / 8) + 1), which is what digest_bytes sums over a run of bytes at
// piece position `pos`.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define RESHARD_DIGEST_HD __host__ __device__ inline
#else
#define RESHARD_DIGEST_HD inline
#endif

namespace reshard::exec::detail {

// The terms of bytes p[0, n), byte 0 at position `pos` of its piece (mod 2^64; the host and every
// GPU are little-endian, so a word read from memory is w_i).
RESHARD_DIGEST_HD std::uint64_t digest_bytes(std::int64_t pos, const unsigned char* p, std::int64_t n) {
  std::uint64_t h = 0;
  std::int64_t j = 0;
  for (; j < n && (pos + j) % 8 != 0; ++j) {
    const std::int64_t at = pos + j;
    h += (static_cast<std::uint64_t>(p[j]) << (8 * (at % 8))) * static_cast<std::uint64_t>(2 * (at / 8) + 1);
  }
  for (; j + 8 <= n; j += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + j, 8);
    h += w * static_cast<std::uint64_t>(2 * ((pos + j) / 8) + 1);
  }
  for (; j < n; ++j) {
    const std::int64_t at = pos + j;
    h += (static_cast<std::uint64_t>(p[j]) << (8 * (at % 8))) * static_cast<std::uint64_t>(2 * (at / 8) + 1);
  }
  return h;
}

}  // namespace reshard::exec::detail

#include "reshard/exec/verify.hpp"

#include <bit>
#include <cstring>

#include "reshard/exec/program.hpp"

#include "reshard/exec/digest_terms.hpp"
#include "reshard/exec/pattern.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::exec {

std::uint64_t pattern_word(std::int32_t tensor, std::int64_t index) { return detail::pattern_word(tensor, index); }

void pattern_bytes(std::int32_t tensor, std::int64_t index, int element_size, unsigned char* out) {
  pattern_row(tensor, index, 1, element_size, out);
}

namespace {

// Elements index .. index + n - 1 of `tensor`, each `Size` bytes: byte i of an element is byte i of
// its word (little-endian), byte 0 with its low bit set (detail::pattern_byte).
template <int Size>
void pattern_elements(std::int32_t tensor, std::int64_t index, std::int64_t n, unsigned char* out) {
  static_assert(std::endian::native == std::endian::little);
  for (std::int64_t k = 0; k < n; ++k, out += Size) {
    const std::uint64_t w = detail::pattern_word(tensor, index + k) | 1u;
    std::memcpy(out, &w, Size);
  }
}

}  // namespace

void pattern_row(std::int32_t tensor, std::int64_t index, std::int64_t n, int element_size, unsigned char* out) {
  switch (element_size) {
    case 1: return pattern_elements<1>(tensor, index, n, out);
    case 2: return pattern_elements<2>(tensor, index, n, out);
    case 4: return pattern_elements<4>(tensor, index, n, out);
    case 8: return pattern_elements<8>(tensor, index, n, out);
    default:
      for (std::int64_t k = 0; k < n; ++k) {
        const std::uint64_t w = detail::pattern_word(tensor, index + k);
        for (int i = 0; i < element_size; ++i) out[k * element_size + i] = detail::pattern_byte(w, i % 8);
      }
  }
}

void PieceDigest::add(const unsigned char* data, std::int64_t n) {
  h_ += detail::digest_bytes(bytes_, data, n);
  bytes_ += n;
}

std::uint64_t PieceDigest::value() const { return h_ + static_cast<std::uint64_t>(bytes_); }

std::uint64_t piece_digest(const model::Box& piece, const model::Box& shard, int element_size, const unsigned char* data) {
  const std::int64_t es = element_size;
  std::uint64_t h = static_cast<std::uint64_t>(piece.elements() * es);
  piece_runs(piece, shard, 0, piece.elements(), [&](std::int64_t offset, std::int64_t k, std::int64_t n) {
    h += detail::digest_bytes(k * es, data + offset * es, n * es);
  });
  return h;
}

}  // namespace reshard::exec

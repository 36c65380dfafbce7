#include "reshard/exec/verify.hpp"

#include <cstring>

#include "reshard/exec/program.hpp"

#include "reshard/exec/pattern.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::exec {

std::uint64_t pattern_word(std::int32_t tensor, std::int64_t index) { return detail::pattern_word(tensor, index); }

void pattern_bytes(std::int32_t tensor, std::int64_t index, int element_size, unsigned char* out) {
  const std::uint64_t w = detail::pattern_word(tensor, index);
  for (int i = 0; i < element_size; ++i) out[i] = detail::pattern_byte(w, i % 8);
}

void PieceDigest::add(const unsigned char* data, std::int64_t n) {
  std::int64_t k = 0;
  // Fill the pending word; then whole words straight from memory; then the tail into the pending word.
  while (k < n && (bytes_ % 8 != 0 || n - k < 8)) {
    pending_ |= static_cast<std::uint64_t>(data[k]) << (8 * (bytes_ % 8));
    ++k;
    if (++bytes_ % 8 == 0) {
      h_ += pending_ * (2 * static_cast<std::uint64_t>(bytes_ / 8 - 1) + 1);
      pending_ = 0;
    }
  }
  for (; n - k >= 8; k += 8, bytes_ += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, data + k, 8);  // little-endian: the word's first byte is its lowest
    h_ += w * (2 * static_cast<std::uint64_t>(bytes_ / 8) + 1);
  }
  for (; k < n; ++k, ++bytes_) pending_ |= static_cast<std::uint64_t>(data[k]) << (8 * (bytes_ % 8));
}

std::uint64_t PieceDigest::value() const {
  const std::uint64_t tail = bytes_ % 8 != 0 ? pending_ * (2 * static_cast<std::uint64_t>(bytes_ / 8) + 1) : 0;
  return h_ + tail + static_cast<std::uint64_t>(bytes_);
}

std::uint64_t piece_digest(const model::Box& piece, const model::Box& shard, int element_size, const unsigned char* data) {
  PieceDigest h;
  piece_runs(piece, shard, 0, piece.elements(), [&](std::int64_t offset, std::int64_t, std::int64_t n) {
    h.add(data + offset * element_size, n * element_size);
  });
  return h.value();
}

}  // namespace reshard::exec

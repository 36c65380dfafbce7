#include "reshard/exec/verify.hpp"

#include "reshard/exec/program.hpp"

#include "reshard/exec/digest_terms.hpp"
#include "reshard/exec/pattern.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::exec {

std::uint64_t pattern_word(std::int32_t tensor, std::int64_t index) { return detail::pattern_word(tensor, index); }

void pattern_bytes(std::int32_t tensor, std::int64_t index, int element_size, unsigned char* out) {
  const std::uint64_t w = detail::pattern_word(tensor, index);
  for (int i = 0; i < element_size; ++i) out[i] = detail::pattern_byte(w, i % 8);
}

std::uint64_t piece_digest(const model::Box& piece, const model::Box& shard, int element_size, const unsigned char* data) {
  const std::int64_t es = element_size;
  std::uint64_t h = static_cast<std::uint64_t>(piece.elements() * es);
  piece_runs(piece, shard, 0, piece.elements(), [&](std::int64_t offset, std::int64_t k, std::int64_t n) {
    h += detail::digest_bytes(k * es, data + offset * es, n * es);
  });
  return h;
}

}  // namespace reshard::exec

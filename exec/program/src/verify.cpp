#include "reshard/exec/verify.hpp"

#include "reshard/exec/program.hpp"

#include "reshard/exec/pattern.hpp"
#include "reshard/model/digest.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::exec {

std::uint64_t pattern_word(std::int32_t tensor, std::int64_t index) { return detail::pattern_word(tensor, index); }

void pattern_bytes(std::int32_t tensor, std::int64_t index, int element_size, unsigned char* out) {
  const std::uint64_t w = detail::pattern_word(tensor, index);
  for (int i = 0; i < element_size; ++i) out[i] = detail::pattern_byte(w, i % 8);
}

std::uint64_t piece_digest(const model::Box& piece, const model::Box& shard, int element_size, const unsigned char* data) {
  model::Fnv1a h;
  piece_runs(piece, shard, 0, piece.elements(), [&](std::int64_t offset, std::int64_t, std::int64_t n) {
    h.add(std::string_view(reinterpret_cast<const char*>(data + offset * element_size), static_cast<std::size_t>(n * element_size)));
  });
  return h.value();
}

}  // namespace reshard::exec

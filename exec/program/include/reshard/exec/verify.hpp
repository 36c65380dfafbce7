// Verification of a run (docs/execution.md), chosen per run (ExecOptions::verification):
//   pattern  the executor fills every source shard with pattern(tensor, global element index) -- a
//            hash of both, never zero (byte 0 has its low bit set), written in the tensor's dtype
//            size as raw bytes -- and after the run every destination shard element must equal the
//            pattern of its global index. With a precision change (model/precision.hpp; host
//            backend only) the weights it quantises hold BF16 values derived from the pattern, the
//            source quantises its shards, the destination those that came in BF16, and every FP8
//            byte and scale must equal a reference quantiser's (exec/backends/src/quantize.hpp). A benchmark
//            of the executor: it owns the bytes.
//   digest   for real weights (the caller's, exec/binding.hpp): nothing is filled; after the run,
//            for every piece, each GPU that holds it as a source and each GPU that needs it takes
//            the 64-bit digest of the piece's bytes in its shard (PieceDigest), and all of them
//            must be equal: one flipped byte names the piece, its tensor and box, and the GPUs.
//   none     nothing is checked (Measurement::verified is false).
#pragma once

#include <cstdint>
#include <string>

#include "reshard/model/layout.hpp"
#include "reshard/model/measurement.hpp"

namespace reshard::exec {

using model::Verification;  // pattern, digest or none (model/measurement.hpp)

// 64 hash bits of (tensor, global row-major element index); splitmix64 finaliser.
std::uint64_t pattern_word(std::int32_t tensor, std::int64_t index);
// The element's bytes (element_size <= 8): the low bytes of pattern_word with bit 0 of byte 0 set,
// so no element is ever all zero.
void pattern_bytes(std::int32_t tensor, std::int64_t index, int element_size, unsigned char* out);
// pattern_bytes of elements index .. index + n - 1, end to end.
void pattern_row(std::int32_t tensor, std::int64_t index, std::int64_t n, int element_size, unsigned char* out);

// The 64-bit digest of a piece, the same on every backend and in reshard.torch (which computes it
// with tensor operations, on the device for CUDA tensors) so that any holder's and any needer's
// agree when their bytes do: over the piece's bytes in row-major order, n of them, read as
// little-endian 64-bit words w_0 .. w_{m-1} (the last one zero-padded),
//   h = n + sum_i w_i (2 i + 1)   mod 2^64.
// Each word's weight is odd, so a change within one word always changes h; words add, so the
// bytes can be summed in any order and in parallel (a reduction on the device, a vectorised sum
// in torch). It detects what moving bytes breaks (a flipped, lost or misplaced word), not forgery.
// The arithmetic is exec/digest_terms.hpp's, which the GPU backends' digest kernel shares.
class PieceDigest {
 public:
  void add(const unsigned char* data, std::int64_t n);  // the next n bytes of the piece
  std::uint64_t value() const;

 private:
  std::uint64_t h_ = 0;  // the terms so far
  std::int64_t bytes_ = 0;
};
// The digest of `piece` (a box inside `shard`'s box) as a shard holding `data` (row-major over the
// shard's box, `element_size` bytes per element) has it.
std::uint64_t piece_digest(const model::Box& piece, const model::Box& shard, int element_size, const unsigned char* data);

}  // namespace reshard::exec

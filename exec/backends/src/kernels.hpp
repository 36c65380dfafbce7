// The GPU backends' kernels (kernels.cu), callable from host C++ without CUDA's headers (a stream
// is passed as void*): the list walk (exec/device_list.hpp), the pattern's fill and check, and the
// piece digests. The argument types are plain data, shared with the host twin (device_run.hpp).
#pragma once

#include <cstdint>

#include "reshard/exec/device_list.hpp"

namespace reshard::exec::detail {

constexpr int kMaxDims = 8;

// A shard in the arena: `elements` elements of `element_size` bytes at byte `offset`, row-major
// over the box (lo, extent) of a tensor of shape `shape`.
struct DeviceShard {
  std::int64_t offset = 0, elements = 0;
  std::int32_t tensor = 0, element_size = 2, dims = 0;
  std::int64_t lo[kMaxDims] = {}, extent[kMaxDims] = {}, shape[kMaxDims] = {};
};

// A slice of a shard's elements [begin, begin + count): the unit of work of one thread block.
struct ShardWork {
  std::int32_t shard = 0;
  std::int64_t begin = 0, count = 0;
};

// Bytes [at, at + bytes) of the arena, at byte `pos` of their piece: their digest terms go into
// sum `slot` (exec/digest_terms.hpp).
struct DigestRun {
  std::int64_t at = 0, pos = 0, bytes = 0;
  std::int32_t slot = 0;
};

// The global row-major index of element k (row-major in the shard's box) of its tensor.
RESHARD_LIST_HD std::int64_t global_index(const DeviceShard& s, std::int64_t k) {
  std::int64_t global = 0, stride = 1;
  for (int i = s.dims - 1; i >= 0; --i) {
    global += (s.lo[i] + k % s.extent[i]) * stride;
    k /= s.extent[i];
    stride *= s.shape[i];
  }
  return global;
}

// The walk kernel's threads per block, and how many of its blocks one SM holds at once.
constexpr int kWalkThreads = 512;
int walk_blocks_per_sm();
// Walks a list with `blocks` blocks on `stream`; cooperative: launched so that every block is
// resident at once (cudaLaunchCooperativeKernel; a list with waits needs it). Returns the CUDA
// error code (0: launched).
int launch_walk(const list::View& v, std::int32_t blocks, bool cooperative, void* stream);
void launch_fill(unsigned char* arena, const DeviceShard* shards, const ShardWork* work, std::int64_t n_work, void* stream);
// first_bad[shard] = the smallest wrong element offset (left as is when every element is right).
void launch_check(const unsigned char* arena, const DeviceShard* shards, const ShardWork* work, std::int64_t n_work,
                  unsigned long long* first_bad, void* stream);
// sums[run.slot] += the digest terms of each run (mod 2^64).
void launch_digest(const unsigned char* arena, const DigestRun* runs, std::int64_t n_runs, unsigned long long* sums, void* stream);

}  // namespace reshard::exec::detail

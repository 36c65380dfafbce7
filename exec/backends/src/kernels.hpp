// Fill, check and copy kernels of the GPU backends (kernels.cu), callable from host C++.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace reshard::exec::detail {

constexpr int kMaxDims = 8;

// A shard in the device arena: `elements` elements of `element_size` bytes at byte `offset`,
// row-major over the box (lo, extent) of a tensor of shape `shape`.
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

// bytes [src, src + bytes) -> [dst, dst + bytes), absolute byte offsets in the arena.
struct DeviceCopy {
  std::int64_t src = 0, dst = 0, bytes = 0;
};

void launch_fill(unsigned char* arena, const DeviceShard* shards, const ShardWork* work, std::int64_t n_work,
                 cudaStream_t stream);
// first_bad[shard] = the smallest wrong element offset (left as is when every element is right).
void launch_check(const unsigned char* arena, const DeviceShard* shards, const ShardWork* work, std::int64_t n_work,
                  unsigned long long* first_bad, cudaStream_t stream);
void launch_copies(unsigned char* arena, const DeviceCopy* copies, std::int64_t n, cudaStream_t stream);
// Test-only fault: flips byte `at` of the arena.
void launch_flip(unsigned char* arena, std::int64_t at, cudaStream_t stream);

}  // namespace reshard::exec::detail

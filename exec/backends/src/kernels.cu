// The GPU backends' kernels (kernels.hpp): the list walk, whose task semantics are
// exec/device_list.hpp's (the host twin runs the same run_task), the pattern's fill and check
// (pattern.hpp's pattern, shared with the host), and the piece digests (exec/digest_terms.hpp).
#include <cuda/atomic>
#include <cuda_runtime_api.h>

#include "kernels.hpp"
#include "reshard/exec/digest_terms.hpp"
#include "reshard/exec/pattern.hpp"

namespace reshard::exec::detail {

namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The block's threads copy [src, src + n) to dst together, 16 bytes a load where both ends allow.
__device__ void block_copy(unsigned char* dst, const unsigned char* src, std::int64_t n) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  std::int64_t head = 0;
  if ((d ^ s) % 16 == 0) {
    head = static_cast<std::int64_t>((16 - d % 16) % 16);
    if (head > n) head = n;
    for (std::int64_t i = threadIdx.x; i < head; i += blockDim.x) dst[i] = src[i];
    const std::int64_t words = (n - head) / 16;
    auto* dv = reinterpret_cast<uint4*>(dst + head);
    const auto* sv = reinterpret_cast<const uint4*>(src + head);
#pragma unroll 4
    for (std::int64_t i = threadIdx.x; i < words; i += blockDim.x) dv[i] = sv[i];
    head += words * 16;
  } else if ((d ^ s) % 4 == 0) {
    head = static_cast<std::int64_t>((4 - d % 4) % 4);
    if (head > n) head = n;
    for (std::int64_t i = threadIdx.x; i < head; i += blockDim.x) dst[i] = src[i];
    const std::int64_t words = (n - head) / 4;
    auto* dv = reinterpret_cast<unsigned int*>(dst + head);
    const auto* sv = reinterpret_cast<const unsigned int*>(src + head);
#pragma unroll 4
    for (std::int64_t i = threadIdx.x; i < words; i += blockDim.x) dv[i] = sv[i];
    head += words * 4;
  }
  for (std::int64_t i = head + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

// The device's walker (device_list.hpp, run_task): one thread block per lane set.
struct BlockWalker {
  __device__ bool lead() const { return threadIdx.x == 0; }
  __device__ void copy(unsigned char* dst, const unsigned char* src, std::int64_t n) { block_copy(dst, src, n); }
  __device__ void sync() { __syncthreads(); }
  __device__ unsigned long long now() { return global_ns(); }
  __device__ void stamp_max(unsigned long long* p, unsigned long long t) { atomicMax(p, t); }
  __device__ void signal(std::int32_t* c, std::int32_t value) {
    __threadfence();
    cuda::atomic_ref<std::int32_t, cuda::thread_scope_device>(*c).store(value, cuda::memory_order_release);
  }
};

__device__ void walk_one(const list::View& v, const list::Task& t, BlockWalker& x) {
  if (t.wait_count > 0) {
    if (threadIdx.x == 0) {
      auto load = [](std::int32_t* c) {
        return cuda::atomic_ref<std::int32_t, cuda::thread_scope_device>(*c).load(cuda::memory_order_acquire);
      };
      while (!list::ready(v, t, load)) __nanosleep(64);
      __threadfence();
    }
    __syncthreads();
  }
  list::run_task(v, t, x);
}

__global__ void __launch_bounds__(kWalkThreads) walk_kernel(list::View v) {
  BlockWalker x;
  if (v.op_times && threadIdx.x == 0) atomicMax(v.op_times + 2 * v.ops, ~global_ns());
  if (v.order) {
    for (std::int64_t q = v.block_first[blockIdx.x]; q < v.block_first[blockIdx.x + 1]; ++q) walk_one(v, v.tasks[v.order[q]], x);
  } else {
    for (std::int64_t i = blockIdx.x; i < v.task_count; i += gridDim.x) walk_one(v, v.tasks[i], x);
  }
}

__global__ void fill_kernel(unsigned char* arena, const DeviceShard* shards, const ShardWork* work) {
  const ShardWork w = work[blockIdx.x];
  const DeviceShard& s = shards[w.shard];
  for (std::int64_t k = w.begin + threadIdx.x; k < w.begin + w.count; k += blockDim.x) {
    const std::uint64_t word = pattern_word(s.tensor, global_index(s, k));
    unsigned char* p = arena + s.offset + k * s.element_size;
    for (int b = 0; b < s.element_size; ++b) p[b] = pattern_byte(word, b % 8);
  }
}

__global__ void check_kernel(const unsigned char* arena, const DeviceShard* shards, const ShardWork* work,
                             unsigned long long* first_bad) {
  const ShardWork w = work[blockIdx.x];
  const DeviceShard& s = shards[w.shard];
  for (std::int64_t k = w.begin + threadIdx.x; k < w.begin + w.count; k += blockDim.x) {
    const std::uint64_t word = pattern_word(s.tensor, global_index(s, k));
    const unsigned char* p = arena + s.offset + k * s.element_size;
    for (int b = 0; b < s.element_size; ++b)
      if (p[b] != pattern_byte(word, b % 8)) {
        atomicMin(first_bad + w.shard, static_cast<unsigned long long>(k));
        break;
      }
  }
}

// One block per run: each thread sums the terms of some of its piece-aligned words (the first
// partial word and the tail are the first thread's), the block adds them up and into the run's slot.
__global__ void digest_kernel(const unsigned char* arena, const DigestRun* runs, unsigned long long* sums) {
  __shared__ unsigned long long partial[kWalkThreads / 32];
  const DigestRun r = runs[blockIdx.x];
  const unsigned char* p = arena + r.at;
  const std::int64_t head = (8 - r.pos % 8) % 8 < r.bytes ? (8 - r.pos % 8) % 8 : r.bytes;
  const std::int64_t words = (r.bytes - head) / 8;
  std::uint64_t h = 0;
  if (threadIdx.x == 0) {
    h += digest_bytes(r.pos, p, head);
    h += digest_bytes(r.pos + head + words * 8, p + head + words * 8, r.bytes - head - words * 8);
  }
  const bool aligned = reinterpret_cast<std::uintptr_t>(p + head) % 8 == 0;
  for (std::int64_t i = threadIdx.x; i < words; i += blockDim.x) {
    const unsigned char* q = p + head + 8 * i;
    std::uint64_t w = 0;
    if (aligned) w = *reinterpret_cast<const std::uint64_t*>(q);
    else
      for (int b = 7; b >= 0; --b) w = (w << 8) | q[b];
    h += w * static_cast<std::uint64_t>(2 * ((r.pos + head) / 8 + i) + 1);
  }
  for (int o = 16; o > 0; o /= 2) h += __shfl_down_sync(0xffffffffu, h, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = h;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint64_t total = 0;
    for (unsigned k = 0; k < blockDim.x / 32; ++k) total += partial[k];
    atomicAdd(sums + r.slot, static_cast<unsigned long long>(total));
  }
}

constexpr std::int64_t kMaxGrid = 1LL << 30;

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

int walk_blocks_per_sm() {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, walk_kernel, kWalkThreads, 0) != cudaSuccess) return 1;
  return n > 0 ? n : 1;
}

int launch_walk(const list::View& v, std::int32_t blocks, bool cooperative, void* stream) {
  if (blocks <= 0) return 0;
  if (!cooperative) {
    walk_kernel<<<static_cast<unsigned>(blocks), kWalkThreads, 0, as_stream(stream)>>>(v);
    return static_cast<int>(cudaGetLastError());
  }
  list::View arg = v;
  void* args[] = {&arg};
  return static_cast<int>(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(walk_kernel), dim3(static_cast<unsigned>(blocks)),
                                                      dim3(kWalkThreads), args, 0, as_stream(stream)));
}

void launch_fill(unsigned char* arena, const DeviceShard* shards, const ShardWork* work, std::int64_t n_work, void* stream) {
  for (std::int64_t first = 0; first < n_work; first += kMaxGrid) {
    const auto blocks = static_cast<unsigned>(n_work - first < kMaxGrid ? n_work - first : kMaxGrid);
    fill_kernel<<<blocks, 256, 0, as_stream(stream)>>>(arena, shards, work + first);
  }
}

void launch_check(const unsigned char* arena, const DeviceShard* shards, const ShardWork* work, std::int64_t n_work,
                  unsigned long long* first_bad, void* stream) {
  for (std::int64_t first = 0; first < n_work; first += kMaxGrid) {
    const auto blocks = static_cast<unsigned>(n_work - first < kMaxGrid ? n_work - first : kMaxGrid);
    check_kernel<<<blocks, 256, 0, as_stream(stream)>>>(arena, shards, work + first, first_bad);
  }
}

void launch_digest(const unsigned char* arena, const DigestRun* runs, std::int64_t n_runs, unsigned long long* sums, void* stream) {
  for (std::int64_t first = 0; first < n_runs; first += kMaxGrid) {
    const auto blocks = static_cast<unsigned>(n_runs - first < kMaxGrid ? n_runs - first : kMaxGrid);
    digest_kernel<<<blocks, kWalkThreads, 0, as_stream(stream)>>>(arena, runs + first, sums);
  }
}

}  // namespace reshard::exec::detail

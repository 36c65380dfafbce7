// Fill, check and copy kernels (see kernels.hpp). The pattern is pattern.hpp's, shared with the host.
#include "kernels.hpp"
#include "reshard/exec/pattern.hpp"

namespace reshard::exec::detail {

namespace {

__device__ std::int64_t global_index(const DeviceShard& s, std::int64_t k) {
  std::int64_t global = 0, stride = 1;
  for (int i = s.dims - 1; i >= 0; --i) {
    global += (s.lo[i] + k % s.extent[i]) * stride;
    k /= s.extent[i];
    stride *= s.shape[i];
  }
  return global;
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

template <class T>
__device__ void copy_words(unsigned char* arena, const DeviceCopy& c) {
  const T* src = reinterpret_cast<const T*>(arena + c.src);
  T* dst = reinterpret_cast<T*>(arena + c.dst);
  const std::int64_t n = c.bytes / static_cast<std::int64_t>(sizeof(T));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

__global__ void copy_kernel(unsigned char* arena, const DeviceCopy* copies) {
  const DeviceCopy c = copies[blockIdx.x];
  const std::int64_t align = c.src | c.dst | c.bytes;
  if (align % 16 == 0) copy_words<uint4>(arena, c);
  else if (align % 4 == 0) copy_words<unsigned int>(arena, c);
  else if (align % 2 == 0) copy_words<unsigned short>(arena, c);
  else copy_words<unsigned char>(arena, c);
}

__global__ void flip_kernel(unsigned char* arena, std::int64_t at) { arena[at] ^= 0x5a; }

constexpr std::int64_t kMaxGrid = 1LL << 30;

}  // namespace

void launch_fill(unsigned char* arena, const DeviceShard* shards, const ShardWork* work, std::int64_t n_work,
                 cudaStream_t stream) {
  for (std::int64_t first = 0; first < n_work; first += kMaxGrid) {
    const auto blocks = static_cast<unsigned>(n_work - first < kMaxGrid ? n_work - first : kMaxGrid);
    fill_kernel<<<blocks, 256, 0, stream>>>(arena, shards, work + first);
  }
}

void launch_check(const unsigned char* arena, const DeviceShard* shards, const ShardWork* work, std::int64_t n_work,
                  unsigned long long* first_bad, cudaStream_t stream) {
  for (std::int64_t first = 0; first < n_work; first += kMaxGrid) {
    const auto blocks = static_cast<unsigned>(n_work - first < kMaxGrid ? n_work - first : kMaxGrid);
    check_kernel<<<blocks, 256, 0, stream>>>(arena, shards, work + first, first_bad);
  }
}

void launch_copies(unsigned char* arena, const DeviceCopy* copies, std::int64_t n, cudaStream_t stream) {
  for (std::int64_t first = 0; first < n; first += kMaxGrid) {
    const auto blocks = static_cast<unsigned>(n - first < kMaxGrid ? n - first : kMaxGrid);
    copy_kernel<<<blocks, 256, 0, stream>>>(arena, copies + first);
  }
}

void launch_flip(unsigned char* arena, std::int64_t at, cudaStream_t stream) { flip_kernel<<<1, 1, 0, stream>>>(arena, at); }

}  // namespace reshard::exec::detail

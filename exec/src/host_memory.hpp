// Host-side memory of one GPU's program: allocation, pattern fill, copy runs, verification. The host
// backend runs on it; the GPU backends use the same row walk for their kernels' arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reshard/exec/executor.hpp"

namespace reshard::exec::detail {

// Calls f(local_element_offset, global_element_index, count) for each row (last dimension) of `box`
// inside a tensor of shape `shape`; both offsets are row-major.
template <class F>
void for_each_row(const model::Box& box, const std::vector<std::int64_t>& shape, F&& f) {
  const std::size_t nd = box.dims.size();
  if (nd == 0) {
    f(std::int64_t{0}, std::int64_t{0}, std::int64_t{1});
    return;
  }
  const std::int64_t rows = box.elements() / std::max<std::int64_t>(box.dims[nd - 1].size(), 1);
  const std::int64_t len = box.dims[nd - 1].size();
  if (len == 0) return;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t global = box.dims[nd - 1].lo, stride = shape[nd - 1], rest = r;
    for (std::size_t i = nd - 1; i > 0; --i) {
      const std::int64_t extent = box.dims[i - 1].size();
      global += (box.dims[i - 1].lo + rest % extent) * stride;
      stride *= shape[i - 1];
      rest /= extent;
    }
    f(r * len, global, len);
  }
}

struct HostMemory {
  std::vector<std::vector<unsigned char>> regions;
};

// Zeroed memory for every region, or (staging = false) for the source and destination shards only.
void allocate(const GpuProgram& prog, HostMemory& mem, bool staging = true);
void fill_sources(const GpuProgram& prog, const model::Inventory& inv, HostMemory& mem);
void run_copies(const std::vector<CopyRun>& runs, HostMemory& mem);
// Checks every destination region; returns "" or the first wrong element, named by process rank,
// GPU, tensor, box, element offset in the shard and global index. Adds the bytes checked to `bytes`.
std::string check_destinations(const GpuProgram& prog, const model::Inventory& inv, const HostMemory& mem, int rank,
                               std::int64_t& bytes);
// The message for a wrong element found at `offset` (elements) of destination region `region`.
std::string wrong_element(const GpuProgram& prog, const model::Inventory& inv, int rank, std::int32_t region,
                          std::int64_t offset, const unsigned char* got);

}  // namespace reshard::exec::detail

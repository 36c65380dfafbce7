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

// Every region's bytes: a shard bound to the caller's buffer (exec/binding.hpp), or memory of its own.
struct HostMemory {
  std::vector<unsigned char*> data;                // per region; null while a staging region is not held
  std::vector<std::int64_t> size;                  // per region: its bytes while held
  std::vector<std::vector<unsigned char>> owned;   // per region: the memory of the unbound ones
  unsigned char* at(std::int32_t region) const { return data[static_cast<std::size_t>(region)]; }
  // Holds (zeroed) or releases a region of its own.
  void hold(std::int32_t region, std::int64_t bytes);
  void release(std::int32_t region);
};

// Memory for every region, or (staging = false) for the source and destination shards only: a
// shard `binding` binds is the caller's buffer (ExecError naming it when the buffer is smaller than
// the shard or not host memory), the others zeroed memory of their own.
void allocate(const GpuProgram& prog, const model::Inventory& inv, HostMemory& mem, bool staging = true,
              const MemoryBinding* binding = nullptr, int rank = 0);
void fill_sources(const GpuProgram& prog, const model::Inventory& inv, HostMemory& mem);
void run_copies(const std::vector<CopyRun>& runs, HostMemory& mem);
void run_copy(const CopyRun& c, HostMemory& mem);
// Checks every destination region; returns "" or the first wrong element, named by process rank,
// GPU, tensor, box, element offset in the shard and global index. Adds the bytes checked to `bytes`.
std::string check_destinations(const GpuProgram& prog, const model::Inventory& inv, const HostMemory& mem, int rank,
                               std::int64_t& bytes);
// Digest verification (exec/verify.hpp): the digest of every piece this GPU holds as a source or
// needs as a destination, appended to `out` as (piece, GPU, side, digest).
struct PieceDigest {
  std::int32_t piece = -1;
  model::GpuId gpu = -1;
  std::int32_t side = 0;  // 0: source, 1: destination
  std::uint64_t digest = 0;
};
void piece_digests(const GpuProgram& prog, const model::TransferSet& ts, const model::Inventory& inv, const HostMemory& mem,
                   std::vector<PieceDigest>& out);
// The first disagreement among `all` (every process's digests), named by piece, tensor, box and
// GPUs; "" when every needer's digest is its holders'. Adds the destination bytes compared to `bytes`.
std::string compare_digests(std::vector<PieceDigest> all, const model::TransferSet& ts, const model::Inventory& inv,
                            std::int64_t& bytes);

// The message for a wrong element found at `offset` (elements) of destination region `region`.
std::string wrong_element(const GpuProgram& prog, const model::Inventory& inv, int rank, std::int32_t region,
                          std::int64_t offset, const unsigned char* got);

}  // namespace reshard::exec::detail

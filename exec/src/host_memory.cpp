#include "host_memory.hpp"

#include <cstring>
#include <sstream>

#include "pattern.hpp"

namespace reshard::exec::detail {

using namespace reshard::model;

void allocate(const GpuProgram& prog, HostMemory& mem, bool staging) {
  mem.regions.resize(prog.regions.size());
  for (std::size_t i = 0; i < prog.regions.size(); ++i) {
    const auto kind = prog.regions[i].kind;
    if (staging || kind == Region::Kind::Source || kind == Region::Kind::Destination)
      mem.regions[i].assign(static_cast<std::size_t>(prog.regions[i].bytes), 0);
  }
}

void fill_sources(const GpuProgram& prog, const Inventory& inv, HostMemory& mem) {
  for (std::size_t i = 0; i < prog.regions.size(); ++i) {
    const Region& r = prog.regions[i];
    if (r.kind != Region::Kind::Source) continue;
    const TensorInfo& t = inv.tensor(r.tensor);
    const int es = static_cast<int>(dtype_size(t.dtype));
    unsigned char* data = mem.regions[i].data();
    for_each_row(r.box, t.shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
      for (std::int64_t k = 0; k < n; ++k) pattern_bytes(r.tensor, global + k, es, data + (local + k) * es);
    });
  }
}

void run_copies(const std::vector<CopyRun>& runs, HostMemory& mem) {
  for (const CopyRun& c : runs)
    std::memcpy(mem.regions[static_cast<std::size_t>(c.dst)].data() + c.dst_offset,
                mem.regions[static_cast<std::size_t>(c.src)].data() + c.src_offset, static_cast<std::size_t>(c.bytes));
}

std::string wrong_element(const GpuProgram& prog, const Inventory& inv, int rank, std::int32_t region,
                          std::int64_t offset, const unsigned char* got) {
  const Region& r = prog.regions[static_cast<std::size_t>(region)];
  const TensorInfo& t = inv.tensor(r.tensor);
  const int es = static_cast<int>(dtype_size(t.dtype));
  std::int64_t global = -1;
  for_each_row(r.box, t.shape, [&](std::int64_t local, std::int64_t g, std::int64_t n) {
    if (offset >= local && offset < local + n) global = g + (offset - local);
  });
  unsigned char want[8] = {};
  pattern_bytes(r.tensor, global, es, want);
  std::ostringstream os;
  os << "rank " << rank << " (GPU " << prog.gpu << "): tensor '" << t.name << "' box " << to_string(r.box)
     << ": wrong value at element offset " << offset << " (byte offset " << offset * es << ", global index " << global
     << "): got 0x" << std::hex;
  for (int i = es - 1; i >= 0; --i) os << (got[i] < 16 ? "0" : "") << static_cast<int>(got[i]);
  os << ", expected 0x";
  for (int i = es - 1; i >= 0; --i) os << (want[i] < 16 ? "0" : "") << static_cast<int>(want[i]);
  return os.str();
}

std::string check_destinations(const GpuProgram& prog, const Inventory& inv, const HostMemory& mem, int rank,
                               std::int64_t& bytes) {
  for (std::size_t i = 0; i < prog.regions.size(); ++i) {
    const Region& r = prog.regions[i];
    if (r.kind != Region::Kind::Destination) continue;
    const TensorInfo& t = inv.tensor(r.tensor);
    const int es = static_cast<int>(dtype_size(t.dtype));
    const unsigned char* data = mem.regions[i].data();
    std::int64_t bad = -1;
    for_each_row(r.box, t.shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
      if (bad >= 0) return;
      unsigned char want[8];
      for (std::int64_t k = 0; k < n; ++k) {
        pattern_bytes(r.tensor, global + k, es, want);
        if (std::memcmp(want, data + (local + k) * es, static_cast<std::size_t>(es)) != 0) {
          bad = local + k;
          return;
        }
      }
    });
    if (bad >= 0) return wrong_element(prog, inv, rank, static_cast<std::int32_t>(i), bad, data + bad * es);
    bytes += r.bytes;
  }
  return {};
}

}  // namespace reshard::exec::detail

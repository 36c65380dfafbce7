#include "host_memory.hpp"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <tuple>
#include <sstream>
#include <unordered_map>

#include "reshard/exec/pattern.hpp"
#include "quantize.hpp"

namespace reshard::exec::detail {

using namespace reshard::model;

void HostMemory::hold(std::int32_t region, std::int64_t bytes) {
  auto& m = owned[static_cast<std::size_t>(region)];
  m.assign(static_cast<std::size_t>(bytes), 0);
  data[static_cast<std::size_t>(region)] = m.data();
  size[static_cast<std::size_t>(region)] = bytes;
}

void HostMemory::release(std::int32_t region) {
  std::vector<unsigned char>().swap(owned[static_cast<std::size_t>(region)]);
  data[static_cast<std::size_t>(region)] = nullptr;
  size[static_cast<std::size_t>(region)] = 0;
}

void allocate(const GpuProgram& prog, const Inventory& inv, HostMemory& mem, bool staging, const MemoryBinding* binding,
              int rank) {
  const std::size_t n = prog.regions.size();
  mem.data.assign(n, nullptr);
  mem.size.assign(n, 0);
  mem.owned.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Region& r = prog.regions[i];
    const bool shard = r.kind == Region::Kind::Source || r.kind == Region::Kind::Destination;
    if (shard && binding) {
      const Side side = r.kind == Region::Kind::Source ? Side::Source : Side::Destination;
      if (const ShardBinding* b = binding->find(prog.gpu, side, r.tensor, r.box)) {
        const std::string what = std::string(side == Side::Source ? "source" : "destination") + " shard of '" +
                                 inv.tensor(r.tensor).name + "' " + to_string(r.box) + " on GPU " + std::to_string(prog.gpu);
        if (b->memory != MemoryKind::Host) throw ExecError("the host backend moves host memory; the " + what + " is bound to device memory", rank, -1);
        if (!b->data || b->bytes < r.bytes)
          throw ExecError("the buffer bound to the " + what + " holds " + std::to_string(b->bytes) + " bytes, the shard " +
                              std::to_string(r.bytes),
                          rank, -1);
        mem.data[i] = static_cast<unsigned char*>(b->data);
        mem.size[i] = r.bytes;
        continue;
      }
    }
    if (staging || shard) mem.hold(static_cast<std::int32_t>(i), r.bytes);
  }
}

namespace {

// The weight box a scale box's blocks cover, clipped to the weight's extent.
Box weight_box_of_scales(const TensorInfo& w, const Box& scales) {
  const std::int64_t block[2] = {w.quant.block_rows, w.quant.block_cols};
  Box b;
  for (std::size_t d = 0; d < 2; ++d)
    b.dims.push_back({scales.dims[d].lo * block[d], std::min(scales.dims[d].hi * block[d], w.shape[d])});
  return b;
}

// The source values of a weight's box, row-major (pattern.hpp: weight_bf16).
std::vector<float> source_values(const TensorInfo& w, const Box& box) {
  std::vector<float> v(static_cast<std::size_t>(box.elements()));
  for_each_row(box, w.shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
    for (std::int64_t k = 0; k < n; ++k)
      v[static_cast<std::size_t>(local + k)] = bf16_value(weight_bf16(pattern_word(w.id, global + k)));
  });
  return v;
}

// The expected bytes of elements global .. global + n - 1 of tensor t: the pattern, or what a
// precision change makes of it.
void expected_bytes(const Inventory& inv, const TensorInfo& t, std::int64_t global, std::int64_t n, int es,
                    std::unordered_map<std::int32_t, ReferenceQuantizer>& quantizers, unsigned char* out) {
  if (t.quant.format == QuantFormat::None) return pattern_row(t.id, global, n, es, out);
  for (std::int64_t k = 0; k < n; ++k) converted_bytes(inv, t, global + k, quantizers, out + k * es);
}

}  // namespace

void fill_sources(const GpuProgram& prog, const Inventory& inv, HostMemory& mem) {
  for (std::size_t i = 0; i < prog.regions.size(); ++i) {
    const Region& r = prog.regions[i];
    if (r.kind != Region::Kind::Source) continue;
    const TensorInfo& t = inv.tensor(r.tensor);
    const int es = static_cast<int>(dtype_size(t.dtype));
    unsigned char* data = mem.data[i];
    const Quantization& q = t.quant;
    if (q.format != QuantFormat::None && (q.scale_of >= 0 || q.site == QuantSite::Source)) {
      // The source quantises what it holds: a weight's box, or the blocks of a scale shard.
      const TensorInfo& w = q.scale_of >= 0 ? inv.tensor(q.scale_of) : t;
      const Box box = q.scale_of >= 0 ? weight_box_of_scales(w, r.box) : r.box;
      std::vector<unsigned char> payload(static_cast<std::size_t>(box.elements())), scales;
      quantize_box(w, box, source_values(w, box), payload.data(), scales);
      const auto& bytes = q.scale_of >= 0 ? scales : payload;
      std::memcpy(data, bytes.data(), std::min(bytes.size(), static_cast<std::size_t>(mem.size[i])));
      continue;
    }
    // The pattern, or a weight the destination quantises: its BF16 source values.
    std::unordered_map<std::int32_t, ReferenceQuantizer> none;
    for_each_row(r.box, t.shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
      expected_bytes(inv, t, global, n, es, none, data + local * es);
    });
  }
}

void run_copy(const CopyRun& c, HostMemory& mem) {
  std::memcpy(mem.at(c.dst) + c.dst_offset, mem.at(c.src) + c.src_offset, static_cast<std::size_t>(c.bytes));
}

void run_copies(const std::vector<CopyRun>& runs, HostMemory& mem) {
  for (const CopyRun& c : runs) run_copy(c, mem);
}

void piece_digests(const GpuProgram& prog, const TransferSet& ts, const Inventory& inv, const HostMemory& mem,
                   std::vector<PieceDigest>& out) {
  for (int side = 0; side < 2; ++side)
    for (const auto& [piece, region] : side == 0 ? prog.source_pieces : prog.destination_pieces) {
      const Piece& p = ts.pieces[static_cast<std::size_t>(piece)];
      const Region& r = prog.regions[static_cast<std::size_t>(region)];
      const int es = static_cast<int>(dtype_size(inv.tensor(p.tensor).dtype));
      out.push_back({piece, prog.gpu, side, piece_digest(p.box, r.box, es, mem.at(region))});
    }
}

std::string compare_digests(std::vector<PieceDigest> all, const TransferSet& ts, const Inventory& inv, std::int64_t& bytes) {
  std::sort(all.begin(), all.end(), [](const PieceDigest& a, const PieceDigest& b) {
    return std::tie(a.piece, a.side, a.gpu) < std::tie(b.piece, b.side, b.gpu);
  });
  auto hex = [](std::uint64_t v) {
    std::ostringstream os;
    os << "0x" << std::hex << std::setw(16) << std::setfill('0') << v;
    return os.str();
  };
  for (std::size_t i = 0; i < all.size();) {
    std::size_t e = i;
    while (e < all.size() && all[e].piece == all[i].piece) ++e;
    const Piece& p = ts.pieces[static_cast<std::size_t>(all[i].piece)];
    const std::string name = "piece " + std::to_string(all[i].piece) + " of tensor '" + inv.tensor(p.tensor).name + "' " + to_string(p.box);
    const PieceDigest* source = all[i].side == 0 ? &all[i] : nullptr;
    for (std::size_t k = i; k < e; ++k) {
      const PieceDigest& d = all[k];
      if (!source) return name + ": no source GPU reported its digest";
      if (d.digest == source->digest) {
        if (d.side == 1) bytes += p.bytes.value;
        continue;
      }
      return name + ": GPU " + std::to_string(d.gpu) + (d.side == 0 ? " holds it as a source with digest " : " received digest ") +
             hex(d.digest) + ", its source GPU " + std::to_string(source->gpu) + " holds " + hex(source->digest);
    }
    i = e;
  }
  return {};
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
  std::unordered_map<std::int32_t, ReferenceQuantizer> quantizers;
  expected_bytes(inv, t, global, 1, es, quantizers, want);
  std::ostringstream os;
  os << "rank " << rank << " (GPU " << prog.gpu << "): tensor '" << t.name << "' box " << to_string(r.box)
     << ": wrong value at element offset " << offset << " (byte offset " << offset * es << ", global index " << global
     << "): got 0x" << std::hex;
  for (int i = es - 1; i >= 0; --i) os << (got[i] < 16 ? "0" : "") << static_cast<int>(got[i]);
  os << ", expected 0x";
  for (int i = es - 1; i >= 0; --i) os << (want[i] < 16 ? "0" : "") << static_cast<int>(want[i]);
  return os.str();
}

namespace {

// A weight quantised at the destination: its received BF16 region converted as the destination
// would (quantize_box), every E4M3 byte and scale compared with the reference. "" or what is wrong.
std::string check_conversion(const GpuProgram& prog, const Inventory& inv, const HostMemory& mem, int rank,
                             std::size_t region, std::unordered_map<std::int32_t, ReferenceQuantizer>& quantizers) {
  const Region& r = prog.regions[region];
  const TensorInfo& w = inv.tensor(r.tensor);
  std::vector<float> values(static_cast<std::size_t>(r.box.elements()));
  for (std::size_t k = 0; k < values.size(); ++k) {
    std::uint16_t b = 0;
    std::memcpy(&b, mem.data[region] + 2 * k, 2);
    values[k] = bf16_value(b);
  }
  std::vector<unsigned char> payload(values.size()), scales;
  quantize_box(w, r.box, values, payload.data(), scales);
  ReferenceQuantizer& ref = quantizers.try_emplace(w.id, w).first->second;
  std::ostringstream os;
  os << "rank " << rank << " (GPU " << prog.gpu << "): tensor '" << w.name << "' box " << to_string(r.box)
     << ", converted at the destination: ";
  std::int64_t bad = -1, bad_global = -1;
  for_each_row(r.box, w.shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
    for (std::int64_t k = 0; k < n && bad < 0; ++k)
      if (payload[static_cast<std::size_t>(local + k)] != ref.payload(global + k)) {
        bad = local + k;
        bad_global = global + k;
      }
  });
  if (bad >= 0) {
    os << "wrong E4M3 byte at element offset " << bad << " (global index " << bad_global << ")";
    return os.str();
  }
  const Box sb = scale_box(r.box, w.quant);
  const std::int64_t ss = w.quant.format == QuantFormat::Fp8Block ? 4 : 1;
  const std::vector<std::int64_t> scale_shape = {(w.shape[0] + w.quant.block_rows - 1) / w.quant.block_rows,
                                                 (w.shape[1] + w.quant.block_cols - 1) / w.quant.block_cols};
  for_each_row(sb, scale_shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
    unsigned char want[4];
    for (std::int64_t k = 0; k < n && bad < 0; ++k) {
      ref.scale_bytes(global + k, want);
      if (std::memcmp(want, scales.data() + (local + k) * ss, static_cast<std::size_t>(ss)) != 0) bad = global + k;
    }
  });
  if (bad >= 0) {
    os << "wrong scale of block " << bad;
    return os.str();
  }
  return {};
}

}  // namespace

std::string check_destinations(const GpuProgram& prog, const Inventory& inv, const HostMemory& mem, int rank,
                               std::int64_t& bytes) {
  std::unordered_map<std::int32_t, ReferenceQuantizer> quantizers;
  for (std::size_t i = 0; i < prog.regions.size(); ++i) {
    const Region& r = prog.regions[i];
    if (r.kind != Region::Kind::Destination) continue;
    const TensorInfo& t = inv.tensor(r.tensor);
    const int es = static_cast<int>(dtype_size(t.dtype));
    const unsigned char* data = mem.data[i];
    std::int64_t bad = -1;
    std::vector<unsigned char> want;  // a row's expected bytes, compared at once
    for_each_row(r.box, t.shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
      if (bad >= 0) return;
      want.resize(static_cast<std::size_t>(n * es));
      expected_bytes(inv, t, global, n, es, quantizers, want.data());
      const unsigned char* got = data + local * es;
      if (std::memcmp(want.data(), got, want.size()) == 0) return;
      for (std::int64_t k = 0;; ++k)  // the first element that differs
        if (std::memcmp(want.data() + k * es, got + k * es, static_cast<std::size_t>(es)) != 0) {
          bad = local + k;
          return;
        }
    });
    if (bad >= 0) return wrong_element(prog, inv, rank, static_cast<std::int32_t>(i), bad, data + bad * es);
    if (t.quant.converted() && t.quant.site == QuantSite::Destination)
      if (std::string err = check_conversion(prog, inv, mem, rank, i, quantizers); !err.empty()) return err;
    bytes += r.bytes;
  }
  return {};
}

}  // namespace reshard::exec::detail

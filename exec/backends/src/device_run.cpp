// The device part the GPU backends share (device_run.hpp): the arena's layout, verification's work,
// and the host twin.
#include "device_run.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "reshard/exec/digest_terms.hpp"
#include "reshard/exec/pattern.hpp"
#include "reshard/exec/staging.hpp"

namespace reshard::exec::detail {

using namespace reshard::model;

namespace {

constexpr std::int64_t kWorkElements = 1 << 16;  // elements per thread block in fill/check
constexpr std::int64_t kDigestBytes = 1 << 16;   // bytes per thread block in the digests
constexpr std::int64_t kLocalBytes = 1 << 20;    // bytes per task of the local copies' list

DeviceShard device_shard(const Region& r, const Inventory& inv, std::int64_t offset, int rank) {
  const TensorInfo& t = inv.tensor(r.tensor);
  if (r.box.dims.size() > static_cast<std::size_t>(kMaxDims))
    throw ExecError("tensor '" + t.name + "' has more than 8 dimensions", rank, -1, true);
  DeviceShard s;
  s.offset = offset;
  s.elements = r.box.elements();
  s.tensor = r.tensor;
  s.element_size = static_cast<std::int32_t>(dtype_size(t.dtype));
  s.dims = static_cast<std::int32_t>(r.box.dims.size());
  for (std::size_t i = 0; i < r.box.dims.size(); ++i) {
    s.lo[i] = r.box.dims[i].lo;
    s.extent[i] = r.box.dims[i].size();
    s.shape[i] = t.shape[i];
  }
  return s;
}

void add_work(std::vector<ShardWork>& work, std::int32_t shard, std::int64_t elements) {
  for (std::int64_t b = 0; b < elements; b += kWorkElements) work.push_back({shard, b, std::min(kWorkElements, elements - b)});
}

// The binding of region i of `prog` (a shard), or null.
const ShardBinding* binding_of(const GpuProgram& prog, const Region& r, const ExecOptions& options) {
  if (!options.binding || (r.kind != Region::Kind::Source && r.kind != Region::Kind::Destination)) return nullptr;
  return options.binding->find(prog.gpu, r.kind == Region::Kind::Source ? Side::Source : Side::Destination, r.tensor, r.box);
}

// A list of copies without waits, one task per kLocalBytes at most.
list::List copy_list(const std::vector<std::pair<std::int64_t, std::int64_t>>& at_of, const std::vector<CopyRun>& runs) {
  list::List l;
  for (const CopyRun& c : runs)
    for (std::int64_t done = 0; done < c.bytes; done += kLocalBytes) {
      list::Task t;
      t.run_first = static_cast<std::int64_t>(l.runs.size());
      t.run_count = t.run_split = 1;
      t.lane = static_cast<std::int32_t>(l.tasks.size());
      const std::int64_t n = std::min(kLocalBytes, c.bytes - done);
      l.runs.push_back({at_of[static_cast<std::size_t>(c.src)].first + c.src_offset + done,
                        at_of[static_cast<std::size_t>(c.dst)].first + c.dst_offset + done, n});
      l.bytes += n;
      l.tasks.push_back(t);
      l.lanes = static_cast<std::int32_t>(l.tasks.size());
    }
  return l;
}

}  // namespace

void lay_out(DeviceRun& d, Device& dev, const RunPlan& plan, const std::vector<GpuId>& gpus, const ExecOptions& options) {
  const Inventory& inv = plan.scenario->inventory;
  dev.clear();
  d.progs.clear();
  d.at.clear();
  d.bytes = 0;
  d.bound.clear();
  d.destination_region.clear();
  d.digest_slots.clear();
  d.digest_bytes.clear();
  for (GpuId g : gpus) d.progs.push_back(build_program(plan, g));
  std::vector<std::vector<const ShardBinding*>> bound(d.progs.size());
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    const GpuProgram& prog = d.progs[p];
    d.at.emplace_back(prog.regions.size(), 0);
    bound[p].assign(prog.regions.size(), nullptr);
    for (std::size_t i = 0; i < prog.regions.size(); ++i) {
      const Region& r = prog.regions[i];
      if (r.kind != Region::Kind::Source && r.kind != Region::Kind::Destination) continue;
      if (const ShardBinding* b = binding_of(prog, r, options)) {
        const std::string what = "the binding of GPU " + std::to_string(prog.gpu) + "'s " +
                                 (r.kind == Region::Kind::Source ? "source" : "destination") + " shard of '" +
                                 inv.tensor(r.tensor).name + "' " + to_string(r.box);
        if (b->memory != MemoryKind::Device) throw ExecError(what + " is host memory; the GPU backends take device memory", d.rank, -1, true);
        if (b->bytes < r.bytes || !b->data)
          throw ExecError(what + " holds " + std::to_string(b->bytes) + " bytes; the shard has " + std::to_string(r.bytes), d.rank, -1, true);
        bound[p][i] = b;
        d.bound.push_back(b->data);
        continue;
      }
      d.at[p][i] = d.bytes;
      d.bytes += (r.bytes + 255) / 256 * 256;
    }
  }
  std::vector<std::vector<std::int64_t>> request_of;
  const std::vector<StagingRequest> requests = staging_requests(plan, d.progs, request_of);
  d.staging = staging_per_program(requests, request_of);
  const std::int64_t free_bytes = dev.free_bytes();
  // Room for the lists and work, and NCCL's own buffers.
  const std::int64_t reserve = free_bytes / 32 + (std::int64_t{1} << 30);
  const StagingPlan staging = plan_staging(requests, free_bytes - d.bytes - reserve, true);
  for (std::size_t p = 0; p < d.progs.size(); ++p)
    for (std::size_t i = 0; i < d.progs[p].regions.size(); ++i)
      if (const std::int64_t q = request_of[p][i]; q >= 0) d.at[p][i] = d.bytes + staging.offset[static_cast<std::size_t>(q)];
  d.bytes += staging.bytes;
  if (d.bytes > free_bytes)
    throw ExecError("the run needs " + format(Bytes{d.bytes}) + " of GPU memory, " + format(Bytes{free_bytes}) + " are free", d.rank, -1,
                    true);
  d.arena = dev.arena(std::max<std::int64_t>(d.bytes, 256));
  // A bound shard is addressed from the arena's start like the others: by its distance from it
  // (the kernels take arena + offset, in one flat address space).
  for (std::size_t p = 0; p < d.progs.size(); ++p)
    for (std::size_t i = 0; i < bound[p].size(); ++i)
      if (bound[p][i])
        d.at[p][i] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(bound[p][i]->data) - reinterpret_cast<std::intptr_t>(d.arena));
  std::vector<DeviceShard> sources, destinations;
  std::vector<ShardWork> fill, check;
  std::vector<DigestRun> runs;
  std::vector<CopyRun> local;
  std::vector<std::pair<std::int64_t, std::int64_t>> at_of;  // per region of all programs: (offset, bytes)
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    const GpuProgram& prog = d.progs[p];
    const auto region0 = static_cast<std::int32_t>(at_of.size());
    for (std::size_t i = 0; i < prog.regions.size(); ++i) {
      const Region& r = prog.regions[i];
      at_of.emplace_back(d.at[p][i], r.bytes);
      if (r.kind == Region::Kind::Source) {
        if (options.verification == Verification::Pattern) add_work(fill, static_cast<std::int32_t>(sources.size()), r.box.elements());
        sources.push_back(device_shard(r, inv, d.at[p][i], d.rank));
      } else if (r.kind == Region::Kind::Destination) {
        if (options.verification == Verification::Pattern)
          add_work(check, static_cast<std::int32_t>(destinations.size()), r.box.elements());
        destinations.push_back(device_shard(r, inv, d.at[p][i], d.rank));
        d.destination_region.emplace_back(p, static_cast<std::int32_t>(i));
      }
    }
    for (CopyRun c : prog.local) {
      c.src += region0;
      c.dst += region0;
      local.push_back(c);
    }
    if (options.verification != Verification::Digest) continue;
    // Each piece's rows in its shard, merged where they follow each other, cut for the blocks.
    for (int side = 0; side < 2; ++side)
      for (const auto& [piece, region] : side == 0 ? prog.source_pieces : prog.destination_pieces) {
        const Piece& pc = plan.transfers->pieces[static_cast<std::size_t>(piece)];
        const std::int64_t es = dtype_size(inv.tensor(pc.tensor).dtype);
        const auto slot = static_cast<std::int32_t>(d.digest_slots.size());
        d.digest_slots.push_back({piece, prog.gpu, side, 0});
        d.digest_bytes.push_back(pc.box.elements() * es);
        const std::int64_t base = d.at[p][static_cast<std::size_t>(region)];
        std::vector<DigestRun> rows;
        piece_runs(pc.box, prog.regions[static_cast<std::size_t>(region)].box, 0, pc.box.elements(),
                   [&](std::int64_t off, std::int64_t k, std::int64_t n) {
                     if (!rows.empty() && rows.back().at + rows.back().bytes == base + off * es && rows.back().pos + rows.back().bytes == k * es)
                       rows.back().bytes += n * es;
                     else
                       rows.push_back({base + off * es, k * es, n * es, slot});
                   });
        for (const DigestRun& r : rows)
          for (std::int64_t done = 0; done < r.bytes; done += kDigestBytes)
            runs.push_back({r.at + done, r.pos + done, std::min(kDigestBytes, r.bytes - done), slot});
      }
  }
  dev.set_shards(std::move(sources), std::move(fill), std::move(destinations), std::move(check));
  dev.set_digest_runs(std::move(runs), static_cast<std::int32_t>(d.digest_slots.size()));
  list::List l = copy_list(at_of, local);
  d.local_bytes = l.bytes;
  d.local_list = l.tasks.empty() ? -1 : dev.add_list(std::move(l));
}

bool same_buffers(const DeviceRun& d, const ExecOptions& options) {
  std::vector<const void*> now;
  for (const GpuProgram& prog : d.progs)
    for (const Region& r : prog.regions)
      if (const ShardBinding* b = binding_of(prog, r, options)) now.push_back(b->data);
  return !d.progs.empty() && now == d.bound;
}

void start_run(DeviceRun& d, Device& dev, const ExecOptions& options) {
  if (options.verification == Verification::Pattern) dev.fill();
  if (d.local_list >= 0) dev.launch(d.local_list);
}

std::string check_pattern(DeviceRun& d, Device& dev, const Inventory& inv, std::int64_t& bytes) {
  if (d.destination_region.empty()) return {};
  const std::vector<std::int64_t> first = dev.check();
  for (std::size_t i = 0; i < first.size(); ++i) {
    const auto [p, region] = d.destination_region[i];
    const Region& r = d.progs[p].regions[static_cast<std::size_t>(region)];
    if (first[i] < 0) {
      bytes += r.bytes;
      continue;
    }
    unsigned char got[8] = {};
    const auto es = dtype_size(inv.tensor(r.tensor).dtype);
    dev.read(got, d.arena + d.at[p][static_cast<std::size_t>(region)] + first[i] * es, std::min<std::int64_t>(es, 8));
    return wrong_element(d.progs[p], inv, d.rank, region, first[i], got);
  }
  return {};
}

void piece_digests(DeviceRun& d, Device& dev, std::vector<PieceDigest>& out) {
  if (d.digest_slots.empty()) return;
  const std::vector<std::uint64_t> sums = dev.digests();
  for (std::size_t i = 0; i < d.digest_slots.size(); ++i) {
    PieceDigest p = d.digest_slots[i];
    p.digest = static_cast<std::uint64_t>(d.digest_bytes[i]) + sums[i];
    out.push_back(p);
  }
}

void add_staging(Measurement& m, const DeviceRun& d) {
  for (std::size_t p = 0; p < d.progs.size(); ++p) m.staging.push_back({d.progs[p].gpu, d.staging[p]});
}

// ---- the host twin ----

struct HostDevice::State {
  std::vector<unsigned char> arena;
  std::vector<list::List> lists;
  std::vector<std::int32_t> counters;
  std::vector<unsigned long long> times;  // per op: start (complemented), end; then the first walk's start (complemented)
  std::int32_t ops = 0;
  std::vector<DeviceShard> sources, destinations;
  std::vector<ShardWork> fill, check;
  std::vector<DigestRun> digest_runs;
  std::int32_t digest_slots = 0;
  std::vector<unsigned long long> events;  // the clock at each record
  unsigned long long clock = 0;            // the twin's clock: one tick per task
};

namespace {

// The host's walker (exec/device_list.hpp, run_task): one thread does a task's work alone.
struct HostWalker {
  unsigned long long& clock;
  std::int64_t& copied;
  bool lead() const { return true; }
  void copy(unsigned char* dst, const unsigned char* src, std::int64_t n) {
    std::memcpy(dst, src, static_cast<std::size_t>(n));
    copied += n;
  }
  void sync() {}
  unsigned long long now() { return ++clock; }
  void stamp_max(unsigned long long* p, unsigned long long t) { *p = std::max(*p, t); }
  void signal(std::int32_t* c, std::int32_t value) { *c = value; }
};

std::uint64_t next_random(std::uint64_t& x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ULL;
  std::uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

HostDevice::HostDevice(std::int32_t blocks, std::uint64_t seed, std::int64_t memory)
    : st_(std::make_unique<State>()), blocks_(std::max(blocks, 1)), rng_(seed), memory_(memory) {}
HostDevice::~HostDevice() = default;

unsigned char* HostDevice::arena(std::int64_t bytes) {
  if (static_cast<std::int64_t>(st_->arena.size()) < bytes) st_->arena.assign(static_cast<std::size_t>(bytes), 0);
  else std::fill(st_->arena.begin(), st_->arena.end(), 0);
  return st_->arena.data();
}

std::int32_t HostDevice::add_list(list::List l) {
  st_->lists.push_back(std::move(l));
  return static_cast<std::int32_t>(st_->lists.size()) - 1;
}

const list::List& HostDevice::list_of(std::int32_t id) const { return st_->lists.at(static_cast<std::size_t>(id)); }

void HostDevice::add_counters(std::int32_t counters, std::int32_t ops) {
  st_->counters.assign(static_cast<std::size_t>(counters), 0);
  st_->ops = ops;
  st_->times.assign(2 * static_cast<std::size_t>(ops) + 1, 0);
}

void HostDevice::clear() {
  st_->lists.clear();
  st_->counters.clear();
  st_->times.clear();
}

void HostDevice::set_shards(std::vector<DeviceShard> sources, std::vector<ShardWork> fill, std::vector<DeviceShard> destinations,
                            std::vector<ShardWork> check) {
  st_->sources = std::move(sources);
  st_->fill = std::move(fill);
  st_->destinations = std::move(destinations);
  st_->check = std::move(check);
}

void HostDevice::set_digest_runs(std::vector<DigestRun> runs, std::int32_t slots) {
  st_->digest_runs = std::move(runs);
  st_->digest_slots = slots;
}

void HostDevice::do_reset() {
  std::fill(st_->counters.begin(), st_->counters.end(), 0);
  std::fill(st_->times.begin(), st_->times.end(), 0);
}

void HostDevice::do_launch(std::int32_t id) {
  const list::List& l = st_->lists.at(static_cast<std::size_t>(id));
  list::View v;
  v.tasks = l.tasks.data();
  v.runs = l.runs.data();
  v.waits = l.waits.data();
  v.task_count = static_cast<std::int64_t>(l.tasks.size());
  v.counters = st_->counters.data();
  v.op_times = st_->times.empty() ? nullptr : st_->times.data();
  v.ops = st_->ops;
  v.base = st_->arena.data();
  HostWalker x{st_->clock, copied_};
  if (v.op_times) x.stamp_max(v.op_times + 2 * v.ops, ~x.now());
  auto load = [](const std::int32_t* c) { return *c; };
  const std::int32_t blocks = l.has_waits() ? blocks_ : std::max<std::int32_t>(1, std::min<std::int32_t>(blocks_, static_cast<std::int32_t>(l.tasks.size())));
  const list::WalkOrder w = list::walk_order(l, blocks);
  std::vector<std::int64_t> next(w.block_first.begin(), w.block_first.end() - 1);
  std::vector<std::int32_t> can;
  for (std::size_t done = 0; done < l.tasks.size(); ++done) {
    can.clear();
    for (std::int32_t b = 0; b < blocks; ++b)
      if (next[static_cast<std::size_t>(b)] < w.block_first[static_cast<std::size_t>(b) + 1] &&
          list::ready(v, l.tasks[static_cast<std::size_t>(w.order[static_cast<std::size_t>(next[static_cast<std::size_t>(b)])])], load))
        can.push_back(b);
    if (can.empty())
      throw ExecError("the walk is stuck: " + std::to_string(l.tasks.size() - done) + " of " + std::to_string(l.tasks.size()) +
                          " tasks wait for counters no block can set",
                      -1, -1, true);
    const std::int32_t b = can[static_cast<std::size_t>(next_random(rng_) % can.size())];
    list::run_task(v, l.tasks[static_cast<std::size_t>(w.order[static_cast<std::size_t>(next[static_cast<std::size_t>(b)]++)])], x);
  }
}

// Calls f(k, global, n) for the shard-local elements [k, k + n) of the work, runs of consecutive
// global indices (a row of the shard's box, or what of it the work holds).
template <class F>
void for_each_work_row(const DeviceShard& s, const ShardWork& w, F&& f) {
  const std::int64_t row = s.dims > 0 ? s.extent[s.dims - 1] : 1;
  for (std::int64_t k = w.begin, end = w.begin + w.count; k < end;) {
    const std::int64_t n = std::min(row - k % row, end - k);
    f(k, global_index(s, k), n);
    k += n;
  }
}

void HostDevice::do_fill() {
  for (const ShardWork& w : st_->fill) {
    const DeviceShard& s = st_->sources[static_cast<std::size_t>(w.shard)];
    for_each_work_row(s, w, [&](std::int64_t k, std::int64_t global, std::int64_t n) {
      pattern_row(s.tensor, global, n, s.element_size, st_->arena.data() + s.offset + k * s.element_size);
    });
  }
}

std::vector<std::int64_t> HostDevice::do_check() {
  std::vector<std::int64_t> first(st_->destinations.size(), -1);
  std::vector<unsigned char> want;
  for (const ShardWork& w : st_->check) {
    const DeviceShard& s = st_->destinations[static_cast<std::size_t>(w.shard)];
    auto& f = first[static_cast<std::size_t>(w.shard)];
    const std::int64_t es = s.element_size;
    for_each_work_row(s, w, [&](std::int64_t k, std::int64_t global, std::int64_t n) {
      if (f >= 0 && f < k) return;
      want.resize(static_cast<std::size_t>(n * es));
      pattern_row(s.tensor, global, n, s.element_size, want.data());
      const unsigned char* got = st_->arena.data() + s.offset + k * es;
      if (std::memcmp(want.data(), got, want.size()) == 0) return;
      for (std::int64_t j = 0; j < n; ++j)  // the first element that differs
        if (std::memcmp(want.data() + j * es, got + j * es, static_cast<std::size_t>(es)) != 0) {
          f = f < 0 ? k + j : std::min(f, k + j);
          return;
        }
    });
  }
  return first;
}

std::vector<std::uint64_t> HostDevice::do_digests() {
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(st_->digest_slots), 0);
  for (const DigestRun& r : st_->digest_runs) sums[static_cast<std::size_t>(r.slot)] += digest_bytes(r.pos, st_->arena.data() + r.at, r.bytes);
  return sums;
}

std::vector<std::pair<double, double>> HostDevice::do_op_times(std::int32_t ops) {
  std::vector<std::pair<double, double>> out(static_cast<std::size_t>(ops), {-1.0, -1.0});
  if (st_->times.size() < 2 * static_cast<std::size_t>(ops) + 1) return out;
  const unsigned long long t0 = ~st_->times[2 * static_cast<std::size_t>(ops)];
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (st_->times[2 * i]) out[i].first = static_cast<double>(~st_->times[2 * i] - t0) * 1e-9;
    if (st_->times[2 * i + 1]) out[i].second = static_cast<double>(st_->times[2 * i + 1] - t0) * 1e-9;
  }
  return out;
}

int HostDevice::do_record() {
  st_->events.push_back(++st_->clock);
  return static_cast<int>(st_->events.size()) - 1;
}

bool HostDevice::do_wait(int, std::chrono::steady_clock::time_point) { return true; }

double HostDevice::do_seconds(int from, int to) {
  return static_cast<double>(st_->events.at(static_cast<std::size_t>(to)) - st_->events.at(static_cast<std::size_t>(from))) * 1e-9;
}

void HostDevice::do_read(void* host, const unsigned char* at, std::int64_t bytes) {
  std::memcpy(host, at, static_cast<std::size_t>(bytes));
}

}  // namespace reshard::exec::detail

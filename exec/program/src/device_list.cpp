// The GPU backends' steps compiled into device copy lists (exec/step_lists.hpp, exec/device_list.hpp).
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <queue>

#include "reshard/exec/step_lists.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"

namespace reshard::exec {

using namespace reshard::model;

namespace list {

WalkOrder walk_order(const List& l, std::int32_t blocks) {
  blocks = std::max(blocks, 1);
  std::vector<std::int64_t> lane_bytes(static_cast<std::size_t>(std::max(l.lanes, 1)), 0);
  std::vector<std::int64_t> lane_tasks(lane_bytes.size(), 0);
  for (const Task& t : l.tasks) {
    std::int64_t b = 0;
    for (std::int32_t r = 0; r < t.run_count; ++r) b += l.runs[static_cast<std::size_t>(t.run_first + r)].bytes;
    lane_bytes[static_cast<std::size_t>(t.lane)] += b;
    ++lane_tasks[static_cast<std::size_t>(t.lane)];
  }
  // The largest lane first, each to the block with the fewest bytes so far (the lowest such block).
  std::vector<std::int32_t> lanes(lane_bytes.size());
  std::iota(lanes.begin(), lanes.end(), 0);
  std::stable_sort(lanes.begin(), lanes.end(), [&](std::int32_t a, std::int32_t b) {
    return lane_bytes[static_cast<std::size_t>(a)] > lane_bytes[static_cast<std::size_t>(b)];
  });
  using Load = std::pair<std::int64_t, std::int32_t>;  // (bytes, block)
  std::priority_queue<Load, std::vector<Load>, std::greater<>> least;
  for (std::int32_t b = 0; b < blocks; ++b) least.push({0, b});
  std::vector<std::int32_t> block_of(lanes.size(), 0);
  for (std::int32_t lane : lanes) {
    auto [bytes, b] = least.top();
    least.pop();
    block_of[static_cast<std::size_t>(lane)] = b;
    // A lane with no bytes still weighs one unit, so empty lanes spread too.
    least.push({bytes + std::max<std::int64_t>(lane_bytes[static_cast<std::size_t>(lane)], lane_tasks[static_cast<std::size_t>(lane)]), b});
  }
  WalkOrder out;
  out.block_first.assign(static_cast<std::size_t>(blocks) + 1, 0);
  for (const Task& t : l.tasks) ++out.block_first[static_cast<std::size_t>(block_of[static_cast<std::size_t>(t.lane)]) + 1];
  for (std::size_t b = 1; b < out.block_first.size(); ++b) out.block_first[b] += out.block_first[b - 1];
  out.order.assign(l.tasks.size(), 0);
  std::vector<std::int64_t> next(out.block_first.begin(), out.block_first.end() - 1);
  for (std::size_t i = 0; i < l.tasks.size(); ++i)
    out.order[static_cast<std::size_t>(next[static_cast<std::size_t>(block_of[static_cast<std::size_t>(l.tasks[i].lane)])]++)] =
        static_cast<std::int32_t>(i);
  return out;
}

}  // namespace list

namespace {

// One GPU's role in an op's stream: its program, its stream entry, and (cuda) its place in the tree.
struct Role {
  std::size_t prog = 0;
  const OpStream* t = nullptr;
  GpuId gpu = -1;
  std::int32_t parent = -1;             // index among the op's roles (-1: the sender)
  std::vector<std::int32_t> children;   // indices among the op's roles
  std::int32_t counter = -1;
};

// Every local GPU's role in each op: the sender's and the receivers', by op.
struct RoleIndex {
  std::map<std::int64_t, Role> send_of;
  std::map<std::pair<std::int64_t, GpuId>, Role> receive_of;
  RoleIndex(const std::vector<GpuProgram>& progs) {
    for (std::size_t p = 0; p < progs.size(); ++p) {
      for (const OpStream& t : progs[p].sends) send_of[t.op] = Role{p, &t, progs[p].gpu, -1, {}, -1};
      for (const OpStream& t : progs[p].receives) receive_of[{t.op, progs[p].gpu}] = Role{p, &t, progs[p].gpu, -1, {}, -1};
    }
  }
  const Role* receiver(std::int64_t op, GpuId g) const {
    auto it = receive_of.find({op, g});
    return it == receive_of.end() ? nullptr : &it->second;
  }
  bool takes_part(std::int64_t op) const {
    if (send_of.count(op)) return true;
    auto it = receive_of.lower_bound({op, std::numeric_limits<GpuId>::min()});
    return it != receive_of.end() && it->first.first == op;
  }
};

std::vector<ChainHop> hops_of(const Schedule& s, const Op& op) {
  if (op.chain >= 0) return s.chains[static_cast<std::size_t>(op.chain)].hops;
  return {ChainHop{op.src, op.dst, -1}};
}

// The ops of each step, in id order.
std::vector<std::vector<std::int64_t>> ops_by_step(const RunPlan& plan) {
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(plan.steps));
  for (const Op& op : plan.schedule->ops) out[static_cast<std::size_t>(plan.step_of[static_cast<std::size_t>(op.id)])].push_back(op.id);
  return out;
}

// Appends a run, merged with the previous one of the same task when both sides continue it.
void add_run(list::List& l, list::Task& t, std::int64_t src, std::int64_t dst, std::int64_t bytes) {
  if (bytes <= 0) return;
  l.bytes += bytes;
  if (t.run_count > 0) {
    list::Run& last = l.runs.back();
    if (last.src + last.bytes == src && last.dst + last.bytes == dst && t.run_count > t.run_split) {
      last.bytes += bytes;
      return;
    }
  }
  l.runs.push_back({src, dst, bytes});
  ++t.run_count;
}

// Chunk k's pack (send) or unpack runs of a role, as arena offsets.
void add_chunk_copies(list::List& l, list::Task& t, const ArenaOffsets& at, const Role& r, bool send, std::int64_t k) {
  const auto& region = at[r.prog];
  for_each_chunk_copy(*r.t, send, k, [&](const CopyRun& c) {
    add_run(l, t, region[static_cast<std::size_t>(c.src)] + c.src_offset, region[static_cast<std::size_t>(c.dst)] + c.dst_offset, c.bytes);
  });
}

std::int64_t slot_at(const ArenaOffsets& at, const Role& r, std::int64_t k) {
  return at[r.prog][static_cast<std::size_t>(r.t->region)] + r.t->slot_offset(k * r.t->chunk);
}

}  // namespace

StepLists virtual_gpu_lists(const RunPlan& plan, const std::vector<GpuProgram>& progs, const ArenaOffsets& at,
                            const std::vector<Fault>& faults) {
  const Schedule& s = *plan.schedule;
  const RoleIndex index(progs);
  StepLists out;
  for (const auto& ops : ops_by_step(plan)) {
    list::List l;
    // Each op's roles in tree order (the sender, then each hop's `to`), their counters and lanes.
    struct Stream {
      const Op* op;
      std::vector<Role> roles;
      std::int64_t chunks;
      bool drop;
      std::int64_t flip_at;  // stream byte flipped at dst (-1: none)
    };
    std::vector<Stream> streams;
    for (auto id : ops) {
      const Op& op = s.ops[static_cast<std::size_t>(id)];
      Stream st{&op, {index.send_of.at(id)}, 0, has_fault(faults, Fault::Kind::Drop, id), -1};
      std::map<GpuId, std::int32_t> role_of{{op.src, 0}};
      for (const ChainHop& h : hops_of(s, op)) {
        const Role* r = index.receiver(id, h.to);
        if (!r) throw ScheduleError("operation " + std::to_string(id) + ": GPU " + std::to_string(h.to) + " has no receive of it");
        Role role = *r;
        role.parent = role_of.at(h.from);
        role_of[h.to] = static_cast<std::int32_t>(st.roles.size());
        st.roles[static_cast<std::size_t>(role.parent)].children.push_back(role_of[h.to]);
        st.roles.push_back(std::move(role));
      }
      for (Role& r : st.roles) r.counter = out.counters++;
      st.chunks = st.roles[0].t->chunks();
      if (has_fault(faults, Fault::Kind::Corrupt, id) && st.chunks > 0)
        for (const Role& r : st.roles)
          if (r.gpu == op.dst && r.parent >= 0) st.flip_at = corrupt_offset(faults, *r.t);
      streams.push_back(std::move(st));
    }
    // Chunk-major: every wait names a task of an earlier chunk, or of this chunk earlier in the tree.
    const std::int32_t first_counter = streams.empty() ? out.counters : streams.front().roles.front().counter;
    std::int64_t most = 0;
    for (const Stream& st : streams) most = std::max(most, std::max<std::int64_t>(st.chunks, 1));
    for (std::int64_t k = 0; k < most; ++k)
      for (const Stream& st : streams) {
        if (st.chunks == 0) {  // nothing to move: one empty task stamps the op's start and end
          if (k == 0) {
            list::Task t;
            t.run_first = static_cast<std::int64_t>(l.runs.size());
            t.wait_first = static_cast<std::int64_t>(l.waits.size());
            t.lane = st.roles[0].counter - first_counter;
            t.op = static_cast<std::int32_t>(st.op->id);
            t.stamps = list::kStampStart | list::kStampEnd;
            l.tasks.push_back(t);
          }
          continue;
        }
        if (k >= st.chunks) continue;
        const std::int64_t chunk_bytes = chain_chunk(st.roles[0].t->bytes, st.roles[0].t->chunk, k).bytes;
        for (std::size_t q = 0; q < st.roles.size(); ++q) {
          const Role& r = st.roles[q];
          list::Task t;
          t.run_first = static_cast<std::int64_t>(l.runs.size());
          t.wait_first = static_cast<std::int64_t>(l.waits.size());
          t.lane = r.counter - first_counter;
          t.op = static_cast<std::int32_t>(st.op->id);
          t.signal = r.counter;
          t.signal_value = static_cast<std::int32_t>(k + 1);
          if (r.parent < 0) {
            add_chunk_copies(l, t, at, r, true, k);
            t.run_split = t.run_count;
            if (k == 0) t.stamps |= list::kStampStart;
          } else {
            const Role& from = st.roles[static_cast<std::size_t>(r.parent)];
            l.waits.push_back({from.counter, static_cast<std::int32_t>(k + 1)});
            if (!(st.drop && r.parent == 0)) add_run(l, t, slot_at(at, from, k), slot_at(at, r, k), chunk_bytes);
            t.run_split = t.run_count;
            const std::int64_t begin = k * r.t->chunk;
            if (r.gpu == st.op->dst && st.flip_at >= begin && st.flip_at < begin + chunk_bytes)
              t.flip_at = at[r.prog][static_cast<std::size_t>(r.t->region)] + r.t->slot_offset(st.flip_at);
            add_chunk_copies(l, t, at, r, false, k);
            if (k == st.chunks - 1) t.stamps |= list::kStampEnd;
          }
          // Chunk k takes the slot of chunk k - S: every child must have taken that one.
          if (!r.t->kept() && k >= r.t->slots)
            for (std::int32_t c : r.children)
              l.waits.push_back({st.roles[static_cast<std::size_t>(c)].counter, static_cast<std::int32_t>(k - r.t->slots + 1)});
          t.wait_count = static_cast<std::int32_t>(static_cast<std::int64_t>(l.waits.size()) - t.wait_first);
          l.tasks.push_back(t);
        }
      }
    l.lanes = out.counters - first_counter;
    out.steps.push_back(std::move(l));
  }
  return out;
}

std::int64_t window_chunks(const Schedule& s, const Op& op) {
  const std::int64_t slots = std::max<std::int32_t>(s.slots, 1);
  return op.chain < 0 ? slots : std::max<std::int64_t>(slots / 2, 1);
}

namespace {

// Calls f(first chunk, chunks) for the pieces of window [k0, k1) that lie contiguously in a ring of
// S slots (split where a chunk index is a multiple of S): the same on every GPU of the stream, so
// the sends and receives of a window match one for one.
template <class F>
void window_segments(std::int64_t k0, std::int64_t k1, std::int32_t slots, F&& f) {
  const std::int64_t s = std::max<std::int32_t>(slots, 1);
  for (std::int64_t k = k0; k < k1;) {
    const std::int64_t end = std::min(k1, (k / s + 1) * s);
    f(k, end - k);
    k = end;
  }
}

}  // namespace

std::vector<NcclStep> nccl_steps(const RunPlan& plan, const std::vector<GpuProgram>& progs, const ArenaOffsets& at,
                                 const std::vector<Fault>& faults, int rank, int world) {
  const Schedule& s = *plan.schedule;
  const RoleIndex index(progs);
  auto proc_of = [&](GpuId g) { return plan.gpu_index(g) % world; };
  auto is_local = [&](GpuId g) { return proc_of(g) == rank; };
  std::vector<NcclStep> out;
  for (const auto& all : ops_by_step(plan)) {
    NcclStep step;
    std::vector<std::int64_t> ops;
    for (auto id : all)
      if (index.takes_part(id)) ops.push_back(id);
    const StepWaves sw = step_waves(s, ops, window_chunks);
    step.waves.resize(static_cast<std::size_t>(ops.empty() ? 0 : sw.waves));
    for (const StreamWaves& w : sw.streams) {
      const Op& op = s.ops[static_cast<std::size_t>(w.op)];
      const std::vector<ChainHop> hops = hops_of(s, op);
      const Role* root = is_local(op.src) ? &index.send_of.at(w.op) : nullptr;
      const std::int64_t chunk = std::max<std::int64_t>(stream_chunk(s, op).value, 1);
      const std::int64_t chunks = chain_chunks(op.bytes.value, chunk);
      const std::int64_t per = window_chunks(s, op);
      const bool drop = has_fault(faults, Fault::Kind::Drop, w.op);
      auto window = [&](std::int64_t x) { return std::pair{x * per, std::min(chunks, (x + 1) * per)}; };
      if (root && w.chunks > 0) step.waves[static_cast<std::size_t>(w.wave_of(0, 0))].starts.push_back(w.op);
      // Packs: window x leaves the sender in wave offset + x.
      if (root)
        for (std::int64_t x = 0; x < w.chunks; ++x) {
          list::List& l = step.waves[static_cast<std::size_t>(w.offset + x)].pack;
          list::Task t;
          t.run_first = static_cast<std::int64_t>(l.runs.size());
          t.lane = static_cast<std::int32_t>(l.tasks.size());
          t.op = static_cast<std::int32_t>(w.op);
          const auto [k0, k1] = window(x);
          for (std::int64_t k = k0; k < k1; ++k) add_chunk_copies(l, t, at, *root, true, k);
          t.run_split = t.run_count;
          if (t.run_count > 0) l.tasks.push_back(t);
          l.lanes = static_cast<std::int32_t>(l.tasks.size());
        }
      for (std::size_t h = 0; h < hops.size(); ++h) {
        const ChainHop& hop = hops[h];
        const bool from_here = is_local(hop.from), to_here = is_local(hop.to);
        if (!from_here && !to_here) continue;
        const Role* from = from_here ? (hop.from == op.src ? root : index.receiver(w.op, hop.from)) : nullptr;
        const Role* to = to_here ? index.receiver(w.op, hop.to) : nullptr;
        if ((from_here && !from) || (to_here && !to))
          throw ScheduleError("operation " + std::to_string(w.op) + ": a GPU of hop " + std::to_string(h) + " has no role in it");
        if (to_here) {
          step.peers.push_back(proc_of(hop.from));
          if (w.chunks > 0) step.waves[static_cast<std::size_t>(w.wave_of(h, w.chunks - 1))].ends.push_back(w.op);
        }
        const std::int64_t flip_at = to && hop.to == op.dst && has_fault(faults, Fault::Kind::Corrupt, w.op) ? corrupt_offset(faults, *to->t) : -1;
        for (std::int64_t x = 0; x < w.chunks; ++x) {
          NcclWave& wave = step.waves[static_cast<std::size_t>(w.wave_of(h, x))];
          const auto [k0, k1] = window(x);
          window_segments(k0, k1, s.slots, [&](std::int64_t k, std::int64_t n) {
            const std::int64_t bytes = std::min(op.bytes.value, (k + n) * chunk) - k * chunk;
            if (from && !(drop && hop.from == op.src)) wave.calls.push_back({true, slot_at(at, *from, k), bytes, proc_of(hop.to)});
            if (to) wave.calls.push_back({false, slot_at(at, *to, k), bytes, proc_of(hop.from)});
          });
          if (!to) continue;
          list::List& l = wave.unpack;
          list::Task t;
          t.run_first = static_cast<std::int64_t>(l.runs.size());
          t.lane = static_cast<std::int32_t>(l.tasks.size());
          t.op = static_cast<std::int32_t>(w.op);
          if (flip_at >= k0 * chunk && flip_at < std::min(op.bytes.value, k1 * chunk))
            t.flip_at = at[to->prog][static_cast<std::size_t>(to->t->region)] + to->t->slot_offset(flip_at);
          for (std::int64_t k = k0; k < k1; ++k) add_chunk_copies(l, t, at, *to, false, k);
          if (t.run_count > 0 || t.flip_at >= 0) l.tasks.push_back(t);
          l.lanes = static_cast<std::int32_t>(l.tasks.size());
        }
      }
    }
    std::sort(step.peers.begin(), step.peers.end());
    step.peers.erase(std::unique(step.peers.begin(), step.peers.end()), step.peers.end());
    out.push_back(std::move(step));
  }
  return out;
}

}  // namespace reshard::exec

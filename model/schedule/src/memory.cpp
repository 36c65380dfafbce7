#include "reshard/model/memory.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace reshard::model {

Bytes stream_chunk(const Schedule& s, const Op& op) {
  if (op.chain >= 0 && static_cast<std::size_t>(op.chain) < s.chains.size())
    return s.chains[static_cast<std::size_t>(op.chain)].chunk;
  return s.params.chunk;
}

Bytes ring_bytes(const Schedule& s, const Op& op) {
  const std::int64_t c = std::max<std::int64_t>(stream_chunk(s, op).value, 1);
  const std::int64_t slots = std::max<std::int32_t>(s.slots, 1);
  return Bytes{c > op.bytes.value / slots ? op.bytes.value : slots * c};
}

bool receives(const Schedule& s, const Op& o, GpuId g) {
  if (o.chain < 0) return o.dst == g;
  const auto& hops = s.chains[static_cast<std::size_t>(o.chain)].hops;
  return std::any_of(hops.begin(), hops.end(), [&](const ChainHop& h) { return h.to == g; });
}

std::vector<std::vector<GpuId>> kept_receives(const Schedule& s) {
  std::vector<std::vector<GpuId>> kept(s.ops.size());
  for (const Op& x : s.ops)
    for (auto a : s.after_of(x))
      if (receives(s, s.ops[static_cast<std::size_t>(a)], x.src)) kept[static_cast<std::size_t>(a)].push_back(x.src);
  for (auto& k : kept) {
    std::sort(k.begin(), k.end());
    k.erase(std::unique(k.begin(), k.end()), k.end());
  }
  return kept;
}

namespace {

// A kept receive: op a's receive at GPU g, held from step(a) until `last` (the largest step of the
// ops at g that forward from it).
struct Kept {
  std::int64_t op;
  GpuId gpu;
  std::int32_t last;
};

// The steps of op_steps (memory.hpp) and the kept receives' intervals.
struct Packing {
  std::vector<std::int32_t> step;
  std::int32_t count = 0;
  std::vector<Kept> kept;
  // Per GPU: whether the packing tracked it (a tight GPU), and then its peak live(g, k) and the
  // first step that reaches it (the sweep of staging_memory needs only the others).
  std::vector<char> tracked;
  std::vector<std::int64_t> peak;
  std::vector<std::int32_t> peak_step;
};

// The largest GPU id a schedule names, plus one.
std::size_t gpus_named(const Schedule& s) {
  GpuId gpus = 0;
  for (const Op& op : s.ops) gpus = std::max({gpus, op.src + 1, op.dst + 1});
  for (const Chain& c : s.chains)
    for (const ChainHop& h : c.hops) gpus = std::max({gpus, h.from + 1, h.to + 1});
  return static_cast<std::size_t>(gpus);
}

// The GPUs of a chain rooted at `root`: the root, then every hop's `to`.
template <class F>
void for_each_chain_gpu(const Chain& c, F&& f) {
  if (c.hops.empty()) return;
  if (c.hops.front().from >= 0) f(c.hops.front().from);
  for (const ChainHop& h : c.hops)
    if (h.to >= 0) f(h.to);
}

// Calls f(GPU, kept) for each role of op: its sender, then each receiver (a transfer's dst, a chain
// hop's `to`), kept when `kept` (its GPUs whose receive is kept, ascending) lists it.
// (GPUs below 0, which op_problem refuses, are skipped.)
template <class F>
void for_each_role(const Schedule& s, const Op& op, const std::vector<GpuId>& kept, F&& f) {
  auto role = [&](GpuId g, bool receiver) {
    if (g >= 0) f(g, receiver && std::binary_search(kept.begin(), kept.end(), g));
  };
  role(op.src, false);
  if (op.chain < 0) {
    role(op.dst, true);
    return;
  }
  for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) role(h.to, true);
}

// Stays whole: one placement pass whose closures (own, split, open_of) and tables (profiles,
// groupings, stamps, open) every op's placement updates in place; split, each part would take most
// of them as arguments.
Packing pack(const Schedule& s) {
  Packing out;
  const std::size_t n_ops = s.ops.size();
  out.step.assign(n_ops, 0);
  const std::size_t n = gpus_named(s);
  const std::vector<std::vector<GpuId>> kept = kept_receives(s);

  // Per op: its base step (dependencies, chain order); per (op, kept GPU): forwarders left, last step.
  std::vector<std::int64_t> last_on_chain(s.chains.size(), -1);
  auto base_of = [&](std::size_t i) {
    const Op& op = s.ops[i];
    std::int32_t base = 0;
    for (auto a : s.after_of(op)) base = std::max(base, out.step[static_cast<std::size_t>(a)] + 1);
    if (op.chain >= 0) {
      auto& prev = last_on_chain[static_cast<std::size_t>(op.chain)];
      if (prev >= 0) base = std::max(base, out.step[static_cast<std::size_t>(prev)]);
      prev = static_cast<std::int64_t>(i);
    }
    return base;
  };
  std::vector<std::size_t> kept_first(n_ops + 1, 0);  // op a's kept entries: [kept_first[a], kept_first[a + 1])
  for (std::size_t a = 0; a < n_ops; ++a) kept_first[a + 1] = kept_first[a] + kept[a].size();
  std::vector<std::int32_t> forwarders(kept_first.back(), 0), last(kept_first.back(), -1);
  auto kept_index = [&](std::size_t a, GpuId g) -> std::ptrdiff_t {
    const auto& k = kept[a];
    auto it = std::lower_bound(k.begin(), k.end(), g);
    return it != k.end() && *it == g ? static_cast<std::ptrdiff_t>(kept_first[a] + static_cast<std::size_t>(it - k.begin())) : -1;
  };
  for (const Op& x : s.ops)
    for (auto a : s.after_of(x))
      if (auto q = kept_index(static_cast<std::size_t>(a), x.src); q >= 0) ++forwarders[static_cast<std::size_t>(q)];

  // Tight GPUs: those whose every footprint at once (each chain's largest ring, each kept receive
  // whole) exceeds their budget. Only they can refuse an op; the others need no tracking.
  std::vector<std::int64_t> budget(n, 0), demand(n, 0);
  for (std::size_t g = 0; g < n && g < s.budget.size(); ++g) budget[g] = s.budget[g].value;
  // (A chain's rings are summed per chain first and added to its GPUs once: a ring's ops pass
  // through thousands of GPUs.)
  std::vector<std::int64_t> big(n, 0);  // per GPU: its largest ring
  std::vector<std::int64_t> chain_sum(s.chains.size(), 0), chain_big(s.chains.size(), 0);
  for (std::size_t i = 0; i < n_ops; ++i) {
    const Op& op = s.ops[i];
    const std::int64_t ring = ring_bytes(s, op).value;
    if (op.chain >= 0) {
      chain_sum[static_cast<std::size_t>(op.chain)] += ring;
      chain_big[static_cast<std::size_t>(op.chain)] = std::max(chain_big[static_cast<std::size_t>(op.chain)], ring);
      for (GpuId g : kept[i]) demand[static_cast<std::size_t>(g)] += op.bytes.value - ring;  // held whole, not as a ring
      continue;
    }
    for_each_role(s, op, kept[i], [&](GpuId g, bool is_kept) {
      demand[static_cast<std::size_t>(g)] += is_kept ? op.bytes.value : ring;
      if (!is_kept) big[static_cast<std::size_t>(g)] = std::max(big[static_cast<std::size_t>(g)], ring);
    });
  }
  for (std::size_t c = 0; c < s.chains.size(); ++c)
    for_each_chain_gpu(s.chains[c], [&](GpuId g) {
      demand[static_cast<std::size_t>(g)] += chain_sum[c];
      big[static_cast<std::size_t>(g)] = std::max(big[static_cast<std::size_t>(g)], chain_big[c]);
    });
  std::vector<std::int32_t> tight(n, -1);  // index into use/open, -1: not tight
  std::int32_t tight_count = 0;
  for (std::size_t g = 0; g < n; ++g)
    if (budget[g] > 0 && demand[g] > budget[g]) tight[g] = tight_count++;

  if (tight_count == 0) {  // no GPU can run out: the dependency depths
    for (std::size_t i = 0; i < n_ops; ++i) out.step[i] = base_of(i);
  } else {
    // Usage profiles: tight GPUs with the same budget and the same history of additions share one
    // profile (its use per step), so an op over thousands of GPUs that all saw the same ops (the
    // rings of gather_broadcast) is checked once; a profile some of whose GPUs an op touches is
    // split (copied) first. Refinement only: at most one split per GPU.
    struct Profile {
      std::vector<std::int64_t> use;  // per step
      std::int64_t budget = 0, big = 0;
      std::int32_t room_from = 0;     // steps below it have no room for its largest ring
      std::int32_t holders = 0;
    };
    std::vector<Profile> profiles;
    std::vector<std::int32_t> prof(n, -1);
    {
      std::map<std::pair<std::int64_t, std::int64_t>, std::int32_t> first;  // (budget, big) -> profile
      for (std::size_t g = 0; g < n; ++g) {
        if (tight[g] < 0) continue;
        auto [it, fresh] = first.try_emplace({budget[g], big[g]}, static_cast<std::int32_t>(profiles.size()));
        if (fresh) profiles.push_back({{}, budget[g], big[g], 0, 0});
        prof[g] = it->second;
        ++profiles[static_cast<std::size_t>(it->second)].holders;
      }
    }
    std::vector<char> keeps(n, 0);             // GPUs with a kept receive: they have profiles of their own
    std::vector<std::int32_t> latest(n, 0);    // the latest step placed at each GPU
    std::vector<std::int64_t> open(n, 0);
    for (const auto& k : kept)
      for (GpuId g : k) keeps[static_cast<std::size_t>(g)] = 1;
    std::vector<std::vector<GpuId>> chain_tight(s.chains.size());  // per chain: its tight GPUs
    for (std::size_t c = 0; c < s.chains.size(); ++c)
      for_each_chain_gpu(s.chains[c], [&](GpuId g) {
        if (tight[static_cast<std::size_t>(g)] >= 0) chain_tight[c].push_back(g);
      });
    auto used = [&](const Profile& p, std::int32_t k) {
      return static_cast<std::size_t>(k) < p.use.size() ? p.use[static_cast<std::size_t>(k)] : 0;
    };
    auto add = [&](Profile& p, std::int32_t k, std::int64_t bytes) {
      if (p.use.size() <= static_cast<std::size_t>(k)) p.use.resize(static_cast<std::size_t>(k) + 1, 0);
      p.use[static_cast<std::size_t>(k)] += bytes;
    };
    // A new profile for `members` of profile p (a copy of its history).
    auto split = [&](std::int32_t p, const std::vector<GpuId>& members) {
      const auto q = static_cast<std::int32_t>(profiles.size());
      profiles.push_back(profiles[static_cast<std::size_t>(p)]);
      profiles.back().holders = static_cast<std::int32_t>(members.size());
      profiles[static_cast<std::size_t>(p)].holders -= static_cast<std::int32_t>(members.size());
      for (GpuId g : members) prof[static_cast<std::size_t>(g)] = q;
      return q;
    };
    std::int64_t splits = 0;  // profiles split so far (a grouping made before a split may be stale)
    auto own = [&](GpuId g) -> Profile& {  // GPU g's profile, g its only holder
      const std::int32_t p = prof[static_cast<std::size_t>(g)];
      if (profiles[static_cast<std::size_t>(p)].holders == 1) return profiles[static_cast<std::size_t>(p)];
      ++splits;
      return profiles[static_cast<std::size_t>(split(p, {g}))];
    };
    // The footprints of op i at tight GPUs, (GPU, bytes), and their groups: one per (profile, bytes).
    // A chain's grouping is kept between its ops while no profile has been split since (a ring's
    // ops then cost one check per group, not one per GPU).
    struct Group {
      std::int32_t profile;
      std::int64_t bytes;
      std::int32_t count = 0;
      const std::vector<GpuId>* members = nullptr;
      std::vector<GpuId> keeping;  // its GPUs that keep receives (their open and latest)
    };
    struct Grouping {
      std::int64_t splits = -1;                 // the split count it was made at
      std::vector<Group> groups;
      std::vector<std::vector<GpuId>> members;  // per group
    };
    std::vector<Grouping> chain_grouping(s.chains.size());
    Grouping scratch;
    std::vector<std::pair<GpuId, std::int64_t>> roles;
    std::vector<std::int64_t> stamp(profiles.size(), -1);  // per profile (grown with them): the op that grouped it
    std::vector<std::int32_t> group_of(profiles.size(), -1);  // per profile: its group (stamp says whether valid)
    for (std::size_t i = 0; i < n_ops; ++i) {
      const Op& op = s.ops[i];
      const std::int32_t base = base_of(i);
      const std::int64_t ring = ring_bytes(s, op).value;
      const bool cached = op.chain >= 0 && kept[i].empty();
      Grouping& grouping = cached ? chain_grouping[static_cast<std::size_t>(op.chain)] : scratch;
      if (!cached || grouping.splits != splits) {
        roles.clear();
        auto role = [&](GpuId g, bool is_kept) {  // a chain's GPUs are distinct; a local copy's two roles share one
          const std::int64_t bytes = is_kept ? op.bytes.value : ring;
          if (tight[static_cast<std::size_t>(g)] < 0 || bytes == 0) return;
          if (op.chain < 0 && !roles.empty() && roles.back().first == g) {
            roles.back().second += bytes;
            return;
          }
          roles.emplace_back(g, bytes);
        };
        if (op.chain < 0) {
          for_each_role(s, op, kept[i], role);
        } else {  // the chain's tight GPUs only (a chain may pass through thousands)
          const auto& tk = kept[i];
          for (GpuId g : chain_tight[static_cast<std::size_t>(op.chain)])
            role(g, g != op.src && std::binary_search(tk.begin(), tk.end(), g));
        }
        // Group the roles by (profile, bytes); a GPU that keeps receives has a profile of its own.
        grouping.groups.clear();
        grouping.members.clear();
        for (const auto& [g, b] : roles) {
          const std::int32_t p = keeps[static_cast<std::size_t>(g)] ? static_cast<std::int32_t>(&own(g) - profiles.data())
                                                                   : prof[static_cast<std::size_t>(g)];
          if (stamp.size() < profiles.size()) {
            stamp.resize(profiles.size() * 2, -1);
            group_of.resize(profiles.size() * 2, -1);
          }
          std::int32_t q = stamp[static_cast<std::size_t>(p)] == static_cast<std::int64_t>(i) ? group_of[static_cast<std::size_t>(p)] : -1;
          if (q >= 0 && grouping.groups[static_cast<std::size_t>(q)].bytes != b) {  // same profile, other bytes
            q = -1;
            for (std::size_t x = 0; x < grouping.groups.size(); ++x)
              if (grouping.groups[x].profile == p && grouping.groups[x].bytes == b) q = static_cast<std::int32_t>(x);
          }
          if (q < 0) {
            q = static_cast<std::int32_t>(grouping.groups.size());
            grouping.groups.push_back({p, b, 0, nullptr, {}});
            grouping.members.emplace_back();
            if (stamp[static_cast<std::size_t>(p)] != static_cast<std::int64_t>(i)) {
              stamp[static_cast<std::size_t>(p)] = static_cast<std::int64_t>(i);
              group_of[static_cast<std::size_t>(p)] = q;
            }
          }
          Group& gr = grouping.groups[static_cast<std::size_t>(q)];
          ++gr.count;
          grouping.members[static_cast<std::size_t>(q)].push_back(g);
          if (keeps[static_cast<std::size_t>(g)]) gr.keeping.push_back(g);
        }
        for (std::size_t q = 0; q < grouping.groups.size(); ++q) grouping.groups[q].members = &grouping.members[q];
        grouping.splits = splits;
      }
      std::vector<Group>& groups = grouping.groups;
      if (cached)  // a chain op without kept receives holds its ring at every GPU: this op's ring
        for (Group& gr : groups) gr.bytes = ring;
      auto open_of = [&](const Group& gr) {
        std::int64_t o = 0;
        for (GpuId g : gr.keeping) o = std::max(o, open[static_cast<std::size_t>(g)]);
        return o;
      };
      // Fits no step even alone: placed at its base, over budget. A GPU that keeps receives takes
      // its ops in steps that never go back (monotone): a kept receive's interval then holds only
      // ops placed after it, which were checked against it (open). The search starts past the
      // steps where a profile has no room left for its largest ring (room_from): a smaller op may
      // fit there, but skipping them keeps the search short.
      bool alone = true;
      std::int32_t from = base;
      for (const Group& gr : groups) {
        const Profile& p = profiles[static_cast<std::size_t>(gr.profile)];
        alone = alone && gr.bytes <= p.budget - open_of(gr);
        from = std::max(from, p.room_from);
        for (GpuId g : gr.keeping) from = std::max(from, latest[static_cast<std::size_t>(g)]);
      }
      std::int32_t k = from;
      if (alone)
        for (;; ++k) {
          bool fits = true;
          for (const Group& gr : groups) {
            const Profile& p = profiles[static_cast<std::size_t>(gr.profile)];
            fits = fits && used(p, k) + gr.bytes <= p.budget - open_of(gr);
          }
          if (fits) break;
        }
      out.step[i] = k;
      for (Group& gr : groups) {
        if (gr.count < profiles[static_cast<std::size_t>(gr.profile)].holders) {  // the others stay where they are
          gr.profile = split(gr.profile, *gr.members);
          ++splits;
        }
        Profile& pr = profiles[static_cast<std::size_t>(gr.profile)];
        add(pr, k, gr.bytes);
        const std::int64_t o = open_of(gr);
        while (used(pr, pr.room_from) + pr.big > pr.budget - o && pr.room_from <= k) ++pr.room_from;
        for (GpuId g : gr.keeping) latest[static_cast<std::size_t>(g)] = std::max(latest[static_cast<std::size_t>(g)], k);
      }
      for (GpuId g : kept[i])
        if (tight[static_cast<std::size_t>(g)] >= 0) open[static_cast<std::size_t>(g)] += op.bytes.value;
      // Kept receives this op forwards from: their interval closes when their last forwarder is placed.
      for (auto a : s.after_of(op)) {
        const auto q = kept_index(static_cast<std::size_t>(a), op.src);
        if (q < 0) continue;
        auto& lq = last[static_cast<std::size_t>(q)];
        lq = std::max(lq, k);
        if (--forwarders[static_cast<std::size_t>(q)] > 0 || tight[static_cast<std::size_t>(op.src)] < 0) continue;
        const std::int64_t bytes = s.ops[static_cast<std::size_t>(a)].bytes.value;
        open[static_cast<std::size_t>(op.src)] -= bytes;
        Profile& pr = own(op.src);
        for (std::int32_t j = out.step[static_cast<std::size_t>(a)] + 1; j <= lq; ++j) add(pr, j, bytes);
      }
    }
    // The tight GPUs' peaks, from their profiles (a profile's use is live(g, k) of each holder).
    std::vector<std::int64_t> profile_peak(profiles.size(), 0);
    std::vector<std::int32_t> profile_step(profiles.size(), -1);
    for (std::size_t p = 0; p < profiles.size(); ++p)
      for (std::size_t k = 0; k < profiles[p].use.size(); ++k)
        if (profile_step[p] < 0 ? profiles[p].use[k] > 0 : profiles[p].use[k] > profile_peak[p]) {
          profile_peak[p] = profiles[p].use[k];
          profile_step[p] = static_cast<std::int32_t>(k);
        }
    out.tracked.assign(n, 0);
    out.peak.assign(n, 0);
    out.peak_step.assign(n, -1);
    for (std::size_t g = 0; g < n; ++g) {
      if (tight[g] < 0) continue;
      const auto p = static_cast<std::size_t>(prof[g]);
      out.tracked[g] = 1;
      out.peak[g] = profile_peak[p];
      out.peak_step[g] = profile_step[p];
    }
  }
  if (tight_count == 0) {
    for (const Op& x : s.ops)
      for (auto a : s.after_of(x))
        if (auto q = kept_index(static_cast<std::size_t>(a), x.src); q >= 0)
          last[static_cast<std::size_t>(q)] = std::max(last[static_cast<std::size_t>(q)], out.step[static_cast<std::size_t>(x.id)]);
  }
  for (std::size_t i = 0; i < n_ops; ++i) out.count = std::max(out.count, out.step[i] + 1);
  for (std::size_t a = 0; a < n_ops; ++a)
    for (std::size_t q = kept_first[a]; q < kept_first[a + 1]; ++q)
      out.kept.push_back({static_cast<std::int64_t>(a), kept[a][q - kept_first[a]], last[q]});
  return out;
}

}  // namespace

std::vector<std::int32_t> op_steps(const Schedule& s, std::int32_t& count) {
  Packing p = pack(s);
  count = p.count;
  return std::move(p.step);
}

StagingMemory staging_memory(const Schedule& s) { return staging_memory(s, nullptr); }

StagingMemory staging_memory(const Schedule& s, std::vector<std::int32_t>* steps_out) {
  StagingMemory out;
  Packing packing = pack(s);
  const std::vector<std::int32_t>& step = packing.step;
  const std::int32_t steps = packing.count;
  out.steps = steps;
  const std::size_t n = gpus_named(s);
  std::vector<std::int64_t> peak(n, 0), live(n, 0), kept(n, 0);
  std::vector<std::int32_t> peak_step(n, -1);

  // Kept receives: held whole in their own step (below), then from step(a) + 1 to last(a, g).
  std::vector<std::tuple<std::int32_t, GpuId, std::int64_t>> changes;  // (step, GPU, bytes)
  std::vector<std::vector<GpuId>> kept_at(s.ops.size());
  for (const Kept& k : packing.kept) {
    const auto a = static_cast<std::size_t>(k.op);
    kept_at[a].push_back(k.gpu);
    if (k.last <= step[a]) continue;
    changes.emplace_back(step[a] + 1, k.gpu, s.ops[a].bytes.value);
    changes.emplace_back(k.last + 1, k.gpu, -s.ops[a].bytes.value);
  }
  std::sort(changes.begin(), changes.end());

  // The ops of each step, in id order.
  std::vector<std::size_t> first(static_cast<std::size_t>(steps) + 1, 0), order(s.ops.size());
  for (auto k : step) ++first[static_cast<std::size_t>(k) + 1];
  for (std::size_t k = 1; k < first.size(); ++k) first[k] += first[k - 1];
  {
    std::vector<std::size_t> at(first.begin(), first.end() - 1);
    for (std::size_t i = 0; i < s.ops.size(); ++i) order[at[static_cast<std::size_t>(step[i])]++] = i;
  }
  std::vector<GpuId> touched;
  std::vector<char> is_touched(n, 0);
  auto add = [&](GpuId g, std::int64_t bytes) {
    const auto i = static_cast<std::size_t>(g);
    if (!is_touched[i]) touched.push_back(g);
    is_touched[i] = 1;
    live[i] += bytes;
  };
  // The GPUs the packing tracked have their peaks already; the sweep counts the others (a chain's
  // untracked GPUs listed once per chain).
  const auto untracked = [&](GpuId g) { return packing.tracked.empty() || !packing.tracked[static_cast<std::size_t>(g)]; };
  std::vector<std::vector<GpuId>> chain_untracked(s.chains.size());
  for (std::size_t c = 0; c < s.chains.size(); ++c)
    for_each_chain_gpu(s.chains[c], [&](GpuId g) {
      if (untracked(g)) chain_untracked[c].push_back(g);
    });
  std::size_t next_change = 0;
  for (std::int32_t k = 0; k < steps; ++k) {
    for (; next_change < changes.size() && std::get<0>(changes[next_change]) <= k; ++next_change)
      kept[static_cast<std::size_t>(std::get<1>(changes[next_change]))] += std::get<2>(changes[next_change]);
    for (std::size_t q = first[static_cast<std::size_t>(k)]; q < first[static_cast<std::size_t>(k) + 1]; ++q) {
      const Op& op = s.ops[order[q]];
      const std::int64_t ring = ring_bytes(s, op).value;
      const auto& kq = kept_at[order[q]];
      if (op.chain < 0) {
        for_each_role(s, op, kq, [&](GpuId g, bool is_kept) {
          if (untracked(g)) add(g, is_kept ? op.bytes.value : ring);
        });
        continue;
      }
      for (GpuId g : chain_untracked[static_cast<std::size_t>(op.chain)])
        add(g, g != op.src && std::binary_search(kq.begin(), kq.end(), g) ? op.bytes.value : ring);
    }
    for (GpuId g : touched) {
      const auto i = static_cast<std::size_t>(g);
      if (live[i] + kept[i] > peak[i] || peak_step[i] < 0) {
        peak[i] = live[i] + kept[i];
        peak_step[i] = k;
      }
      live[i] = 0;
      is_touched[i] = 0;
    }
    touched.clear();
  }
  for (std::size_t g = 0; g < n && g < packing.tracked.size(); ++g)
    if (packing.tracked[g]) {
      peak[g] = packing.peak[g];
      peak_step[g] = packing.peak_step[g];
    }
  out.per_gpu.reserve(n);
  std::int64_t worst = 0;
  for (std::size_t g = 0; g < n; ++g) {
    out.per_gpu.push_back(Bytes{peak[g]});
    if (peak_step[g] >= 0 && (out.gpu < 0 || peak[g] > out.peak.value)) {
      out.peak = Bytes{peak[g]};
      out.gpu = static_cast<GpuId>(g);
      out.step = peak_step[g];
    }
    const std::int64_t budget = staging_budget(s, static_cast<GpuId>(g)).value;
    if (budget > 0 && peak[g] > budget) {
      ++out.over_budget;
      if (peak[g] - budget > worst) {
        worst = peak[g] - budget;
        out.worst_over = static_cast<GpuId>(g);
      }
    }
  }
  if (steps_out) *steps_out = std::move(packing.step);
  return out;
}

}  // namespace reshard::model

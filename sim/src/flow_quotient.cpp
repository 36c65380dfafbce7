// Colour refinement for the symmetry quotient; the math is written on flow_quotient.hpp.
#include "flow_quotient.hpp"

#include <algorithm>
#include <cstring>

namespace reshard::sim {

namespace {

std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finalizer: a bijection that scatters bits
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t bits(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// Dense numbers 0, 1, ... for distinct keys (previous colour, h1, h2), in order of first appearance:
// open addressing with linear probing, doubled when half full.
class Numbering {
 public:
  void reset(std::size_t expected) {
    std::size_t capacity = 1024;
    while (capacity < 2 * expected) capacity *= 2;
    slots_.assign(capacity, Slot{});
    count_ = 0;
  }
  std::int32_t number(std::uint32_t colour, std::uint64_t h1, std::uint64_t h2) {
    if (2 * (static_cast<std::size_t>(count_) + 1) > slots_.size()) grow();
    const std::int32_t n = insert(Slot{h1, h2, colour, count_});
    if (n == count_) ++count_;
    return n;
  }
  std::int32_t count() const { return count_; }

 private:
  struct Slot {
    std::uint64_t h1 = 0, h2 = 0;
    std::uint32_t colour = 0;
    std::int32_t number = -1;  // -1: empty
  };
  std::int32_t insert(const Slot& s) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = mix64(s.h1 ^ mix64(s.h2 + s.colour)) & mask;; i = (i + 1) & mask) {
      Slot& at = slots_[i];
      if (at.number < 0) {
        at = s;
        return s.number;
      }
      if (at.h1 == s.h1 && at.h2 == s.h2 && at.colour == s.colour) return at.number;
    }
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.number >= 0) insert(s);
  }
  std::vector<Slot> slots_;
  std::int32_t count_ = 0;
};

// A multiset of colours, summarized by two sums of salted colour hashes (kept up to date as
// members change colour).
struct Sum {
  std::uint64_t a = 0, b = 0;
  bool operator==(const Sum& o) const { return a == o.a && b == o.b; }
  static std::uint64_t ha(std::int32_t colour, std::uint64_t salt) { return mix64(static_cast<std::uint64_t>(colour) ^ salt); }
  static std::uint64_t hb(std::int32_t colour, std::uint64_t salt) {
    return mix64((static_cast<std::uint64_t>(colour) << 32) + salt);
  }
  // What a member of colour `colour` adds to a multiset under `salt`.
  static Sum of(std::int32_t colour, std::uint64_t salt) { return {ha(colour, salt), hb(colour, salt)}; }
  // What a member moving from colour `from` to `to` adds (mod 2^64); the same for every multiset
  // it is in under one salt, so it is computed once per move.
  static Sum change(std::int32_t from, std::int32_t to, std::uint64_t salt) {
    return {ha(to, salt) - ha(from, salt), hb(to, salt) - hb(from, salt)};
  }
  void add(const Sum& change) {
    a += change.a;
    b += change.b;
  }
};

// One side of the refinement (flows or links): the colour of each element, the size of each cell,
// and the signature its members had when the cell got them. An element whose signature may have
// changed is marked; split() regroups the marked elements of each cell by signature.
class Side {
 public:
  Side(std::vector<std::int32_t>& colour, std::int32_t cells) : colour_(colour) {
    size_.assign(static_cast<std::size_t>(cells), 0);
    signature_.assign(static_cast<std::size_t>(cells), Sum{});
    has_signature_.assign(static_cast<std::size_t>(cells), 0);
    for (auto c : colour_) ++size_[c];
    stamp_.assign(colour_.size(), 0);
    // The first round marks every element: room for all of them up front, not by doubling.
    marked_.reserve(colour_.size());
    group_of_.reserve(colour_.size());
    moved_.reserve(colour_.size());
  }
  std::size_t cells() const { return size_.size(); }
  void mark(std::int32_t e) {
    if (stamp_[e] != round_) {
      stamp_[e] = round_;
      marked_.push_back(e);
    }
  }
  // Regroups the marked elements by (cell, signature). A group stays in its cell when its
  // signature is the cell's (the unmarked members have that one), or when every member of the cell
  // is marked, none has the cell's signature and it is the cell's largest group; any other group
  // becomes a new cell. So a new cell is always a real split. Returns the elements that changed
  // cell, each with its old cell.
  template <class SignatureOf>
  const std::vector<std::pair<std::int32_t, std::int32_t>>& split(SignatureOf&& signature_of) {
    moved_.clear();
    groups_.clear();
    group_of_.clear();
    numbering_.reset(std::min<std::size_t>(marked_.size(), 4096));  // grows with the groups, not the marked
    for (auto e : marked_) {
      const Sum s = signature_of(e);
      const auto g = numbering_.number(static_cast<std::uint32_t>(colour_[e]), s.a, s.b);
      if (g == static_cast<std::int32_t>(groups_.size())) groups_.push_back({colour_[e], s, 0, -1});
      ++groups_[g].count;
      group_of_.push_back(g);
    }
    marked_in_cell_.resize(size_.size(), 0);
    largest_.resize(size_.size(), -1);
    matched_.resize(size_.size(), 0);
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const Group& gr = groups_[g];
      marked_in_cell_[gr.cell] += gr.count;
      if (largest_[gr.cell] < 0 || groups_[largest_[gr.cell]].count < gr.count) largest_[gr.cell] = static_cast<std::int32_t>(g);
      if (has_signature_[gr.cell] && signature_[gr.cell] == gr.signature) matched_[gr.cell] = 1;
    }
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      Group& gr = groups_[g];
      const bool all_marked = marked_in_cell_[gr.cell] == size_[gr.cell];
      const bool keeps = (has_signature_[gr.cell] && signature_[gr.cell] == gr.signature) ||
                         (all_marked && !matched_[gr.cell] && largest_[gr.cell] == static_cast<std::int32_t>(g));
      gr.target = keeps ? gr.cell : static_cast<std::int32_t>(size_.size());
      if (!keeps) {
        size_.push_back(0);
        signature_.push_back(gr.signature);
        has_signature_.push_back(1);
      }
    }
    for (const Group& gr : groups_) {
      if (gr.target == gr.cell) {
        signature_[gr.cell] = gr.signature;
        has_signature_[gr.cell] = 1;
      }
      marked_in_cell_[gr.cell] = 0;
      largest_[gr.cell] = -1;
      matched_[gr.cell] = 0;
    }
    for (std::size_t i = 0; i < marked_.size(); ++i) {
      const std::int32_t e = marked_[i];
      const Group& gr = groups_[group_of_[i]];
      if (gr.target == gr.cell) continue;
      --size_[gr.cell];
      ++size_[gr.target];
      colour_[e] = gr.target;
      moved_.emplace_back(e, gr.cell);
    }
    marked_.clear();
    ++round_;
    return moved_;
  }

 private:
  struct Group {
    std::int32_t cell;
    Sum signature;
    std::int64_t count;
    std::int32_t target;
  };
  std::vector<std::int32_t>& colour_;
  std::vector<std::int64_t> size_;
  std::vector<Sum> signature_;
  std::vector<char> has_signature_;
  std::vector<std::uint32_t> stamp_;
  std::uint32_t round_ = 1;
  std::vector<std::int32_t> marked_;
  std::vector<Group> groups_;
  std::vector<std::int32_t> group_of_;
  Numbering numbering_;
  std::vector<std::int64_t> marked_in_cell_;
  std::vector<std::int32_t> largest_;
  std::vector<char> matched_;
  std::vector<std::pair<std::int32_t, std::int32_t>> moved_;
};

constexpr std::uint64_t kFlowSalt = 0x243f6a8885a308d3ull, kLinkSalt = 0x13198a2e03707344ull,
                        kPredSalt = 0xa4093822299f31d0ull;

}  // namespace

FlowQuotient find_quotient(const FlowNetwork& net, const FlowTable& flows, const FlowGraph& graph,
                           const std::vector<std::int32_t>& link_group, std::size_t max_flow_cells,
                           std::int32_t max_rounds) {
  const std::size_t n = flows.size(), nl = net.capacity.size();
  FlowQuotient q;
  q.flow_cell.resize(n);
  q.link_cell.resize(nl);
  Numbering numbering;
  numbering.reset(1024);
  for (std::size_t l = 0; l < nl; ++l)
    q.link_cell[l] = numbering.number(0, bits(net.capacity[l].value),
                                      link_group.empty() ? 0 : static_cast<std::uint64_t>(link_group[l]) + 1);
  const std::int32_t link_cells = numbering.count();
  // The signatures: per flow the multisets of its links' colours and of its predecessors'
  // colours, per link the multiset of its flows' colours.
  std::vector<Sum> flow_links(n), flow_preds(n), link_sum(nl), link_change(nl);
  std::vector<char> link_moved(nl, 0);
  // The flows' first colours: not just (bytes, latency) but a hash of everything a flow's chain of
  // predecessors is made of, computed in one pass in topological order:
  //   seed(f) = H(bytes, latency, {first colour of each link of f}, {seed(p) : p a predecessor}).
  // Flows of one cell of any equitable partition that refines (bytes, latency) have equal seeds (by
  // induction along the order: equal bytes, latency, link colour multisets, and predecessor cell
  // multisets whose members have equal seeds). So the coarsest equitable partition refining the
  // seeds is the coarsest refining (bytes, latency): the same quotient, but what rounds of
  // refinement would find one dependency step at a time (the chunks of a pipeline) is there at
  // the start (deepseek-v3's best schedule: 31 rounds -> 8, docs/performance.md).
  {
    std::vector<Sum> link_hash(nl);
    for (std::size_t l = 0; l < nl; ++l) link_hash[l] = Sum::of(q.link_cell[l], kLinkSalt);
    // flow_preds[f] gathers the seeds of f's predecessors here; flow_links[f] is final.
    auto visit = [&](std::size_t f) {
      for (auto k = flows.link_begin[f]; k < flows.link_begin[f + 1]; ++k) flow_links[f].add(link_hash[flows.links[k]]);
      const std::uint64_t own = mix64(bits(flows.bytes[f].value) ^ mix64(bits(flows.latency[f].value)));
      const Sum seed{mix64(own ^ mix64(flow_links[f].a)) + flow_preds[f].a,
                     mix64(own + kPredSalt + mix64(flow_links[f].b)) + flow_preds[f].b};
      const Sum as_predecessor{mix64(seed.a ^ kPredSalt), mix64(seed.b + kFlowSalt)};
      for (auto s = graph.succ_begin[f]; s < graph.succ_begin[f + 1]; ++s) flow_preds[graph.succ[s]].add(as_predecessor);
      q.flow_cell[f] = numbering.number(0, seed.a, seed.b);
    };
    numbering.reset(1024);
    if (graph.order.empty())
      for (std::size_t f = 0; f < n; ++f) visit(f);
    else
      for (auto f : graph.order) visit(static_cast<std::size_t>(f));
  }
  const std::int32_t initial_flow_cells = numbering.count();
  Side flow_side(q.flow_cell, initial_flow_cells), link_side(q.link_cell, link_cells);
  // Round 1 looks at everything; later rounds only at the elements next to one that moved. The
  // first sums in one pass over the flows, the hashes of the first colours from tables.
  {
    std::vector<Sum> as_member(static_cast<std::size_t>(initial_flow_cells)), as_predecessor(as_member.size());
    for (std::int32_t c = 0; c < initial_flow_cells; ++c) {
      as_member[c] = Sum::of(c, kFlowSalt);
      as_predecessor[c] = Sum::of(c, kPredSalt);
    }
    for (std::size_t l = 0; l < nl; ++l) link_side.mark(static_cast<std::int32_t>(l));
    std::fill(flow_preds.begin(), flow_preds.end(), Sum{});
    for (std::size_t f = 0; f < n; ++f) {
      const Sum& member = as_member[q.flow_cell[f]];
      for (auto k = flows.link_begin[f]; k < flows.link_begin[f + 1]; ++k) link_sum[flows.links[k]].add(member);
      const Sum& predecessor = as_predecessor[q.flow_cell[f]];
      for (auto s = graph.succ_begin[f]; s < graph.succ_begin[f + 1]; ++s) flow_preds[graph.succ[s]].add(predecessor);
      flow_side.mark(static_cast<std::int32_t>(f));
    }
  }
  auto flow_signature = [&](std::int32_t f) {
    return Sum{mix64(flow_links[f].a) ^ flow_preds[f].a, mix64(flow_links[f].b + kPredSalt) ^ flow_preds[f].b};
  };
  while (true) {
    ++q.rounds;
    const auto& links_moved = link_side.split([&](std::int32_t l) { return link_sum[l]; });
    // The flows crossing a moved link take its change, in one pass over the flows in order (links
    // move only in the first rounds, and then on most flows: in order beats scattered updates
    // through a per-link list of flows, and needs no such list).
    if (!links_moved.empty()) {
      for (const auto& [l, old] : links_moved) {
        link_change[l] = Sum::change(old, q.link_cell[l], kLinkSalt);
        link_moved[l] = 1;
      }
      for (std::size_t f = 0; f < n; ++f) {
        bool moved = false;
        for (auto k = flows.link_begin[f]; k < flows.link_begin[f + 1]; ++k)
          if (link_moved[flows.links[k]]) {
            flow_links[f].add(link_change[flows.links[k]]);
            moved = true;
          }
        if (moved) flow_side.mark(static_cast<std::int32_t>(f));
      }
      for (const auto& [l, old] : links_moved) link_moved[l] = 0;
    }
    const bool links_changed = !links_moved.empty();
    const auto& flows_moved = flow_side.split(flow_signature);
    if (flow_side.cells() > max_flow_cells || q.rounds > max_rounds) {
      q.flow_cells = -1;
      return q;
    }
    // Like the link sums above: when most flows moved, every flow's predecessor sum afresh, in
    // order (by the table's `after`, indices when the ids are), instead of scattered updates.
    const bool recompute_preds = graph.dense_ids && 4 * flows_moved.size() > n;
    for (const auto& [f, old] : flows_moved) {
      const Sum as_member = Sum::change(old, q.flow_cell[f], kFlowSalt);
      for (auto k = flows.link_begin[f]; k < flows.link_begin[f + 1]; ++k) {
        link_sum[flows.links[k]].add(as_member);
        link_side.mark(flows.links[k]);
      }
      if (recompute_preds || graph.succ_begin[f] == graph.succ_begin[f + 1]) continue;
      const Sum as_predecessor = Sum::change(old, q.flow_cell[f], kPredSalt);
      for (auto s = graph.succ_begin[f]; s < graph.succ_begin[f + 1]; ++s) {
        flow_preds[graph.succ[s]].add(as_predecessor);
        flow_side.mark(graph.succ[s]);
      }
    }
    if (recompute_preds)
      for (std::size_t f = 0; f < n; ++f) {
        if (flows.after_begin[f] == flows.after_begin[f + 1]) continue;
        Sum sum;
        for (auto k = flows.after_begin[f]; k < flows.after_begin[f + 1]; ++k)
          sum.add(Sum::of(q.flow_cell[static_cast<std::size_t>(flows.after[k])], kPredSalt));
        if (sum == flow_preds[f]) continue;  // signature unchanged: the flow keeps its cell's
        flow_preds[f] = sum;
        flow_side.mark(static_cast<std::int32_t>(f));
      }
    if (!links_changed && flows_moved.empty()) break;
  }
  // Cells that lost all their members are dropped: number the rest densely.
  auto compact = [](std::vector<std::int32_t>& colour) {
    std::vector<std::int32_t> renumber(colour.size() + 1, -1);
    std::int32_t next = 0;
    for (auto& c : colour) {
      if (static_cast<std::size_t>(c) >= renumber.size()) renumber.resize(static_cast<std::size_t>(c) + 1, -1);
      if (renumber[c] < 0) renumber[c] = next++;
      c = renumber[c];
    }
    return next;
  };
  q.flow_cells = compact(q.flow_cell);
  q.link_cells = compact(q.link_cell);
  return q;
}

}  // namespace reshard::sim

// The symmetry quotient of a schedule on its operations; the math is written on op_quotient.hpp.
#include "op_quotient.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>

#include "flow_quotient.hpp"
#include "quotient_sim.hpp"
#include "refinement.hpp"
#include "tolerances.hpp"

namespace reshard::sim {

namespace {

using namespace refinement;  // mix64, bits, Numbering, Sum, Side, compact

constexpr std::uint64_t kOpSalt = 0x082efa98ec4e6c89ull, kPathSalt = 0x452821e638d01377ull,
                        kSubFlowSalt = 0xbe5466cf34e90c6cull, kJoinSalt = 0xc0ac29b7c97c50ddull,
                        kProductSalt = 0x3f84d5b5b5470917ull;

Sum times(const Sum& x, const Sum& y) { return {x.a * y.a, x.b * y.b}; }
Sum minus(const Sum& x, const Sum& y) { return {x.a - y.a, x.b - y.b}; }
Sum scatter(const Sum& s, std::uint64_t salt) { return {mix64(s.a ^ salt), mix64(s.b + salt)}; }

// CSR of `count` lists: begin[x] .. begin[x + 1] in `items`, filled by for_each(add(x, item)).
struct Csr {
  std::vector<std::int64_t> begin;
  std::vector<std::int32_t> items;
  template <class ForEach>
  void build(std::size_t count, ForEach&& for_each) {
    begin.assign(count + 1, 0);
    for_each([&](std::int32_t x, std::int32_t) { ++begin[x + 1]; });
    for (std::size_t x = 0; x < count; ++x) begin[x + 1] += begin[x];
    items.resize(static_cast<std::size_t>(begin[count]));
    std::vector<std::int64_t> fill(begin.begin(), begin.end() - 1);
    for_each([&](std::int32_t x, std::int32_t item) { items[fill[x]++] = item; });
  }
};

// The stable colours, or op_cells < 0 when the refinement gave up.
struct OpColours {
  std::vector<std::int32_t> op, path, route, link;  // path and route: their signatures, numbered
  std::vector<std::int32_t> shape;  // per route: the sequence of its paths' colours, numbered
  std::int32_t link_cells = 0;
  std::int64_t op_cells = -1;
  std::int32_t rounds = 0;
};

// Stays whole: one incremental refinement whose steps share a dozen arrays updated in place
// (sums, stamps, changed lists); split, each phase would take most of them as arguments.
OpColours refine(const FlowNetwork& net, const OpProblem& ops, const std::vector<std::int32_t>& link_group,
                 std::size_t max_op_cells, std::int32_t max_rounds) {
  const std::size_t n = ops.ops(), nl = net.capacity.size(), nr = ops.route_path_begin.size() - 1,
                    np = ops.path_link_begin.size() - 1;
  OpColours out;
  std::vector<std::int32_t> path_route(np);
  for (std::size_t r = 0; r < nr; ++r)
    for (auto p = ops.route_path_begin[r]; p < ops.route_path_begin[r + 1]; ++p) path_route[p] = static_cast<std::int32_t>(r);
  Csr paths_of_link, ops_of_route, successors;
  paths_of_link.build(nl, [&](auto&& add) {
    for (std::size_t p = 0; p < np; ++p)
      for (auto k = ops.path_link_begin[p]; k < ops.path_link_begin[p + 1]; ++k) add(ops.path_links[k], static_cast<std::int32_t>(p));
  });
  ops_of_route.build(nr, [&](auto&& add) {
    for (std::size_t i = 0; i < n; ++i) add(ops.route[i], static_cast<std::int32_t>(i));
  });
  successors.build(n, [&](auto&& add) {
    for (std::size_t i = 0; i < n; ++i)
      for (auto k = ops.after_begin[i]; k < ops.after_begin[i + 1]; ++k) add(ops.after[k], static_cast<std::int32_t>(i));
  });

  // Links: (capacity, group) first. Paths: the sum of their links' colour hashes.
  auto& link_cell = out.link;
  const std::int32_t first_link_cells = refinement::first_link_colours(net, link_group, link_cell);
  Side link_side(link_cell, first_link_cells);
  Numbering numbering;
  std::vector<Sum> path_sum(np);
  for (std::size_t p = 0; p < np; ++p)
    for (auto k = ops.path_link_begin[p]; k < ops.path_link_begin[p + 1]; ++k)
      path_sum[p].add(Sum::of(link_cell[ops.path_links[k]], kLinkSalt));
  // A route's identity as a predecessor: its one path's sum (the op's sub-flow), or the multiset of
  // its paths' sums (the op's join flow).
  auto identity_of = [&](std::size_t r) {
    const auto first = ops.route_path_begin[r], last = ops.route_path_begin[r + 1];
    if (last - first == 1) return scatter(path_sum[first], kSubFlowSalt);
    Sum m;
    for (auto p = first; p < last; ++p) m.add(scatter(path_sum[p], kPathSalt));
    return scatter(m, kJoinSalt);
  };
  std::vector<Sum> identity(nr);
  for (std::size_t r = 0; r < nr; ++r) identity[r] = identity_of(r);
  auto as_predecessor = [&](std::int32_t colour, const Sum& id) {
    return Sum{mix64(Sum::ha(colour, kPredSalt) ^ id.a), mix64(Sum::hb(colour, kPredSalt) + id.b)};
  };

  // Ops: seeded in order (predecessors come first) by (share, latency, predecessors as
  // predecessors), so the seed colouring is already stable on the predecessor side (the seed of
  // find_quotient, flow_quotient.cpp). pred[i] is the sum of op i's predecessors' hashes.
  auto& colour = out.op;
  colour.resize(n);
  std::vector<Sum> pred(n);
  numbering.reset(1024);
  for (std::size_t i = 0; i < n; ++i) {
    for (auto k = ops.after_begin[i]; k < ops.after_begin[i + 1]; ++k) {
      const auto a = static_cast<std::size_t>(ops.after[k]);
      pred[i].add(as_predecessor(colour[a], identity[ops.route[a]]));
    }
    const std::uint64_t own = mix64(alike_bits(ops.share[i].value) ^ mix64(alike_bits(ops.latency[i].value) + kOpSalt));
    colour[i] = numbering.number(0, own ^ pred[i].a, pred[i].b);
  }
  Side op_side(colour, numbering.count());
  op_side.set_signatures([&](std::int32_t i) { return pred[i]; });

  // Link sums: sum over routes r and their paths p through the link of C_r * B(p).
  auto op_hash = [](std::int32_t c) { return Sum::of(c, kOpSalt); };
  auto path_hash = [&](const Sum& s) { return scatter(s, kProductSalt); };
  std::vector<Sum> route_ops(nr), link_sum(nl);  // C_r, and the links' sums
  for (std::size_t i = 0; i < n; ++i) route_ops[ops.route[i]].add(op_hash(colour[i]));
  auto add_to_route_links = [&](std::size_t r, const Sum& factor) {  // C_r grew by `factor`
    for (auto p = ops.route_path_begin[r]; p < ops.route_path_begin[r + 1]; ++p) {
      const Sum delta = times(factor, path_hash(path_sum[p]));
      for (auto k = ops.path_link_begin[p]; k < ops.path_link_begin[p + 1]; ++k) {
        link_sum[ops.path_links[k]].add(delta);
        link_side.mark(ops.path_links[k]);
      }
    }
  };
  for (std::size_t r = 0; r < nr; ++r) add_to_route_links(r, route_ops[r]);
  for (std::size_t l = 0; l < nl; ++l) link_side.mark(static_cast<std::int32_t>(l));

  // Every op's predecessor sum afresh, marking the ops whose sum changed (when most ops are
  // affected: cheaper in order than scattered updates).
  auto recompute_preds = [&] {
    for (std::size_t i = 0; i < n; ++i) {
      if (ops.after_begin[i] == ops.after_begin[i + 1]) continue;
      Sum s;
      for (auto k = ops.after_begin[i]; k < ops.after_begin[i + 1]; ++k) {
        const auto a = static_cast<std::size_t>(ops.after[k]);
        s.add(as_predecessor(colour[a], identity[ops.route[a]]));
      }
      if (s == pred[i]) continue;
      pred[i] = s;
      op_side.mark(static_cast<std::int32_t>(i));
    }
  };
  auto add_to_successors = [&](std::size_t i, const Sum& delta) {
    for (auto s = successors.begin[i]; s < successors.begin[i + 1]; ++s) {
      pred[successors.items[s]].add(delta);
      op_side.mark(successors.items[s]);
    }
  };

  std::vector<Sum> link_change(nl), old_identity(nr), route_change(nr);
  std::vector<char> link_moved(nl, 0);
  std::vector<std::int32_t> path_stamp(np, 0), route_stamp(nr, 0), changed_paths, changed_routes;
  std::int32_t path_round = 0;
  while (true) {
    ++out.rounds;
    // Links that moved change their paths' sums, which change the links of those paths (through
    // B(p)) and their routes' identities (through the successors of the routes' ops). The links
    // and paths are refined until they settle (the op colours held), so that the ops see the
    // routes' changes of several link rounds at once.
    bool links_changed = false;
    changed_routes.clear();
    while (true) {
      const auto& links_moved = link_side.split([&](std::int32_t l) { return link_sum[l]; });
      if (links_moved.empty()) break;
      links_changed = true;
      ++path_round;
      changed_paths.clear();
      for (const auto& [l, old] : links_moved) {
        link_change[l] = Sum::change(old, link_cell[l], kLinkSalt);
        link_moved[l] = 1;
        for (auto k = paths_of_link.begin[l]; k < paths_of_link.begin[l + 1]; ++k) {
          const auto p = paths_of_link.items[k];
          if (path_stamp[p] == path_round) continue;
          path_stamp[p] = path_round;
          changed_paths.push_back(p);
        }
      }
      for (auto p : changed_paths) {
        const Sum before = path_hash(path_sum[p]);
        for (auto k = ops.path_link_begin[p]; k < ops.path_link_begin[p + 1]; ++k)
          if (link_moved[ops.path_links[k]]) path_sum[p].add(link_change[ops.path_links[k]]);
        const auto r = path_route[p];
        const Sum delta = times(route_ops[r], minus(path_hash(path_sum[p]), before));
        for (auto k = ops.path_link_begin[p]; k < ops.path_link_begin[p + 1]; ++k) {
          link_sum[ops.path_links[k]].add(delta);
          link_side.mark(ops.path_links[k]);
        }
        if (route_stamp[r] != out.rounds) {
          route_stamp[r] = out.rounds;
          old_identity[r] = identity[r];
          changed_routes.push_back(r);
        }
      }
      for (const auto& [l, old] : links_moved) link_moved[l] = 0;
    }
    if (links_changed) {
      std::size_t affected = 0;
      for (auto r : changed_routes) {
        identity[r] = identity_of(static_cast<std::size_t>(r));
        affected += static_cast<std::size_t>(ops_of_route.begin[r + 1] - ops_of_route.begin[r]);
      }
      if (kRecomputeAllDivisor * affected > n) {
        recompute_preds();
      } else {
        for (auto r : changed_routes)
          for (auto k = ops_of_route.begin[r]; k < ops_of_route.begin[r + 1]; ++k) {
            const auto i = static_cast<std::size_t>(ops_of_route.items[k]);
            if (successors.begin[i] == successors.begin[i + 1]) continue;
            add_to_successors(i, minus(as_predecessor(colour[i], identity[r]), as_predecessor(colour[i], old_identity[r])));
          }
      }
    }
    // Ops split by their predecessor sums; one that moved changes its route's C_r and its
    // successors' sums.
    const auto& ops_moved = op_side.split([&](std::int32_t i) { return pred[i]; });
    if (op_side.cells() > max_op_cells || out.rounds > max_rounds) return out;  // op_cells stays -1
    changed_routes.clear();
    for (const auto& [i, old] : ops_moved) {
      const auto r = ops.route[i];
      if (route_stamp[r] != -out.rounds) {
        route_stamp[r] = -out.rounds;
        route_change[r] = Sum{};
        changed_routes.push_back(r);
      }
      route_change[r].add(minus(op_hash(colour[i]), op_hash(old)));
    }
    for (auto r : changed_routes) {
      route_ops[r].add(route_change[r]);
      add_to_route_links(static_cast<std::size_t>(r), route_change[r]);
    }
    if (kRecomputeAllDivisor * ops_moved.size() > n) {
      recompute_preds();
    } else {
      for (const auto& [i, old] : ops_moved) {
        if (successors.begin[i] == successors.begin[i + 1]) continue;
        const Sum& id = identity[ops.route[i]];
        add_to_successors(static_cast<std::size_t>(i), minus(as_predecessor(colour[i], id), as_predecessor(old, id)));
      }
    }
    if (!links_changed && ops_moved.empty()) break;
  }

  // Dense numbers: paths by their sums, routes by their identities, links and ops in order of
  // first appearance (cells left empty by splits dropped).
  out.path.resize(np);
  numbering.reset(1024);
  for (std::size_t p = 0; p < np; ++p) out.path[p] = numbering.number(0, path_sum[p].a, path_sum[p].b);
  out.route.resize(nr);
  numbering.reset(1024);
  for (std::size_t r = 0; r < nr; ++r) out.route[r] = numbering.number(0, identity[r].a, identity[r].b);
  out.shape.resize(nr);
  numbering.reset(1024);
  for (std::size_t r = 0; r < nr; ++r) {
    std::uint64_t h1 = 0, h2 = kPathSalt;
    for (auto p = ops.route_path_begin[r]; p < ops.route_path_begin[r + 1]; ++p) {
      h1 = mix64(h1 ^ static_cast<std::uint64_t>(out.path[p]));
      h2 = mix64(h2 + static_cast<std::uint64_t>(out.path[p]));
    }
    out.shape[r] = numbering.number(static_cast<std::uint32_t>(ops.route_path_begin[r + 1] - ops.route_path_begin[r]), h1, h2);
  }
  out.link_cells = compact(out.link);
  out.op_cells = compact(out.op);
  return out;
}

// A value per (colour, key), made once: the first key each colour meets is kept in arrays by
// colour (most colours meet one), the others hashed.
class PerColour {
 public:
  explicit PerColour(std::size_t colours) : first_key_(colours, -1), first_value_(colours) { others_.reset(1024); }
  template <class Make>
  std::int32_t get(std::int32_t colour, std::int32_t key, Make&& make) {
    const auto c = static_cast<std::size_t>(colour);
    if (first_key_[c] == key) return first_value_[c];
    if (first_key_[c] < 0) {
      first_key_[c] = key;
      return first_value_[c] = make();
    }
    const auto k = others_.number(static_cast<std::uint32_t>(colour), static_cast<std::uint64_t>(key), 0);
    if (k == static_cast<std::int32_t>(other_value_.size())) other_value_.push_back(make());
    return other_value_[k];
  }

 private:
  std::vector<std::int32_t> first_key_, first_value_, other_value_;
  Numbering others_;
};

// What a flow of the expansion is: sub-flow `path` (0-based within the route) of op `op`, the join
// flow of op `op`, or the overhead flow.
struct FlowRef {
  enum Kind : std::int8_t { sub_flow, join, overhead } kind = sub_flow;
  std::int32_t op = -1, path = 0;
};

// The flows of an op problem as simulate_schedule makes them (schedule_sim.hpp), each with its
// cell, as the quotient's reduction and expansion read them (quotient_sim.hpp). An op's sub-flow
// cells are its entry's (op colour, route shape), listed in entry_cells.
struct OpView {
  using Ref = FlowRef;
  explicit OpView(const OpProblem& problem) : ops(problem) {}
  const OpProblem& ops;
  std::size_t flows = 0;
  std::vector<FlowRef> stands_for;                           // per cell
  std::vector<std::int64_t> first_flow, join_of;            // per op: its first sub-flow, its join flow (-1)
  std::vector<std::int32_t> entry_of, join_cell;            // per op
  std::vector<std::int32_t> entry_begin{0}, entry_cells;    // per entry: its sub-flows' cells
  std::vector<char> has_successor;                          // per op
  std::int64_t overhead_flow = -1;
  std::int32_t overhead_cell = -1;

  std::int32_t sub_cell(std::size_t i, std::int32_t p) const { return entry_cells[entry_begin[entry_of[i]] + p]; }
  std::size_t flow_count() const { return flows; }
  Ref stand_in(std::int32_t cell) const { return stands_for[cell]; }
  std::int32_t cell_of(const Ref& f) const {
    return f.kind == FlowRef::sub_flow ? sub_cell(f.op, f.path) : f.kind == FlowRef::join ? join_cell[f.op] : overhead_cell;
  }
  std::size_t index(const Ref& f) const {
    return static_cast<std::size_t>(f.kind == FlowRef::sub_flow ? first_flow[f.op] + f.path
                                    : f.kind == FlowRef::join   ? join_of[f.op]
                                                                : overhead_flow);
  }
  std::int64_t id(const Ref& f) const { return static_cast<std::int64_t>(index(f)); }
  ByteAmount bytes(const Ref& f) const { return f.kind == FlowRef::sub_flow ? ops.share[f.op] : ByteAmount{0}; }
  Seconds latency(const Ref& f) const {
    return f.kind == FlowRef::sub_flow ? ops.latency[f.op] : f.kind == FlowRef::join ? Seconds{0} : ops.overheads;
  }
  template <class F>
  void for_each_link(const Ref& f, F&& fn) const {
    if (f.kind != FlowRef::sub_flow) return;  // joins and the overhead flow cross no link
    const auto p = ops.route_path_begin[ops.route[f.op]] + f.path;
    for (auto k = ops.path_link_begin[p]; k < ops.path_link_begin[p + 1]; ++k) fn(ops.path_links[k]);
  }
  // A sub-flow waits for each op of its op's `after`: its sub-flow, or its join flow when it has
  // several; a join flow for its op's sub-flows; the overhead flow for the sub-flows of the ops no
  // op waits for.
  template <class F>
  bool for_each_predecessor(const Ref& f, F&& fn) const {
    auto sub_flows_of = [&](std::int32_t i) {
      for (std::int32_t p = 0; p < ops.sub_flows(static_cast<std::size_t>(i)); ++p)
        if (fn(FlowRef{FlowRef::sub_flow, i, p})) return true;
      return false;
    };
    if (f.kind == FlowRef::sub_flow) {
      for (auto k = ops.after_begin[f.op]; k < ops.after_begin[f.op + 1]; ++k) {
        const auto a = ops.after[k];
        if (fn(FlowRef{ops.sub_flows(static_cast<std::size_t>(a)) == 1 ? FlowRef::sub_flow : FlowRef::join, a, 0})) return true;
      }
      return false;
    }
    if (f.kind == FlowRef::join) return sub_flows_of(f.op);
    for (std::size_t i = 0; i < ops.ops(); ++i)
      if (!has_successor[i] && sub_flows_of(static_cast<std::int32_t>(i))) return true;
    return false;
  }
};

// Link bytes: the sums of add_link_traffic (flow_sim.cpp), in flow order, a share once per entry
// of a path's link list. When every share is a whole number of bytes and all of them together
// stay below 2^53 (so every partial sum is exact in any order), per route instead: one add per
// op instead of one per sub-flow and link.
void add_link_bytes(const OpProblem& ops, FlowSimResult& result) {
  const std::size_t n = ops.ops();
  double total = 0;
  bool whole = true;
  for (std::size_t i = 0; i < n && whole; ++i) {
    whole = ops.share[i].value == std::floor(ops.share[i].value);
    total += ops.share[i].value * ops.sub_flows(i);
  }
  if (whole && total < tolerance::kExactIntegerSums) {
    std::vector<double> route_bytes(ops.route_path_begin.size() - 1, 0.0);
    for (std::size_t i = 0; i < n; ++i) route_bytes[ops.route[i]] += ops.share[i].value;
    for (std::size_t r = 0; r < route_bytes.size(); ++r)
      for (auto p = ops.route_path_begin[r]; p < ops.route_path_begin[r + 1]; ++p)
        for (auto k = ops.path_link_begin[p]; k < ops.path_link_begin[p + 1]; ++k)
          result.links[ops.path_links[k]].bytes += ByteAmount{route_bytes[r]};
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const auto route = ops.route[i];
      for (auto p = ops.route_path_begin[route]; p < ops.route_path_begin[route + 1]; ++p)
        for (auto k = ops.path_link_begin[p]; k < ops.path_link_begin[p + 1]; ++k)
          result.links[ops.path_links[k]].bytes += ops.share[i];
    }
  }
}

}  // namespace

OpQuotientOutcome simulate_op_quotient(const FlowNetwork& net, const OpProblem& ops, const SimOptions& options,
                                       std::size_t flow_count, ScheduleSimulation& out) {
  const auto wall_start = std::chrono::steady_clock::now();
  const std::size_t n = ops.ops();
  // What validate_and_index would reject is left to it (it names the flow).
  if (flow_count > kMaxFlows) return OpQuotientOutcome::unchecked;
  for (const auto& c : net.capacity)
    if (!valid_capacity(c)) return OpQuotientOutcome::unchecked;
  for (std::size_t i = 0; i < n; ++i)
    if (!valid_amount(ops.latency[i].value) || !valid_amount(ops.share[i].value))
      return OpQuotientOutcome::unchecked;

  const OpColours colours = refine(net, ops, options.link_group, quotient_max_cells(flow_count), kQuotientMaxRounds);
  if (colours.op_cells < 0) return OpQuotientOutcome::not_paying;
  const auto classes_wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()};

  // The flows in simulate_schedule's order (schedule_sim.cpp), each given its cell: cells numbered
  // in order of their first flow, which stands for the cell. An op's sub-flow cells depend only on
  // (op colour, route shape): looked up once per such pair (an "entry"), and a join flow's on (op
  // colour, route colour).
  const auto op_cells = static_cast<std::size_t>(colours.op_cells);
  OpView view(ops);
  view.flows = flow_count;
  view.first_flow.resize(n);
  view.join_of.assign(n, -1);
  view.entry_of.resize(n);
  view.join_cell.assign(n, -1);
  view.has_successor.assign(n, 0);
  std::vector<std::int32_t> entry_ops;
  std::vector<std::int64_t> cell_size;
  std::vector<std::int64_t> op_of_flow;
  op_of_flow.reserve(flow_count);
  PerColour entries(op_cells), join_cells(op_cells), sub_flow_cells(op_cells);
  auto new_cell = [&](FlowRef ref) {
    cell_size.push_back(0);
    view.stands_for.push_back(ref);
    return static_cast<std::int32_t>(cell_size.size() - 1);
  };
  auto join_cell_of = [&](std::size_t a) {
    return join_cells.get(colours.op[a], colours.route[ops.route[a]],
                          [&] { return new_cell(FlowRef{FlowRef::join, static_cast<std::int32_t>(a), 0}); });
  };
  auto new_entry = [&](std::size_t i) {
    const auto first_path = ops.route_path_begin[ops.route[i]];
    for (std::int32_t p = 0; p < ops.sub_flows(i); ++p)
      view.entry_cells.push_back(sub_flow_cells.get(colours.op[i], colours.path[first_path + p], [&] {
        return new_cell(FlowRef{FlowRef::sub_flow, static_cast<std::int32_t>(i), p});
      }));
    view.entry_begin.push_back(static_cast<std::int32_t>(view.entry_cells.size()));
    entry_ops.push_back(0);
    return static_cast<std::int32_t>(entry_ops.size() - 1);
  };
  auto entry_of_op = [&](std::size_t i) {
    return entries.get(colours.op[i], colours.shape[ops.route[i]], [&] { return new_entry(i); });
  };
  std::int64_t next_flow = 0;
  std::size_t join_flows = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (auto k = ops.after_begin[i]; k < ops.after_begin[i + 1]; ++k) {
      const auto a = static_cast<std::size_t>(ops.after[k]);
      view.has_successor[a] = 1;
      if (ops.sub_flows(a) == 1 || view.join_of[a] >= 0) continue;
      view.join_of[a] = next_flow++;
      op_of_flow.push_back(-1);
      ++join_flows;
      view.join_cell[a] = join_cell_of(a);
      ++cell_size[view.join_cell[a]];
    }
    view.first_flow[i] = next_flow;
    const auto paths = ops.sub_flows(i);
    op_of_flow.insert(op_of_flow.end(), static_cast<std::size_t>(paths), static_cast<std::int64_t>(i));
    next_flow += paths;
    view.entry_of[i] = entry_of_op(i);
    ++entry_ops[view.entry_of[i]];
  }
  for (std::size_t e = 0; e < entry_ops.size(); ++e)
    for (auto k = view.entry_begin[e]; k < view.entry_begin[e + 1]; ++k) cell_size[view.entry_cells[k]] += entry_ops[e];
  if (ops.overheads.value > 0) {
    view.overhead_flow = next_flow++;
    op_of_flow.push_back(-1);
    view.overhead_cell = new_cell(FlowRef{FlowRef::overhead, -1, 0});
    ++cell_size[view.overhead_cell];
  }
  const auto n_cells = static_cast<std::int32_t>(cell_size.size());
  if (static_cast<std::size_t>(n_cells) > quotient_max_cells(flow_count)) return OpQuotientOutcome::not_paying;

  FlowSimResult qr = reduce_to_quotient(net, view, colours.link, colours.link_cells, cell_size, options).run();
  // Per op: release and start of its sub-flows (equal), finish of the last one; per entry.
  std::vector<SimulatedOpTiming> entry_timing(view.entry_begin.size() - 1);
  for (std::size_t e = 0; e + 1 < view.entry_begin.size(); ++e) {
    SimulatedOpTiming& t = entry_timing[e];
    for (auto k = view.entry_begin[e]; k < view.entry_begin[e + 1]; ++k) {
      const FlowTiming& ft = qr.timing[view.entry_cells[k]];
      if (k == view.entry_begin[e]) {
        t.release = ft.release;
        t.start = ft.start;
      }
      t.finish = std::max(t.finish, ft.finish);
    }
  }
  out.ops.resize(n);
  for (std::size_t i = 0; i < n; ++i) out.ops[i] = entry_timing[view.entry_of[i]];

  FlowSimResult result = expand_quotient(view, std::move(qr), colours.link, n_cells);
  result.classes_wall = classes_wall;
  add_link_bytes(ops, result);
  finish_link_stats(result, net);
  result.wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()};
  out.result = std::move(result);
  out.op_of_flow = std::move(op_of_flow);
  out.join_flows = join_flows;
  return OpQuotientOutcome::simulated;
}

}  // namespace reshard::sim

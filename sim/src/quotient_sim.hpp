// Internal to the simulator: running a flow problem through its symmetry quotient
// (flow_quotient.hpp), whichever way the cells were found: on the flows (find_quotient, by
// simulate_table) or on a schedule's ops (op_quotient.hpp, by simulate_schedule). One reduction
// (the quotient problem: one flow per cell, one link per link cell, weights n(L, F)) and one
// expansion (every flow's answer from its cell's), both reading the original problem through a
// *view*:
//
//   struct View {
//     using Ref = ...;                                  // names a flow of the original problem
//     std::size_t flow_count() const;
//     Ref stand_in(std::int32_t cell) const;            // the flow standing for a cell: its first
//     std::int32_t cell_of(const Ref&) const;           // the cell of a flow
//     std::size_t index(const Ref&) const;              // its index among the flows
//     std::int64_t id(const Ref&) const;                // its id
//     ByteAmount bytes(const Ref&) const; Seconds latency(const Ref&) const;
//     template <class F> void for_each_link(const Ref&, F&& f) const;         // f(link), in list order
//     template <class F> bool for_each_predecessor(const Ref&, F&& f) const;  // f(Ref) -> true stops;
//                                                                             // returns whether stopped
//   };
//
// The flows of a cell are alike, so which one stands for it does not matter (the first, so that
// both ways of finding the cells build the same quotient problem, bit for bit).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "flow_quotient.hpp"

namespace reshard::sim {

// When the quotient is not worth it (SimOptions::symmetry_quotient says why): more cells than
// this, or a refinement that has not settled after kQuotientMaxRounds rounds.
inline std::size_t quotient_max_cells(std::size_t flows) { return flows / 2; }
inline constexpr std::int32_t kQuotientMaxRounds = 48;

// The quotient problem of `view`'s flows, cell c of size cell_size[c] standing for its flows.
template <class View>
QuotientProblem reduce_to_quotient(const FlowNetwork& net, const View& view, const std::vector<std::int32_t>& link_cell,
                                   std::int32_t link_cells, const std::vector<std::int64_t>& cell_size,
                                   const SimOptions& options) {
  QuotientProblem problem(net, link_cell, link_cells, options);
  std::vector<std::int32_t> cells, preds;
  for (std::size_t c = 0; c < cell_size.size(); ++c) {
    const auto f = view.stand_in(static_cast<std::int32_t>(c));
    cells.clear();
    view.for_each_link(f, [&](std::int32_t l) { cells.push_back(link_cell[l]); });
    preds.clear();
    view.for_each_predecessor(f, [&](const auto& p) {
      preds.push_back(view.cell_of(p));
      return false;
    });
    problem.add_cell(view.bytes(f), view.latency(f), cell_size[c], cells, preds);
  }
  return problem;
}

// Flow f's own link in link cell `cell` (its bottleneck when the cell is its cell's), -1 if none.
template <class View>
std::int32_t link_in_cell(const View& view, const typename View::Ref& f, std::int32_t cell,
                          const std::vector<std::int32_t>& link_cell) {
  std::int32_t found = -1;
  if (cell >= 0)
    view.for_each_link(f, [&](std::int32_t l) {
      if (found < 0 && link_cell[l] == cell) found = l;
    });
  return found;
}

// The answer for `view`'s flows from the quotient's answer `qr`: makespan, counts, the group
// timeline, link busy times (bytes and utilization are the caller's: finish_link_stats), the
// critical path (the quotient's, each cell's step taken by a predecessor of the flow after it, its
// bottleneck the flow's own link in the cell's bottleneck link cell), and `timing` one row per cell
// (bottleneck -1: a link cell is no one link).
template <class View>
FlowSimResult expand_quotient(const View& view, FlowSimResult&& qr, const std::vector<std::int32_t>& link_cell,
                              std::int32_t cells) {
  const std::size_t nl = link_cell.size();
  FlowSimResult out;
  out.makespan = qr.makespan;
  out.rate_updates = qr.rate_updates;
  out.rate_changes = qr.rate_changes;
  out.solver = qr.solver;
  out.event_loop_wall = qr.event_loop_wall;
  out.simulated_flows = cells;
  out.group_timeline = std::move(qr.group_timeline);
  // Every flow starts and finishes once; the quotient counted one start and one finish per cell.
  out.events = 2 * static_cast<std::int64_t>(view.flow_count());
  out.links.assign(nl, LinkStats{});
  for (std::size_t l = 0; l < nl; ++l) out.links[l].busy = qr.links[link_cell[l]].busy;
  std::optional<typename View::Ref> at;
  for (const CriticalStep& step : qr.critical_path) {
    const auto cell = static_cast<std::int32_t>(step.flow_index);
    if (!at) {
      at = view.stand_in(cell);
    } else {
      view.for_each_predecessor(*at, [&](const auto& p) {
        if (view.cell_of(p) != cell) return false;
        at = p;
        return true;
      });
    }
    const FlowTiming& t = qr.timing[static_cast<std::size_t>(cell)];
    out.critical_path.push_back({view.id(*at), view.index(*at), t.release, t.start, t.finish,
                                 link_in_cell(view, *at, t.bottleneck, link_cell)});
  }
  out.timing = std::move(qr.timing);
  for (auto& t : out.timing) t.bottleneck = -1;
  return out;
}

// Utilization of every link, bytes / (capacity * makespan) (0 when the makespan is 0), once its
// bytes are in.
inline void finish_link_stats(FlowSimResult& result, const FlowNetwork& net) {
  for (std::size_t l = 0; l < result.links.size(); ++l) {
    LinkStats& s = result.links[l];
    s.utilization = result.makespan.value > 0 ? s.bytes.as_double() / (net.capacity[l].value * result.makespan.value) : 0.0;
  }
}

}  // namespace reshard::sim

// Internal to the simulator: the symmetry quotient of a flow problem (SimOptions::symmetry_quotient).
//
// Symmetry quotient. Partition the flows into cells and the links into cells such that
//   - flows of one cell have the same bytes and latency, cross the same number of links of
//     each link cell (counted with repeats: a link a flow lists k times counts k times), and wait
//     for the same number of flows of each flow cell;
//   - links of one cell have the same capacity (and link group), and are crossed by the same number
//     n(L, F) of flows of each flow cell F, counted with repeats (the weight of F's flows on the
//     link: an *equitable* partition of the flow-link incidence multigraph).
// Then every flow of a cell has the same release, start, finish and rate at all times. By induction
// over events: if it holds up to time t, the active flows at t are a union of cells, and the
// partition restricted to them is still equitable; progressive filling keeps rates equal per cell
// (links of one cell carry equal loads, so they saturate at the same level, and a flow cell meets the
// same link cells, so its flows are fixed together); equal bytes and rates give equal finishes,
// and predecessors with equal finishes give equal releases.
// So the simulation can run on one flow per cell: a link per link cell with capacity C_L, on which
// flow cell F counts n(L, F) times (its load is n(L, F) * x_F), and whose predecessors are the
// predecessor cells. The coarsest such partition is found by colour refinement: start from (bytes,
// latency) for flows and (capacity, group) for links, and split cells by the multiset of
// neighbouring colours (links of a flow and flows of a link, both with repeats, predecessors of a
// flow) until nothing splits. A repeated link is one more entry of the flow's link list wherever the
// refinement walks it, so the sums are over multisets without any special case. Multisets are compared by two independent 64-bit sums of hashed colours (a false merge
// needs both to collide: probability about 2^-128 per pair).
#pragma once

#include <cstdint>
#include <vector>

#include "flow_table.hpp"

namespace reshard::sim {

// The weights the engine runs a quotient with (flow_sim.cpp's Engine, whose solver classes carry
// them as slot weights, maxmin.hpp).
struct QuotientWeights {
  std::vector<std::int64_t> flow_link;      // aligned with FlowTable::links of the quotient: n(L, F)
  std::vector<std::int64_t> link_replicas;           // per quotient link: |L|
};

// The problem the engine runs for a quotient: one flow per flow cell, one link per link cell (link
// cell L is its first link, with |L| replicas). Flow cell F on link cell L: its |F| flows cross L's
// links |F| * (entries of L per flow, repeats included) times in all, equally spread, so
// n(L, F) = |F| * count / |L|.
struct QuotientProblem {
  FlowNetwork net;
  FlowTable flows;
  QuotientWeights weights;
  SimOptions options;

  QuotientProblem(const FlowNetwork& network, const std::vector<std::int32_t>& link_cell, std::int32_t link_cells,
                  const SimOptions& network_options);
  // Appends the flow of the next cell: `cell_size` alike flows of `bytes` and `latency`, each
  // crossing links of the cells `link_cells` (one entry per entry of the flow's link list,
  // repeats included) and waiting for flows of the cells `pred_cells`. Sorts both lists.
  void add_cell(ByteAmount bytes, Seconds latency, std::int64_t cell_size, std::vector<std::int32_t>& link_cells,
                std::vector<std::int32_t>& pred_cells);
  FlowSimResult run() const;  // the engine on it (flow_sim.cpp)
};

struct FlowQuotient {
  std::vector<std::int32_t> flow_cell;  // per flow
  std::vector<std::int32_t> link_cell;  // per link
  std::int32_t flow_cells = 0, link_cells = 0;
  std::int32_t rounds = 0;              // refinement rounds until stable
};

// The coarsest equitable partition described above. Gives up, returning flow_cells = -1, once a
// round leaves more than `max_flow_cells` flow cells, or after `max_rounds` rounds without
// settling (see SimOptions::symmetry_quotient for why).
FlowQuotient find_quotient(const FlowNetwork& net, const FlowTable& flows, const FlowGraph& graph,
                           const std::vector<std::int32_t>& link_group, std::size_t max_flow_cells,
                           std::int32_t max_rounds);

}  // namespace reshard::sim

// Colour refinement for the symmetry quotient; the math is written on flow_quotient.hpp.
#include "flow_quotient.hpp"

#include <algorithm>

#include "refinement.hpp"

namespace reshard::sim {

namespace {

using namespace refinement;  // mix64, bits, Numbering, Sum, Side, compact

constexpr std::uint64_t kFlowSalt = 0x243f6a8885a308d3ull;

}  // namespace

// Stays whole, as refine() in op_quotient.cpp: one incremental refinement over arrays its rounds
// update in place.
FlowQuotient find_quotient(const FlowNetwork& net, const FlowTable& flows, const FlowGraph& graph,
                           const std::vector<std::int32_t>& link_group, std::size_t max_flow_cells,
                           std::int32_t max_rounds) {
  const std::size_t n = flows.size(), nl = net.capacity.size();
  FlowQuotient q;
  q.flow_cell.resize(n);
  const std::int32_t link_cells = refinement::first_link_colours(net, link_group, q.link_cell);
  Numbering numbering;
  // The signatures: per flow the multisets of its links' colours and of its predecessors'
  // colours, per link the multiset of its flows' colours.
  std::vector<Sum> flow_links(n), flow_preds(n), link_sum(nl), link_change(nl);
  std::vector<char> link_moved(nl, 0);
  // The flows' first colours: not just (bytes, latency) but a hash of everything a flow's chain of
  // predecessors is made of, computed in one pass in topological order:
  //   seed(f) = H(bytes, latency, {first colour of each link of f, with its repeats},
  //               {seed(p) : p a predecessor}).
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
      const std::uint64_t own = mix64(alike_bits(flows.bytes[f].value) ^ mix64(alike_bits(flows.latency[f].value)));
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
    const bool recompute_preds = graph.dense_ids && kRecomputeAllDivisor * flows_moved.size() > n;
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
  q.flow_cells = compact(q.flow_cell);
  q.link_cells = compact(q.link_cell);
  return q;
}

QuotientProblem::QuotientProblem(const FlowNetwork& network, const std::vector<std::int32_t>& link_cell,
                                 std::int32_t link_cells, const SimOptions& network_options)
    : options(network_options) {
  std::vector<std::int32_t> first_link(static_cast<std::size_t>(link_cells), -1);
  weights.link_replicas.assign(static_cast<std::size_t>(link_cells), 0);
  for (std::size_t l = 0; l < link_cell.size(); ++l) {
    if (first_link[link_cell[l]] < 0) first_link[link_cell[l]] = static_cast<std::int32_t>(l);
    ++weights.link_replicas[link_cell[l]];
  }
  options.link_group.clear();
  for (auto l : first_link) {
    net.capacity.push_back(network.capacity[l]);
    if (!network_options.link_group.empty()) options.link_group.push_back(network_options.link_group[l]);
  }
}

void QuotientProblem::add_cell(ByteAmount bytes, Seconds latency, std::int64_t cell_size,
                               std::vector<std::int32_t>& link_cells, std::vector<std::int32_t>& pred_cells) {
  flows.begin_flow(bytes, latency);
  std::sort(link_cells.begin(), link_cells.end());
  for (std::size_t i = 0; i < link_cells.size();) {
    std::size_t j = i;
    while (j < link_cells.size() && link_cells[j] == link_cells[i]) ++j;
    flows.links.push_back(link_cells[i]);
    weights.flow_link.push_back(cell_size * static_cast<std::int64_t>(j - i) / weights.link_replicas[link_cells[i]]);
    i = j;
  }
  std::sort(pred_cells.begin(), pred_cells.end());
  pred_cells.erase(std::unique(pred_cells.begin(), pred_cells.end()), pred_cells.end());
  flows.after.insert(flows.after.end(), pred_cells.begin(), pred_cells.end());
  flows.end_flow();
}

}  // namespace reshard::sim

#include "reshard/model/cost.hpp"

#include <Eigen/SparseCore>
#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "reshard/model/chain.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/systems.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace reshard::model {

CostParams CostParams::named_or_loaded(const std::string& profile, const std::filesystem::path& params_file) {
  return params_file.empty() ? profile_named(profile) : load(params_file);
}

CostParams CostParams::load(const std::filesystem::path& path) {
  const auto root = yaml::load_file(path);
  root.allow_only({"profile", "efficiency", "chain_hop_latency", "per_op", "per_tensor", "per_call_rank", "per_broadcast_tensor",
                   "per_bucket", "per_stage", "load_per_tensor", "load_per_expert", "per_read", "per_refit",
                   "engine_call", "tensor_streams", "barriers_per_tensor", "copy_passes", "host_passes", "host_overlaps", "step_barriers"});
  CostParams p;
  if (auto n = root.get("profile")) p.profile = n->str();
  const auto& kinds = kLinkKindKeys;
  const std::vector<std::string> kind_keys(kinds.begin(), kinds.end());
  if (auto e = root.get("efficiency")) {
    e->allow_only(kind_keys);
    for (std::size_t k = 0; k < kLinkKinds; ++k)
      if (auto v = e->get(kinds[k])) {
        const double x = v->number();
        if (x <= 0 || x > 1) v->fail("efficiency must be in (0, 1]");
        p.efficiency[k] = x;
      }
  }
  if (auto e = root.get("chain_hop_latency")) {
    e->allow_only(kind_keys);
    for (std::size_t k = 0; k < kLinkKinds; ++k)
      if (auto v = e->get(kinds[k])) p.chain_hop_latency[k] = v->duration();
  }
  if (auto n = root.get("per_op")) p.per_op = n->duration();
  if (auto n = root.get("per_tensor")) p.per_tensor = n->duration();
  if (auto n = root.get("per_call_rank")) p.per_call_rank = n->duration();
  if (auto n = root.get("per_broadcast_tensor")) p.per_broadcast_tensor = n->duration();
  if (auto n = root.get("per_bucket")) p.per_bucket = n->duration();
  if (auto n = root.get("per_stage")) p.per_stage = n->duration();
  if (auto n = root.get("load_per_tensor")) p.load_per_tensor = n->duration();
  if (auto n = root.get("load_per_expert")) p.load_per_expert = n->duration();
  if (auto n = root.get("per_read")) p.per_read = n->duration();
  if (auto n = root.get("per_refit")) p.per_refit = n->duration();
  if (auto n = root.get("engine_call")) p.engine_call = n->duration();
  if (auto n = root.get("tensor_streams")) p.tensor_streams = static_cast<std::int32_t>(n->integer_in(1, 1024));
  if (auto n = root.get("barriers_per_tensor")) {
    p.barriers_per_tensor = n->number();
    if (p.barriers_per_tensor < 0) n->fail("barriers_per_tensor must be at least 0");
  }
  if (auto n = root.get("copy_passes")) {
    p.copy_passes = n->number();
    if (p.copy_passes < 0) n->fail("copy_passes must be at least 0");
  }
  if (auto n = root.get("host_passes")) {
    p.host_passes = n->number();
    if (p.host_passes < 0) n->fail("host_passes must be at least 0");
  }
  if (auto n = root.get("host_overlaps")) p.host_overlaps = n->boolean();
  if (auto n = root.get("step_barriers")) p.step_barriers = n->boolean();
  else if (const CostProfile* named = find_cost_profile(p.profile)) p.step_barriers = named->make().step_barriers;  // its profile's
  else p.step_barriers = false;  // a system's: none runs reshard's steps
  return p;
}

namespace {

// A column of the routing matrix: the links an op loads, with its share of its bytes on each,
// and what the op pays alone on them. A pair's column keeps its route's middle links apart
// (`middle`, an index into the estimate's table of middles): every route between the same two
// leaves shares them, so their loads are added once per middle (add_bandwidth_bound).
struct Column {
  std::vector<std::pair<LinkId, double>> shares;
  std::int32_t middle = -1;
  double latency = 0, rate = 0;
  std::int32_t depth = 1;
  Chain const* chain = nullptr;
  std::int32_t network_hops = 0, local_hops = 0;
};

// The middles of the routes an estimate's columns take (RouteView::middle_key): each one's shares,
// the rate its links allow alone, and the bytes of every column through it.
struct Middles {
  std::unordered_map<std::int64_t, std::int32_t> index;  // by middle key
  std::vector<std::vector<std::pair<LinkId, double>>> shares;
  std::vector<double> rate, bytes;
};

// The column of the transfers from GPU a to GPU b, streamed in chunks of `chunk` through `slots`
// slots (model/chain.hpp). cap: per link, the achievable rate.
Column pair_column(const Topology& topo, const std::vector<double>& cap, Middles& middles, GpuId a, GpuId b, Bytes chunk,
                   std::int32_t slots) {
  Column c;
  const RouteView r = topo.route_view(a, b);
  c.latency = r.latency.value;
  (r.kind == LinkKind::Network ? c.network_hops : c.local_hops) = 1;
  // Share of the op's bytes on each link: 1/k per path through it (a GPU's NIC link is on all k
  // paths, a spine link on one). Alone on its route the op runs at min over links of cap / share.
  const double end = r.end_share();
  for (auto span : {r.head(), r.tail()})
    for (LinkId l : span) c.shares.push_back({l, end});
  c.rate = slot_rate(chunk, slots, r.latency).value;
  for (const auto& [l, share] : c.shares) c.rate = std::min(c.rate, cap[static_cast<std::size_t>(l)] / share);
  if (r.middle_key() >= 0) {
    const auto [it, added] = middles.index.try_emplace(r.middle_key(), static_cast<std::int32_t>(middles.shares.size()));
    if (added) {
      auto& shares = middles.shares.emplace_back();
      r.middle_shares(shares);
      double rate = std::numeric_limits<double>::infinity();
      for (const auto& [l, share] : shares) rate = std::min(rate, cap[static_cast<std::size_t>(l)] / share);
      middles.rate.push_back(rate);
      middles.bytes.push_back(0);
    }
    c.middle = it->second;
    c.rate = std::min(c.rate, middles.rate[static_cast<std::size_t>(c.middle)]);
  }
  return c;
}

// The column of a chain rooted at GPU root.
Column chain_column(const Topology& topo, const std::vector<double>& cap, const CostParams& params, const Chain& chain,
                    std::int32_t slots, GpuId root, std::int64_t op_id) {
  const ChainRoute cr = chain_route(chain, root, topo, "operation " + std::to_string(op_id), params.chain_hop_latency);
  Column c;
  c.chain = &chain;
  c.latency = cr.latency.value;
  c.depth = cr.depth;
  c.network_hops = cr.network_hops;
  c.local_hops = cr.local_hops;
  c.rate = slot_rate(chain.chunk, slots, cr.hop_latency).value;
  for (std::size_t k = 0; k < cr.links.size(); ++k) {
    c.shares.push_back({cr.links[k], static_cast<double>(cr.weights[k])});
    c.rate = std::min(c.rate, cap[static_cast<std::size_t>(cr.links[k])] / cr.weights[k]);
  }
  return c;
}

// The routing matrix R (links x columns: a column per ordered GPU pair, share 1/k on each of k
// ECMP paths, and one per chain, weight w_l on its links) and the bytes of each column, in one pass
// over the operations in id order; the bytes on the network and on NVLink into pr.
struct Routing {
  std::vector<Column> columns;
  std::vector<std::int32_t> column_of;  // per op; -1: a local copy (not estimated)
  std::vector<double> column_bytes;
  Middles middles;
};

Routing routing_matrix(const Schedule& s, const Topology& topo, const std::vector<double>& cap, const CostParams& params,
                       Prediction& pr) {
  Routing out;
  auto& [columns, column_of, column_bytes, middles] = out;
  column_of.assign(s.ops.size(), -1);
  std::unordered_map<GpuPair, std::int32_t> pair_columns;
  std::vector<std::int32_t> chain_column_of(s.chains.size(), -1);
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const auto& op = s.ops[i];
    if (const std::string problem = op_problem(s, i, topo.gpu_count(), false); !problem.empty())
      throw ScheduleError("operation " + std::to_string(i) + ": " + problem);
    if (op.src == op.dst && op.chain < 0) continue;
    std::size_t column = 0;
    if (op.chain >= 0) {
      auto& cc = chain_column_of[static_cast<std::size_t>(op.chain)];
      if (cc < 0) {
        cc = static_cast<std::int32_t>(columns.size());
        columns.push_back(chain_column(topo, cap, params, s.chains[static_cast<std::size_t>(op.chain)], s.slots, op.src, op.id));
        column_bytes.push_back(0);
      }
      column = static_cast<std::size_t>(cc);
    } else {
      const auto [it, added] = pair_columns.try_emplace({op.src, op.dst}, static_cast<std::int32_t>(columns.size()));
      column = static_cast<std::size_t>(it->second);
      if (added) {
        columns.push_back(pair_column(topo, cap, middles, op.src, op.dst, s.params.chunk, s.slots));
        column_bytes.push_back(0);
      }
    }
    column_of[i] = static_cast<std::int32_t>(column);
    const Column& c = columns[column];
    column_bytes[column] += op.bytes.as_double();
    pr.network_bytes += op.bytes * c.network_hops;
    pr.nvlink_bytes += op.bytes * c.local_hops;
  }
  for (std::size_t c = 0; c < columns.size(); ++c)
    if (columns[c].middle >= 0) middles.bytes[static_cast<std::size_t>(columns[c].middle)] += column_bytes[c];
  return out;
}

// T_steps: each step's most loaded network link, the steps one after another (ops taken in
// `order`, by step; cost.hpp).
Seconds steps_bound(const Schedule& s, const Routing& routing, const std::vector<std::size_t>& order,
                    const std::vector<std::int32_t>& step, const std::vector<Link>& links, const std::vector<double>& cap) {
  const auto& columns = routing.columns;
  const auto& column_of = routing.column_of;
  const auto& middles = routing.middles;
  auto network = [&](const std::vector<std::pair<LinkId, double>>& shares) {
    std::vector<std::pair<LinkId, double>> out;
    for (const auto& sh : shares)
      if (links[static_cast<std::size_t>(sh.first)].kind == LinkKind::Network) out.push_back(sh);
    return out;
  };
  std::vector<std::vector<std::pair<LinkId, double>>> network_shares, middle_network_shares;  // per column, per middle
  for (const auto& c : columns) network_shares.push_back(network(c.shares));
  for (const auto& m : middles.shares) middle_network_shares.push_back(network(m));
  std::vector<double> load(cap.size(), 0);
  std::vector<LinkId> touched;
  auto add_load = [&](const std::vector<std::pair<LinkId, double>>& shares, double bytes) {
    for (const auto& [l, share] : shares) {
      auto& x = load[static_cast<std::size_t>(l)];
      if (x == 0) touched.push_back(l);
      x += share * bytes;
    }
  };
  // A step's bytes through each middle, added to its links when the step closes.
  std::vector<double> middle_bytes(middles.shares.size(), 0);
  std::vector<std::int32_t> touched_middles;
  double step_bound = 0;
  auto close_step = [&] {
    for (std::int32_t m : touched_middles) {
      add_load(middle_network_shares[static_cast<std::size_t>(m)], middle_bytes[static_cast<std::size_t>(m)]);
      middle_bytes[static_cast<std::size_t>(m)] = 0;
    }
    touched_middles.clear();
    double worst = 0;
    for (LinkId l : touched) {
      worst = std::max(worst, load[static_cast<std::size_t>(l)] / cap[static_cast<std::size_t>(l)]);
      load[static_cast<std::size_t>(l)] = 0;
    }
    touched.clear();
    step_bound += worst;
  };
  std::int32_t current = 0;
  for (std::size_t i : order) {
    if (column_of[i] < 0) continue;
    if (step[i] != current) {
      close_step();
      current = step[i];
    }
    const auto c = static_cast<std::size_t>(column_of[i]);
    add_load(network_shares[c], s.ops[i].bytes.as_double());
    if (const std::int32_t m = columns[c].middle; m >= 0) {
      auto& x = middle_bytes[static_cast<std::size_t>(m)];
      if (x == 0) touched_middles.push_back(m);
      x += s.ops[i].bytes.as_double();
    }
  }
  close_step();
  return Seconds{step_bound};
}

// Link loads = R * b, with R the routing matrix (links x columns) and b the bytes of each column;
// the link that takes longest to carry its load sets pr.bandwidth_bound and pr.bottleneck. The
// middles are columns of their own (R's columns: the op columns without their middles, then one per
// middle), carrying the bytes of every column through them: R * b sums the same terms.
void add_bandwidth_bound(const std::vector<Column>& columns, std::vector<double> column_bytes, const Middles& middles,
                         const std::vector<double>& cap, Prediction& pr) {
  // R in compressed-column form, written column by column (a column's links are distinct, so no
  // entry repeats), read in place by Eigen.
  std::vector<int> outer{0}, inner;
  std::vector<double> values;
  auto add_column = [&](const std::vector<std::pair<LinkId, double>>& shares) {
    for (const auto& [l, share] : shares) {
      inner.push_back(l);
      values.push_back(share);
    }
    outer.push_back(static_cast<int>(inner.size()));
  };
  for (const auto& c : columns) add_column(c.shares);
  for (const auto& m : middles.shares) add_column(m);
  column_bytes.insert(column_bytes.end(), middles.bytes.begin(), middles.bytes.end());
  const Eigen::Map<const Eigen::SparseMatrix<double>> R(static_cast<Eigen::Index>(cap.size()),
                                                       static_cast<Eigen::Index>(column_bytes.size()),
                                                       static_cast<Eigen::Index>(inner.size()), outer.data(), inner.data(),
                                                       values.data());
  const Eigen::VectorXd load = R * Eigen::Map<const Eigen::VectorXd>(column_bytes.data(), static_cast<Eigen::Index>(column_bytes.size()));
  for (Eigen::Index l = 0; l < load.size(); ++l) {
    const double t = load[l] / cap[static_cast<std::size_t>(l)];
    if (t > pr.bandwidth_bound.value) {
      pr.bandwidth_bound = Seconds{t};
      pr.bottleneck = static_cast<LinkId>(l);
    }
  }
}

// The slowest GPU's memory-bound work: (bytes read + written) / its memory bandwidth; `what` says
// in an error what the GPU does when the topology gives no bandwidth for it.
Seconds memory_pass_time(const std::vector<std::pair<GpuId, Bytes>>& work, const Topology& topo, const char* what) {
  Seconds t{0};
  for (const auto& [g, b] : work) {
    const BytesPerSecond bw = topo.gpu_memory_bandwidth(g);
    if (bw.value <= 0)
      throw PlanError("GPU " + std::to_string(g) + " " + what + ", but the topology '" + topo.name() +
                      "' gives no memory bandwidth for it (memory_bandwidth of its device)");
    t = std::max(t, b / bw);
  }
  return t;
}

// T_barrier: a barrier in which every GPU signals every other at once and waits for all of them
// (NCCL's GIN barrier, src/include/nccl_device/impl/gin_barrier__funcs.h: the signals are issued in
// parallel by the block's threads) costs one round: the largest route latency from the lowest GPU
// the schedule touches to another. The GPUs it touches: every op's sender and receiver, and every
// GPU a chain op reaches (its forwarding GPUs take part in the barrier as much as its last).
Seconds barrier_time(const Schedule& s, const Topology& topo) {
  std::vector<GpuId> gpus;
  for (const Op& op : s.ops) {
    gpus.push_back(op.src);
    gpus.push_back(op.dst);
    if (op.chain >= 0)
      for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) gpus.push_back(h.to);
  }
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  Seconds worst{0};
  for (std::size_t i = 1; i < gpus.size(); ++i) worst = std::max(worst, topo.route_view(gpus.front(), gpus[i]).latency);
  return worst;
}

// T_copy: `passes` reads and writes of every byte a GPU sends (packs) and receives (unpacks; a chain's
// forwarding GPUs unpack what they receive, and forward it as received), the slowest GPU's, at
// its memory bandwidth (memory_pass_time, as T_convert).
Seconds copy_time(const Schedule& s, const Topology& topo, double passes) {
  std::vector<double> through(static_cast<std::size_t>(topo.gpu_count()), 0.0);
  auto add = [&](GpuId g, Bytes b) { through[static_cast<std::size_t>(g)] += b.as_double(); };
  for (const Op& op : s.ops) {
    if (op.chain < 0) {
      if (op.src == op.dst) continue;  // a local copy is already a pass
      add(op.src, op.bytes);
      add(op.dst, op.bytes);
      continue;
    }
    add(op.src, op.bytes);  // the root packs once; every GPU the chain reaches unpacks
    for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) add(h.to, op.bytes);
  }
  std::vector<std::pair<GpuId, Bytes>> work;
  for (std::size_t g = 0; g < through.size(); ++g)
    if (through[g] > 0) work.push_back({static_cast<GpuId>(g), Bytes{static_cast<std::int64_t>(2 * passes * through[g])}});
  return memory_pass_time(work, topo, "packs and unpacks what it moves (the profile's copy_passes)");
}

// call_ranks (cost.hpp): per tensor moved by reshard operations, the GPUs that send or receive a
// part of it by one, summed.
std::int64_t call_ranks(const Schedule& s, const TransferSet& ts, const std::vector<char>& tensor_path) {
  std::unordered_map<std::int32_t, std::vector<GpuId>> spans;  // per tensor: its GPUs, with repeats
  for (const Op& op : s.ops) {
    if (op.phase == OpPhase::Broadcast || op.phase == OpPhase::Gather) continue;
    for (const auto& sl : s.buffers[static_cast<std::size_t>(op.buffer)].slices) {
      const std::int32_t t = ts.pieces[static_cast<std::size_t>(sl.piece)].tensor;
      if (!(tensor_path[static_cast<std::size_t>(t)] & 1)) continue;
      auto& v = spans[t];
      v.push_back(op.src);
      if (op.chain < 0) {
        v.push_back(op.dst);
      } else {
        for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) v.push_back(h.to);
      }
    }
  }
  std::int64_t n = 0;
  for (auto& [t, v] : spans) {
    std::sort(v.begin(), v.end());
    n += std::unique(v.begin(), v.end()) - v.begin();
  }
  return n;
}

// T_host_copy: `passes` crossings of its host link by every byte a GPU sends (a transfer's sender,
// a chain's root: the forwarders pass on what they received into GPU memory), the slowest GPU's.
Seconds host_copy_time(const Schedule& s, const Topology& topo, double passes) {
  std::vector<double> sent(static_cast<std::size_t>(topo.gpu_count()), 0.0);
  for (const Op& op : s.ops)
    if (op.src != op.dst || op.chain >= 0) sent[static_cast<std::size_t>(op.src)] += op.bytes.as_double();
  Seconds t{0};
  for (std::size_t g = 0; g < sent.size(); ++g) {
    if (sent[g] == 0) continue;
    const auto link = topo.host_link(static_cast<GpuId>(g));
    if (!link || link->bandwidth.value <= 0)
      throw PlanError("GPU " + std::to_string(g) + " stages what it sends through host memory (the profile's host_passes), "
                      "but the topology '" + topo.name() + "' gives it no host link");
    t = std::max(t, Seconds{passes * sent[g] / link->bandwidth.value});
  }
  return t;
}

// T_load and T_reads (cost.hpp): per destination GPU, the tensors the schedule delivers any part of
// to it (its loader is handed each once; a chain delivers its buffer to every GPU it reaches, a
// local copy to its own GPU) and the piece slices it reads from another GPU; the busiest GPU's.
void add_receive_side(const Schedule& s, const TransferSet& ts, const Inventory& inv, const CostParams& params,
                      Prediction& pr) {
  std::unordered_map<GpuId, std::vector<std::int32_t>> handed;  // per GPU: tensor ids, with repeats
  std::unordered_map<GpuId, std::int64_t> reads;
  auto hand = [&](GpuId g, const Buffer& b) {
    auto& v = handed[g];
    for (const auto& sl : b.slices) v.push_back(ts.pieces[static_cast<std::size_t>(sl.piece)].tensor);
  };
  for (const Op& op : s.ops) {
    if (op.phase == OpPhase::Gather) continue;  // gathered to a head for its broadcast, not for its engine
    const Buffer& b = s.buffers[static_cast<std::size_t>(op.buffer)];
    if (op.chain < 0) {
      hand(op.dst, b);
      if (op.src != op.dst) reads[op.dst] += static_cast<std::int64_t>(b.slices.size());
      continue;
    }
    for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) hand(h.to, b);
  }
  for (auto& [g, v] : handed) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    std::int64_t experts = 0;
    for (auto t : v) experts += inv.tensor(t).expert >= 0 ? 1 : 0;
    const Seconds load = params.load_per_tensor * static_cast<double>(v.size()) + params.load_per_expert * static_cast<double>(experts);
    if (load > pr.load || pr.loaded_tensors == 0) {
      pr.load = load;
      pr.loaded_tensors = static_cast<std::int64_t>(v.size());
      pr.loaded_experts = experts;
    }
  }
  for (const auto& [g, n] : reads) pr.read_count = std::max(pr.read_count, n);
  pr.reads = params.per_read * static_cast<double>(pr.read_count);
}

// E(g) of T_issue (cost.hpp) for every GPU. `step` is op_steps' step of every operation, `steps`
// their count. A hop of depth d (its `to`'s, chain_depths; 1 for a transfer) carries chunk c of an
// operation in wave offset + c + d - 1 (exec::step_waves); its two GPUs take part in those waves.
// A chain's operations are summed first (their chunks and their count, per step the chunks that
// set its waves), then spread over its hops once: a ring through thousands of GPUs carrying
// thousands of operations costs its hops, not their product.
std::vector<std::int64_t> engine_calls(const Schedule& s, const std::vector<std::int32_t>& step, std::int32_t steps,
                                       std::int32_t gpu_count) {
  std::vector<std::int64_t> calls(static_cast<std::size_t>(gpu_count), 0);
  // Per GPU and step: the first and the last wave it takes part in, and whether it packs (sends
  // from its shards) and unpacks (receives) there.
  const std::size_t cells = static_cast<std::size_t>(gpu_count) * static_cast<std::size_t>(std::max(steps, 1));
  std::vector<std::int64_t> first(cells, std::numeric_limits<std::int64_t>::max()), last(cells, -1);
  std::vector<char> packs(cells, 0), unpacks(cells, 0);
  auto active = [&](GpuId g, std::int32_t k, std::int64_t from, std::int64_t to, bool pack, bool unpack) {
    const std::size_t i = static_cast<std::size_t>(g) * static_cast<std::size_t>(steps) + static_cast<std::size_t>(k);
    first[i] = std::min(first[i], from);
    last[i] = std::max(last[i], to);
    packs[i] = static_cast<char>(packs[i] || pack);
    unpacks[i] = static_cast<char>(unpacks[i] || unpack);
  };
  const std::int64_t slots = std::max<std::int32_t>(s.slots, 1);
  struct ChainSum {
    std::int64_t windows = 0, ops = 0;            // over its operations
    std::map<std::int32_t, std::int64_t> waves;   // per step: its operations' windows there
  };
  std::vector<ChainSum> chain(s.chains.size());
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.chain < 0 && op.src == op.dst) continue;  // a local copy: made before the steps, no calls
    const std::int64_t chunk = std::max<std::int64_t>(1, stream_chunk(s, op).value);
    const std::int64_t n = (op.bytes.value + chunk - 1) / chunk;
    if (n == 0) continue;  // an empty stream has no wave and the backend issues nothing for it
    const std::int64_t per = op.chain < 0 ? slots : std::max<std::int64_t>(slots / 2, 1);  // chunks per window
    const std::int64_t x = (n + per - 1) / per;
    const std::int32_t k = step[i];
    if (op.chain < 0) {
      calls[static_cast<std::size_t>(op.src)] += x + 1;  // a send per window, the start event
      calls[static_cast<std::size_t>(op.dst)] += x + 1;  // a receive per window, the end event
      active(op.src, k, 0, x - 1, true, false);
      active(op.dst, k, 0, x - 1, false, true);
      continue;
    }
    ChainSum& c = chain[static_cast<std::size_t>(op.chain)];
    const Chain& ch = s.chains[static_cast<std::size_t>(op.chain)];
    if (c.ops == 0 || ch.hops.empty() || op.src != ch.hops.front().from)
      chain_depths(ch, op.src, "operation " + std::to_string(op.id));  // throws for a shape the backend refuses
    c.windows += x;
    ++c.ops;
    c.waves[k] += x;
  }
  for (std::size_t c = 0; c < chain.size(); ++c) {
    const ChainSum& sum = chain[c];
    if (sum.ops == 0) continue;
    const Chain& ch = s.chains[c];
    const GpuId root = ch.hops.front().from;
    const std::vector<std::int32_t> depth = chain_depths(ch, root, "chain " + std::to_string(c));
    calls[static_cast<std::size_t>(root)] += sum.ops;  // a start event per op
    for (std::size_t h = 0; h < ch.hops.size(); ++h) {
      calls[static_cast<std::size_t>(ch.hops[h].from)] += sum.windows;          // a send per window
      calls[static_cast<std::size_t>(ch.hops[h].to)] += sum.windows + sum.ops;  // a receive per window, an end event per op
      for (const auto& [k, total] : sum.waves) {
        const std::int64_t d = depth[h];
        active(ch.hops[h].from, k, d - 1, total + d - 2, ch.hops[h].from == root, false);
        active(ch.hops[h].to, k, d - 1, total + d - 2, false, true);
      }
    }
  }
  // Per step a GPU takes part in: per wave a group's start and end, its pack launch where it packs
  // and its unpack launch where it unpacks; the step's end event.
  for (std::size_t g = 0; g < calls.size(); ++g)
    for (std::int32_t k = 0; k < steps; ++k) {
      const std::size_t i = g * static_cast<std::size_t>(steps) + static_cast<std::size_t>(k);
      if (last[i] >= 0) calls[g] += (2 + packs[i] + unpacks[i]) * (last[i] - first[i] + 1) + 1;
    }
  return calls;
}

// Framework overheads: what each path moves (tensors by reshard ops, tensors by gather/broadcast
// ops, each buffer walked once), the broadcast buckets, and the heads that start broadcast rings
// (GPUs that send on a ring without receiving on one: the source PP stages).
void add_overheads(const Schedule& s, const TransferSet& ts, const Inventory& inv, const Topology& topo,
                   const CostParams& params, const std::vector<std::int32_t>& step, Prediction& pr) {
  const std::int32_t gpu_count = topo.gpu_count();
  std::vector<char> buffer_path(s.buffers.size(), 0);  // bit 1: reshard op, bit 2: gather/broadcast op
  std::vector<char> bucket(s.buffers.size(), 0);       // buffers that travel a broadcast ring
  std::vector<char> ring_member(static_cast<std::size_t>(gpu_count), 0), ring_sender(ring_member);
  for (const Op& op : s.ops) {
    const bool bcast = op.phase == OpPhase::Broadcast || op.phase == OpPhase::Gather;
    buffer_path[static_cast<std::size_t>(op.buffer)] |= bcast ? 2 : 1;
    if (op.phase != OpPhase::Broadcast) continue;
    bucket[static_cast<std::size_t>(op.buffer)] = 1;
    ring_sender[static_cast<std::size_t>(op.src)] = 1;
    if (op.chain < 0) {
      ring_member[static_cast<std::size_t>(op.dst)] = 1;
    } else {
      for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) {
        ring_member[static_cast<std::size_t>(h.to)] = 1;
        ring_sender[static_cast<std::size_t>(h.from)] = 1;
      }
    }
  }
  std::vector<char> tensor_path(inv.tensors().size(), 0);
  for (std::size_t b = 0; b < s.buffers.size(); ++b) {
    if (!buffer_path[b]) continue;
    for (const auto& sl : s.buffers[b].slices)
      tensor_path[static_cast<std::size_t>(ts.pieces[static_cast<std::size_t>(sl.piece)].tensor)] |= buffer_path[b];
  }
  for (char t : tensor_path) {
    pr.reshard_tensors += (t & 1) ? 1 : 0;
    pr.broadcast_tensors += (t & 2) ? 1 : 0;
  }
  if (params.per_call_rank.value > 0) pr.call_ranks = call_ranks(s, ts, tensor_path);
  for (std::size_t g = 0; g < ring_sender.size(); ++g)
    if (ring_sender[g] && !ring_member[g]) ++pr.broadcast_stages;
  pr.broadcast_buckets = std::count(bucket.begin(), bucket.end(), 1);
  if (params.barriers_per_tensor > 0) pr.barrier = barrier_time(s, topo);
  if (params.copy_passes > 0) pr.copies = copy_time(s, topo, params.copy_passes);
  if (params.host_passes > 0) pr.host_copies = host_copy_time(s, topo, params.host_passes);
  if (params.load_per_tensor.value > 0 || params.load_per_expert.value > 0 || params.per_read.value > 0)
    add_receive_side(s, ts, inv, params, pr);
  pr.fixed = params.per_refit;
  if (params.engine_call.value > 0) {
    const auto calls = engine_calls(s, step, pr.steps, gpu_count);
    pr.engine_calls = calls.empty() ? 0 : *std::max_element(calls.begin(), calls.end());
    pr.issue = params.engine_call * static_cast<double>(pr.engine_calls);
  }
  const double calls = static_cast<double>(pr.reshard_tensors) / std::max(1, params.tensor_streams);
  pr.host = params.per_tensor * calls +
            params.per_call_rank * (static_cast<double>(pr.call_ranks) / std::max(1, params.tensor_streams)) +
            params.per_broadcast_tensor * static_cast<double>(pr.broadcast_tensors) +
            params.per_bucket * static_cast<double>(pr.broadcast_buckets) +
            params.per_stage * static_cast<double>(pr.broadcast_stages) + pr.load + pr.reads + pr.issue;
  pr.device = pr.barrier * (params.barriers_per_tensor * calls) + pr.copies;
}

}  // namespace

std::vector<std::int64_t> engine_calls(const Schedule& s, std::int32_t gpu_count) {
  std::int32_t steps = 0;
  const std::vector<std::int32_t> step = op_steps(s, steps);
  return engine_calls(s, step, steps, gpu_count);
}

Seconds delta_source_time(const DeltaWork& work, const Topology& topo) {
  Seconds t = memory_pass_time(work.source, topo, "diffs and encodes a delta refit");
  for (const auto& [g, b] : work.source_host) {
    const auto link = topo.host_link(g);
    if (!link || link->bandwidth.value <= 0)
      throw PlanError("GPU " + std::to_string(g) + " keeps its delta snapshot in host memory (delta.snapshot: host), "
                      "but the topology '" + topo.name() + "' gives it no host link");
    t = std::max(t, b / link->bandwidth);
  }
  return t;
}

Seconds delta_destination_time(const DeltaWork& work, const Topology& topo) {
  return memory_pass_time(work.destination, topo, "decodes a delta refit");
}

Seconds conversion_time(const std::vector<std::pair<GpuId, Bytes>>& work, const Topology& topo) {
  return memory_pass_time(work, topo, "converts weights to a new precision");
}

Prediction estimate(const Schedule& s, const TransferSet& ts, const Inventory& inv, const Topology& topo,
                    const CostParams& params) {
  Prediction pr;
  pr.operations = static_cast<std::int64_t>(s.ops.size());
  const auto& links = topo.links();
  std::vector<double> cap(links.size());
  for (std::size_t l = 0; l < links.size(); ++l)
    cap[l] = links[l].bandwidth.value * params.efficiency[static_cast<int>(links[l].kind)];

  const Routing routing = routing_matrix(s, topo, cap, params, pr);
  const auto& [columns, column_of, column_bytes, middles] = routing;

  // The steps the executors run the ops in (model/memory.hpp) and the critical path through them,
  // ops taken by (step, id): an op starts once released (its `after`), once the previous op on its
  // chain has been sent, and once the GPU that sends it has finished its own part in the ops of
  // the earlier steps (a root's part: sent; a plain transfer's sender and receiver: arrived) --
  // the executors' step order, seen from the sender and a plain transfer's receiver.
  std::vector<std::int32_t> step;
  const StagingMemory memory = staging_memory(s, &step);
  pr.staging_peak = memory.peak;
  pr.staging_gpu = memory.gpu;
  pr.steps = memory.steps;
  pr.over_budget = memory.over_budget;
  std::vector<std::size_t> order(s.ops.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return step[a] < step[b]; });
  // finish: when an op's last byte has arrived; sent: when a chain op's root has sent its last byte
  // (the next op on the same chain starts then, model/chain.hpp).
  std::vector<double> finish(s.ops.size(), 0), latency_path(s.ops.size(), 0);
  std::vector<double> chain_sent(s.chains.size(), 0);
  // Per GPU: the latest end of its part in the ops of its earlier steps (done) and of its current one.
  struct Barrier {
    std::int32_t step = -1;
    double done = 0, current = 0;
  };
  std::vector<Barrier> barrier(static_cast<std::size_t>(topo.gpu_count()));
  auto done_before = [&](GpuId g, std::int32_t k) {
    Barrier& b = barrier[static_cast<std::size_t>(g)];
    if (b.step < k) {
      b.done = std::max(b.done, b.current);
      b.current = 0;
      b.step = k;
    }
    return b.done;
  };
  auto part_ends = [&](GpuId g, double t) { auto& b = barrier[static_cast<std::size_t>(g)]; b.current = std::max(b.current, t); };
  const BytesPerSecond copy_rate = params.memory_copy_rate;
  for (std::size_t i : order) {
    const auto& op = s.ops[i];
    if (column_of[i] < 0) continue;
    const Column& c = columns[static_cast<std::size_t>(column_of[i])];
    const double bytes = op.bytes.as_double();
    const std::int32_t k = step[i];
    double release = params.step_barriers ? done_before(op.src, k) : 0, latency_start = 0;
    if (!c.chain && params.step_barriers) release = std::max(release, done_before(op.dst, k));
    for (auto a : s.after_of(op)) {
      release = std::max(release, finish[static_cast<std::size_t>(a)]);
      latency_start = std::max(latency_start, latency_path[static_cast<std::size_t>(a)]);
    }
    const double hop = c.latency + params.per_op.value;
    const double copies = copy_fill(stream_chunk(s, op), op.bytes, copy_rate).value;
    if (c.chain) {
      // The root starts once released and once the previous op on its chain has left it; the
      // last chunk then crosses the chain's latency and fill (model/chain.hpp).
      double& sent = chain_sent[static_cast<std::size_t>(op.chain)];
      sent = std::max(release, sent) + params.per_op.value + bytes / c.rate;
      const double fill = chain_fill(*c.chain, c.depth, op.bytes).as_double() / c.rate + copies;
      finish[i] = sent + c.latency + fill;
      part_ends(op.src, sent);
      pr.fill = Seconds{std::max(pr.fill.value, fill)};
      pr.chain_depth = std::max(pr.chain_depth, c.depth);
    } else {
      finish[i] = release + hop + bytes / c.rate + copies;
      part_ends(op.src, finish[i]);
      part_ends(op.dst, finish[i]);
      pr.fill = Seconds{std::max(pr.fill.value, copies)};
    }
    latency_path[i] = latency_start + hop;
    pr.critical_path = Seconds{std::max(pr.critical_path.value, finish[i])};
    pr.latency_path = Seconds{std::max(pr.latency_path.value, latency_path[i])};
  }
  // T_steps: each step's most loaded network link, the steps one after another.
  if (pr.steps > 1 && params.step_barriers) pr.steps_bound = steps_bound(s, routing, order, step, topo.links(), cap);
  add_bandwidth_bound(columns, column_bytes, middles, cap, pr);
  add_overheads(s, ts, inv, topo, params, step, pr);
  pr.pipeline = pr.bandwidth_bound + pr.fill + pr.latency_path;
  pr.convert_source = conversion_time(ts.conversion.source, topo);
  pr.convert_destination = conversion_time(ts.conversion.destination, topo);
  pr.delta_source = delta_source_time(ts.delta, topo);
  pr.delta_destination = delta_destination_time(ts.delta, topo);
  const Seconds gpus{std::max({pr.pipeline.value, pr.critical_path.value, pr.steps_bound.value})};
  // The host's work hides behind the GPUs' when the profile says it overlaps: only what it takes
  // beyond them adds (cost.hpp).
  pr.overheads = pr.host_copies + pr.fixed + pr.device +
                 (params.host_overlaps ? std::max(Seconds{0}, pr.host - gpus - pr.device) : pr.host);
  pr.time = pr.convert_source + pr.delta_source + gpus + pr.overheads + pr.delta_destination + pr.convert_destination;
  return pr;
}

}  // namespace reshard::model

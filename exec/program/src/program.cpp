// The executor core: run plans, per-GPU programs, the pattern, faults (see executor.hpp).
#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "reshard/exec/pattern.hpp"
#include "reshard/exec/fault.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/exec/program.hpp"
#include "reshard/model/checked.hpp"
#include "reshard/model/chain.hpp"
#include "reshard/model/memory.hpp"

namespace reshard::exec {

using namespace reshard::model;

std::int32_t RunPlan::gpu_index(GpuId g) const {
  auto it = std::lower_bound(gpus.begin(), gpus.end(), g);
  if (it == gpus.end() || *it != g) return -1;
  return static_cast<std::int32_t>(it - gpus.begin());
}

namespace {

bool contains(const Box& outer, const Box& inner) {
  if (outer.dims.size() != inner.dims.size()) return false;
  for (std::size_t i = 0; i < outer.dims.size(); ++i)
    if (inner.dims[i].lo < outer.dims[i].lo || inner.dims[i].hi > outer.dims[i].hi) return false;
  return true;
}

std::int32_t find_shard(const ShardMap& m, const Piece& p, RankSetId ranks) {
  const auto& shards = m.shards(p.tensor);
  for (std::size_t i = 0; i < shards.size(); ++i)
    if (shards[i].ranks == ranks && contains(shards[i].box, p.box)) return static_cast<std::int32_t>(i);
  return -1;
}

// Whether run r continues run p on both sides (the two are one run).
bool continues(const CopyRun& p, const CopyRun& r) {
  return p.src == r.src && p.dst == r.dst && p.src_offset + p.bytes == r.src_offset && p.dst_offset + p.bytes == r.dst_offset;
}

CopyRun nth(const CopyRun& first, std::int64_t k, std::int64_t src_stride, std::int64_t dst_stride) {
  CopyRun r = first;
  r.src_offset += k * src_stride;
  r.dst_offset += k * dst_stride;
  return r;
}

}  // namespace

void add_runs(std::vector<CopyRun>& runs, const CopyRun& first, std::int64_t count, std::int64_t src_stride,
              std::int64_t dst_stride) {
  for (std::int64_t k = 0; k < count; ++k) {
    const CopyRun r = nth(first, k, src_stride, dst_stride);
    if (!runs.empty() && continues(runs.back(), r)) runs.back().bytes += r.bytes;
    else runs.push_back(r);
  }
}

// Two stages, each in constant time per call: merging (last_ holds the last run while the next may
// continue it, as add_runs merges) and grouping (open_ is the group a merged run may join).
void StridedRuns::add(const CopyRun& first, std::int64_t count, std::int64_t src_stride, std::int64_t dst_stride) {
  if (count <= 0) return;
  CopyRun head = first;
  if (count >= 2 && src_stride == first.bytes && dst_stride == first.bytes) {  // rows that continue each other: one run
    head.bytes *= count;
    count = 1;
  }
  if (has_last_ && continues(last_, head)) {
    last_.bytes += head.bytes;
  } else {
    if (has_last_) group_row(last_);
    last_ = head;
    has_last_ = true;
  }
  if (count == 1) return;
  // Runs 2..count continue none before them (else the rows would have been one run): run 1 (in
  // last_) is final, runs 2..count-1 are grouped at once, the last one may still grow.
  group_row(last_);
  if (count > 2) group_rows(nth(first, 1, src_stride, dst_stride), count - 2, src_stride, dst_stride);
  last_ = nth(first, count - 1, src_stride, dst_stride);
}

void StridedRuns::group_row(const CopyRun& r) {
  if (open_.count > 0 && open_.src == r.src && open_.dst == r.dst && open_.bytes == r.bytes) {
    if (open_.count == 1) {
      open_.src_stride = r.src_offset - open_.src_offset;
      open_.dst_stride = r.dst_offset - open_.dst_offset;
      open_.count = 2;
      return;
    }
    if (r.src_offset - (open_.src_offset + (open_.count - 1) * open_.src_stride) == open_.src_stride &&
        r.dst_offset - (open_.dst_offset + (open_.count - 1) * open_.dst_stride) == open_.dst_stride) {
      ++open_.count;
      return;
    }
  }
  close_group();
  open_ = StridedRun{r.src, r.dst, r.src_offset, r.dst_offset, r.bytes, 1, 0, 0};
}

// `count` runs at the strides, grouped as group_row would one by one: the first two decide where the
// group stands (joined to the open group, or a new one), the rest follow at its strides.
void StridedRuns::group_rows(const CopyRun& first, std::int64_t count, std::int64_t src_stride, std::int64_t dst_stride) {
  group_row(first);
  if (count == 1) return;
  group_row(nth(first, 1, src_stride, dst_stride));
  if (count == 2) return;
  if (open_.count == 1) {
    open_.src_stride = src_stride;
    open_.dst_stride = dst_stride;
  }
  open_.count += count - 2;
}

void StridedRuns::close_group() {
  if (open_.count == 0) return;
  if (open_.count == 1) open_.src_stride = open_.dst_stride = 0;
  done_.push_back(open_);
  open_.count = 0;
}

const std::vector<StridedRun>& StridedRuns::groups() {
  if (has_last_) group_row(last_);
  has_last_ = false;
  close_group();
  return done_;
}

RunPlan make_run_plan(const LoadedScenario& sc, const TransferSet& ts, const Schedule& s) {
  RunPlan rp;
  rp.scenario = &sc;
  rp.transfers = &ts;
  rp.schedule = &s;
  const std::string who = "schedule for '" + s.scenario + "' run on scenario '" + sc.scenario.name + "'";
  if (sc.inventory.delta().active())
    throw ConfigError(sc.scenario.file, sc.scenario.delta_line, "delta",
                      "reshard's engine refits dense: a delta refit is modelled (plan, compare, simulate, sweep) but not run; "
                      "remove delta (or --delta) to run the refit");
  if (s.piece_count != static_cast<std::int32_t>(ts.pieces.size()))
    throw ScheduleError(who + ": the schedule was built for " + std::to_string(s.piece_count) +
                        " pieces, the scenario plans " + std::to_string(ts.pieces.size()) +
                        "; a schedule that does not match its scenario is refused");
  // The GPUs of both layouts, and relays: GPUs of the topology a schedule passes data through.
  std::set<GpuId> gpus(sc.source.gpus().begin(), sc.source.gpus().end());
  gpus.insert(sc.destination.gpus().begin(), sc.destination.gpus().end());
  auto in_topology = [&](GpuId g, const std::string& where) {
    if (g < 0 || g >= sc.topology.gpu_count())
      throw ScheduleError(where + ": GPU " + std::to_string(g) + " is not in the scenario's topology (" +
                          std::to_string(sc.topology.gpu_count()) +
                          " GPUs); a schedule that does not match its scenario is refused");
  };
  for (std::size_t c = 0; c < s.chains.size(); ++c) {
    const Chain& chain = s.chains[c];
    for (std::size_t k = 0; k < chain.hops.size(); ++k) {
      const std::string where = who + ": chain " + std::to_string(c) + " hop " + std::to_string(k);
      in_topology(chain.hops[k].from, where);
      in_topology(chain.hops[k].to, where);
    }
  }
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (const std::string problem = op_problem(s, i, sc.topology.gpu_count(), true); !problem.empty())
      throw ScheduleError(who + ": operation " + std::to_string(i) + ": " + problem +
                          "; a schedule that does not match its scenario is refused");
    if (op.chain < 0 && op.src == op.dst)  // data a GPU holds on both sides is copied locally, never sent
      throw ScheduleError(who + ": operation " + std::to_string(i) + " sends from GPU " + std::to_string(op.src) +
                          " to itself; pieces a GPU holds on both sides are copied locally, not sent");
    gpus.insert(op.src);
    gpus.insert(op.dst);
    if (op.chain >= 0)  // every GPU the chain passes through runs the op
      for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) gpus.insert(h.to);
  }
  rp.gpus.assign(gpus.begin(), gpus.end());
  validate(s, ts, sc.inventory, sc.source, sc.destination);
  rp.step_of = op_steps(s, rp.steps);
  rp.kept = kept_receives(s);
  rp.chain_prev.assign(s.ops.size(), -1);
  std::vector<std::int64_t> last_on_chain(s.chains.size(), -1);
  for (const Op& op : s.ops)
    if (op.chain >= 0) {
      auto& last = last_on_chain[static_cast<std::size_t>(op.chain)];
      rp.chain_prev[static_cast<std::size_t>(op.id)] = last;
      last = op.id;
    }
  for (const auto& p : ts.pieces) {
    rp.piece_source_shard.push_back(find_shard(sc.source, p, p.holders));
    rp.piece_destination_shard.push_back(find_shard(sc.destination, p, p.needers));
    if (rp.piece_source_shard.back() < 0 || rp.piece_destination_shard.back() < 0)
      throw ScheduleError(who + ": a piece of '" + sc.inventory.tensor(p.tensor).name + "' " + to_string(p.box) +
                          " lies in no single shard");
  }
  return rp;
}

namespace {

// One GPU's program, in three phases: the regions of the shards its ranks hold, the pieces it
// copies locally, then each op it sends or receives (in id order, so a forward finds what it
// received). Runs are added a box's rows at a time (piece_row_groups): `Runs` keeps them one by one
// or as strided groups.
template <class Runs>
class ProgramBuilder {
 public:
  ProgramBuilder(const RunPlan& rp, GpuId gpu)
      : rp_(rp), sc_(*rp.scenario), ts_(*rp.transfers), s_(*rp.schedule) {
    prog_.gpu = gpu;
    src_regions_ = shard_regions(sc_.source, Region::Kind::Source);
    dst_regions_ = shard_regions(sc_.destination, Region::Kind::Destination);
  }

  // Pieces held here and needed here: copied locally.
  void add_local_copies() {
    for (std::int32_t p = 0; p < static_cast<std::int32_t>(ts_.pieces.size()); ++p) {
      const std::int32_t from = piece_src(p), to = piece_dst(p);
      if (from >= 0) prog_.source_pieces.emplace_back(p, from);
      if (to >= 0) prog_.destination_pieces.emplace_back(p, to);
      if (from < 0 || to < 0) continue;
      const Piece& pc = ts_.pieces[static_cast<std::size_t>(p)];
      const std::int64_t es = dtype_size(sc_.inventory.tensor(pc.tensor).dtype);
      // Both shards contain the piece; its row groups are the same in both (piece_row_groups).
      std::vector<std::pair<std::int64_t, std::int64_t>> src_groups;  // (offset, stride) in piece order
      piece_row_groups(pc.box, shard_box(from), 0, pc.box.elements(),
                       [&](std::int64_t off, std::int64_t, std::int64_t, std::int64_t, std::int64_t stride) {
                         src_groups.emplace_back(off, stride);
                       });
      std::size_t group = 0;
      piece_row_groups(pc.box, shard_box(to), 0, pc.box.elements(),
                       [&](std::int64_t off, std::int64_t, std::int64_t n, std::int64_t rows, std::int64_t stride) {
                         const auto [src_off, src_stride] = src_groups[group++];
                         add_runs(prog_.local, CopyRun{from, to, src_off * es, off * es, n * es}, rows, src_stride * es,
                                  stride * es);
                       });
    }
  }

  // This GPU's roles in op's stream: sender (a transfer's src, a chain's root) and receiver (a
  // transfer's dst, a chain hop's `to`), with the parent it receives from and the children it
  // sends to (a transfer: its one hop, src -> dst).
  void add_op(const Op& op) {
    const GpuId gpu = prog_.gpu;
    OpStreamOf<Runs> t;
    t.op = op.id;
    t.chain = op.chain;
    t.chunk = std::max<std::int64_t>(stream_chunk(s_, op).value, 1);
    t.bytes = op.bytes.value;
    const bool sends = op.src == gpu;
    bool receives = false;
    OpStreamOf<Runs> in = t;
    OpStreamOf<Runs> out = t;
    out.slots = s_.slots;
    if (op.chain < 0) {
      if (sends) {
        out.children = {op.dst};
        out.child_hops = {0};
      }
      if (op.dst == gpu) {
        receives = true;
        in.peer = op.src;
      }
    } else {
      const Chain& c = s_.chains[static_cast<std::size_t>(op.chain)];
      std::vector<GpuId> children;
      std::vector<std::int32_t> hops;
      for (std::size_t h = 0; h < c.hops.size(); ++h) {
        if (c.hops[h].from == gpu) {
          children.push_back(c.hops[h].to);
          hops.push_back(static_cast<std::int32_t>(h));
        }
        if (c.hops[h].to == gpu) {
          receives = true;
          in.peer = c.hops[h].from;
          in.hop = static_cast<std::int32_t>(h);
        }
      }
      (sends ? out : in).children = children;
      (sends ? out : in).child_hops = hops;
    }
    const auto& kept_at = rp_.kept[static_cast<std::size_t>(op.id)];
    in.slots = std::binary_search(kept_at.begin(), kept_at.end(), gpu) ? 0 : s_.slots;
    if (sends) {
      out.region = static_cast<std::int32_t>(prog_.regions.size());
      add_send(op, std::move(out));
    }
    if (receives) {
      in.region = static_cast<std::int32_t>(prog_.regions.size());
      add_receive(op, std::move(in));
    }
  }

  ProgramOf<Runs> take() { return std::move(prog_); }

 private:
  using Regions = std::map<std::pair<std::int32_t, std::int32_t>, std::int32_t>;  // (tensor, shard) -> region

  // (tensor, shard index) -> region, for the shards some rank on this GPU holds.
  Regions shard_regions(const ShardMap& m, Region::Kind kind) {
    Regions out;
    std::vector<Rank> ranks;
    for (Rank r = 0; r < m.world_size(); ++r)
      if (m.gpu_of(r) == prog_.gpu) ranks.push_back(r);
    if (ranks.empty()) return out;
    for (std::int32_t t = 0; t < m.tensor_count(); ++t) {
      const auto& shards = m.shards(t);
      const std::int64_t es = dtype_size(sc_.inventory.tensor(t).dtype);
      for (std::size_t i = 0; i < shards.size(); ++i) {
        const auto& set = m.rank_set(shards[i].ranks);
        if (std::none_of(ranks.begin(), ranks.end(), [&](Rank r) { return set.contains(r); })) continue;
        out[{t, static_cast<std::int32_t>(i)}] = static_cast<std::int32_t>(prog_.regions.size());
        prog_.regions.push_back(Region{kind, t, shards[i].box, -1, shards[i].box.elements() * es});
        if (kind == Region::Kind::Destination) prog_.destination_bytes += prog_.regions.back().bytes;
      }
    }
    return out;
  }
  static std::int32_t region_of(const Regions& regions, std::int32_t tensor, std::int32_t shard) {
    auto it = regions.find({tensor, shard});
    return it == regions.end() ? -1 : it->second;
  }
  std::int32_t piece_src(std::int32_t p) const {
    return region_of(src_regions_, ts_.pieces[static_cast<std::size_t>(p)].tensor, rp_.piece_source_shard[static_cast<std::size_t>(p)]);
  }
  std::int32_t piece_dst(std::int32_t p) const {
    return region_of(dst_regions_, ts_.pieces[static_cast<std::size_t>(p)].tensor,
                     rp_.piece_destination_shard[static_cast<std::size_t>(p)]);
  }
  const Box& shard_box(std::int32_t region) const { return prog_.regions[static_cast<std::size_t>(region)].box; }

  // A staging region's bytes: the whole part of `bytes` when kept, else its ring (model::ring_bytes).
  static std::int64_t region_bytes(const OpStreamOf<Runs>& t, std::int64_t bytes) {
    if (t.kept()) return bytes;
    return t.chunk > bytes / t.slots ? bytes : t.slots * t.chunk;
  }

  // A send: its part packed from the source shards here, or from what an op it waits for brought.
  void add_send(const Op& op, OpStreamOf<Runs> t) {
    prog_.regions.push_back(Region{Region::Kind::Send, -1, {}, op.id, 0});
    std::int64_t pos = 0;
    for_each_in_part(s_.buffers[static_cast<std::size_t>(op.buffer)], op.part, op.parts,
                     [&](std::int32_t p, std::int64_t b, std::int64_t e) {
      const Piece& pc = ts_.pieces[static_cast<std::size_t>(p)];
      const std::int64_t es = dtype_size(sc_.inventory.tensor(pc.tensor).dtype);
      if (const std::int32_t from = piece_src(p); from >= 0) {
        piece_row_groups(pc.box, shard_box(from), b, e,
                         [&](std::int64_t off, std::int64_t k, std::int64_t n, std::int64_t rows, std::int64_t stride) {
                           add_runs(t.copies, CopyRun{from, t.region, off * es, pos + (k - b) * es, n * es}, rows,
                                    stride * es, n * es);
                         });
      } else if (!copy_received(op, p, b, e, es, pos, t)) {
        throw ScheduleError("operation " + std::to_string(op.id) + ": GPU " + std::to_string(prog_.gpu) +
                            " sends elements of piece " + std::to_string(p) + " it neither holds nor received before");
      }
      pos += (e - b) * es;
    });
    prog_.regions[static_cast<std::size_t>(t.region)].bytes = region_bytes(t, pos);
    prog_.sends.push_back(std::move(t));
  }
  // Elements [b, e) of piece p from a receive of an op that op waits for, into t at byte pos.
  bool copy_received(const Op& op, std::int32_t p, std::int64_t b, std::int64_t e, std::int64_t es, std::int64_t pos,
                     OpStreamOf<Runs>& t) const {
    for (auto a : s_.after_of(op)) {
      auto it = received_.find(a);
      if (it == received_.end()) continue;
      for (const Held& h : it->second.second)
        if (h.piece == p && h.b <= b && e <= h.e) {
          add_runs(t.copies, CopyRun{it->second.first, t.region, h.offset + (b - h.b) * es, pos, (e - b) * es}, 1, 0, 0);
          return true;
        }
    }
    return false;
  }
  // A receive: unpacked into the destination shards here (pieces not also held here), and kept
  // for forwarding.
  void add_receive(const Op& op, OpStreamOf<Runs> t) {
    prog_.regions.push_back(Region{Region::Kind::Receive, -1, {}, op.id, 0});
    auto& held = received_[op.id];
    held.first = t.region;
    std::int64_t pos = 0;
    for_each_in_part(s_.buffers[static_cast<std::size_t>(op.buffer)], op.part, op.parts,
                     [&](std::int32_t p, std::int64_t b, std::int64_t e) {
      const Piece& pc = ts_.pieces[static_cast<std::size_t>(p)];
      const std::int64_t es = dtype_size(sc_.inventory.tensor(pc.tensor).dtype);
      held.second.push_back({p, b, e, pos});
      if (const std::int32_t to = piece_dst(p); to >= 0 && piece_src(p) < 0) {
        piece_row_groups(pc.box, shard_box(to), b, e,
                         [&](std::int64_t off, std::int64_t k, std::int64_t n, std::int64_t rows, std::int64_t stride) {
                           add_runs(t.copies, CopyRun{t.region, to, pos + (k - b) * es, off * es, n * es}, rows, n * es,
                                    stride * es);
                         });
      }
      pos += (e - b) * es;
    });
    prog_.regions[static_cast<std::size_t>(t.region)].bytes = region_bytes(t, pos);
    prog_.receives.push_back(std::move(t));
  }

  // Receives keep what they got: (piece, begin, end, byte offset) per receive region, for forwarding.
  struct Held {
    std::int32_t piece;
    std::int64_t b, e, offset;
  };
  const RunPlan& rp_;
  const LoadedScenario& sc_;
  const TransferSet& ts_;
  const Schedule& s_;
  ProgramOf<Runs> prog_;
  Regions src_regions_, dst_regions_;
  std::map<std::int64_t, std::pair<std::int32_t, std::vector<Held>>> received_;  // op -> (region, runs)
};

}  // namespace

namespace {
template <class Runs>
ProgramOf<Runs> build(const RunPlan& rp, GpuId gpu) {
  ProgramBuilder<Runs> b(rp, gpu);
  b.add_local_copies();
  for (const Op& op : rp.schedule->ops) b.add_op(op);
  return b.take();
}
}  // namespace

GpuProgram build_program(const RunPlan& rp, GpuId gpu) { return build<std::vector<CopyRun>>(rp, gpu); }
StridedProgram build_strided_program(const RunPlan& rp, GpuId gpu) { return build<StridedRuns>(rp, gpu); }

StepWaves step_waves(const Schedule& s, const std::vector<std::int64_t>& ops) { return step_waves(s, ops, nullptr); }

StepWaves step_waves(const Schedule& s, const std::vector<std::int64_t>& ops, std::int64_t (*window)(const Schedule&, const Op&)) {
  StepWaves out;
  std::map<std::int32_t, std::int64_t> next_offset;  // per chain: the wave its next op starts in
  for (auto id : ops) {
    const Op& op = s.ops[static_cast<std::size_t>(id)];
    StreamWaves sw;
    sw.op = id;
    sw.chunks = chain_chunks(op.bytes.value, std::max<std::int64_t>(stream_chunk(s, op).value, 1));
    if (window) sw.chunks = (sw.chunks + window(s, op) - 1) / window(s, op);
    if (op.chain >= 0) {
      const Chain& c = s.chains[static_cast<std::size_t>(op.chain)];
      sw.offset = next_offset[op.chain];
      next_offset[op.chain] = sw.offset + sw.chunks;
      sw.depth = chain_depths(c, op.src, "operation " + std::to_string(id));
    } else {
      sw.depth = {1};
    }
    if (sw.chunks > 0)
      out.waves = std::max(out.waves, sw.offset + sw.chunks + *std::max_element(sw.depth.begin(), sw.depth.end()) - 1);
    out.streams.push_back(std::move(sw));
  }
  return out;
}

Fault parse_fault(const std::string& text) {
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  Fault f;
  if (kind == "corrupt") f.kind = Fault::Kind::Corrupt;
  else if (kind == "die") f.kind = Fault::Kind::Die;
  else if (kind == "kill") f.kind = Fault::Kind::Kill;
  else if (kind == "drop") f.kind = Fault::Kind::Drop;
  else if (kind == "stop") f.kind = Fault::Kind::Stop;
  else throw ConfigError("--inject", 0, text, "expected corrupt:OP[@first|@middle|@last], die:RANK, kill:RANK, stop:RANK[@init] or drop:OP");
  std::string number = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (const auto at = number.find('@'); at != std::string::npos && f.kind == Fault::Kind::Stop) {
    if (number.substr(at + 1) != "init") throw ConfigError("--inject", 0, text, "expected @init after the rank (stopped before MPI_Init)");
    number.resize(at);
    f.kind = Fault::Kind::StopBeforeInit;
  }
  if (const auto at = number.find('@'); at != std::string::npos && f.kind == Fault::Kind::Corrupt) {
    const std::string where = number.substr(at + 1);
    number.resize(at);
    if (where == "first") f.where = Fault::Where::First;
    else if (where == "middle") f.where = Fault::Where::Middle;
    else if (where == "last") f.where = Fault::Where::Last;
    else throw ConfigError("--inject", 0, text, "expected @first, @middle or @last after the op");
  }
  const auto v = checked::parse_integer(number);
  if (!v || *v < 0) throw ConfigError("--inject", 0, text, "expected a non-negative number after '" + kind + ":'");
  f.target = *v;
  return f;
}

bool has_fault(const std::vector<Fault>& faults, Fault::Kind k, std::int64_t target) {
  for (const auto& f : faults)
    if (f.kind == k && f.target == target) return true;
  return false;
}

std::int64_t corrupt_offset(const std::vector<Fault>& faults, const OpStream& receive) {
  for (const Fault& f : faults) {
    if (f.kind != Fault::Kind::Corrupt || f.target != receive.op) continue;
    const auto& c = receive.copies;
    if (c.empty()) return 0;
    std::int64_t total = 0;
    for (const CopyRun& r : c) total += r.bytes;
    if (f.where == Fault::Where::First || total == 0) return c.front().src_offset;
    // The k-th unpacked byte, k = total / 2 (middle) or total - 1 (last).
    std::int64_t k = f.where == Fault::Where::Middle ? total / 2 : total - 1;
    for (const CopyRun& r : c) {
      if (k < r.bytes) return r.src_offset + k;
      k -= r.bytes;
    }
  }
  return -1;
}

}  // namespace reshard::exec

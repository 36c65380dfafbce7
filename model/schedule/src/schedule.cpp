#include <algorithm>
#include <iterator>
#include <limits>
#include <span>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "reshard/model/chain.hpp"
#include "reshard/model/checked.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/schedule.hpp"

namespace reshard::model {

namespace {
constexpr const char* kScheduleFormat = "reshard-schedule-4";

// The one table of the phases: name and stable id (schedule.hpp). Id 5 was `forward` (never
// produced; removed): reserved, never given to another phase.
constexpr OpPhaseInfo kOpPhases[] = {
    {OpPhase::Direct, "direct", 0},   {OpPhase::Gather, "gather", 1}, {OpPhase::Broadcast, "broadcast", 2},
    {OpPhase::Ingress, "ingress", 3}, {OpPhase::FanOut, "fanout", 4},
};
constexpr std::uint8_t kRetiredOpPhaseIds[] = {5};
static_assert([] {
  for (std::size_t i = 0; i < std::size(kOpPhases); ++i) {
    if (static_cast<std::size_t>(kOpPhases[i].phase) != i) return false;
    for (std::size_t k = 0; k < i; ++k)
      if (kOpPhases[k].id == kOpPhases[i].id) return false;
    for (auto retired : kRetiredOpPhaseIds)
      if (kOpPhases[i].id == retired) return false;
  }
  return true;
}(), "kOpPhases lists the phases in enum order, each with an id of its own that no retired phase had");
}  // namespace

std::span<const OpPhaseInfo> op_phases() { return kOpPhases; }

const char* to_string(OpPhase p) { return kOpPhases[static_cast<std::size_t>(p)].name; }

std::uint8_t stable_id(OpPhase p) { return kOpPhases[static_cast<std::size_t>(p)].id; }

std::optional<OpPhase> op_phase_with_id(std::uint8_t id) {
  for (const auto& p : kOpPhases)
    if (p.id == id) return p.phase;
  return std::nullopt;
}

std::optional<OpPhase> op_phase_named(std::string_view name) {
  for (const auto& p : kOpPhases)
    if (name == p.name) return p.phase;
  return std::nullopt;
}

std::string op_problem(const Schedule& s, std::size_t i, std::int32_t gpu_count, bool content) {
  const Op& op = s.ops[i];
  if (op.id != static_cast<std::int64_t>(i))
    return "its id is " + std::to_string(op.id) + " at position " + std::to_string(i) + "; ids must be dense and ascending";
  const auto pool = static_cast<std::int64_t>(s.after.size());
  if (op.after_begin < 0 || op.after_count < 0 || op.after_begin > pool || op.after_count > pool - op.after_begin)
    return "its `after` entries " + std::to_string(op.after_begin) + "+" + std::to_string(op.after_count) + " lie outside the " +
           std::to_string(pool) + " of the schedule's pool";
  for (auto a : s.after_of(op))
    if (a < 0 || a >= op.id) return "waits for operation " + std::to_string(a) + ", which does not precede it";
  if (op.chain < -1 || op.chain >= static_cast<std::int32_t>(s.chains.size()))
    return "no chain " + std::to_string(op.chain) + " (" + std::to_string(s.chains.size()) + " chains)";
  if (op.bytes.value < 0) return "negative bytes";
  if (gpu_count >= 0)
    for (GpuId g : {op.src, op.dst})
      if (g < 0 || g >= gpu_count)
        return "GPU " + std::to_string(g) + " is not in the topology (GPUs 0.." + std::to_string(gpu_count - 1) + ")";
  if (content) {
    if (op.buffer < 0 || op.buffer >= static_cast<std::int32_t>(s.buffers.size()))
      return "no buffer " + std::to_string(op.buffer) + " (" + std::to_string(s.buffers.size()) + " buffers)";
    if (op.parts < 1 || op.parts > kMaxParts || op.part < 0 || op.part >= op.parts)
      return "part " + std::to_string(op.part) + " of " + std::to_string(op.parts) + " is not a part (0 <= part < parts <= " +
             std::to_string(kMaxParts) + ")";
  }
  return {};
}

void append_op(std::vector<Op>& ops, std::vector<std::int64_t>& after, Op op, std::span<const std::int64_t> ids) {
  if (ids.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw ScheduleError("operation " + std::to_string(op.id) + " waits for " + std::to_string(ids.size()) +
                        " operations, more than an op's count holds");
  op.after_begin = static_cast<std::int64_t>(after.size());
  op.after_count = static_cast<std::int32_t>(ids.size());
  after.insert(after.end(), ids.begin(), ids.end());
  ops.push_back(op);
}

std::int64_t Schedule::add_op(Op op, std::span<const std::int64_t> ids) {
  op.id = static_cast<std::int64_t>(ops.size());
  append_op(ops, after, op, ids);
  return op.id;
}

namespace {

// The validator works on units: a unit is (buffer, part, parts), the exact element ranges one
// operation moves. Its ranges are computed once per unit, however many operations move it (a ring
// broadcast moves the same unit once per hop), so the cost is the number of operations plus the
// slices of the units plus the deliveries (a unit's ranges times the GPUs it reaches), sorted per
// piece. No string is built unless a check fails.
// Three phases: the chains' shapes, each operation (in id order), the deliveries per needer.
class Validator {
 public:
  Validator(const Schedule& s, const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst)
      : s_(s), ts_(ts), inv_(inv), holders_(static_cast<std::size_t>(src.rank_set_count())),
        needers_(static_cast<std::size_t>(dst.rank_set_count())), op_unit_(s.ops.size()) {
    for (RankSetId i = 0; i < src.rank_set_count(); ++i) holders_[static_cast<std::size_t>(i)] = src.gpus_of(i);
    for (RankSetId i = 0; i < dst.rank_set_count(); ++i) needers_[static_cast<std::size_t>(i)] = dst.gpus_of(i);
  }

  // Each chain's shape, checked once, and the GPUs it reaches, sorted (chain_reaches).
  void check_chains() {
    reached_.resize(s_.chains.size());
    for (std::size_t c = 0; c < s_.chains.size(); ++c) {
      if (s_.chains[c].hops.empty()) throw ScheduleError("chain " + std::to_string(c) + " has no hop");
      chain_depths(s_.chains[c], s_.chains[c].hops.front().from, "chain " + std::to_string(c));
      for (const ChainHop& h : s_.chains[c].hops) reached_[c].push_back(h.to);
      std::sort(reached_[c].begin(), reached_[c].end());
    }
  }

  // Operation i: its shape, its unit and bytes, and that its sender holds or received all it sends.
  void check_op(std::size_t i) {
    const Op& op = s_.ops[i];
    // Built only for an error (built for every operation, it cost more than the checks).
    const auto where = [&] {
      return "operation " + std::to_string(op.id) + " (" + to_string(op.phase) + ", GPU " + std::to_string(op.src) + " -> " +
             std::to_string(op.dst) + ")";
    };
    if (const std::string problem = op_problem(s_, i, -1, true); !problem.empty()) throw ScheduleError(where() + ": " + problem);
    if (op.chain >= 0) {
      const Chain& c = s_.chains[static_cast<std::size_t>(op.chain)];
      if (c.hops.front().from != op.src)
        throw ScheduleError(where() + ": chain " + std::to_string(op.chain) + " is rooted at GPU " +
                            std::to_string(c.hops.front().from) + ", not at the op's src");
      if (c.hops.back().to != op.dst)
        throw ScheduleError(where() + ": a chain op's dst must be its last hop's receiver, GPU " + std::to_string(c.hops.back().to));
    }
    const std::int32_t u = unit_of(op, where);
    if (op.bytes.value != unit_bytes_[static_cast<std::size_t>(u)])
      throw ScheduleError(where() + ": carries " + std::to_string(op.bytes.value) + " bytes, but part " +
                          std::to_string(op.part) + " of " + std::to_string(op.parts) + " of buffer " +
                          std::to_string(op.buffer) + " holds " + std::to_string(unit_bytes_[static_cast<std::size_t>(u)]));
    op_unit_[i] = u;
    // The sender holds every range as a source, or received it in an operation it waits for.
    const auto after = s_.after_of(op);
    for (auto a : after)
      if (delivers(s_.ops[static_cast<std::size_t>(a)], op.src) && op_unit_[static_cast<std::size_t>(a)] == u) return;
    // The ranges received from the operations it waits for, sorted by (piece, begin), gathered at
    // the first range its sender does not hold (a relay forwards a bucket of many pieces).
    received_.clear();
    bool gathered = false;
    for (const auto& r : unit_ranges_[static_cast<std::size_t>(u)]) {
      if (holds(op.src, r.piece)) continue;
      if (!gathered) {
        for (auto a : after)
          if (delivers(s_.ops[static_cast<std::size_t>(a)], op.src))
            for (const auto& q : unit_ranges_[static_cast<std::size_t>(op_unit_[static_cast<std::size_t>(a)])]) received_.push_back(q);
        std::sort(received_.begin(), received_.end(),
                  [](const Range& x, const Range& y) { return x.piece != y.piece ? x.piece < y.piece : x.begin < y.begin; });
        gathered = true;
      }
      bool ok = false;
      auto it = std::lower_bound(received_.begin(), received_.end(), r.piece,
                                 [](const Range& x, std::int32_t piece) { return x.piece < piece; });
      for (; it != received_.end() && it->piece == r.piece && it->begin <= r.begin && !ok; ++it) ok = r.end <= it->end;
      if (!ok)
        throw ScheduleError(where() + ", " + describe_piece(r.piece) + ": GPU " + std::to_string(op.src) +
                            " forwards elements it neither holds nor received before");
    }
  }

  // Every needer GPU that does not hold a piece receives each of its elements exactly once.
  // Works from the deliveries: every GPU a unit reaches (an op's dst, every GPU its chain reaches,
  // once per op) receives each of the unit's ranges. Per piece, a merge of each receiver list of its
  // units with the piece's needers (both sorted) hands each needer its ranges, which are sorted (a
  // needer has a few) and must tile the piece. The cost is linear in the deliveries, plus one sort
  // of each unit's direct receivers; memory is a few entries per operation and per needer.
  void check_deliveries() const {
    // Per unit: the GPUs its direct operations reach (one entry per delivery, sorted) and the
    // chains that carry it (one entry per operation; a chain's GPUs are reached_, sorted). Chains are
    // not expanded: a ring broadcast reaches thousands of GPUs per operation.
    std::vector<std::vector<GpuId>> direct(unit_ranges_.size());
    std::vector<std::vector<std::int32_t>> chains(unit_ranges_.size());
    for (const auto& op : s_.ops) {
      const auto u = static_cast<std::size_t>(op_unit_[static_cast<std::size_t>(op.id)]);
      if (op.chain < 0) direct[u].push_back(op.dst);
      else chains[u].push_back(op.chain);
    }
    for (auto& d : direct)
      if (!std::is_sorted(d.begin(), d.end())) std::sort(d.begin(), d.end());
    // The units holding each piece: piece p's are piece_units[piece_first[p] .. piece_first[p + 1]).
    std::vector<std::int64_t> piece_first(ts_.pieces.size() + 1, 0);
    for (const auto& ranges : unit_ranges_)
      for (const auto& r : ranges) ++piece_first[static_cast<std::size_t>(r.piece) + 1];
    for (std::size_t p = 0; p < ts_.pieces.size(); ++p) piece_first[p + 1] += piece_first[p];
    std::vector<std::pair<std::int32_t, const Range*>> piece_units(static_cast<std::size_t>(piece_first.back()));
    {
      std::vector<std::int64_t> fill(piece_first.begin(), piece_first.end() - 1);
      for (std::size_t u = 0; u < unit_ranges_.size(); ++u)
        for (const auto& r : unit_ranges_[u])
          piece_units[static_cast<std::size_t>(fill[static_cast<std::size_t>(r.piece)]++)] = {static_cast<std::int32_t>(u), &r};
    }
    // Per piece: its needers without it (sorted), and the ranges each receives, grouped by needer
    // (first[k] .. first[k + 1] in `got`).
    std::vector<GpuId> lacking;
    std::vector<std::int64_t> first, next;
    std::vector<std::pair<std::int64_t, std::int64_t>> got;
    for (std::int32_t i = 0; i < s_.piece_count; ++i) {
      const auto& pc = ts_.pieces[static_cast<std::size_t>(i)];
      lacking.clear();
      for (auto g : needers_[static_cast<std::size_t>(pc.needers)])
        if (!holds(g, i)) lacking.push_back(g);
      if (lacking.empty()) continue;
      // Calls f(k, range) for every delivery of the piece to lacking[k], once per delivery.
      const auto each_delivery = [&](auto&& f) {
        const auto merge = [&](const std::vector<GpuId>& receivers, const Range& r) {
          std::size_t k = 0;
          for (GpuId g : receivers) {
            while (k < lacking.size() && lacking[k] < g) ++k;
            if (k == lacking.size()) break;
            if (lacking[k] == g) f(k, r);
          }
        };
        for (auto j = piece_first[static_cast<std::size_t>(i)]; j < piece_first[static_cast<std::size_t>(i) + 1]; ++j) {
          const auto& [u, r] = piece_units[static_cast<std::size_t>(j)];
          merge(direct[static_cast<std::size_t>(u)], *r);
          for (auto c : chains[static_cast<std::size_t>(u)]) merge(reached_[static_cast<std::size_t>(c)], *r);
        }
      };
      first.assign(lacking.size() + 1, 0);
      each_delivery([&](std::size_t k, const Range&) { ++first[k + 1]; });
      for (std::size_t k = 0; k < lacking.size(); ++k) first[k + 1] += first[k];
      got.resize(static_cast<std::size_t>(first.back()));
      next.assign(first.begin(), first.end() - 1);
      each_delivery([&](std::size_t k, const Range& r) { got[static_cast<std::size_t>(next[k]++)] = {r.begin, r.end}; });
      for (std::size_t k = 0; k < lacking.size(); ++k) {
        const auto b = got.begin() + first[k], e = got.begin() + first[k + 1];
        std::sort(b, e);
        check_covered(std::span(b, e), pc.box.elements(), [&] { return describe_piece(i) + " at GPU " + std::to_string(lacking[k]); });
      }
    }
  }

 private:
  struct Range {
    std::int32_t piece;
    std::int64_t begin, end;
  };

  bool holds(GpuId g, std::int32_t piece) const {
    const auto& h = holders_[static_cast<std::size_t>(ts_.pieces[static_cast<std::size_t>(piece)].holders)];
    return std::binary_search(h.begin(), h.end(), g);
  }
  std::string describe_piece(std::int32_t piece) const {
    const auto& pc = ts_.pieces[static_cast<std::size_t>(piece)];
    return "piece " + std::to_string(piece) + " ('" + inv_.tensor(pc.tensor).name + "' " + to_string(pc.box) + ")";
  }
  bool chain_reaches(std::int32_t chain, GpuId g) const {
    const auto& r = reached_[static_cast<std::size_t>(chain)];
    return std::binary_search(r.begin(), r.end(), g);
  }
  // Whether operation `o` leaves its data on GPU g: its dst, or any GPU its chain reaches.
  bool delivers(const Op& o, GpuId g) const { return o.chain < 0 ? o.dst == g : chain_reaches(o.chain, g); }

  // The unit op moves, its ranges computed the first time.
  template <class Where>
  std::int32_t unit_of(const Op& op, const Where& where) {
    const std::int64_t key = (static_cast<std::int64_t>(op.buffer) << 40) | (static_cast<std::int64_t>(op.part) << 20) | op.parts;
    auto [it, fresh] = unit_index_.try_emplace(key, static_cast<std::int32_t>(unit_ranges_.size()));
    if (fresh) {
      std::vector<Range> ranges;
      std::int64_t bytes = 0;
      for_each_in_part(s_.buffers[static_cast<std::size_t>(op.buffer)], op.part, op.parts,
                       [&](std::int32_t piece, std::int64_t b, std::int64_t e) {
                         if (piece < 0 || piece >= s_.piece_count)
                           throw ScheduleError(where() + ": no piece " + std::to_string(piece));
                         const auto& pc = ts_.pieces[static_cast<std::size_t>(piece)];
                         if (b < 0 || e > pc.box.elements())
                           throw ScheduleError(where() + ", " + describe_piece(piece) + ": slice outside the piece");
                         ranges.push_back({piece, b, e});
                         bytes += inv_.wire_bytes(inv_.tensor(pc.tensor), e - b).value;
                       });
      unit_ranges_.push_back(std::move(ranges));
      unit_bytes_.push_back(bytes);
    }
    return it->second;
  }

  // The element ranges `got` (sorted) tile [0, elements) exactly once.
  template <class What>
  static void check_covered(std::span<const std::pair<std::int64_t, std::int64_t>> got, std::int64_t elements,
                            const What& what) {
    if (got.empty()) throw ScheduleError(what() + ": never delivered");
    std::int64_t pos = 0;
    for (const auto& [b, e] : got) {
      if (b < pos)
        throw ScheduleError(what() + ": elements " + std::to_string(b) + ".." + std::to_string(std::min(e, pos)) +
                            " delivered twice");
      if (b > pos) throw ScheduleError(what() + ": elements " + std::to_string(pos) + ".." + std::to_string(b) + " never delivered");
      pos = e;
    }
    if (pos != elements)
      throw ScheduleError(what() + ": elements " + std::to_string(pos) + ".." + std::to_string(elements) + " never delivered");
  }

  const Schedule& s_;
  const TransferSet& ts_;
  const Inventory& inv_;
  std::vector<std::vector<GpuId>> holders_, needers_;  // per rank set: its GPUs, sorted
  std::vector<std::vector<GpuId>> reached_;            // per chain: the GPUs it reaches, sorted
  std::unordered_map<std::int64_t, std::int32_t> unit_index_;  // (buffer, part, parts) -> unit
  std::vector<std::vector<Range>> unit_ranges_;
  std::vector<std::int64_t> unit_bytes_;
  std::vector<std::int32_t> op_unit_;
  std::vector<Range> received_;  // check_op's scratch
};

}  // namespace

void encode_delta(Schedule& s, const TransferSet& ts, const Inventory& inv) {
  if (!inv.delta().active()) return;
  auto range_bytes = [&](std::int32_t piece, std::int64_t b, std::int64_t e) {
    return inv.wire_bytes(inv.tensor(ts.pieces[static_cast<std::size_t>(piece)].tensor), e - b);
  };
  for (Buffer& buf : s.buffers) {
    buf.bytes = Bytes{0};
    for (const PieceSlice& sl : buf.slices) buf.bytes += range_bytes(sl.piece, sl.offset, sl.offset + sl.count);
  }
  std::unordered_map<std::int64_t, Bytes> parts;  // by (buffer, part, parts), as the validator's units
  for (Op& op : s.ops) {
    if (op.parts <= 1) {
      op.bytes = s.buffers[static_cast<std::size_t>(op.buffer)].bytes;
      continue;
    }
    const std::int64_t key = (static_cast<std::int64_t>(op.buffer) << 40) | (static_cast<std::int64_t>(op.part) << 20) | op.parts;
    const auto placed = parts.try_emplace(key, Bytes{0});
    Bytes& bytes = placed.first->second;
    if (placed.second)
      for_each_in_part(s.buffers[static_cast<std::size_t>(op.buffer)], op.part, op.parts,
                       [&](std::int32_t piece, std::int64_t b, std::int64_t e) { bytes += range_bytes(piece, b, e); });
    op.bytes = bytes;
  }
}

void validate(const Schedule& s, const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst) {
  if (s.piece_count != static_cast<std::int32_t>(ts.pieces.size()))
    throw ScheduleError("the schedule was built for " + std::to_string(s.piece_count) + " pieces, the plan has " +
                        std::to_string(ts.pieces.size()));
  Validator v(s, ts, inv, src, dst);
  v.check_chains();
  for (std::size_t i = 0; i < s.ops.size(); ++i) v.check_op(i);
  v.check_deliveries();
}

void check_schedule_gpus(const Schedule& s, std::int32_t gpu_count) {
  auto check = [&](GpuId g, const std::string& where) {
    if (g < 0 || g >= gpu_count)
      throw ScheduleError(where + ": GPU " + std::to_string(g) + " is not in the topology (0.." +
                          std::to_string(gpu_count - 1) + ")");
  };
  for (const auto& op : s.ops) {
    check(op.src, "operation " + std::to_string(op.id) + " src");
    check(op.dst, "operation " + std::to_string(op.id) + " dst");
  }
  for (std::size_t c = 0; c < s.chains.size(); ++c)
    for (const auto& h : s.chains[c].hops) {
      check(h.from, "chain " + std::to_string(c) + " hop");
      check(h.to, "chain " + std::to_string(c) + " hop");
    }
}

std::vector<BudgetRun> budget_runs(const std::vector<Bytes>& budget) {
  std::vector<BudgetRun> runs;
  for (std::size_t g = 0; g < budget.size(); ++g) {
    if (!runs.empty() && runs.back().bytes == budget[g] && runs.back().first + runs.back().count == static_cast<GpuId>(g)) {
      ++runs.back().count;
      continue;
    }
    runs.push_back({static_cast<GpuId>(g), 1, budget[g]});
  }
  return runs;
}

namespace {
nlohmann::json budget_runs_json(const std::vector<Bytes>& budget) {
  nlohmann::json runs = nlohmann::json::array();
  for (const BudgetRun& r : budget_runs(budget)) runs.push_back({r.first, r.count, r.bytes.value});
  return runs;
}

}  // namespace

nlohmann::json to_json(const Schedule& s) {
  nlohmann::json j;
  j["format"] = kScheduleFormat;
  j["scenario"] = s.scenario;
  if (!s.scenario_file.empty()) j["scenario_file"] = s.scenario_file;
  j["params"] = to_json(s.params);
  j["piece_count"] = s.piece_count;
  j["staging"] = {{"slots", s.slots}, {"budget", budget_runs_json(s.budget)}};
  auto& buffers = j["buffers"] = nlohmann::json::array();
  for (const auto& b : s.buffers) {
    nlohmann::json sl = nlohmann::json::array();
    for (const auto& x : b.slices) sl.push_back({x.piece, x.offset, x.count});
    buffers.push_back({{"bytes", b.bytes.value}, {"slices", std::move(sl)}});
  }
  auto& chains = j["chains"] = nlohmann::json::array();
  for (const auto& c : s.chains) {
    nlohmann::json hops = nlohmann::json::array();
    for (const auto& h : c.hops) {
      if (h.path >= 0) hops.push_back({h.from, h.to, h.path});
      else hops.push_back({h.from, h.to});
    }
    chains.push_back({{"chunk_bytes", c.chunk.value}, {"hops", std::move(hops)}});
  }
  auto& ops = j["ops"] = nlohmann::json::array();
  for (const auto& o : s.ops) {
    nlohmann::json op = {{"id", o.id},         {"src", o.src},     {"dst", o.dst},
                         {"buffer", o.buffer}, {"part", o.part},   {"parts", o.parts},
                         {"bytes", o.bytes.value}, {"phase", to_string(o.phase)}};
    const auto after = s.after_of(o);
    op["after"] = std::vector<std::int64_t>(after.begin(), after.end());
    if (o.chain >= 0) op["chain"] = o.chain;
    ops.push_back(std::move(op));
  }
  return j;
}

// Every value is read through the checked layer (checked.hpp): integers in their type's range, no
// bool or float taken for an integer, and every index checked against what it indexes in the
// document itself (pieces, buffers, chains, earlier operations), so nothing downstream indexes out
// of range. Whether the pieces match a plan is validate()'s business.
// Stays whole: one reader of the document's sections in order, each checked against the ones
// before it (an op's buffer, chain and after ids), as the schedule-format table lists them.
Schedule schedule_from_json(const nlohmann::json& j, const std::string& file, const std::string& path) {
  using namespace checked;
  const JsonWhere root{file, path};
  constexpr std::int32_t kI32 = std::numeric_limits<std::int32_t>::max();
  constexpr std::int64_t kI64 = std::numeric_limits<std::int64_t>::max();
  const auto& fmt = member(j, "format", root);
  if (fmt != kScheduleFormat)
    root.at("format").fail("not a " + std::string(kScheduleFormat) + " document (format " + cut(fmt.dump()) +
                           "); schedules written by an older reshard must be planned again");
  Schedule s;
  s.scenario = string(member(j, "scenario", root), root.at("scenario"));
  if (j.contains("scenario_file")) s.scenario_file = string(j.at("scenario_file"), root.at("scenario_file"));
  s.params = strategy_params_from_json(member(j, "params", root), root.at("params"));
  s.piece_count = integer_as<std::int32_t>(member(j, "piece_count", root), root.at("piece_count"), 0, kI32);
  {
    const auto stw = root.at("staging");
    const auto& st = member(j, "staging", root);
    s.slots = integer_as<std::int32_t>(member(st, "slots", stw), stw.at("slots"), kMinSlots, kMaxSlots);
    const auto rw = stw.at("budget");
    const auto& runs = array(member(st, "budget", stw), rw);
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const auto xw = rw.at(k);
      const auto& x = array(runs[k], xw);
      if (x.size() != 3) xw.fail("expected [first GPU, count, bytes]");
      const auto first = integer_as<GpuId>(x[0], xw.at(std::size_t{0}), static_cast<GpuId>(s.budget.size()), kMaxGpus - 1);
      const auto count = integer_as<GpuId>(x[1], xw.at(1), 1, kMaxGpus - first);
      const Bytes bytes{integer(x[2], xw.at(2), 0, kI64)};
      s.budget.resize(static_cast<std::size_t>(first), Bytes{0});
      s.budget.resize(static_cast<std::size_t>(first + count), bytes);
    }
  }
  const auto bw = root.at("buffers");
  const auto& buffers = array(member(j, "buffers", root), bw);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const auto w = bw.at(i);
    Buffer buf;
    buf.bytes = Bytes{integer(member(buffers[i], "bytes", w), w.at("bytes"), 0, kI64)};
    const auto sw = w.at("slices");
    const auto& slices = array(member(buffers[i], "slices", w), sw);
    for (std::size_t k = 0; k < slices.size(); ++k) {
      const auto xw = sw.at(k);
      const auto& x = array(slices[k], xw);
      if (x.size() != 3) xw.fail("expected [piece, offset, count]");
      buf.slices.push_back({integer_as<std::int32_t>(x[0], xw.at(std::size_t{0}), 0, s.piece_count - 1),
                            integer(x[1], xw.at(1), 0, kI64), integer(x[2], xw.at(2), 0, kI64)});
    }
    s.buffers.push_back(std::move(buf));
  }
  const auto cw = root.at("chains");
  const auto& chains = array(member(j, "chains", root), cw);
  for (std::size_t i = 0; i < chains.size(); ++i) {
    const auto w = cw.at(i);
    Chain chain;
    chain.chunk = Bytes{integer(member(chains[i], "chunk_bytes", w), w.at("chunk_bytes"), 0, kI64)};
    const auto hw = w.at("hops");
    const auto& hops = array(member(chains[i], "hops", w), hw);
    for (std::size_t k = 0; k < hops.size(); ++k) {
      const auto xw = hw.at(k);
      const auto& h = array(hops[k], xw);
      if (h.size() != 2 && h.size() != 3) xw.fail("expected [from, to] or [from, to, path]");
      chain.hops.push_back({integer_as<GpuId>(h[0], xw.at(std::size_t{0}), 0, kI32), integer_as<GpuId>(h[1], xw.at(1), 0, kI32),
                            h.size() > 2 ? integer_as<std::int32_t>(h[2], xw.at(2), 0, kI32) : -1});
    }
    if (chain.hops.empty()) hw.fail("a chain needs at least one hop");
    s.chains.push_back(std::move(chain));
  }
  const auto ow = root.at("ops");
  const auto& ops = array(member(j, "ops", root), ow);
  const auto buffer_max = static_cast<std::int32_t>(s.buffers.size()) - 1;
  const auto chain_max = static_cast<std::int32_t>(s.chains.size()) - 1;
  s.ops.reserve(ops.size());
  std::vector<std::int64_t> ids;  // op i's `after` ids, read
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto w = ow.at(i);
    const auto& o = ops[i];
    Op op;
    op.id = integer(member(o, "id", w), w.at("id"), static_cast<std::int64_t>(i), static_cast<std::int64_t>(i));
    op.src = integer_as<GpuId>(member(o, "src", w), w.at("src"), 0, kI32);
    op.dst = integer_as<GpuId>(member(o, "dst", w), w.at("dst"), 0, kI32);
    if (buffer_max < 0) w.at("buffer").fail("the schedule has no buffers");
    op.buffer = integer_as<std::int32_t>(member(o, "buffer", w), w.at("buffer"), 0, buffer_max);
    op.parts = integer_as<std::int32_t>(member(o, "parts", w), w.at("parts"), 1, kMaxParts);
    op.part = integer_as<std::int32_t>(member(o, "part", w), w.at("part"), 0, op.parts - 1);
    op.bytes = Bytes{integer(member(o, "bytes", w), w.at("bytes"), 0, kI64)};
    if (o.is_object() && o.contains("chain")) {
      if (chain_max < 0) w.at("chain").fail("the schedule has no chains");
      op.chain = integer_as<std::int32_t>(o["chain"], w.at("chain"), 0, chain_max);
    }
    const std::string phase = string(member(o, "phase", w), w.at("phase"));
    const auto ph = op_phase_named(phase);
    if (!ph) w.at("phase").fail("unknown phase " + quote(phase));
    op.phase = *ph;
    const auto aw = w.at("after");
    const auto& after = array(member(o, "after", w), aw);
    ids.clear();
    for (std::size_t k = 0; k < after.size(); ++k) {
      if (op.id == 0) aw.at(k).fail("the first operation cannot wait for another");
      ids.push_back(integer(after[k], aw.at(k), 0, op.id - 1));
    }
    s.add_op(op, ids);
  }
  return s;
}

}  // namespace reshard::model

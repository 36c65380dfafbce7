#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "reshard/model/chain.hpp"
#include "reshard/model/json_file.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/schedule.hpp"

namespace reshard::model {

namespace {
constexpr const char* kScheduleFormat = "reshard-schedule-2";
}  // namespace

std::string op_problem(const Schedule& s, std::size_t i, std::int32_t gpu_count, bool content) {
  const Op& op = s.ops[i];
  if (op.id != static_cast<std::int64_t>(i))
    return "its id is " + std::to_string(op.id) + " at position " + std::to_string(i) + "; ids must be dense and ascending";
  for (auto a : op.after)
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

namespace {

// The validator works on units: a unit is (buffer, part, parts), the exact element ranges one
// operation moves. Its ranges are computed once per unit, however many operations move it (a ring
// broadcast moves the same unit once per hop), so the cost is the number of operations plus the
// slices of the units plus, for every piece, its needers times the units holding it.
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
    const std::string where = "operation " + std::to_string(op.id) + " (" + to_string(op.phase) + ", GPU " +
                              std::to_string(op.src) + " -> " + std::to_string(op.dst) + ")";
    if (const std::string problem = op_problem(s_, i, -1, true); !problem.empty()) throw ScheduleError(where + ": " + problem);
    if (op.chain >= 0) {
      const Chain& c = s_.chains[static_cast<std::size_t>(op.chain)];
      if (c.hops.front().from != op.src)
        throw ScheduleError(where + ": chain " + std::to_string(op.chain) + " is rooted at GPU " +
                            std::to_string(c.hops.front().from) + ", not at the op's src");
      if (c.hops.back().to != op.dst)
        throw ScheduleError(where + ": a chain op's dst must be its last hop's receiver, GPU " + std::to_string(c.hops.back().to));
    }
    const std::int32_t u = unit_of(op, where);
    if (op.bytes.value != unit_bytes_[static_cast<std::size_t>(u)])
      throw ScheduleError(where + ": carries " + std::to_string(op.bytes.value) + " bytes, but part " +
                          std::to_string(op.part) + " of " + std::to_string(op.parts) + " of buffer " +
                          std::to_string(op.buffer) + " holds " + std::to_string(unit_bytes_[static_cast<std::size_t>(u)]));
    op_unit_[i] = u;
    // The sender holds every range as a source, or received it in an operation it waits for.
    for (auto a : op.after)
      if (delivers(s_.ops[static_cast<std::size_t>(a)], op.src) && op_unit_[static_cast<std::size_t>(a)] == u) return;
    for (const auto& r : unit_ranges_[static_cast<std::size_t>(u)]) {
      if (holds(op.src, r.piece)) continue;
      bool ok = false;
      for (auto a : op.after) {
        if (!delivers(s_.ops[static_cast<std::size_t>(a)], op.src)) continue;
        for (const auto& q : unit_ranges_[static_cast<std::size_t>(op_unit_[static_cast<std::size_t>(a)])])
          if (q.piece == r.piece && q.begin <= r.begin && r.end <= q.end) ok = true;
        if (ok) break;
      }
      if (!ok)
        throw ScheduleError(where + ", " + describe_piece(r.piece) + ": GPU " + std::to_string(op.src) +
                            " forwards elements it neither holds nor received before");
    }
  }

  // Every needer GPU that does not hold a piece receives each of its elements exactly once.
  void check_deliveries() const {
    // How often each GPU receives each unit from plain transfers, and the chains that carry each
    // unit (every GPU a chain reaches receives its unit once).
    std::unordered_map<std::int64_t, std::int32_t> received;
    auto rkey = [](GpuId g, std::int32_t u) { return (static_cast<std::int64_t>(g) << 32) | static_cast<std::uint32_t>(u); };
    std::vector<std::vector<std::int32_t>> unit_chains(unit_ranges_.size());
    for (const auto& op : s_.ops) {
      const std::int32_t u = op_unit_[static_cast<std::size_t>(op.id)];
      if (op.chain < 0) ++received[rkey(op.dst, u)];
      else unit_chains[static_cast<std::size_t>(u)].push_back(op.chain);
    }
    auto times_received = [&](GpuId g, std::int32_t u) {
      std::int32_t n = 0;
      if (auto it = received.find(rkey(g, u)); it != received.end()) n = it->second;
      for (auto c : unit_chains[static_cast<std::size_t>(u)]) n += chain_reaches(c, g) ? 1 : 0;
      return n;
    };
    // The units holding each piece.
    std::vector<std::vector<std::pair<std::int32_t, const Range*>>> piece_units(ts_.pieces.size());
    for (std::size_t u = 0; u < unit_ranges_.size(); ++u)
      for (const auto& r : unit_ranges_[u]) piece_units[static_cast<std::size_t>(r.piece)].push_back({static_cast<std::int32_t>(u), &r});
    std::vector<std::pair<std::int64_t, std::int64_t>> got;
    for (std::int32_t i = 0; i < s_.piece_count; ++i) {
      const auto& pc = ts_.pieces[static_cast<std::size_t>(i)];
      for (auto g : needers_[static_cast<std::size_t>(pc.needers)]) {
        if (holds(g, i)) continue;
        got.clear();
        for (const auto& [u, r] : piece_units[static_cast<std::size_t>(i)])
          for (std::int32_t k = times_received(g, u); k > 0; --k) got.push_back({r->begin, r->end});
        check_covered(got, pc.box.elements(), describe_piece(i) + " at GPU " + std::to_string(g));
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
  std::int32_t unit_of(const Op& op, const std::string& where) {
    const std::int64_t key = (static_cast<std::int64_t>(op.buffer) << 40) | (static_cast<std::int64_t>(op.part) << 20) | op.parts;
    auto [it, fresh] = unit_index_.try_emplace(key, static_cast<std::int32_t>(unit_ranges_.size()));
    if (fresh) {
      std::vector<Range> ranges;
      std::int64_t bytes = 0;
      for_each_in_part(s_.buffers[static_cast<std::size_t>(op.buffer)], op.part, op.parts,
                       [&](std::int32_t piece, std::int64_t b, std::int64_t e) {
                         if (piece < 0 || piece >= s_.piece_count)
                           throw ScheduleError(where + ": no piece " + std::to_string(piece));
                         const auto& pc = ts_.pieces[static_cast<std::size_t>(piece)];
                         if (b < 0 || e > pc.box.elements())
                           throw ScheduleError(where + ", " + describe_piece(piece) + ": slice outside the piece");
                         ranges.push_back({piece, b, e});
                         bytes += (e - b) * dtype_size(inv_.tensor(pc.tensor).dtype);
                       });
      unit_ranges_.push_back(std::move(ranges));
      unit_bytes_.push_back(bytes);
    }
    return it->second;
  }

  // The element ranges `got` (sorted here) tile [0, elements) exactly once.
  static void check_covered(std::vector<std::pair<std::int64_t, std::int64_t>>& got, std::int64_t elements,
                            const std::string& what) {
    if (got.empty()) throw ScheduleError(what + ": never delivered");
    std::sort(got.begin(), got.end());
    std::int64_t pos = 0;
    for (const auto& [b, e] : got) {
      if (b < pos)
        throw ScheduleError(what + ": elements " + std::to_string(b) + ".." + std::to_string(std::min(e, pos)) +
                            " delivered twice");
      if (b > pos) throw ScheduleError(what + ": elements " + std::to_string(pos) + ".." + std::to_string(b) + " never delivered");
      pos = e;
    }
    if (pos != elements)
      throw ScheduleError(what + ": elements " + std::to_string(pos) + ".." + std::to_string(elements) + " never delivered");
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
};

}  // namespace

void validate(const Schedule& s, const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst) {
  if (s.piece_count != static_cast<std::int32_t>(ts.pieces.size()))
    throw ScheduleError("the schedule was built for " + std::to_string(s.piece_count) + " pieces, the plan has " +
                        std::to_string(ts.pieces.size()));
  Validator v(s, ts, inv, src, dst);
  v.check_chains();
  for (std::size_t i = 0; i < s.ops.size(); ++i) v.check_op(i);
  v.check_deliveries();
}

nlohmann::json to_json(const Schedule& s) {
  nlohmann::json j;
  j["format"] = kScheduleFormat;
  j["scenario"] = s.scenario;
  j["params"] = {{"strategy", to_string(s.params.strategy)}, {"chunk_bytes", s.params.chunk.value}, {"channels", s.params.channels},
                 {"max_chain", s.params.max_chain}, {"bucket_bytes", s.params.bucket.value},
                 {"rail_aligned_ingress", s.params.rail_aligned_ingress}, {"relay_ingress", s.params.relay_ingress},
                 {"relay_egress", s.params.relay_egress}};
  j["piece_count"] = s.piece_count;
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
                         {"bytes", o.bytes.value}, {"phase", to_string(o.phase)}, {"after", o.after}};
    if (o.chain >= 0) op["chain"] = o.chain;
    ops.push_back(std::move(op));
  }
  return j;
}

Schedule schedule_from_json(const nlohmann::json& j) {
  try {
    if (j.at("format") != kScheduleFormat)
      throw ScheduleError("not a " + std::string(kScheduleFormat) + " document (format " + j.at("format").dump() +
                          "); schedules written by an older reshard must be planned again");
    Schedule s;
    s.scenario = j.at("scenario").get<std::string>();
    const auto& p = j.at("params");
    try {
      s.params.strategy = strategy_named(p.at("strategy").get<std::string>());
    } catch (const PlanError& e) {
      throw ScheduleError(std::string("params.strategy: ") + e.what());
    }
    s.params.chunk = Bytes{p.at("chunk_bytes").get<std::int64_t>()};
    s.params.channels = p.at("channels").get<std::int32_t>();
    s.params.max_chain = p.at("max_chain").get<std::int32_t>();
    s.params.bucket = Bytes{p.at("bucket_bytes").get<std::int64_t>()};
    s.params.rail_aligned_ingress = p.at("rail_aligned_ingress").get<bool>();
    s.params.relay_ingress = p.at("relay_ingress").get<bool>();
    s.params.relay_egress = p.at("relay_egress").get<bool>();
    s.piece_count = j.at("piece_count").get<std::int32_t>();
    for (const auto& b : j.at("buffers")) {
      Buffer buf;
      buf.bytes = Bytes{b.at("bytes").get<std::int64_t>()};
      for (const auto& x : b.at("slices")) buf.slices.push_back({x.at(0).get<std::int32_t>(), x.at(1).get<std::int64_t>(), x.at(2).get<std::int64_t>()});
      s.buffers.push_back(std::move(buf));
    }
    for (const auto& c : j.at("chains")) {
      Chain chain;
      chain.chunk = Bytes{c.at("chunk_bytes").get<std::int64_t>()};
      for (const auto& h : c.at("hops"))
        chain.hops.push_back({h.at(0).get<GpuId>(), h.at(1).get<GpuId>(), h.size() > 2 ? h.at(2).get<std::int32_t>() : -1});
      s.chains.push_back(std::move(chain));
    }
    static const std::unordered_map<std::string, OpPhase> phases = {
        {"direct", OpPhase::Direct}, {"gather", OpPhase::Gather}, {"broadcast", OpPhase::Broadcast},
        {"ingress", OpPhase::Ingress}, {"fanout", OpPhase::FanOut}, {"forward", OpPhase::Forward}};
    for (const auto& o : j.at("ops")) {
      Op op;
      op.id = o.at("id").get<std::int64_t>();
      op.src = o.at("src").get<GpuId>();
      op.dst = o.at("dst").get<GpuId>();
      op.buffer = o.at("buffer").get<std::int32_t>();
      op.part = o.at("part").get<std::int32_t>();
      op.parts = o.at("parts").get<std::int32_t>();
      op.bytes = Bytes{o.at("bytes").get<std::int64_t>()};
      if (auto c = o.find("chain"); c != o.end()) {
        op.chain = c->get<std::int32_t>();
        if (op.chain < 0 || op.chain >= static_cast<std::int32_t>(s.chains.size()))
          throw ScheduleError("operation " + std::to_string(op.id) + ": no chain " + std::to_string(op.chain));
      }
      const auto ph = phases.find(o.at("phase").get<std::string>());
      if (ph == phases.end()) throw ScheduleError("operation " + std::to_string(op.id) + ": unknown phase");
      op.phase = ph->second;
      op.after = o.at("after").get<std::vector<std::int64_t>>();
      s.ops.push_back(std::move(op));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw ScheduleError(std::string("malformed schedule JSON: ") + e.what());
  }
}

Schedule read_schedule_file(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "schedule file");
  try {
    return schedule_from_json(j);
  } catch (const ScheduleError& e) {
    throw ConfigError(path, 0, "", e.what());
  }
}

}  // namespace reshard::model

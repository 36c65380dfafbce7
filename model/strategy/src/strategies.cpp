#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <functional>
#include <iterator>
#include <limits>
#include <sstream>
#include <map>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "reshard/model/errors.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"

namespace reshard::model {

namespace {
// An ingress off the sender's rail detours over a spine: the choice counts it as this fraction of
// the stripe's bytes of extra load, so rail alignment wins only between near-equal candidates.
constexpr double kRailDetourWeight = 0.25;
// NVIDIA's M2N reshard pipelines its hierarchical ring in 256 KB chunks (its default).
constexpr Bytes kM2NRingChunk{256 << 10};
}  // namespace

namespace {

bool is_ffn(TensorClass c) {
  return c == TensorClass::DenseFFN || c == TensorClass::ExpertFFN || c == TensorClass::SharedExpert;
}

}  // namespace

struct ScheduleBasis::Data {
  // Needers of a class in one NVLink domain, and the class's holders there (none: the domain is
  // remote, its needers are reached through an ingress GPU).
  struct DomainNeed {
    std::int32_t domain = 0;
    std::vector<GpuId> receivers;  // sorted
    std::vector<GpuId> local;      // holders in the domain, in holder order
  };
  struct PieceClass {
    Buffer buffer;  // the class's pieces, whole, in piece order
    double bytes = 0;
    RankSetId holders = 0;
    std::vector<GpuId> receivers;     // the needers that do not hold it, sorted
    std::vector<DomainNeed> domains;  // by domain, ascending
  };
  enum List : std::size_t { kAll, kFfn, kRest, kLists };

  const TransferSet& ts;
  const Inventory& inv;
  const ShardMap& src;
  const ShardMap& dst;
  const Topology& topo;
  std::vector<std::int32_t> domain, rail;            // per GPU
  std::vector<std::vector<GpuId>> holders, needers;  // per rank set of src / dst: its GPUs, sorted
  std::array<std::vector<std::int32_t>, kLists> pieces;
  std::array<std::vector<PieceClass>, kLists> classes;
  std::vector<Bytes> budget;  // per GPU; 0: unbounded

  Data(const TransferSet& ts_, const Inventory& inv_, const ShardMap& src_, const ShardMap& dst_, const Topology& topo_,
       std::vector<Bytes> budget_)
      : ts(ts_), inv(inv_), src(src_), dst(dst_), topo(topo_), budget(std::move(budget_)) {
    for (GpuId g = 0; g < topo.gpu_count(); ++g) {
      domain.push_back(topo.domain_of(g));
      rail.push_back(topo.rail_of(g));
    }
    holders.resize(static_cast<std::size_t>(src.rank_set_count()));
    needers.resize(static_cast<std::size_t>(dst.rank_set_count()));
    for (std::size_t i = 0; i < ts.pieces.size(); ++i) {
      const auto piece = static_cast<std::int32_t>(i);
      auto& h = holders[static_cast<std::size_t>(ts.pieces[i].holders)];
      if (h.empty()) h = src.gpus_of(ts.pieces[i].holders);
      auto& n = needers[static_cast<std::size_t>(ts.pieces[i].needers)];
      if (n.empty()) n = dst.gpus_of(ts.pieces[i].needers);
      pieces[kAll].push_back(piece);
      pieces[is_ffn(inv.tensor(ts.pieces[i].tensor).cls) ? kFfn : kRest].push_back(piece);
    }
    for (std::size_t list = 0; list < kLists; ++list) classes[list] = group(pieces[list]);
  }

  // Pieces grouped by (holder set, needer set): pieces of one class travel together.
  // Classes in (holders, needers) order, pieces in their given order within a class: one hash
  // lookup per piece, then the few classes sorted by key.
  std::vector<PieceClass> group(const std::vector<std::int32_t>& list) const {
    std::unordered_map<std::uint64_t, std::size_t> index;  // (holders, needers) packed -> class
    std::vector<std::pair<std::uint64_t, std::vector<std::int32_t>>> by;
    for (auto i : list) {
      const auto& pc = ts.pieces[static_cast<std::size_t>(i)];
      const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pc.holders)) << 32) |
                                static_cast<std::uint32_t>(pc.needers);
      const auto [it, fresh] = index.try_emplace(key, by.size());
      if (fresh) by.push_back({key, {}});
      by[it->second].second.push_back(i);
    }
    std::sort(by.begin(), by.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<PieceClass> out;
    out.reserve(by.size());
    for (const auto& [key, members] : by) {
      PieceClass c;
      c.buffer.slices.reserve(members.size());
      for (auto i : members) {
        const auto& pc = ts.pieces[static_cast<std::size_t>(i)];
        c.buffer.slices.push_back({i, 0, pc.elements});
        c.buffer.bytes += pc.bytes;
        c.bytes += pc.bytes.as_double();
      }
      const auto& first = ts.pieces[static_cast<std::size_t>(members.front())];
      c.holders = first.holders;
      const auto& H = holders[static_cast<std::size_t>(first.holders)];
      for (auto g : needers[static_cast<std::size_t>(first.needers)])
        if (!std::binary_search(H.begin(), H.end(), g)) c.receivers.push_back(g);
      std::map<std::int32_t, std::vector<GpuId>> by_domain;
      for (auto n : c.receivers) by_domain[domain[static_cast<std::size_t>(n)]].push_back(n);
      for (auto& [d, gpus] : by_domain) {
        DomainNeed need{d, std::move(gpus), {}};
        for (auto h : H)
          if (domain[static_cast<std::size_t>(h)] == d) need.local.push_back(h);
        c.domains.push_back(std::move(need));
      }
      out.push_back(std::move(c));
    }
    return out;
  }
};

// The builders' way to a basis's shared data (ScheduleBasis::Data is private to them).
struct BasisAccess {
  static const ScheduleBasis::Data& of(const ScheduleBasis& b) { return *b.data_; }
};

ScheduleBasis::ScheduleBasis(const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst,
                             const Topology& topo, std::vector<Bytes> budget)
    : data_(std::make_unique<const Data>(ts, inv, src, dst, topo, std::move(budget))) {}
ScheduleBasis::~ScheduleBasis() = default;
const TransferSet& ScheduleBasis::transfers() const { return data_->ts; }
const Inventory& ScheduleBasis::inventory() const { return data_->inv; }
const ShardMap& ScheduleBasis::source() const { return data_->src; }
const ShardMap& ScheduleBasis::destination() const { return data_->dst; }
const Topology& ScheduleBasis::topology() const { return data_->topo; }
const std::vector<Bytes>& ScheduleBasis::budget() const { return data_->budget; }

namespace {

using Basis = ScheduleBasis::Data;

class Builder {
 public:
  Builder(const Basis& basis, const StrategyParams& p, Schedule& out)
      : b_(basis), ts_(basis.ts), inv_(basis.inv), dst_(basis.dst), topo_(basis.topo), p_(p), s_(out),
        egress_(static_cast<std::size_t>(topo_.gpu_count()), 0.0),
        ingress_(static_cast<std::size_t>(topo_.gpu_count()), 0.0),
        nvlink_out_(static_cast<std::size_t>(topo_.gpu_count()), 0.0),
        path_load_(static_cast<std::size_t>(topo_.link_count()), 0.0) {}

  // The topology's domain and rail of a GPU, from tables (looked up for every candidate of every stripe).
  std::int32_t domain_of(GpuId g) const { return b_.domain[static_cast<std::size_t>(g)]; }
  std::int32_t rail_of(GpuId g) const { return b_.rail[static_cast<std::size_t>(g)]; }

  const std::vector<GpuId>& holder_gpus(RankSetId id) const { return b_.holders[static_cast<std::size_t>(id)]; }
  // The staging budget of GPU g (0: unbounded).
  std::int64_t g_budget(GpuId g) const {
    return static_cast<std::size_t>(g) < b_.budget.size() ? b_.budget[static_cast<std::size_t>(g)].value : 0;
  }

  // A buffer of these slices, with their bytes.
  Buffer slices_buffer(std::vector<PieceSlice> slices) const {
    Buffer b;
    for (const PieceSlice& sl : slices) {
      const auto& pc = ts_.pieces[static_cast<std::size_t>(sl.piece)];
      b.bytes += Bytes{sl.count * dtype_size(inv_.tensor(pc.tensor).dtype)};
    }
    b.slices = std::move(slices);
    return b;
  }
  std::int32_t add_buffer(Buffer b) {
    s_.buffers.push_back(std::move(b));
    return static_cast<std::int32_t>(s_.buffers.size() - 1);
  }
  // An op moving part `part` of `parts` of `buffer` from GPU `from` to GPU `to`, or along chain
  // `chain` (from its root, `to` its last receiver).
  std::int64_t add_op(GpuId from, GpuId to, std::int32_t buffer, std::int32_t part, std::int32_t parts, OpPhase phase,
                      std::span<const std::int64_t> after, std::int32_t chain = -1) {
    Op op;
    op.src = from;
    op.dst = to;
    op.chain = chain;
    op.buffer = buffer;
    op.part = part;
    op.parts = parts;
    op.phase = phase;
    op.bytes = part_bytes(buffer, part, parts);
    // Load balancing looks at the network: bytes leaving and entering GPUs through their NICs, on
    // every hop of a chain.
    auto count = [&](GpuId a, GpuId b) {
      if (domain_of(a) == domain_of(b)) return;
      egress_[static_cast<std::size_t>(a)] += op.bytes.as_double();
      ingress_[static_cast<std::size_t>(b)] += op.bytes.as_double();
    };
    if (chain < 0) count(from, to);
    else
      for (const ChainHop& h : s_.chains[static_cast<std::size_t>(chain)].hops) count(h.from, h.to);
    return s_.add_op(op, after);
  }
  std::int64_t add_chain_op(std::int32_t chain, std::int32_t buffer, std::int32_t part, std::int32_t parts, OpPhase phase,
                            std::span<const std::int64_t> after) {
    const Chain& c = s_.chains[static_cast<std::size_t>(chain)];
    return add_op(c.hops.front().from, c.hops.back().to, buffer, part, parts, phase, after, chain);
  }

  // A chain (schedule.hpp) in the schedule's table; returns its index. A hop with several equal
  // paths is pinned to the one whose links carry the least so far in all (the links every path
  // shares add the same to each; bytes: what the chain is expected to carry), so that the chains
  // spread over the spines.
  std::int32_t add_chain(std::vector<ChainHop> hops, Bytes chunk, double bytes) {
    for (ChainHop& h : hops) {
      const RouteView r = topo_.route_view(h.from, h.to);
      if (r.paths < 2) continue;
      r.path_sums(path_load_, path_sums_);
      h.path = static_cast<std::int32_t>(std::min_element(path_sums_.begin(), path_sums_.end()) - path_sums_.begin());
      r.path_links(h.path, path_links_);
      for (LinkId l : path_links_) path_load_[static_cast<std::size_t>(l)] += bytes;
    }
    s_.chains.push_back({std::move(hops), chunk});
    return static_cast<std::int32_t>(s_.chains.size() - 1);
  }
  // The bytes of part `part` of `parts` of a buffer: its elements (for_each_in_part) times their
  // dtype sizes. All parts of a buffer are computed at once and kept for the buffer's next operation.
  Bytes part_bytes(std::int32_t buffer, std::int32_t part, std::int32_t parts) {
    const auto& b = s_.buffers[static_cast<std::size_t>(buffer)];
    if (parts == 1) return b.bytes;
    if (part_bytes_of_ != buffer || static_cast<std::int32_t>(part_bytes_.size()) != parts) {
      part_bytes_of_ = buffer;
      part_bytes_.assign(static_cast<std::size_t>(parts), Bytes{0});
      for (std::int32_t c = 0; c < parts; ++c)
        for_each_in_part(b, c, parts, [&](std::int32_t piece, std::int64_t begin, std::int64_t end) {
          const auto& pc = ts_.pieces[static_cast<std::size_t>(piece)];
          part_bytes_[static_cast<std::size_t>(c)] += Bytes{(end - begin) * dtype_size(inv_.tensor(pc.tensor).dtype)};
        });
    }
    return part_bytes_[static_cast<std::size_t>(part)];
  }

  // The least-loaded GPU among `cands` by `load`, preferring those `prefer` accepts.
  template <class Pred>
  GpuId least_loaded(const std::vector<GpuId>& cands, const std::vector<double>& load, Pred prefer) {
    GpuId best = -1;
    bool best_pref = false;
    for (auto g : cands) {
      const bool pref = prefer(g);
      if (best < 0 || (pref && !best_pref) ||
          (pref == best_pref && load[static_cast<std::size_t>(g)] < load[static_cast<std::size_t>(best)])) {
        best = g;
        best_pref = pref;
      }
    }
    return best;
  }

  // The first of the least loaded GPUs of a fixed list, as least_loaded() (no preference) scans
  // for it, in O(log n) a pick instead of O(n): a heap of (load when pushed, position in the list).
  // Loads only grow, so an entry is never above its GPU's load; one below it is pushed again with
  // the load of now, until the top is current -- then no GPU has less, nor as much earlier in the list.
  class LeastLoadedQueue {
   public:
    LeastLoadedQueue(const std::vector<GpuId>& gpus, const std::vector<double>& load) : gpus_(&gpus), load_(&load) {
      heap_.reserve(gpus.size());
      for (std::size_t i = 0; i < gpus.size(); ++i) heap_.push_back({now(i), i});
      std::make_heap(heap_.begin(), heap_.end(), std::greater<>{});
    }
    // -1 for an empty list. The GPU picked stays in the list, at its load when next asked.
    GpuId pick() {
      if (last_ < gpus_->size()) push(last_);
      last_ = gpus_->size();
      while (!heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
        const auto [load, i] = heap_.back();
        heap_.pop_back();
        if (load == now(i)) {
          last_ = i;
          return (*gpus_)[i];
        }
        push(i);
      }
      return -1;
    }

   private:
    double now(std::size_t i) const { return (*load_)[static_cast<std::size_t>((*gpus_)[i])]; }
    void push(std::size_t i) {
      heap_.push_back({now(i), i});
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
    }
    const std::vector<GpuId>* gpus_;
    const std::vector<double>* load_;
    std::vector<std::pair<double, std::size_t>> heap_;
    std::size_t last_ = std::numeric_limits<std::size_t>::max();
  };

  // The GPUs of `gpus` by NVLink domain, each list in the order of `gpus`.
  std::unordered_map<std::int32_t, std::vector<GpuId>> by_domain(const std::vector<GpuId>& gpus) const {
    std::unordered_map<std::int32_t, std::vector<GpuId>> out;
    for (GpuId g : gpus) out[domain_of(g)].push_back(g);
    return out;
  }

  // direct over the classes of a piece list: each needer of a class gets it from the least-loaded
  // holder, one of its own domain where there is one (as least_loaded() preferring the needer's
  // domain), in one operation.
  void direct(Basis::List list) {
    for (const auto& cls : b_.classes[list]) {
      const auto& H = holder_gpus(cls.holders);
      const std::vector<GpuId>& N = cls.receivers;
      if (N.empty()) continue;
      const std::int32_t buffer = add_buffer(cls.buffer);
      const auto holders_by_domain = by_domain(H);
      std::unordered_map<std::int32_t, LeastLoadedQueue> local;
      for (const auto& [d, gpus] : holders_by_domain) local.emplace(d, LeastLoadedQueue(gpus, egress_));
      LeastLoadedQueue any(H, egress_);
      for (auto n : N) {
        const auto it = local.find(domain_of(n));
        add_op(it != local.end() ? it->second.pick() : any.pick(), n, buffer, 0, 1, OpPhase::Direct, {});
      }
    }
  }

  // domain_grouped (max_chain 1) / domain_chain over the classes of a piece list: a class enters
  // each NVLink domain that needs it once and fans out there; chain ops pipeline in chunks of
  // `chunk` through up to max_chain domains.
  void through_domains(Basis::List list, std::int32_t max_chain, Bytes chunk) {
    for (const auto& cls : b_.classes[list]) {
      const auto& H = holder_gpus(cls.holders);
      const std::vector<GpuId>& N = cls.receivers;
      if (N.empty()) continue;
      const std::int32_t buffer = add_buffer(cls.buffer);
      std::vector<const Basis::DomainNeed*> remote;
      for (const auto& need : cls.domains) {
        // A holder inside the domain serves it over NVLink.
        if (need.local.empty()) {
          remote.push_back(&need);
          continue;
        }
        for (auto n : need.receivers)
          add_op(least_loaded(need.local, egress_, [](GpuId) { return false; }), n, buffer, 0, 1, OpPhase::FanOut, {});
      }
      if (remote.empty()) continue;
      // Stripes: the class cut into S equal element ranges; each stripe enters a domain at another
      // ingress GPU (the least loaded) and leaves from another holder, so the NICs of both sides
      // share the class. S = ceil(class bytes / stripe_target_), so that small classes travel whole
      // (a replicated class cut into S stripes costs S x needers fan-out hops per domain) and
      // large ones in stripes small enough for the greedy choices to balance every NIC; at most the
      // number of GPUs on the wider side (holders, or the ingress candidates of a domain), beyond
      // which more stripes balance nothing.
      std::int64_t wider_side = static_cast<std::int64_t>(H.size());
      for (const auto* need : remote)
        wider_side = std::max<std::int64_t>(wider_side, static_cast<std::int64_t>(candidates(*need).size()));
      const std::int64_t class_bytes = s_.buffers[static_cast<std::size_t>(buffer)].bytes.value;
      const std::int64_t stripes = std::clamp<std::int64_t>((class_bytes + stripe_target_ - 1) / stripe_target_, 1, wider_side);
      const std::vector<GpuId> senders = p_.relay_egress ? egress_candidates(H, N) : std::vector<GpuId>{};
      LeastLoadedQueue sender_queue(p_.relay_egress ? senders : H, egress_);
      const auto holders_by_domain = p_.relay_egress ? by_domain(H) : decltype(by_domain(H)){};
      for (const std::int32_t stripe : split(buffer, cls.buffer, static_cast<std::int32_t>(stripes)))
        for (std::size_t seg = 0; seg < remote.size(); seg += static_cast<std::size_t>(max_chain)) {
          const double stripe_bytes = s_.buffers[static_cast<std::size_t>(stripe)].bytes.as_double();
          // The sender: the least-loaded holder, or with relay_egress the least-loaded GPU of a
          // holder's domain (a holder hands the stripe to it over NVLink, the chain's first hop),
          // so every NIC of the source domains can send.
          GpuId h = sender_queue.pick();
          std::vector<ChainHop> hops;
          if (!std::binary_search(H.begin(), H.end(), h)) {
            const GpuId handoff = least_loaded(holders_by_domain.at(domain_of(h)), nvlink_out_, [](GpuId) { return false; });
            nvlink_out_[static_cast<std::size_t>(handoff)] += stripe_bytes;
            hops.push_back({handoff, h});
          }
          // One ingress GPU per domain of the chain; each forwards to the next domain's ingress and
          // fans out to the other needers of its own domain, chunk by chunk (one chain op).
          const auto end = std::min(remote.size(), seg + static_cast<std::size_t>(max_chain));
          GpuId from = h;
          for (auto k = seg; k < end; ++k) {
            // The least-loaded candidate; a rail change (a detour over a spine) counts as
            // kRailDetourWeight of this stripe's bytes of extra load, so rail alignment wins only
            // between near equals.
            const double detour = p_.rail_aligned_ingress ? kRailDetourWeight * stripe_bytes : 0;
            GpuId i = -1;
            double best = 0;
            for (auto g : candidates(*remote[k])) {
              const double cost = ingress_[static_cast<std::size_t>(g)] + (rail_of(g) == rail_of(from) ? 0 : detour);
              if (i < 0 || cost < best) {
                i = g;
                best = cost;
              }
            }
            hops.push_back({from, i});
            for (auto n : remote[k]->receivers)
              if (n != i) hops.push_back({i, n});
            from = i;
          }
          add_chain_op(add_chain(std::move(hops), chunk, stripe_bytes), stripe, 0, 1, OpPhase::Ingress, {});
        }
    }
  }

  // The GPUs of a remote domain that may be a class's ingress: its needers there, or with
  // relay_ingress any GPU of the domain (a relay that needs nothing itself forwards to every
  // needer), so every NIC of the domain can take a stripe.
  const std::vector<GpuId>& candidates(const Basis::DomainNeed& need) const {
    return p_.relay_ingress ? topo_.gpus_in_domain(need.domain) : need.receivers;
  }

  // The stripe size that balances NIC loads: a GPU's fair share of network ingress, A = (sum over
  // classes of bytes x remote domains) / (ingress candidate GPUs), cut into kStripesPerShare
  // stripes, so the greedy least-loaded choice ends within about A / kStripesPerShare of even on
  // either side. Never below kMinStripe (4 KiB). Set once, before through_domains(), over every piece the
  // schedule routes through domains: one target however the strategy splits them between calls.
  void set_stripe_target(Basis::List list) {
    double remote_bytes = 0;
    std::vector<char> candidate(static_cast<std::size_t>(topo_.gpu_count()), 0);
    for (const auto& cls : b_.classes[list])
      for (const auto& need : cls.domains) {
        if (!need.local.empty()) continue;
        remote_bytes += cls.bytes;
        for (auto g : candidates(need)) candidate[static_cast<std::size_t>(g)] = 1;
      }
    const auto gpus = std::count(candidate.begin(), candidate.end(), 1);
    stripe_target_ = gpus == 0 ? kMinStripe
                               : std::max<std::int64_t>(kMinStripe, static_cast<std::int64_t>(remote_bytes / static_cast<double>(gpus) /
                                                                                               kStripesPerShare));
  }

  // Every GPU of the NVLink domains that hold a copy, except the class's needers (they get the class
  // from a holder of their own domain), sorted.
  std::vector<GpuId> egress_candidates(const std::vector<GpuId>& holders, std::vector<GpuId> needers) {
    std::sort(needers.begin(), needers.end());
    std::vector<GpuId> out;
    std::vector<std::int32_t> domains;
    for (auto g : holders) domains.push_back(domain_of(g));
    std::sort(domains.begin(), domains.end());
    domains.erase(std::unique(domains.begin(), domains.end()), domains.end());
    for (auto d : domains)
      for (auto g : topo_.gpus_in_domain(d))
        if (!std::binary_search(needers.begin(), needers.end(), g)) out.push_back(g);
    std::sort(out.begin(), out.end());
    return out;
  }

  // Cuts buffer `buffer`, whose content is `whole`, into `n` buffers of equal element counts (the
  // buffer itself when n == 1).
  std::vector<std::int32_t> split(std::int32_t buffer, const Buffer& whole, std::int32_t n) {
    if (n <= 1) return {buffer};
    std::int64_t total = 0;
    for (const auto& sl : whole.slices) total += sl.count;
    std::vector<std::int32_t> out;
    std::size_t i = 0;
    std::int64_t used = 0;  // elements of whole.slices[i] already taken
    for (std::int32_t k = 0; k < n; ++k) {
      std::int64_t want = total * (k + 1) / n - total * k / n;
      Buffer b;
      while (want > 0) {
        const auto& sl = whole.slices[i];
        const std::int64_t take = std::min(want, sl.count - used);
        b.slices.push_back({sl.piece, sl.offset + used, take});
        const auto& pc = ts_.pieces[static_cast<std::size_t>(sl.piece)];
        b.bytes += Bytes{take * dtype_size(inv_.tensor(pc.tensor).dtype)};
        used += take;
        want -= take;
        if (used == sl.count) {
          ++i;
          used = 0;
        }
      }
      out.push_back(add_buffer(std::move(b)));
    }
    return out;
  }

  // The bucket a ring broadcast of `total` bytes over `channels` rings from `heads` takes: what the
  // budget of every head holds twice beside the rings it roots (one ring of slots x chunk per
  // channel: NeMo RL's two buffers), at most bucket=SIZE when given; without a budget, bucket=SIZE
  // or kDefaultBucket. With b the bucket, a channel's ring holds min(b / channels, S c), so a head
  // holds 2 b + channels min(b / channels, S c) <= M: b = (M - channels S c) / 2 where that leaves
  // a part of at least S c per channel, else b = M / 3. A ring broadcast is buckets x channels
  // chain ops: past kMaxBroadcastOps the buckets grow until the schedule fits (the schedule records
  // the bucket size it really uses).
  Bytes broadcast_bucket(const std::vector<GpuId>& heads, std::int32_t channels, double total) const {
    std::int64_t from_budget = 0;
    const std::int64_t ring = static_cast<std::int64_t>(s_.slots) * p_.chunk.value;
    for (GpuId head : heads) {
      const std::int64_t m = g_budget(head);
      if (m <= 0) continue;
      std::int64_t fits = (m - channels * ring) / 2;
      if (fits < channels * ring) fits = m / 3;
      fits = std::max<std::int64_t>(fits, 1);
      from_budget = from_budget == 0 ? fits : std::min(from_budget, fits);
    }
    std::int64_t want = from_budget > 0 ? from_budget : kDefaultBucket.value;
    if (p_.bucket.value > 0) want = std::min(want, p_.bucket.value);
    return Bytes{std::max(want, static_cast<std::int64_t>(total * channels / kMaxBroadcastOps))};
  }

  // The baseline: per source stage a head GPU gathers whole tensors, then broadcasts them in buckets
  // along a ring over every destination GPU.
  void gather_broadcast(Basis::List which) {
    const std::vector<std::int32_t>& pieces = b_.pieces[which];
    if (pieces.empty()) return;
    // Head of a layer = the lowest GPU holding any of its pieces (Megatron: the stage's first rank).
    std::map<std::int32_t, GpuId> head_of_layer;
    auto layer_key = [&](const TensorInfo& t) { return t.layer >= 0 ? t.layer : -1000 - t.id; };
    for (auto i : pieces) {
      const auto& pc = ts_.pieces[static_cast<std::size_t>(i)];
      const GpuId g = holder_gpus(pc.holders).front();
      auto [it, fresh] = head_of_layer.try_emplace(layer_key(inv_.tensor(pc.tensor)), g);
      if (!fresh) it->second = std::min(it->second, g);
    }
    std::map<GpuId, std::vector<std::int32_t>> by_head;
    for (auto i : pieces) {
      const auto& pc = ts_.pieces[static_cast<std::size_t>(i)];
      by_head[head_of_layer[layer_key(inv_.tensor(pc.tensor))]].push_back(i);
    }
    // Destination GPUs by NVLink domain. NCCL broadcasts over one ring per channel, each channel
    // crossing between nodes on its own NIC; here part c of a bucket travels its own ring: inside
    // domain k it enters at the GPU of index e_k = (c - k) mod n and leaves from e_k - 1, so every
    // network hop stays on one rail and the parts spread over all NICs.
    std::map<std::int32_t, std::vector<GpuId>> dest_domains;
    for (auto g : dst_.gpus()) dest_domains[domain_of(g)].push_back(g);
    for (auto& [d, v] : dest_domains) std::sort(v.begin(), v.end());
    std::int32_t rings = 1;
    for (const auto& [d, v] : dest_domains) rings = std::max(rings, static_cast<std::int32_t>(v.size()));
    const std::int32_t channels = p_.channels > 0 ? p_.channels : rings;
    double total = 0;
    for (auto i : pieces) total += ts_.pieces[static_cast<std::size_t>(i)].bytes.as_double();
    std::vector<GpuId> heads;
    for (const auto& [head, list] : by_head) heads.push_back(head);
    const Bytes bucket = broadcast_bucket(heads, channels, total);
    // relay_egress (verl's multi_sender, verl/checkpoint_engine/nccl_checkpoint_engine.py,
    // NCCLCheckpointEngine._multi_sender_ranks): the source GPUs of the head's NVLink domain that are
    // not destinations join its rings, so ring c first crosses NVLink to the c-th of them (the head
    // itself first) and leaves the domain through that GPU's NIC.
    std::vector<char> is_source;  // 1: holds a piece; 2: a destination GPU
    if (p_.relay_egress) {
      is_source.assign(static_cast<std::size_t>(topo_.gpu_count()), 0);
      for (auto i : pieces)
        for (GpuId g : holder_gpus(ts_.pieces[static_cast<std::size_t>(i)].holders)) is_source[static_cast<std::size_t>(g)] = 1;
      for (GpuId g : dst_.gpus()) is_source[static_cast<std::size_t>(g)] = 2;
    }
    auto relays_of = [&](GpuId head) {
      std::vector<GpuId> relays{head};
      if (!p_.relay_egress) return relays;
      for (GpuId g : topo_.gpus_in_domain(domain_of(head)))
        if (g != head && is_source[static_cast<std::size_t>(g)] == 1) relays.push_back(g);
      return relays;
    };
    auto ring_for = [&](std::int32_t c, GpuId head) {
      std::vector<GpuId> ring;
      std::int32_t k = 0;
      for (const auto& [d, v] : dest_domains) {
        const auto n = static_cast<std::int32_t>(v.size());
        const std::int32_t e = (((c - k) % n) + n) % n;
        for (std::int32_t i = 0; i < n; ++i)
          if (v[static_cast<std::size_t>((e + i) % n)] != head) ring.push_back(v[static_cast<std::size_t>((e + i) % n)]);
        ++k;
      }
      return ring;
    };
    for (auto& [head, list] : by_head) {
      // One chain per channel, shared by the head's buckets: chain ops on one chain run in order,
      // each leaving the head once the previous one has (NCCL runs a communicator's collectives
      // in order on its channels).
      std::vector<std::int32_t> ring_of_channel;
      const std::vector<GpuId> relays = relays_of(head);
      for (std::int32_t c = 0; c < channels; ++c) {
        std::vector<ChainHop> hops;
        GpuId from = head;
        if (const GpuId relay = relays[static_cast<std::size_t>(c) % relays.size()]; relay != head) {
          hops.push_back({head, relay});
          from = relay;
        }
        for (auto d : ring_for(c, head)) {
          hops.push_back({from, d});
          from = d;
        }
        if (hops.empty()) break;  // the head is the only destination GPU: gathering is all
        ring_of_channel.push_back(add_chain(std::move(hops), p_.chunk, total / static_cast<double>(by_head.size() * channels)));
      }
      // Buckets of whole pieces, a piece larger than a bucket cut into buckets of its own (so no
      // bucket exceeds the size the head's budget holds).
      std::vector<std::vector<PieceSlice>> buckets(1);
      Bytes fill{0};
      for (auto i : list) {
        const Piece& pc = ts_.pieces[static_cast<std::size_t>(i)];
        const std::int64_t es = dtype_size(inv_.tensor(pc.tensor).dtype);
        if (!buckets.back().empty() && fill + pc.bytes > bucket) {
          buckets.emplace_back();
          fill = Bytes{0};
        }
        if (pc.bytes <= bucket) {
          buckets.back().push_back({i, 0, pc.elements});
          fill += pc.bytes;
          continue;
        }
        const std::int64_t per = std::max<std::int64_t>(1, bucket.value / es);
        for (std::int64_t off = 0; off < pc.elements; off += per) {
          if (!buckets.back().empty()) buckets.emplace_back();
          const std::int64_t take = std::min(per, pc.elements - off);
          buckets.back().push_back({i, off, take});
          fill = Bytes{take * es};
        }
      }
      // Bucket k: its pieces the head lacks are gathered (packed per holder) once bucket k - 1's
      // gathering is done (the head packs one bucket at a time), then broadcast once gathered.
      // NeMo RL packs into two buffers, so its packing also waits until bucket k - 2 has left the
      // head; that changes no time: packing runs ahead only while it is faster than the broadcast,
      // which then sets the pace either way.
      std::vector<std::int64_t> previous_gathers;
      for (std::size_t k = 0; k < buckets.size(); ++k) {
        std::map<GpuId, std::vector<PieceSlice>> gather;
        for (const PieceSlice& sl : buckets[k]) {
          const auto& H = holder_gpus(ts_.pieces[static_cast<std::size_t>(sl.piece)].holders);
          if (std::binary_search(H.begin(), H.end(), head)) continue;
          gather[least_loaded(H, egress_, [&, head = head](GpuId g) { return domain_of(g) == domain_of(head); })].push_back(sl);
        }
        std::vector<std::int64_t> gathered;
        for (auto& [h, g] : gather)
          gathered.push_back(add_op(h, head, add_buffer(slices_buffer(std::move(g))), 0, 1, OpPhase::Gather, previous_gathers));
        if (!gathered.empty()) previous_gathers = gathered;
        const auto buffer = add_buffer(slices_buffer(buckets[k]));
        for (std::int32_t c = 0; c < static_cast<std::int32_t>(ring_of_channel.size()); ++c)
          add_chain_op(ring_of_channel[static_cast<std::size_t>(c)], buffer, c, channels, OpPhase::Broadcast, gathered);
      }
    }
  }

 private:
  const Basis& b_;
  const TransferSet& ts_;
  const Inventory& inv_;
  const ShardMap& dst_;
  const Topology& topo_;
  const StrategyParams& p_;
  Schedule& s_;
  std::vector<double> egress_, ingress_, nvlink_out_;
  std::vector<double> path_load_;  // per link: bytes of the chain hops pinned to paths through it
  std::vector<LinkId> path_links_;  // add_chain's scratch: one path's links,
  std::vector<double> path_sums_;   // and every path's load
  std::int64_t stripe_target_ = 1;
  std::int32_t part_bytes_of_ = -1;  // the buffer whose part sizes part_bytes_ holds
  std::vector<Bytes> part_bytes_;
};

}  // namespace

Schedule build_schedule(const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst,
                        const Topology& topo, const StrategyParams& params, const std::vector<Bytes>& budget) {
  return build_schedule(ScheduleBasis(ts, inv, src, dst, topo, budget), params);
}

Schedule build_schedule(const ScheduleBasis& basis, const StrategyParams& requested) {
  const Basis& d = BasisAccess::of(basis);
  Schedule s;
  s.piece_count = static_cast<std::int32_t>(d.ts.pieces.size());
  s.budget = d.budget;
  // Streams within the smallest budget: a chunk of at most a kMinSlots-th of it, and as many
  // slots (up to kChainSlots) as it holds of that chunk (model/memory.hpp).
  StrategyParams params = requested;
  std::int64_t least = 0;
  for (const Bytes& b : d.budget)
    if (b.value > 0) least = least == 0 ? b.value : std::min(least, b.value);
  const Bytes largest_chunk{least > 0 ? std::max<std::int64_t>(1, least / kMinSlots) : std::numeric_limits<std::int64_t>::max()};
  if (least > 0) {
    params.chunk = std::min(params.chunk, largest_chunk);
    s.slots = static_cast<std::int32_t>(std::clamp<std::int64_t>(least / params.chunk.value, kMinSlots, kChainSlots));
  }
  s.params = params;
  Builder b(d, params, s);
  b.set_stripe_target(params.strategy == Strategy::NemoRlReshard ? Basis::kFfn : Basis::kAll);
  const std::int32_t max_chain = std::max(1, params.max_chain);
  switch (params.strategy) {
    case Strategy::Direct: b.direct(Basis::kAll); break;
    case Strategy::DomainGrouped: b.through_domains(Basis::kAll, 1, params.chunk); break;
    case Strategy::DomainChain: b.through_domains(Basis::kAll, max_chain, params.chunk); break;
    case Strategy::GatherBroadcast: b.gather_broadcast(Basis::kAll); break;
    case Strategy::Hybrid:
      // FFN by the chain, the rest (small, replicated or fused) by grouped reshard.
      b.through_domains(Basis::kFfn, max_chain, params.chunk);
      b.through_domains(Basis::kRest, 1, params.chunk);
      break;
    case Strategy::NemoRlReshard:
      // NeMo RL: FFN through M2N's hierarchical ring over all destination domains, the rest broadcast.
      b.through_domains(Basis::kFfn, std::numeric_limits<std::int32_t>::max(), std::min(kM2NRingChunk, largest_chunk));
      b.gather_broadcast(Basis::kRest);
      break;
  }
  encode_delta(s, d.ts, d.inv);  // a delta refit's transfers carry their encoded bytes (model/delta.hpp)
  return s;
}

}  // namespace reshard::model

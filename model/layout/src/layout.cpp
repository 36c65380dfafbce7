#include "reshard/model/layout.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "layout_builders.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::model {

std::int64_t Box::elements() const {
  std::int64_t n = 1;
  for (const auto& d : dims) n *= d.size();
  return n;
}

Box intersect(const Box& a, const Box& b) {
  Box r;
  r.dims.resize(a.dims.size());
  for (std::size_t i = 0; i < a.dims.size(); ++i) {
    r.dims[i].lo = std::max(a.dims[i].lo, b.dims[i].lo);
    r.dims[i].hi = std::max(r.dims[i].lo, std::min(a.dims[i].hi, b.dims[i].hi));
  }
  return r;
}

Box full_box(const TensorInfo& t) {
  Box b;
  for (auto n : t.shape) b.dims.push_back({0, n});
  return b;
}

std::string to_string(const Box& b) {
  std::string s = "[";
  for (std::size_t i = 0; i < b.dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(b.dims[i].lo) + ":" + std::to_string(b.dims[i].hi);
  }
  return s + "]";
}

std::int64_t RankGrid::size() const {
  std::int64_t n = 1;
  for (const auto& a : axes) n *= a.count;
  return n;
}

std::int64_t RankSet::size() const {
  std::int64_t n = 0;
  for (const auto& g : grids_) n += g.size();
  return n;
}

namespace {
void grid_for_each(const RankGrid& g, const std::function<void(Rank)>& f) {
  if (g.axes.empty()) {
    f(g.start);
    return;
  }
  std::vector<std::int32_t> idx(g.axes.size(), 0);
  for (;;) {
    Rank r = g.start;
    for (std::size_t k = 0; k < idx.size(); ++k) r += idx[k] * g.axes[k].stride;
    f(r);
    std::size_t k = 0;
    while (k < idx.size() && ++idx[k] == g.axes[k].count) idx[k++] = 0;
    if (k == idx.size()) return;
  }
}
}  // namespace

void RankSet::for_each(const std::function<void(Rank)>& f) const {
  for (const auto& g : grids_) grid_for_each(g, f);
}

bool RankSet::contains(Rank r) const {
  for (const auto& g : grids_) {
    // Axes are generated with strides that form a mixed radix (each stride a multiple of the span of
    // the faster axes), so greedy division from the largest stride decides membership.
    Rank rest = r - g.start;
    if (rest < 0) continue;
    std::vector<std::size_t> order(g.axes.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return g.axes[a].stride > g.axes[b].stride; });
    for (auto k : order) {
      const auto& ax = g.axes[k];
      if (ax.stride == 0) continue;
      const Rank i = std::min<Rank>(rest / ax.stride, ax.count - 1);
      rest -= i * ax.stride;
    }
    if (rest == 0) return true;
  }
  return false;
}

std::vector<Rank> RankSet::to_vector() const {
  std::vector<Rank> v;
  v.reserve(static_cast<std::size_t>(size()));
  for_each([&](Rank r) { v.push_back(r); });
  std::sort(v.begin(), v.end());
  return v;
}

std::string RankSet::to_string() const {
  const auto v = to_vector();
  if (v.empty()) return "{}";
  bool contiguous = v.back() - v.front() + 1 == static_cast<Rank>(v.size());
  if (contiguous)
    return v.size() == 1 ? "{" + std::to_string(v[0]) + "}"
                         : "{" + std::to_string(v.front()) + "-" + std::to_string(v.back()) + "}";
  std::string s = "{";
  for (std::size_t i = 0; i < v.size() && i < 4; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  if (v.size() > 4) s += ",... (" + std::to_string(v.size()) + " ranks)";
  return s + "}";
}

const char* to_string(ExpertPlacement p) { return p == ExpertPlacement::RoundRobin ? "round_robin" : "linear"; }
namespace {
struct All2AllName {
  VllmAll2All backend;
  const char* name;
};
constexpr All2AllName kAll2AllNames[] = {
    {VllmAll2All::AllgatherReducescatter, "allgather_reducescatter"},
    {VllmAll2All::Naive, "naive"},
    {VllmAll2All::Pplx, "pplx"},
    {VllmAll2All::DeepepHighThroughput, "deepep_high_throughput"},
    {VllmAll2All::DeepepLowLatency, "deepep_low_latency"},
    {VllmAll2All::FlashinferAll2allv, "flashinfer_all2allv"},
    {VllmAll2All::NixlEp, "nixl_ep"},
};
}  // namespace

const char* to_string(VllmAll2All b) {
  for (const auto& n : kAll2AllNames)
    if (n.backend == b) return n.name;
  return "?";
}
std::optional<VllmAll2All> vllm_all2all_named(const std::string& name) {
  for (const auto& n : kAll2AllNames)
    if (name == n.name) return n.backend;
  return std::nullopt;
}
const std::vector<std::string>& vllm_all2all_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& n : kAll2AllNames) v.emplace_back(n.name);
    return v;
  }();
  return names;
}

const char* to_string(VllmDpMode m) { return m == VllmDpMode::DataParallel ? "data_parallel" : "engines"; }

std::string LayoutSpec::framework() const {
  switch (spec.index()) {
    case 0: return "megatron";
    case 1: return "vllm";
    case 2: return "dtensor";
    default: return "sglang";
  }
}

std::string LayoutSpec::describe() const {
  std::ostringstream o;
  if (auto* m = std::get_if<MegatronSpec>(&spec)) {
    o << "megatron TP" << m->tp;
    if (m->cp > 1) o << " CP" << m->cp;
    o << " PP" << m->pp;
    if (m->vpp > 1) o << " VPP" << m->vpp;
    o << " DP" << m->dp;
    if (m->ep > 1) o << " EP" << m->ep;
    if (m->expert_tp() != m->tp) o << " ETP" << m->expert_tp();  // no ETP: equal to TP
  } else if (auto* v = std::get_if<VllmSpec>(&spec)) {
    o << "vllm TP" << v->tp;
    if (v->pp > 1) o << " PP" << v->pp;
    o << " DP" << v->dp;
    const auto ep = v->expert_parallel_size();
    if (v->dp_mode == VllmDpMode::DataParallel) {
      o << " (data parallel";
      if (ep > 0) o << ", EP" << ep;
      o << ")";
    } else if (ep > 0) {
      o << " EP" << ep;
    }
    if (ep > 0 && v->expert_placement == ExpertPlacement::RoundRobin) o << " round-robin";
    if (ep > v->tp && v->all2all_backend != VllmAll2All::AllgatherReducescatter) o << " " << to_string(v->all2all_backend);
    if (v->redundant_experts > 0) o << " +" << v->redundant_experts << " redundant experts";
  } else if (auto* g = std::get_if<SglangSpec>(&spec)) {
    o << "sglang TP" << g->tp;
    if (g->enable_dp_attention) o << " DP-attention " << g->dp;
    else if (g->dp > 1) o << " DP" << g->dp;
    if (g->ep > 1) o << " EP" << g->ep;
    if (g->moe_dense_tp == 1) o << " dense-TP1";
    if (g->enable_dp_lm_head) o << " DP-lm-head";
    if (g->a2a_moe) o << " a2a";
    if (g->redundant_experts > 0) o << " +" << g->redundant_experts << " redundant experts";
    if (g->servers > 1) o << " x " << g->servers << " servers";
  } else {
    const auto& d = std::get<DTensorSpec>(spec);
    o << "dtensor mesh [";
    for (std::size_t i = 0; i < d.mesh_shape.size(); ++i)
      o << (i ? ", " : "") << (i < d.mesh_names.size() ? d.mesh_names[i] + "=" : "") << d.mesh_shape[i];
    o << "]";
  }
  o << " on " << gpus.size() << " GPUs";
  return o.str();
}

ShardMap::ShardMap(std::int32_t tensors, std::vector<GpuId> gpus, std::string description)
    : gpus_(std::move(gpus)), by_tensor_(static_cast<std::size_t>(tensors)), description_(std::move(description)) {}

namespace {
std::size_t hash_set(const RankSet& s) {
  std::size_t h = 1469598103934665603ull;
  auto mix = [&](std::int64_t v) { h = (h ^ static_cast<std::size_t>(v)) * 1099511628211ull; };
  for (const auto& g : s.grids()) {
    mix(g.start);
    for (const auto& a : g.axes) {
      mix(a.count);
      mix(a.stride);
    }
    mix(-1);
  }
  return h;
}
}  // namespace

RankSetId ShardMap::intern(const RankSet& s) {
  const std::size_t h = hash_set(s);
  auto [lo, hi] = intern_index_.equal_range(h);
  for (auto it = lo; it != hi; ++it)
    if (rank_sets_[static_cast<std::size_t>(it->second)] == s) return it->second;
  const auto id = static_cast<RankSetId>(rank_sets_.size());
  rank_sets_.push_back(s);
  intern_index_.emplace(h, id);
  return id;
}

void ShardMap::add_tensors(std::int32_t count) { by_tensor_.resize(by_tensor_.size() + static_cast<std::size_t>(count)); }

void ShardMap::map_boxes(std::int32_t tensor, const std::function<Box(const Box&)>& f) {
  for (auto& sh : by_tensor_[static_cast<std::size_t>(tensor)]) sh.box = f(sh.box);
}

void ShardMap::add_shard(std::int32_t tensor, Box box, RankSetId ranks) {
  if (box.empty()) return;
  auto& v = by_tensor_[static_cast<std::size_t>(tensor)];
  for (auto& sh : v)
    if (sh.box == box) {
      // Same box on another rank set (e.g. a redundant expert replica): merge the sets.
      if (sh.ranks == ranks) return;
      auto grids = rank_sets_[static_cast<std::size_t>(sh.ranks)].grids();
      const auto& more = rank_sets_[static_cast<std::size_t>(ranks)].grids();
      grids.insert(grids.end(), more.begin(), more.end());
      sh.ranks = intern(RankSet(std::move(grids)));
      return;
    }
  v.push_back({std::move(box), ranks});
}

ShardMap ShardMap::restricted_to(const std::vector<Rank>& lost, std::vector<RankSetId>& remap) const {
  ShardMap out(tensor_count(), gpus_, description_);
  out.conventions_ = conventions_;
  out.expert_slots_ = expert_slots_;
  remap.assign(rank_sets_.size(), -1);
  for (std::size_t id = 0; id < rank_sets_.size(); ++id) {
    const RankSet& set = rank_sets_[id];
    // Membership tests for the few lost ranks; only a set that loses one is expanded.
    if (std::none_of(lost.begin(), lost.end(), [&](Rank r) { return set.contains(r); })) {
      remap[id] = out.intern(set);
      continue;
    }
    std::vector<Rank> left;
    set.for_each([&](Rank r) {
      if (!std::binary_search(lost.begin(), lost.end(), r)) left.push_back(r);
    });
    if (left.empty()) continue;
    std::sort(left.begin(), left.end());
    std::vector<RankGrid> runs;
    for (std::size_t i = 0; i < left.size();) {
      std::size_t j = i + 1;
      while (j < left.size() && left[j] == left[j - 1] + 1) ++j;
      RankGrid g{left[i], {}};
      if (j - i > 1) g.axes.push_back({static_cast<std::int32_t>(j - i), 1});
      runs.push_back(std::move(g));
      i = j;
    }
    remap[id] = out.intern(RankSet(std::move(runs)));
  }
  // Boxes of one tensor stay distinct, so the shards are copied as they are (add_shard's merge of
  // equal boxes is not needed).
  for (std::size_t t = 0; t < by_tensor_.size(); ++t)
    for (const Shard& sh : by_tensor_[t])
      if (const RankSetId id = remap[static_cast<std::size_t>(sh.ranks)]; id >= 0) out.by_tensor_[t].push_back({sh.box, id});
  return out;
}

std::vector<GpuId> ShardMap::gpus_of(RankSetId id) const {
  std::vector<GpuId> v;
  rank_set(id).for_each([&](Rank r) { v.push_back(gpu_of(r)); });
  std::sort(v.begin(), v.end());
  return v;
}

const std::vector<std::int64_t>& ShardMap::expert_slots(Rank r) const {
  static const std::vector<std::int64_t> none;
  return r >= 0 && static_cast<std::size_t>(r) < expert_slots_.size() ? expert_slots_[static_cast<std::size_t>(r)] : none;
}

void ShardMap::set_expert_slots(Rank r, std::vector<std::int64_t> experts) {
  if (static_cast<std::size_t>(r) >= expert_slots_.size()) expert_slots_.resize(static_cast<std::size_t>(r) + 1);
  expert_slots_[static_cast<std::size_t>(r)] = std::move(experts);
}

Bytes ShardMap::total_bytes_held(const Inventory& inv) const {
  Bytes total{0};
  for (std::int32_t t = 0; t < tensor_count(); ++t) {
    const auto es = dtype_size(inv.tensor(t).dtype);
    for (const auto& sh : shards(t)) total += Bytes{sh.box.elements() * es * rank_set(sh.ranks).size()};
  }
  return total;
}

std::vector<Bytes> ShardMap::bytes_per_rank(const Inventory& inv) const {
  std::vector<Bytes> per_set(rank_sets_.size(), Bytes{0});
  for (std::int32_t t = 0; t < tensor_count(); ++t) {
    const auto es = dtype_size(inv.tensor(t).dtype);
    for (const auto& sh : shards(t)) per_set[static_cast<std::size_t>(sh.ranks)] += Bytes{sh.box.elements() * es};
  }
  std::vector<Bytes> out(gpus_.size(), Bytes{0});
  for (std::size_t s = 0; s < rank_sets_.size(); ++s)
    if (per_set[s].value) rank_sets_[s].for_each([&](Rank r) { out[static_cast<std::size_t>(r)] += per_set[s]; });
  return out;
}

void verify_coverage(const Inventory& inv, const ShardMap& map) {
  // Shards of one tensor must be pairwise disjoint and their volumes must add up to the tensor's:
  // disjoint boxes inside the tensor whose volumes sum to its volume cover it exactly.
  for (std::int32_t t = 0; t < map.tensor_count(); ++t) {
    const auto& info = inv.tensor(t);
    const auto& sh = map.shards(t);
    std::int64_t vol = 0;
    const Box full = full_box(info);
    for (const auto& s : sh) {
      if (intersect(s.box, full).elements() != s.box.elements())
        throw PlanError(map.description() + ": shard " + to_string(s.box) + " of '" + info.name +
                        "' lies outside the tensor");
      vol += s.box.elements();
    }
    // Disjointness by a sweep over dim 0 (boxes sorted by their start).
    std::vector<const Shard*> order;
    for (const auto& s : sh) order.push_back(&s);
    std::sort(order.begin(), order.end(),
              [](const Shard* a, const Shard* b) { return a->box.dims[0].lo < b->box.dims[0].lo; });
    std::vector<const Shard*> active;
    for (const Shard* s : order) {
      std::erase_if(active, [&](const Shard* a) { return a->box.dims[0].hi <= s->box.dims[0].lo; });
      for (const Shard* a : active)
        if (!intersect(a->box, s->box).empty())
          throw PlanError(map.description() + ": shards " + to_string(a->box) + " and " + to_string(s->box) +
                          " of '" + info.name + "' overlap");
      active.push_back(s);
    }
    if (vol != full.elements())
      throw PlanError(map.description() + ": the shards of '" + info.name + "' cover " + std::to_string(vol) +
                      " of its " + std::to_string(full.elements()) + " elements");
  }
}

ShardMap build_shard_map(const Inventory& inv, const LayoutSpec& spec) {
  {
    std::vector<GpuId> sorted = spec.gpus;
    std::sort(sorted.begin(), sorted.end());
    const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end())
      throw PlanError(spec.describe() + ": GPU " + std::to_string(*dup) + " appears twice in the layout's GPU list");
  }
  // A vision tower is counted (Inventory include_vision) but not placed: Megatron-Bridge, vLLM
  // (mm_encoder_tp_mode weights or data) and SGLang each place it by rules of their own that
  // reshard does not model, so a layout of it would be a guess.
  if (inv.includes_vision() && spec.framework() != "dtensor")
    throw PlanError(spec.describe() + ": the vision tower's placement is not modelled for " + spec.framework() +
                    "; plan the language model alone (leave include_vision off)");
  ShardMap map = std::visit(
      [&](const auto& s) -> ShardMap {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, MegatronSpec>) return layouts::build_megatron(inv, s, spec);
        else if constexpr (std::is_same_v<T, VllmSpec>) return layouts::build_vllm(inv, s, spec);
        else if constexpr (std::is_same_v<T, SglangSpec>) return layouts::build_sglang(inv, s, spec);
        else return layouts::build_dtensor(inv, s, spec);
      },
      spec.spec);
  verify_coverage(inv, map);
  return map;
}

}  // namespace reshard::model

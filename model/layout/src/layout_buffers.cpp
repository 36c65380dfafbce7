// A rank's local memory as its framework lays it out.
//
//   vLLM:     q/k/v of a layer fuse into `qkv_proj` = [q; k; v]; gate/up into `gate_up_proj` =
//             [gate; up] (dense, shared experts, and each routed expert's w13).
//   Megatron: `linear_qkv` interleaves per query group: for each KV group g held by the rank,
//             [q rows of g's heads; k rows of g; v rows of g]; with fewer KV heads than TP the
//             rank holds a slice of one group's rows, its q, k and v pieces in that order;
//             `linear_fc1` = [gate; up].
//   dtensor:  one buffer per tensor.
//   Every other tensor is a buffer of its own. Buffers are ordered by their first tensor's id.
#include <algorithm>
#include <cstring>
#include <map>

#include "reshard/model/layout.hpp"

namespace reshard::model {

namespace {
// "x.layers.3.self_attn.k_proj.weight" -> "x.layers.3.self_attn.qkv_proj.weight".
std::string fused_name(const std::string& name, FusedPart part) {
  static const std::pair<FusedPart, std::pair<const char*, const char*>> kParts[] = {
      {FusedPart::Q, {".q_proj.", ".qkv_proj."}},      {FusedPart::K, {".k_proj.", ".qkv_proj."}},
      {FusedPart::V, {".v_proj.", ".qkv_proj."}},      {FusedPart::Gate, {".gate_proj.", ".gate_up_proj."}},
      {FusedPart::Up, {".up_proj.", ".gate_up_proj."}}};
  for (const auto& [p, names] : kParts)
    if (p == part) {
      std::string s = name;
      const auto pos = s.rfind(names.first);
      if (pos != std::string::npos) s.replace(pos, std::strlen(names.first), names.second);
      return s;
    }
  return name;
}
std::string rename(std::string s, const std::string& from, const std::string& to) {
  const auto pos = s.rfind(from);
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}
int part_order(FusedPart p) {
  switch (p) {
    case FusedPart::Q: return 0;
    case FusedPart::K: return 1;
    case FusedPart::V: return 2;
    case FusedPart::Gate: return 0;
    case FusedPart::Up: return 1;
    case FusedPart::None: break;
  }
  return 0;
}
}  // namespace

std::vector<LocalBuffer> local_buffers(const Inventory& inv, const LayoutSpec& spec, const ShardMap& map, Rank r) {
  const bool fuse = spec.framework() != "dtensor";
  const bool megatron = spec.framework() == "megatron";
  struct Pending {
    std::int32_t first_tensor;
    std::vector<std::pair<int, Segment>> parts;  // (order within the buffer, segment)
  };
  std::map<std::string, Pending> by_name;
  for (std::int32_t t = 0; t < map.tensor_count(); ++t) {
    const auto& info = inv.tensor(t);
    for (const auto& sh : map.shards(t)) {
      if (!map.rank_set(sh.ranks).contains(r)) continue;
      // LoRA factors stay apart (vLLM stacks each slice's A and B in a buffer of its own).
      const std::string name = fuse && info.lora == LoraPart::None ? fused_name(info.name, info.fused) : info.name;
      auto [it, fresh] = by_name.try_emplace(name, Pending{t, {}});
      it->second.first_tensor = std::min(it->second.first_tensor, t);
      it->second.parts.push_back({part_order(info.fused), Segment{t, sh.box}});
    }
  }
  std::vector<LocalBuffer> out;
  for (auto& [name, p] : by_name) {
    std::stable_sort(p.parts.begin(), p.parts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    LocalBuffer buf{name, {}};
    const auto& cfg = inv.config();
    const bool qkv = p.parts.size() == 3 && inv.tensor(p.parts[0].second.tensor).fused == FusedPart::Q;
    // With fewer KV heads than TP a rank's rows lie inside one query group, already in q, k, v order.
    const bool whole_groups = megatron && cfg.num_key_value_heads >= std::get<MegatronSpec>(spec.spec).tp;
    if (qkv && whole_groups) {
      // Per-query-group interleave: the rank's q, k, v boxes split into whole KV groups.
      const auto& q = p.parts[0].second;
      const auto& k = p.parts[1].second;
      const auto& v = p.parts[2].second;
      const std::int64_t head_dim = inv.tensor(k.tensor).shape[0] / cfg.num_key_value_heads;
      const std::int64_t q_rows = cfg.q_head_rows() * (cfg.num_attention_heads / cfg.num_key_value_heads);
      const std::int64_t groups = k.box.dims[0].size() / head_dim;
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t gk = k.box.dims[0].lo / head_dim + g;
        for (const auto* seg : {&q, &k, &v}) {
          Segment s = *seg;
          const std::int64_t rows = seg == &q ? q_rows : head_dim;
          s.box.dims[0] = {gk * rows, (gk + 1) * rows};
          buf.segments.push_back(s);
        }
      }
      buf.name = rename(buf.name, ".qkv_proj.", ".linear_qkv.");
    } else {
      for (auto& [order, seg] : p.parts) buf.segments.push_back(seg);
      if (megatron) buf.name = rename(rename(buf.name, ".gate_up_proj.", ".linear_fc1."), ".qkv_proj.", ".linear_qkv.");
    }
    out.push_back(std::move(buf));
  }
  std::sort(out.begin(), out.end(), [](const LocalBuffer& a, const LocalBuffer& b) {
    return a.segments.front().tensor < b.segments.front().tensor;
  });
  return out;
}

}  // namespace reshard::model

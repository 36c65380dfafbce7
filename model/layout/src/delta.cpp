// A delta refit's encoded sizes and its passes' work per GPU (see delta.hpp).
#include "reshard/model/delta.hpp"

#include <cmath>
#include <cstdio>
#include <map>

#include "reshard/model/inventory.hpp"
#include "reshard/model/planner.hpp"

namespace reshard::model {

const char* to_string(DeltaEncoding e) { return e == DeltaEncoding::Indices ? "indices" : "bitmask"; }
const char* to_string(SnapshotSite s) { return s == SnapshotSite::Gpu ? "gpu" : "host"; }

bool DeltaSpec::active() const {
  for (double d : density)
    if (d > 0) return true;
  return false;
}

std::int64_t DeltaSpec::changed(std::int64_t n, TensorClass c) const {
  return static_cast<std::int64_t>(std::llround(density_of(c) * static_cast<double>(n)));
}

Bytes DeltaSpec::encoded(std::int64_t n, std::int64_t element_size, TensorClass c) const {
  if (density_of(c) <= 0) return Bytes{n * element_size};
  const std::int64_t k = changed(n, c);
  if (encoding == DeltaEncoding::Bitmask) return Bytes{(n + 7) / 8 + k * element_size};
  const std::int64_t index = n > (std::int64_t{1} << 32) ? 8 : 4;
  return Bytes{k * (index + element_size)};
}

namespace {
std::string percent(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g %%", d * 100);
  return buf;
}
}  // namespace

std::string DeltaSpec::describe() const {
  std::string s;
  bool all_same = true, any_dense = false;
  for (double d : density) {
    all_same = all_same && d == density[0];
    any_dense = any_dense || d <= 0;
  }
  if (all_same) {
    s = percent(density[0]) + " of every tensor's elements changed";
  } else {
    for (int c = 0; c < kDeltaClasses; ++c)
      if (density[static_cast<std::size_t>(c)] > 0)
        s += (s.empty() ? "" : ", ") + std::string(to_string(static_cast<TensorClass>(c))) + " " +
             percent(density[static_cast<std::size_t>(c)]);
    s += any_dense ? " changed; other classes dense" : " changed";
  }
  return s + "; " + to_string(encoding) + " encoding, snapshot in " + (snapshot == SnapshotSite::Gpu ? "GPU" : "pinned host") +
         " memory";
}

DeltaWork delta_work(const Inventory& inv, const ShardMap& src, const ShardMap& dst) {
  DeltaWork w;
  const DeltaSpec& spec = inv.delta();
  if (!spec.active()) return w;
  // Per rank set first (one pass over tensors x shards), then to each GPU of its ranks once.
  struct Work {
    Bytes shard, encoded, values;
  };
  auto per_gpu = [&](const ShardMap& map) {
    std::vector<Work> per_set(static_cast<std::size_t>(map.rank_set_count()));
    for (const TensorInfo& t : inv.tensors()) {
      if (spec.density_of(t.cls) <= 0) continue;
      const std::int64_t es = dtype_size(t.dtype);
      for (const Shard& sh : map.shards(t.id)) {
        const std::int64_t n = sh.box.elements();
        Work& x = per_set[static_cast<std::size_t>(sh.ranks)];
        x.shard += Bytes{n * es};
        x.encoded += spec.encoded(n, es, t.cls);
        x.values += spec.values(n, es, t.cls);
      }
    }
    std::map<GpuId, Work> out;
    std::map<GpuId, RankSetId> seen;  // a GPU counts a set once however many of its ranks it runs
    for (RankSetId id = 0; id < map.rank_set_count(); ++id) {
      const Work& x = per_set[static_cast<std::size_t>(id)];
      if (x.shard.value == 0) continue;
      map.rank_set(id).for_each([&](Rank r) {
        const GpuId g = map.gpu_of(r);
        const auto [it, added] = seen.try_emplace(g, id);
        if (!added && it->second == id) return;
        it->second = id;
        Work& o = out[g];
        o.shard += x.shard;
        o.encoded += x.encoded;
        o.values += x.values;
      });
    }
    return out;
  };
  const bool on_gpu = spec.snapshot == SnapshotSite::Gpu;
  for (const auto& [g, x] : per_gpu(src)) {
    // Read the current values and the snapshot, write the encoded stream and the changed values.
    const Bytes memory = on_gpu ? x.shard * 2 + x.encoded + x.values : x.shard + x.encoded;
    w.source.emplace_back(g, memory);
    if (!on_gpu) w.source_host.emplace_back(g, x.shard + x.values);
    w.snapshot.emplace_back(g, x.shard);
    w.source_bytes += memory;
    w.snapshot_bytes += x.shard;
  }
  for (const auto& [g, x] : per_gpu(dst)) {
    const Bytes memory = x.encoded + x.values;  // read the encoded stream, write the changed values
    w.destination.emplace_back(g, memory);
    w.destination_bytes += memory;
  }
  return w;
}

}  // namespace reshard::model

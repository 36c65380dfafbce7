// DTensor layout: a device mesh plus per-tensor placements.
//
//   Ranks number the mesh row-major (last mesh dimension fastest), as torch DeviceMesh does for
//   torch.arange(world).reshape(shape). Placement i applies to mesh dimension i: Replicate, or
//   Shard(d) = split tensor dimension d over that mesh dimension with torch.chunk semantics
//   (chunk size ceil(n/k); 10 rows over 4 ranks -> 3, 3, 3, 1; trailing ranks may hold nothing).
//   Several mesh dimensions sharding one tensor dimension nest, outer mesh dimension first: the
//   outer one chunks the dimension, the inner one chunks the outer chunk.
//   The ranks holding one box are those that agree on every sharding mesh coordinate: a grid over
//   the replicating mesh dimensions.
//   Placements come from globs over tensor names; "default" first, the last matching glob wins.
#include <fnmatch.h>

#include "layout_builders.hpp"
#include "layout_yaml.hpp"
#include "reshard/model/scenario_keys.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::model::layouts {

ShardMap build_dtensor(const Inventory& inv, const DTensorSpec& d, const LayoutSpec& spec) {
  const std::string name = spec.describe();
  const auto ndim = d.mesh_shape.size();
  std::int64_t world = 1;
  for (auto s : d.mesh_shape) {
    if (s < 1) throw PlanError(name + ": mesh sizes must be positive");
    world *= s;
  }
  if (world != static_cast<std::int64_t>(spec.gpus.size()))
    throw PlanError(name + ": the mesh has " + std::to_string(world) + " ranks but its gpus list has " +
                    std::to_string(spec.gpus.size()));
  std::vector<std::int32_t> stride(ndim, 1);
  for (std::size_t m = ndim; m-- > 1;) stride[m - 1] = stride[m] * d.mesh_shape[m];
  for (const auto& [glob, pl] : d.placements)
    if (pl.size() != ndim)
      throw PlanError(name + ": placements for '" + glob + "' list " + std::to_string(pl.size()) +
                      " entries, the mesh has " + std::to_string(ndim) + " dimensions");

  ShardMap map(static_cast<std::int32_t>(inv.tensors().size()), spec.gpus, name);
  const std::vector<Placement> replicate_all(ndim, Placement{});
  for (const auto& t : inv.tensors()) {
    const std::vector<Placement>* pl = &replicate_all;
    std::string chosen = "default";
    for (const auto& [glob, p] : d.placements)
      if (glob == "default" || fnmatch(glob.c_str(), t.name.c_str(), 0) == 0) {
        pl = &p;
        chosen = glob;
      }
    std::vector<std::size_t> sharding;  // mesh dims that shard, in mesh order
    std::vector<RankGrid::Axis> replicating;
    for (std::size_t m = 0; m < ndim; ++m) {
      const auto& p = (*pl)[m];
      if (p.kind == Placement::Kind::Shard) {
        if (p.dim < 0 || p.dim >= static_cast<std::int32_t>(t.shape.size()))
          throw PlanError(name + ": placement Shard(" + std::to_string(p.dim) + ") from '" + chosen +
                          "' on tensor '" + t.name + "', which has " + std::to_string(t.shape.size()) +
                          " dimensions");
        sharding.push_back(m);
      } else {
        replicating.push_back({d.mesh_shape[m], stride[m]});
      }
    }
    std::vector<std::int32_t> coord(sharding.size(), 0);
    for (;;) {
      Box b = full_box(t);
      Rank start = 0;
      for (std::size_t k = 0; k < sharding.size(); ++k) {
        const auto m = sharding[k];
        auto& iv = b.dims[static_cast<std::size_t>((*pl)[m].dim)];
        const Interval c = chunk_split(iv.size(), d.mesh_shape[m], coord[k]);
        iv = {iv.lo + c.lo, iv.lo + c.hi};
        start += coord[k] * stride[m];
      }
      map.add_shard(t.id, std::move(b), map.intern(grid(start, replicating)));
      std::size_t k = 0;
      while (k < coord.size() && ++coord[k] == d.mesh_shape[sharding[k]]) coord[k++] = 0;
      if (k == coord.size()) break;
    }
  }
  return map;
}

namespace {

Placement parse_placement(const yaml::Node& n) {
  const std::string s = n.str();
  if (s == "Replicate" || s == "Replicate()") return {};
  if (s.rfind("Shard(", 0) == 0 && s.back() == ')') {
    const std::string d = s.substr(6, s.size() - 7);
    std::size_t pos = 0;
    int v = -1;
    try {
      v = std::stoi(d, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == d.size() && !d.empty() && v >= 0) return {Placement::Kind::Shard, v};
  }
  n.fail("expected Replicate or Shard(d), got '" + s + "'");
}

}  // namespace

DTensorSpec read_dtensor(const yaml::Node& n, std::int64_t count) {
  n.allow_only(scenario_keys("dtensor"));
  DTensorSpec d;
  const auto mesh = n.at("mesh");
  mesh.allow_only(scenario_keys("dtensor.mesh"));
  std::int64_t world = 1;
  for (const auto& x : mesh.at("shape").items()) {
    d.mesh_shape.push_back(small_int(x));
    world *= d.mesh_shape.back();
  }
  if (auto names = mesh.get("names")) {
    for (const auto& x : names->items()) d.mesh_names.push_back(x.str());
    if (d.mesh_names.size() != d.mesh_shape.size())
      names->fail("names " + std::to_string(d.mesh_names.size()) + " mesh dimensions, shape has " +
                  std::to_string(d.mesh_shape.size()));
  }
  check_world(n, count, world, "the mesh");
  if (auto pl = n.get("placements")) {
    for (const auto& [glob, list] : pl->entries()) {
      std::vector<Placement> p;
      for (const auto& x : list.items()) p.push_back(parse_placement(x));
      if (p.size() != d.mesh_shape.size())
        list.fail("lists " + std::to_string(p.size()) + " placements, the mesh has " +
                  std::to_string(d.mesh_shape.size()) + " dimensions");
      d.placements.emplace_back(glob, std::move(p));
    }
  }
  return d;
}

}  // namespace reshard::model::layouts

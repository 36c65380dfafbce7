#include "reshard/model/scenario.hpp"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "reshard/model/checked.hpp"
#include "reshard/model/json_file.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario_keys.hpp"
#include "reshard/model/layout_reader.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace reshard::model {

std::vector<GpuId> shared_gpus(const Scenario& s) {
  std::vector<GpuId> a = s.source.gpus, b = s.destination.gpus, both;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return both;
}

namespace {

// One density of `delta:`: a number in (0, 1], the share of elements that change in a step.
double parse_density(const yaml::Node& n) {
  const double d = n.number();
  if (!(d > 0 && d <= 1))
    n.fail("a density is the share of elements that change in a step, a number in (0, 1] (0.03 for 3 %), or dense; got " +
           n.str());
  return d;
}

// delta (model/delta.hpp):
//   delta: 0.03                (or dense: no delta, as without the key)
//   delta: {density: 0.03 | {expert_ffn: 0.02, attention: 0.05, ...}, encoding: indices | bitmask,
//           snapshot: gpu | host}
// Classes a density map leaves out travel dense.
DeltaSpec parse_delta(const yaml::Node& n) {
  DeltaSpec d;
  if (n.is_scalar() && n.str() == "dense") return d;  // a dense refit said explicitly (a sweep's axis)
  if (n.is_scalar()) {
    d.density.fill(parse_density(n));
    return d;
  }
  if (!n.is_map()) n.fail("expected a density (0.03) or a mapping with density, encoding, snapshot");
  n.allow_only(scenario_keys("delta"));
  const auto density = n.at("density");
  if (density.is_map()) {
    for (const auto& [key, value] : density.entries()) {
      const auto c = parse_tensor_class(key);
      if (!c) value.fail("unknown tensor class '" + key + "'; expected one of embedding, attention, dense_ffn, expert_ffn, "
                         "shared_expert, router, norm, mamba, head, linear_attention, vision");
      d.density[static_cast<std::size_t>(*c)] = parse_density(value);
    }
    if (!d.active()) density.fail("give a density for at least one tensor class");
  } else {
    d.density.fill(parse_density(density));
  }
  if (auto e = n.get("encoding")) {
    const std::string v = e->str();
    if (v == "indices") d.encoding = DeltaEncoding::Indices;
    else if (v == "bitmask") d.encoding = DeltaEncoding::Bitmask;
    else e->fail("unknown encoding '" + v + "'; expected indices (index/value pairs) or bitmask (a bit per element + the changed values)");
  }
  if (auto w = n.get("snapshot")) {
    const std::string v = w->str();
    if (v == "gpu") d.snapshot = SnapshotSite::Gpu;
    else if (v == "host") d.snapshot = SnapshotSite::Host;
    else w->fail("expected gpu or host (pinned host memory), got '" + v + "'");
  }
  return d;
}

// destination.precision (model/precision.hpp):
//   precision: {format: fp8_block, weight_block_size: [128, 128], quantize_at: source,
//               classes: [attention, dense_ffn, expert_ffn, shared_expert]}
PrecisionSpec parse_precision(const yaml::Node& n) {
  n.allow_only(scenario_keys("precision"));
  PrecisionSpec p;
  const auto f = n.at("format");
  const std::string format = f.str();
  if (format == "bf16") p.format = QuantFormat::None;
  else if (format == "fp8_block") p.format = QuantFormat::Fp8Block;
  else if (format == "mxfp8") p.format = QuantFormat::Mxfp8;
  else if (format == "mxfp4") p.format = QuantFormat::Mxfp4;
  else f.fail("unknown format '" + format + "'; expected bf16, fp8_block, mxfp8 or mxfp4");
  if (auto b = n.get("weight_block_size")) {
    if (p.format == QuantFormat::Mxfp8 || p.format == QuantFormat::Mxfp4)
      b->fail(format + " blocks are 1 x 32 elements by definition; weight_block_size is for fp8_block");
    const auto v = b->integers();
    if (v.size() != 2 || v[0] < 1 || v[1] < 1 || v[0] > kMaxDimension || v[1] > kMaxDimension)
      b->fail("expected two positive block extents [rows, columns], e.g. [128, 128]");
    p.block_rows = v[0];
    p.block_cols = v[1];
  }
  if (auto w = n.get("quantize_at")) {
    const std::string at = w->str();
    if (at == "source") p.site = QuantSite::Source;
    else if (at == "destination") p.site = QuantSite::Destination;
    else w->fail("expected source or destination, got '" + at + "'");
  }
  const auto classes = n.get("classes");
  if (!classes) {
    if (p.format != QuantFormat::None) n.at("classes");  // required: fails naming the key
    return p;
  }
  for (const auto& c : classes->items()) {
    const auto cls = parse_tensor_class(c.str());
    if (!cls) c.fail("unknown tensor class '" + c.str() + "'; expected attention, dense_ffn, expert_ffn, shared_expert or mamba");
    if (*cls == TensorClass::Embedding || *cls == TensorClass::Norm || *cls == TensorClass::Router ||
        *cls == TensorClass::Head)
      c.fail(std::string("class ") + to_string(*cls) +
             " stays in the model dtype (FP8 checkpoints keep embeddings, norms, router gates and the output head "
             "unquantised)");
    if (std::find(p.classes.begin(), p.classes.end(), *cls) != p.classes.end()) c.fail("class listed twice");
    p.classes.push_back(*cls);
  }
  if (p.classes.empty() && p.format != QuantFormat::None) classes->fail("list at least one tensor class to quantise");
  return p;
}

// `refit_memory`: a size with its unit, more than 0 (0 would read as unbounded) and at most
// kMostGpuMemory.
Bytes refit_memory_size(const yaml::Node& n) {
  const Bytes b = n.size_bytes();
  if (b.value <= 0)
    n.fail("the refit staging budget must be positive, got " + checked::quote(n.str()) +
           " (leave refit_memory out for the default)");
  if (b > kMostGpuMemory) n.fail(checked::quote(n.str()) + " is more than " + format(kMostGpuMemory) + ", more than any GPU has");
  return b;
}

// Each side's refit_memory and the destination's memory fraction (docs/design.md §5.2). The
// layouts are parsed first, so the framework's own keys are known to be allowed.
void read_memory_keys(const yaml::Node& src, const yaml::Node& dst, Scenario& s) {
  if (auto r = src.get("refit_memory")) s.source_refit_memory = refit_memory_size(*r);
  if (auto w = dst.get("weights_in"))
    w->fail("weights_in says where the source's weights live (a source key); the destination's are on its GPUs");
  if (auto w = src.get("weights_in")) {
    const std::string v = w->str();
    if (v != "gpu" && v != "host") w->fail("expected gpu or host, got " + checked::quote(v));
    s.source_weights_in_host = v == "host";
  }
  if (auto r = dst.get("refit_memory")) s.destination_refit_memory = refit_memory_size(*r);
  const std::string fw = s.destination.framework();
  s.memory_fraction_key = fw == "vllm" ? "gpu_memory_utilization" : fw == "sglang" ? "mem_fraction_static" : "";
  if (s.memory_fraction_key.empty()) return;  // megatron, dtensor: the whole memory
  s.memory_fraction = 0.9;  // vLLM's default gpu_memory_utilization; reshard's for SGLang (no heuristic)
  if (auto f = dst.get(s.memory_fraction_key)) {
    const double v = f->number();
    if (!(v > 0 && v <= 1))
      f->fail("must be in (0, 1], the share of each GPU's memory the engine may use; got " + checked::quote(f->str()));
    s.memory_fraction = v;
  }
}

std::filesystem::path resolve(const std::filesystem::path& base, const std::string& p) {
  std::filesystem::path path(p);
  return path.is_absolute() ? path : (base / path).lexically_normal();
}

void parse_root(const yaml::Node& root, const std::string& name, const std::filesystem::path& base_dir, Scenario& s) {
  root.allow_only(scenario_keys("root"));
  s.file = name;
  s.name = root.get("name") ? root.at("name").str() : std::filesystem::path(name).stem().string();
  if (auto d = root.get("description")) s.description = d->str();
  s.model_path = resolve(base_dir, root.at("model").str());
  s.topology_path = resolve(base_dir, root.at("topology").str());
  s.model_line = root.at("model").line();
  s.topology_line = root.at("topology").line();
  if (auto d = root.get("dtype")) {
    try {
      s.model_options.dtype = parse_dtype(d->str());
    } catch (const std::invalid_argument& e) {
      d->fail(e.what());
    }
  }
  if (auto m = root.get("include_mtp")) s.model_options.include_mtp = m->boolean();
  if (auto l = root.get("lora")) {
    l->allow_only(scenario_keys("lora"));
    LoraSpec spec;
    spec.rank = l->at("rank").integer_in(1, kMaxDimension);
    spec.alpha = static_cast<double>(spec.rank);
    if (auto a = l->get("alpha")) {
      spec.alpha = a->number();
      if (!(spec.alpha > 0)) a->fail("must be a positive number");
    }
    const auto targets = l->at("target_modules");
    for (const auto& t : targets.items()) {
      if (std::find(spec.target_modules.begin(), spec.target_modules.end(), t.str()) != spec.target_modules.end())
        t.fail("'" + t.str() + "' is listed twice");
      spec.target_modules.push_back(t.str());
    }
    if (spec.target_modules.empty()) targets.fail("list at least one module to adapt");
    s.model_options.lora = std::move(spec);
    s.lora_line = l->line();
  }
  const auto src = root.at("source"), dst = root.at("destination");
  s.source_line = src.line();
  s.destination_line = dst.line();
  s.source_gpus_line = src.at("gpus").line();
  s.destination_gpus_line = dst.at("gpus").line();
  if (auto p = src.get("precision")) p->fail("precision describes the destination; give it under destination");
  for (const char* key : {"gpu_memory_utilization", "mem_fraction_static"})
    if (auto f = src.get(key))
      f->fail(std::string(key) + " is the serving engine's share of GPU memory, a destination key; a source GPU's "
              "limit is its whole memory");
  s.source = parse_layout(src);
  s.destination = parse_layout(dst);
  // Overlapping GPU lists are a colocated refit only when the scenario says so: a typo in a range
  // would otherwise turn a disaggregated deployment into a colocated one without a word.
  if (auto c = root.get("colocated")) s.colocated = c->boolean();
  const std::vector<GpuId> both = shared_gpus(s);
  if (!both.empty() && !s.colocated)
    dst.at("gpus").fail("shares " + std::to_string(both.size()) + " GPUs with source.gpus (" + gpu_ranges(both) +
                        "): training and generation on the same GPUs is a colocated refit; say `colocated: true` "
                        "at the top of the scenario, or give the destination GPUs of its own");
  if (both.empty() && s.colocated)
    root.at("colocated").fail("the two sides share no GPU: a colocated refit lists the same GPUs on both sides");
  read_memory_keys(src, dst, s);
  if (auto d = root.get("delta")) {
    s.delta = parse_delta(*d);
    s.delta_line = d->line();
    if (s.model_options.lora) d->fail("an adapter-only refit (lora) moves whole adapters; a delta refit of them is not modelled");
  }
  if (auto p = dst.get("precision")) {
    s.precision = parse_precision(*p);
    s.precision_line = p->line();
    if (s.model_options.lora && s.precision.format != QuantFormat::None)
      p->fail("an adapter-only refit (lora) moves the adapters in the model's dtype; a precision change does not apply");
    // Experts served in MXFP4: vLLM's and SGLang's gpt-oss loaders slice the intermediate dimension
    // in whole 32-element blocks (GptOssModel._load_weights_mxfp4, _load_mxfp4_experts_weights).
    const auto& c = s.precision.classes;
    if (s.precision.format == QuantFormat::Mxfp4 && std::find(c.begin(), c.end(), TensorClass::ExpertFFN) != c.end()) {
      if (auto* v = std::get_if<VllmSpec>(&s.destination.spec)) v->gpt_oss_expert_block = 32;
      if (auto* g = std::get_if<SglangSpec>(&s.destination.spec)) g->gpt_oss_expert_block = 32;
    }
  }
}

}  // namespace

Scenario Scenario::parse(const std::string& text, const std::string& name, const std::filesystem::path& base_dir,
                         const std::vector<Override>& overrides) {
  std::vector<Override> own;
  Scenario s;
  s.overrides = overrides;
  for (const auto& o : overrides) {
    auto file_key = [&](const std::string& prefix, std::vector<Override>& into) {
      if (o.key.rfind(prefix + ".", 0) != 0) return false;
      into.push_back({o.key.substr(prefix.size() + 1), o.value, o.text});
      return true;
    };
    if (!file_key("model", s.model_overrides) && !file_key("topology", s.topology_overrides)) own.push_back(o);
  }
  const auto root = yaml::load_string(text, name, own);
  yaml::naming_overrides(own, [&] { parse_root(root, name, base_dir, s); });
  return s;
}

Scenario Scenario::load(const std::filesystem::path& path, const std::vector<Override>& overrides) {
  check_input_file(path, "scenario file");
  std::ifstream in(path);
  if (!in) throw ConfigError(path.string(), 0, "", "cannot open scenario file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path.string(), path.parent_path(), overrides);
}

namespace {

// The line of the key a message is about: a side's `gpus:` or `precision:`, else the side itself.
ConfigError side_error(const Scenario& s, const std::string& key, const std::string& what) {
  if (key == "destination.precision") return ConfigError(s.file, s.precision_line, key, what);
  if (key == "source.gpus") return ConfigError(s.file, s.source_gpus_line, key, what);
  if (key == "destination.gpus") return ConfigError(s.file, s.destination_gpus_line, key, what);
  return ConfigError(s.file, key.rfind("source", 0) == 0 ? s.source_line : s.destination_line, key, what);
}

// A `model` or `topology` override that replaced the file: errors in that file name it.
std::vector<Override> replacing(const Scenario& s, const char* key) {
  for (const auto& o : s.overrides)
    if (o.key == key) return {Override{"", "", o.text}};
  return {};
}

}  // namespace

// A `model:` or `topology:` path that names nothing is the scenario's error: its file, line and
// key, and the path tried.
void check_named_file(const Scenario& s, const char* key, int line, const std::filesystem::path& path,
                      const char* expected) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return;
  const std::filesystem::path dir = std::filesystem::path(s.file).parent_path();
  const std::string from = !replacing(s, key).empty() ? "a --set path is read from the current folder"
                                                      : "relative paths are read from the scenario's folder, " +
                                                            (dir.empty() ? std::string(".") : dir.string());
  throw ConfigError(s.file, line, key, "no such file: tried " + path.string() + " (" + from + "); " + expected);
}

Inventory load_inventory(const Scenario& s) {
  return yaml::naming_overrides(replacing(s, "model"), [&] {
    check_named_file(s, "model", s.model_line, s.model_path,
                     "a model is a models/*.yaml file, a Hugging Face config.json or a folder holding one");
    try {
      return Inventory::load(s.model_path, s.model_options, s.model_overrides);
    } catch (const ConfigError& e) {
      // The adapters' problems are the scenario's `lora:` key's, not the model file's.
      if (e.key().rfind("lora.", 0) == 0) throw ConfigError(s.file, s.lora_line, e.key(), e.reason());
      throw;
    }
  });
}

Topology load_topology(const Scenario& s) {
  return yaml::naming_overrides(replacing(s, "topology"), [&] {
    check_named_file(s, "topology", s.topology_line, s.topology_path, "a topology is a topologies/*.yaml file");
    return Topology::load(s.topology_path, s.topology_overrides);
  });
}

void check_layout_gpus(const Scenario& s, const Topology& topo) {
  yaml::naming_overrides(s.overrides, [&] {
    for (const auto* side : {&s.source, &s.destination}) {
      const char* key = side == &s.source ? "source.gpus" : "destination.gpus";
      for (auto g : side->gpus)
        if (g >= topo.gpu_count())
          throw side_error(s, key, "GPU " + std::to_string(g) + " is outside the topology '" + topo.name() + "' (" +
                                       std::to_string(topo.gpu_count()) + " GPUs)");
    }
  });
}

std::pair<ShardMap, ShardMap> build_layouts(const Scenario& s, const Inventory& inv) {
  auto build = [&](const LayoutSpec& spec, const char* key) {
    try {
      return build_shard_map(inv, spec);
    } catch (const PlanError& e) {
      throw side_error(s, key, e.what());
    }
  };
  return yaml::naming_overrides(s.overrides, [&] {
    ShardMap src = build(s.source, "source");
    ShardMap dst = build(s.destination, "destination");
    return std::pair<ShardMap, ShardMap>(std::move(src), std::move(dst));
  });
}

void apply_precision(const Scenario& s, Inventory& inv, ShardMap& src, ShardMap& dst) {
  yaml::naming_overrides(s.overrides, [&] {
    try {
      apply_precision(s.precision, inv, src, dst);
    } catch (const PlanError& e) {
      throw side_error(s, "destination.precision", e.what());
    }
  });
}

Bytes default_refit_memory(Bytes gpu_memory) {
  // NeMo RL's packed broadcast (nemo_rl/utils/packed_tensor.py): get_target_packed_tensor_size() =
  // min(int(total_memory * 0.02), 5 * 1024**3) per buffer, get_num_buffers() = 2.
  const std::int64_t buffer = std::min(gpu_memory.value / 50, std::int64_t{5} << 30);
  return Bytes{2 * buffer};
}

namespace {

// Bytes of `map`'s shards on each GPU: per rank set the bytes of the shards it holds (one pass over
// tensors x shards), then each set's bytes to each GPU of its ranks, once per GPU however many of
// the set's ranks share it (one pass over the sets' ranks; `seen` marks the GPUs of the set at hand).
// `delta_only`: only the tensors of classes a delta refit encodes (its snapshot, model/delta.hpp).
std::vector<Bytes> weights_per_gpu(const Inventory& inv, const ShardMap& map, std::int32_t gpus, bool delta_only = false) {
  std::vector<Bytes> per_set(static_cast<std::size_t>(map.rank_set_count()), Bytes{0});
  for (std::int32_t t = 0; t < map.tensor_count(); ++t) {
    if (delta_only && inv.delta().density_of(inv.tensor(t).cls) <= 0) continue;
    const std::int64_t es = dtype_size(inv.tensor(t).dtype);
    for (const auto& sh : map.shards(t)) per_set[static_cast<std::size_t>(sh.ranks)] += Bytes{sh.box.elements() * es};
  }
  std::vector<Bytes> out(static_cast<std::size_t>(gpus), Bytes{0});
  std::vector<RankSetId> seen(static_cast<std::size_t>(gpus), -1);
  for (RankSetId id = 0; id < map.rank_set_count(); ++id) {
    const Bytes b = per_set[static_cast<std::size_t>(id)];
    if (b.value == 0) continue;
    map.rank_set(id).for_each([&](Rank r) {
      const auto g = static_cast<std::size_t>(map.gpu_of(r));
      if (seen[g] == id) return;
      seen[g] = id;
      out[g] += b;
    });
  }
  return out;
}

// 0 stands for unbounded: the smaller bound of the two.
Bytes smaller_bound(Bytes a, Bytes b) {
  if (a.value == 0) return b;
  if (b.value == 0) return a;
  return std::min(a, b);
}

// Which side(s) each GPU is on: bit 1 source, bit 2 destination.
std::vector<std::uint8_t> gpu_sides(const Scenario& s, std::size_t gpus) {
  std::vector<std::uint8_t> side(gpus, 0);
  for (auto g : s.source.gpus)
    if (static_cast<std::size_t>(g) < gpus) side[static_cast<std::size_t>(g)] |= 1;
  for (auto g : s.destination.gpus)
    if (static_cast<std::size_t>(g) < gpus) side[static_cast<std::size_t>(g)] |= 2;
  return side;
}

// Sizes in the memory message: decimal GB with one decimal (sums read across), smaller ones as format.
std::string gb(Bytes b) {
  if (b.value < 1'000'000'000) return format(b);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f GB", b.as_double() / 1e9);
  return buf;
}
std::string fraction_text(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

// Where a GPU's budget comes from, for the message: "refit_memory 4.3 GB" or "refit_memory
// default: 2 x min(2 % of 141.0 GB, 5 GiB)"; a colocated GPU's names the side that set it (the one
// that gave refit_memory where the two are equal).
std::string budget_origin(const Scenario& s, const GpuMemoryUse& u, std::uint8_t side) {
  auto of = [&](const std::optional<Bytes>& given) {
    return given ? "refit_memory " + gb(*given) : "refit_memory default: 2 x min(2 % of " + gb(u.capacity) + ", 5 GiB)";
  };
  const auto& src = s.source_refit_memory;
  const auto& dst = s.destination_refit_memory;
  if (side != 3) return of(side == 1 ? src : dst);
  if (!src && !dst) return of(std::nullopt);
  if (src && dst && *src == *dst) return of(src) + " on both sides";
  const Bytes fallback = default_refit_memory(u.capacity);
  const bool from_source = u.budget == src.value_or(fallback) && (src || u.budget != dst.value_or(fallback));
  return std::string(from_source ? "source " : "destination ") + of(from_source ? src : dst) +
         ", the smaller of the two sides'";
}

}  // namespace

namespace {

// The refit staging budget of a GPU of `capacity` on `side` (bit 1: source, bit 2: destination):
// the side's refit_memory or default_refit_memory(capacity); both sides: the smaller. `from`: whose
// rule set it (GpuMemoryUse::budget_side).
Bytes refit_budget(const Scenario& s, Bytes capacity, std::uint8_t side, std::uint8_t* from = nullptr) {
  const Bytes fallback = default_refit_memory(capacity);
  const Bytes src_budget = s.source_refit_memory.value_or(fallback);
  const Bytes dst_budget = s.destination_refit_memory.value_or(fallback);
  const Bytes budget = side == 3 ? smaller_bound(src_budget, dst_budget) : side == 1 ? src_budget : side == 2 ? dst_budget : fallback;
  if (from) *from = side == 3 ? static_cast<std::uint8_t>((budget == src_budget ? 1 : 0) | (budget == dst_budget ? 2 : 0)) : side;
  return budget;
}

}  // namespace

std::vector<GpuMemoryUse> gpu_memory_use(const Scenario& s, const Inventory& inv, const Topology& topo,
                                         const ShardMap& src, const ShardMap& dst) {
  const std::int32_t n = topo.gpu_count();
  const std::vector<Bytes> held_src = weights_per_gpu(inv, src, n), held_dst = weights_per_gpu(inv, dst, n);
  const std::vector<std::uint8_t> side = gpu_sides(s, static_cast<std::size_t>(n));
  const bool snapshot = inv.delta().active() && inv.delta().snapshot == SnapshotSite::Gpu;
  const std::vector<Bytes> snapshots = snapshot ? weights_per_gpu(inv, src, n, true) : std::vector<Bytes>();
  std::vector<GpuMemoryUse> out(static_cast<std::size_t>(n));
  for (GpuId g = 0; g < n; ++g) {
    const auto i = static_cast<std::size_t>(g);
    GpuMemoryUse& u = out[i];
    u.capacity = topo.gpu_memory(g);
    u.source_weights = s.source_weights_in_host ? Bytes{0} : held_src[i];
    u.destination_weights = held_dst[i];
    if (snapshot) u.delta_snapshot = snapshots[i];
    u.budget = refit_budget(s, u.capacity, side[i], &u.budget_side);
    u.limit = (side[i] & 2) ? Bytes{static_cast<std::int64_t>(std::llround(s.memory_fraction * u.capacity.as_double()))}
                            : u.capacity;
  }
  return out;
}

void check_memory(const Scenario& s, const std::vector<GpuMemoryUse>& memory) {
  const std::vector<std::uint8_t> side = gpu_sides(s, memory.size());
  GpuId worst = -1;
  Bytes most{0};  // the largest excess of weights + budget over the limit
  for (std::size_t i = 0; i < memory.size(); ++i) {
    const GpuMemoryUse& u = memory[i];
    if (side[i] == 0 || u.limit.value == 0) continue;
    const Bytes excess = u.weights() + u.budget - u.limit;
    if (excess.value > 0 && excess > most) {
      most = excess;
      worst = static_cast<GpuId>(i);
    }
  }
  if (worst < 0) return;
  const GpuMemoryUse& u = memory[static_cast<std::size_t>(worst)];
  const std::uint8_t on = side[static_cast<std::size_t>(worst)];
  const bool destination = (on & 2) != 0;
  const std::string snapshot = u.delta_snapshot.value > 0 ? " + " + gb(u.delta_snapshot) + " delta snapshot" : "";
  const std::string weights =
      on == 3 ? gb(u.weights()) + " of weights (" + gb(u.source_weights) + " source + " + gb(u.destination_weights) +
                    " destination" + snapshot + ")"
      : snapshot.empty() ? gb(u.weights()) + " of weights"
                         : gb(u.weights()) + " of weights (" + gb(u.source_weights) + snapshot + ")";
  const std::string limit = destination && !s.memory_fraction_key.empty()
                                ? fraction_text(s.memory_fraction) + " (" + s.memory_fraction_key + ") x " + gb(u.capacity) +
                                      " = " + gb(u.limit)
                                : "its " + gb(u.capacity) + " of memory";
  const std::string tp = s.destination.framework() == "sglang" ? "tp_size" : "tp";
  const std::string advice = destination ? "use more GPUs per replica (" + tp + ") or a smaller refit_memory"
                                         : "shard the weights over more GPUs (tp, pp, ep) or use a smaller refit_memory";
  yaml::naming_overrides(s.overrides, [&] {
    throw side_error(s, destination ? "destination" : "source",
                     "GPU " + std::to_string(worst) + (on == 3 ? " (on both sides)" : "") + " holds " + weights + " + " +
                         gb(u.budget) + " of refit staging (" + budget_origin(s, u, on) + ") = " +
                         gb(u.weights() + u.budget) + ", more than " + limit + "; " + advice);
  });
}

LoadedScenario load_scenario(const Scenario& s) {
  Inventory inv = load_inventory(s);
  Topology topo = load_topology(s);
  check_layout_gpus(s, topo);
  auto [src, dst] = build_layouts(s, inv);
  apply_precision(s, inv, src, dst);
  inv.set_delta(s.delta);  // what travels is encoded from here on (model/delta.hpp)
  std::vector<GpuMemoryUse> memory = gpu_memory_use(s, inv, topo, src, dst);
  if (s.model_options.lora) {
    // The adapters sit beside the model's weights, which stay resident: the memory check counts both.
    Scenario weights = s;
    weights.model_options.lora.reset();
    const Inventory model = load_inventory(weights);
    auto [msrc, mdst] = build_layouts(weights, model);
    const auto base = gpu_memory_use(weights, model, topo, msrc, mdst);
    for (std::size_t g = 0; g < memory.size(); ++g) {
      memory[g].source_weights += base[g].source_weights;
      memory[g].destination_weights += base[g].destination_weights;
    }
  }
  check_memory(s, memory);
  return LoadedScenario{s, std::move(inv), std::move(topo), std::move(src), std::move(dst), std::move(memory)};
}

LoadedScenario load_scenario(const std::filesystem::path& path, const std::vector<Override>& overrides) {
  return load_scenario(Scenario::load(path, overrides));
}

std::vector<Bytes> staging_budgets(const Scenario& s, const Topology& topo) {
  const std::int32_t n = topo.gpu_count();
  const std::vector<std::uint8_t> side = gpu_sides(s, static_cast<std::size_t>(n));
  std::vector<Bytes> out(static_cast<std::size_t>(n));
  for (GpuId g = 0; g < n; ++g) out[static_cast<std::size_t>(g)] = refit_budget(s, topo.gpu_memory(g), side[static_cast<std::size_t>(g)]);
  return out;
}

std::vector<Bytes> cap_budgets(std::vector<Bytes> budget, Bytes cap, std::int32_t gpu_count) {
  if (budget.size() < static_cast<std::size_t>(gpu_count)) budget.resize(static_cast<std::size_t>(gpu_count), Bytes{0});
  for (Bytes& b : budget) b = b.value > 0 ? std::min(b, cap) : cap;
  return budget;
}

std::vector<Bytes> staging_budgets(const LoadedScenario& sc, const std::optional<Bytes>& cap) {
  std::vector<Bytes> budget = staging_budgets(sc);
  return cap ? cap_budgets(std::move(budget), *cap, sc.topology.gpu_count()) : budget;
}

}  // namespace reshard::model

#include "reshard/study/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "compare_parts.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"

namespace reshard::study {

using namespace reshard::model;

namespace {

// Values built once per key and shared by every thread that asks for them; a thread asking for
// one being built waits for it. A failure is shared too: every point that needs it fails with it.
template <class T>
class SharedCache {
 public:
  template <class Make>
  std::shared_ptr<const T> get(const std::string& key, Make&& make) {
    std::unique_lock lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      auto f = it->second;
      lock.unlock();
      return f.get();
    }
    std::promise<std::shared_ptr<const T>> promise;
    const auto future = promise.get_future().share();
    entries_.emplace(key, future);
    lock.unlock();
    try {
      promise.set_value(std::make_shared<const T>(make()));
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
    return future.get();
  }

  // Forgets an entry, or every entry whose key starts with `prefix` (values in use stay alive
  // with their users).
  void release(const std::string& key) {
    std::lock_guard lock(mutex_);
    entries_.erase(key);
  }
  void release_prefix(const std::string& prefix) {
    std::lock_guard lock(mutex_);
    auto it = entries_.lower_bound(prefix);
    while (it != entries_.end() && it->first.compare(0, prefix.size(), prefix) == 0) it = entries_.erase(it);
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_future<std::shared_ptr<const T>>> entries_;
};

struct Plan {
  ShardMap source, destination;
  TransferSet transfers;
  std::optional<Inventory> wire;  // the inventory as it travels, when the precision changes
};

// What a schedule depends on in a topology: its devices and links with their kinds, domains and
// rails, and so its routes (hop counts), but not the links' capacities or latencies. Strategies
// place operations by structure alone, so topologies that differ only in link speeds (a NIC
// speed axis) share their schedules (tests/test_sweep.cpp checks this on every strategy).
std::string structure_of(const Topology& t) {
  std::string s;
  for (const auto& d : t.devices())
    s += d.name + ' ' + to_string(d.kind) + ' ' + std::to_string(d.node) + ' ' + std::to_string(d.domain) + ' ' +
         std::to_string(d.rail) + ' ' + std::to_string(d.gpu) + '\n';
  for (const auto& l : t.links())
    s += std::to_string(l.from) + ' ' + std::to_string(l.to) + ' ' + to_string(l.kind) + '\n';
  return s;
}

struct TopologyEntry {
  Topology topology;
  std::size_t structure;  // topologies with the same structure_of() have the same number
};

struct Caches {
  SharedCache<TopologyEntry> topologies;
  SharedCache<Inventory> inventories;
  SharedCache<Plan> plans;
  SharedCache<Schedule> schedules;
  std::mutex structures_mutex;
  std::map<std::string, std::size_t> structures;

  std::size_t structure_number(const Topology& t) {
    std::string s = structure_of(t);
    std::lock_guard lock(structures_mutex);
    return structures.emplace(std::move(s), structures.size()).first->second;
  }
};

std::string overrides_key(const std::vector<Override>& v) {
  std::string k;
  for (const auto& o : v) k += "\n" + o.key + "=" + o.value;
  return k;
}

// What a point shares with others: the keys of its topology, inventory and plan (layouts and
// transfer set; its schedules are keyed by the plan's key, kSeparator, the topology's structure).
struct PointKeys {
  std::string topology, inventory, plan;
};
constexpr char kSeparator = '\x1f';

// An adapter-only refit's inventory depends on its lora: key too.
std::string lora_key(const InventoryOptions& o) {
  if (!o.lora) return "";
  std::string k = "\nlora " + std::to_string(o.lora->rank);
  for (const auto& t : o.lora->target_modules) k += " " + t;
  return k;
}

PointKeys keys_of(const Scenario& s) {
  PointKeys k;
  k.topology = s.topology_path.string() + overrides_key(s.topology_overrides);
  k.inventory = s.model_path.string() + "\n" +
                (s.model_options.dtype ? to_string(*s.model_options.dtype) : std::string("-")) + "\n" +
                (s.model_options.include_mtp ? "mtp" : "-") + overrides_key(s.model_overrides) + lora_key(s.model_options);
  std::vector<Override> own;  // the scenario's own keys: with the inventory, they fix the layouts
  for (const auto& o : s.overrides)
    if (o.key.rfind("model.", 0) != 0 && o.key.rfind("topology.", 0) != 0) own.push_back(o);
  k.plan = k.inventory + "\n" + overrides_key(own);
  return k;
}

// How many of the points still to come use each shared value (counted from every point's scenario,
// read before any is evaluated): a value is forgotten after its last point, so a long sweep holds
// only what the points in flight and those still to come share.
class Uses {
 public:
  void add(const PointKeys& k) {
    ++topologies_[k.topology];
    ++inventories_[k.inventory];
    ++plans_[k.plan];
  }
  void done(const PointKeys& k, Caches& caches) {
    std::lock_guard lock(mutex_);
    if (--topologies_[k.topology] == 0) caches.topologies.release(k.topology);
    if (--inventories_[k.inventory] == 0) caches.inventories.release(k.inventory);
    if (--plans_[k.plan] == 0) {
      caches.plans.release(k.plan);
      caches.schedules.release_prefix(k.plan + kSeparator);
    }
  }

 private:
  std::mutex mutex_;
  std::map<std::string, int> topologies_, inventories_, plans_;
};

SweepRow base_row(const SweepSpec& spec, std::size_t point, const std::string& profile) {
  SweepRow r;
  r.point = static_cast<std::int64_t>(point);
  r.inputs = spec.points[point];
  r.profile = profile;
  return r;
}

// A point that failed: one row per profile with the error.
std::vector<SweepRow> error_rows(const SweepSpec& spec, std::size_t point, const std::string& error) {
  std::vector<SweepRow> rows;
  for (const auto& profile : spec.profiles) {
    rows.push_back(base_row(spec, point, profile));
    rows.back().error = error;
  }
  return rows;
}

std::vector<SweepRow> evaluate_point(const SweepSpec& spec, std::size_t point, const Scenario& s, const PointKeys& keys,
                                     Caches& caches) {
  std::vector<SweepRow> rows;
  try {
    const auto topo_entry = caches.topologies.get(keys.topology, [&] {
      Topology t = load_topology(s);
      const std::size_t structure = caches.structure_number(t);
      return TopologyEntry{std::move(t), structure};
    });
    const Topology* topo = &topo_entry->topology;
    const auto inv = caches.inventories.get(keys.inventory, [&] { return load_inventory(s); });
    check_layout_gpus(s, *topo);
    const auto plan = caches.plans.get(keys.plan, [&] {
      auto [src, dst] = build_layouts(s, *inv);
      std::optional<Inventory> wire;
      if (s.precision.format != QuantFormat::None || s.delta.active()) {
        wire = *inv;
        apply_precision(s, *wire, src, dst);
        wire->set_delta(s.delta);  // a delta refit's encoded transfers (model/delta.hpp)
      }
      TransferSet ts = model::plan(wire ? *wire : *inv, src, dst);
      return Plan{std::move(src), std::move(dst), std::move(ts), std::move(wire)};
    });
    const Inventory& used = plan->wire ? *plan->wire : *inv;
    // Every GPU holds its weights and staging budget (as load_scenario checks): else an error row.
    check_memory(s, gpu_memory_use(s, used, *topo, plan->source, plan->destination));
    // The staging budgets (a schedule is built within them: part of its cache key).
    const std::vector<Bytes> budget = staging_budgets(s, *topo);
    std::string budget_key;
    for (const BudgetRun& r : budget_runs(budget))
      budget_key += std::to_string(r.first) + ":" + std::to_string(r.count) + ":" + std::to_string(r.bytes.value) + ",";
    CompareOptions options;
    options.simulate = spec.simulate;
    options.threads = 1;  // the points run on the cores at once (run_sweep)
    options.tune = false;
    options.strategies.clear();
    for (const auto& st : spec.strategies) {
      if (st == "auto") options.tune = true;
      else if (st.find(' ') == std::string::npos) options.strategies.push_back(st);
      else options.configured.push_back(st);
    }
    for (std::size_t k = 0; k < spec.profiles.size(); ++k) {
      const std::string& profile = spec.profiles[k];
      options.profile = profile;
      options.params_file = spec.params_file(k).string();
      detail::ScenarioParts parts{s, used, *topo, plan->source, plan->destination, plan->transfers, budget};
      parts.cache = [&](const StrategyParams& p, const detail::ScenarioParts::Build& build) {
        const std::string key = keys.plan + kSeparator + std::to_string(topo_entry->structure) + kSeparator + budget_key +
                                "\n" + describe(p);
        return caches.schedules.get(key, build);
      };
      const CompareResult r = detail::compare(parts, options);
      for (const auto& c : r.rows) {
        SweepRow row = base_row(spec, point, profile);
        row.strategy = c.name;
        row.params = describe(c.params);
        row.estimate_s = c.prediction.time.value;
        if (c.simulated) row.simulated_s = c.simulated->value;
        row.lower_bound_s = r.lower_bound.time.value;
        row.bound_cut = r.lower_bound.binding.cut;
        row.bound_where = r.lower_bound.binding.where;
        row.bound_limit = r.lower_bound_limit;
        row.limited_by = c.limited_by;
        row.limit = c.limit;
        row.bottleneck = c.bottleneck;
        row.network_bytes = c.prediction.network_bytes.value;
        row.nvlink_bytes = c.prediction.nvlink_bytes.value;
        row.operations = c.prediction.operations;
        row.peak_staging_bytes = c.prediction.staging_peak.value;
        row.staging_budget_bytes = r.budget_of(c.prediction.staging_gpu).value;
        row.best = r.rows[r.best].name;
        rows.push_back(std::move(row));
      }
    }
  } catch (const Error& e) {
    return error_rows(spec, point, e.what());
  }
  return rows;
}

// Shortest text that reads back as the same double.
std::string number(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::vector<std::string> check_points(const SweepSpec& spec) {
  std::map<std::string, std::string> topology_error, model_error;  // by PointKeys: "" read
  std::map<std::string, std::vector<std::size_t>> points_of;        // by message
  std::vector<std::string> order;
  for (std::size_t i = 0; i < spec.points.size(); ++i) {
    std::string error;
    try {
      const Scenario s = Scenario::load(spec.scenario, spec.overrides(i));
      const PointKeys k = keys_of(s);
      auto read = [&](std::map<std::string, std::string>& seen, const std::string& key, auto&& load) {
        auto [it, fresh] = seen.emplace(key, "");
        if (fresh) try {
            load();
          } catch (const Error& e) {
            it->second = e.what();
          }
        return it->second;
      };
      error = read(topology_error, k.topology, [&] { load_topology(s); });
      if (error.empty()) error = read(model_error, k.inventory, [&] { load_inventory(s); });
    } catch (const Error& e) {
      error = e.what();
    }
    if (error.empty()) continue;
    auto& points = points_of[error];
    if (points.empty()) order.push_back(error);
    points.push_back(i);
  }
  std::vector<std::string> out;
  for (const auto& error : order) {
    const auto& points = points_of[error];
    std::string which;
    for (std::size_t j = 0; j < points.size() && j < 8; ++j) which += (j ? ", " : "") + std::to_string(points[j]);
    if (points.size() > 8) which += " and " + std::to_string(points.size() - 8) + " more";
    out.push_back(spec.file + ": point" + (points.size() == 1 ? " " : "s ") + which + ": " + error);
  }
  return out;
}

std::vector<SweepRow> run_sweep(const SweepSpec& spec, const SweepOptions& options) {
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < spec.points.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(options.ranks)) == options.rank) mine.push_back(i);
  std::vector<std::vector<SweepRow>> results(mine.size());
  Caches caches;
  Uses uses;
  std::vector<std::optional<Scenario>> scenarios(mine.size());
  std::vector<PointKeys> keys(mine.size());
  std::vector<std::string> errors(mine.size());
  for (std::size_t k = 0; k < mine.size(); ++k) {
    try {
      scenarios[k] = Scenario::load(spec.scenario, spec.overrides(mine[k]));
      keys[k] = keys_of(*scenarios[k]);
      uses.add(keys[k]);
    } catch (const Error& e) {
      errors[k] = e.what();
    }
  }
  std::atomic<std::size_t> next{0};
  std::mutex progress_mutex;
  std::size_t done = 0, failed = 0;
  auto worker = [&] {
    for (std::size_t k; (k = next++) < mine.size();) {
      if (scenarios[k]) {
        results[k] = evaluate_point(spec, mine[k], *scenarios[k], keys[k], caches);
        uses.done(keys[k], caches);
      } else {
        results[k] = error_rows(spec, mine[k], errors[k]);
      }
      std::lock_guard lock(progress_mutex);
      ++done;
      if (!results[k].empty() && !results[k].front().error.empty()) ++failed;
      if (options.progress) options.progress(done, mine.size(), failed);
    }
  };
  const int threads = std::max(1, std::min<int>(options.threads > 0 ? options.threads
                                                                    : static_cast<int>(std::thread::hardware_concurrency()),
                                                static_cast<int>(mine.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  std::vector<SweepRow> rows;
  for (auto& r : results)
    for (auto& row : r) rows.push_back(std::move(row));
  return rows;
}

nlohmann::json to_json(const SweepRow& r, const SweepSpec& spec) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json inputs = nlohmann::json::object();
  for (std::size_t k = 0; k < spec.keys.size(); ++k) inputs[spec.keys[k]] = r.inputs.at(k);
  return {{"point", r.point},
          {"inputs", inputs},
          {"profile", r.profile},
          {"strategy", r.strategy},
          {"params", r.params},
          {"estimate_s", opt(r.estimate_s)},
          {"simulated_s", opt(r.simulated_s)},
          {"lower_bound_s", opt(r.lower_bound_s)},
          {"bound_cut", r.bound_cut},
          {"bound_where", r.bound_where},
          {"bound_limit", r.bound_limit},
          {"limited_by", r.limited_by},
          {"limit", r.limit},
          {"bottleneck", r.bottleneck},
          {"network_bytes", opt(r.network_bytes)},
          {"nvlink_bytes", opt(r.nvlink_bytes)},
          {"operations", opt(r.operations)},
          {"peak_staging_bytes", opt(r.peak_staging_bytes)},
          {"staging_budget_bytes", opt(r.staging_budget_bytes)},
          {"best", r.best},
          {"error", r.error}};
}

SweepRow sweep_row_from_json(const nlohmann::json& j, const SweepSpec& spec) {
  SweepRow r;
  r.point = j.at("point").get<std::int64_t>();
  for (const auto& k : spec.keys) r.inputs.push_back(j.at("inputs").at(k).get<std::string>());
  auto str = [&](const char* k) { return j.at(k).get<std::string>(); };
  auto opt_double = [&](const char* k) {
    return j.at(k).is_null() ? std::optional<double>() : std::optional<double>(j.at(k).get<double>());
  };
  auto opt_int = [&](const char* k) {
    return j.at(k).is_null() ? std::optional<std::int64_t>() : std::optional<std::int64_t>(j.at(k).get<std::int64_t>());
  };
  r.profile = str("profile");
  r.strategy = str("strategy");
  r.params = str("params");
  r.estimate_s = opt_double("estimate_s");
  r.simulated_s = opt_double("simulated_s");
  r.lower_bound_s = opt_double("lower_bound_s");
  r.bound_cut = str("bound_cut");
  r.bound_where = str("bound_where");
  r.bound_limit = str("bound_limit");
  r.limited_by = str("limited_by");
  r.limit = str("limit");
  r.bottleneck = str("bottleneck");
  r.network_bytes = opt_int("network_bytes");
  r.nvlink_bytes = opt_int("nvlink_bytes");
  r.operations = opt_int("operations");
  r.peak_staging_bytes = opt_int("peak_staging_bytes");
  r.staging_budget_bytes = opt_int("staging_budget_bytes");
  r.best = str("best");
  r.error = str("error");
  return r;
}

std::string csv_header(const SweepSpec& spec) {
  std::string h = "point";
  for (const auto& k : spec.keys) h += "," + csv_field(k);
  return h +
         ",profile,strategy,params,estimate_s,simulated_s,lower_bound_s,bound_cut,bound_where,bound_limit,"
         "limited_by,limit,bottleneck,network_bytes,nvlink_bytes,operations,peak_staging_bytes,staging_budget_bytes,best,"
         "error";
}

std::string to_csv(const SweepRow& r) {
  auto d = [](const std::optional<double>& v) { return v ? number(*v) : std::string(); };
  auto i = [](const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string(); };
  std::string s = std::to_string(r.point);
  for (const auto& v : r.inputs) s += "," + csv_field(v);
  for (const std::string& f :
       {r.profile, r.strategy, r.params, d(r.estimate_s), d(r.simulated_s), d(r.lower_bound_s), r.bound_cut,
        r.bound_where, r.bound_limit, r.limited_by, r.limit, r.bottleneck, i(r.network_bytes), i(r.nvlink_bytes),
        i(r.operations), i(r.peak_staging_bytes), i(r.staging_budget_bytes), r.best, r.error})
    s += "," + csv_field(f);
  return s;
}

}  // namespace reshard::study

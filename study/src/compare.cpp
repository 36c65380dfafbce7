#include "reshard/study/compare.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>

#include "compare_parts.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/parallel.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/model/systems.hpp"
#include "reshard/model/tuner.hpp"
#include "reshard/sim/schedule_sim.hpp"

namespace reshard::study {

using namespace reshard::model;

namespace {

// What sets an estimate: the largest of its terms.
std::string limited_by(const Prediction& p) {
  const double hw = std::max(p.pipeline.value, p.critical_path.value);
  if ((p.convert_source + p.convert_destination).value > std::max(hw, p.overheads.value)) return "conversion";
  if ((p.delta_source + p.delta_destination).value > std::max(hw, p.overheads.value)) return "delta passes";
  if (p.issue.value > hw + p.device.value) return "engine calls";  // the engine's issuing outlasts the GPUs (cost.hpp)
  if (p.overheads.value > hw) return "overheads";
  if (p.critical_path > p.pipeline) return "dependencies";
  const double filled = p.pipeline.value - p.latency_path.value;  // bandwidth bound times the fill
  if (p.latency_path.value > filled) return "latency";
  std::string s = "bandwidth";
  if (filled > p.bandwidth_bound.value * 1.001) s += "+fill";
  if (p.latency_path.value > 0.01 * p.pipeline.value) s += "+latency";
  return s;
}

std::string link_name(const Topology& topo, LinkId l) {
  if (l < 0) return "-";
  const auto& k = topo.link(l);
  return std::string(to_string(k.kind)) + " " + topo.device(k.from).name + " -> " + topo.device(k.to).name;
}

// The part of the cluster a link belongs to: the GPU <-> NIC host link, the NIC's own link, a
// link between switches, NVLink (GPU <-> NVSwitch) or C2C.
std::string link_role(const Topology& topo, LinkId l) {
  const auto& k = topo.link(l);
  const DeviceKind a = topo.device(k.from).kind, b = topo.device(k.to).kind;
  auto either = [&](DeviceKind x, DeviceKind y) { return (a == x && b == y) || (a == y && b == x); };
  if (either(DeviceKind::GPU, DeviceKind::NIC)) return "host link";
  if (a == DeviceKind::NIC || b == DeviceKind::NIC) return k.kind == LinkKind::Network ? "NIC link" : "host link";
  if (k.kind == LinkKind::NVLink) return "NVLink";
  if (k.kind == LinkKind::Network) return "fabric";
  return to_string(k.kind);
}

std::string row_limit(const Topology& topo, const Prediction& p, const std::string& limited) {
  if (limited.rfind("bandwidth", 0) == 0 && p.bottleneck >= 0) return link_role(topo, p.bottleneck);
  return limited.substr(0, limited.find('+'));
}

// What forms the lower bound's binding cut (planner.hpp: a cut of NIC links has no suffix in its
// `where`; host links and mixed cuts name themselves).
// Seconds since `start`, and `start` moved to now: the phases of compare one after another.
Seconds lap(std::chrono::steady_clock::time_point& start) {
  const auto now = std::chrono::steady_clock::now();
  const Seconds t{std::chrono::duration<double>(now - start).count()};
  start = now;
  return t;
}

std::string bound_limit(const LowerBound& lb) {
  const auto& w = lb.binding.where;
  if (w.find(": host links") != std::string::npos) return "host link";
  if (w.find(": cut") != std::string::npos) return "mixed cut";
  if (lb.binding.cut == "dest_gpu_ingress" || lb.binding.cut == "source_gpu_egress") return "GPU links";
  if (lb.binding.cut == "dest_fabric_ingress" || lb.binding.cut == "source_fabric_egress") return "fabric";
  return "NIC link";
}

// A row as it crosses between processes (CompareOptions::processes), before the columns derived
// from its prediction (limited_by, limit, bottleneck) are set.
nlohmann::json row_json(const CompareRow& r) {
  return {{"name", r.name},
          {"params", to_json(r.params)},
          {"prediction", to_json(r.prediction)},
          {"simulated", r.simulated ? time_json(*r.simulated) : nlohmann::json()}};
}

CompareRow row_from_json(const nlohmann::json& j) {
  CompareRow r{j.at("name").get<std::string>(), strategy_params_from_json(j.at("params")),
               prediction_from_json(j.at("prediction")), std::nullopt, "", "", ""};
  if (!j.at("simulated").is_null()) r.simulated = time_from_json(j.at("simulated"));
  return r;
}

// The smallest and largest staging budget of `gpus`.
CompareResult::SideBudget side_budget(const CompareResult& r, const std::vector<GpuId>& gpus) {
  CompareResult::SideBudget b;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const Bytes x = r.budget_of(gpus[i]);
    b.min = i == 0 ? x : std::min(b.min, x);
    b.max = i == 0 ? x : std::max(b.max, x);
  }
  return b;
}

// The profiles CompareOptions::systems names ("all": every one); ConfigError for an unknown name.
std::vector<const SystemProfile*> systems_named(const std::vector<std::string>& names) {
  std::vector<const SystemProfile*> systems;
  for (const auto& name : names) {
    if (name == "all") {
      for (const auto& sp : system_profiles()) systems.push_back(&sp);
      continue;
    }
    const SystemProfile* sp = find_system_profile(name);
    if (!sp) throw ConfigError("", 0, "systems", "unknown system '" + name + "'; known: " + system_profile_names());
    systems.push_back(sp);
  }
  return systems;
}

// Progress of rows evaluated at once, in row order: row i's steps are said as they come once
// every row before it is done, held until then; a row counts as done with its last step. say(done
// rows, item) is called under a lock.
class RowProgress {
 public:
  explicit RowProgress(std::function<void(std::int64_t, const std::string&)> say) : say_(std::move(say)) {}
  void resize(std::size_t rows) { steps_.resize(rows); }
  void note(std::size_t row, std::string item, bool last) {
    std::lock_guard lock(mutex_);
    steps_[row].push_back({std::move(item), last});
    while (said_rows_ < steps_.size()) {
      const auto& steps = steps_[said_rows_];
      bool done = false;
      for (; said_steps_ < steps.size(); ++said_steps_) {
        done = steps[said_steps_].last;
        const auto n = static_cast<std::int64_t>(said_rows_);
        say_(done ? n + 1 : n, steps[said_steps_].item);
      }
      if (!done) break;
      ++said_rows_;
      said_steps_ = 0;
    }
  }

 private:
  struct Step {
    std::string item;
    bool last = false;
  };
  std::function<void(std::int64_t, const std::string&)> say_;
  std::vector<std::vector<Step>> steps_;
  std::size_t said_rows_ = 0, said_steps_ = 0;
  std::mutex mutex_;
};

}  // namespace

namespace detail {

CompareResult compare(const ScenarioParts& sc, const CompareOptions& options) {
  std::mutex say_mutex;  // the callback is called from one thread at a time
  auto say = [&](const char* stage, std::int64_t done, std::int64_t total, const std::string& item) {
    if (!options.progress) return;
    std::lock_guard lock(say_mutex);
    options.progress({stage, done, total, item});
  };
  const TransferSet& ts = sc.transfers;
  const auto strategy_rows = static_cast<std::int64_t>(options.strategies.size() + options.configured.size());
  CompareResult out;
  out.scenario = sc.scenario.name;
  out.source = sc.source.description();
  out.destination = sc.destination.description();
  auto clock = std::chrono::steady_clock::now();
  out.lower_bound = lower_bound(ts, sc.source, sc.destination, sc.topology);
  out.wall.bound = lap(clock);
  out.lower_bound_limit = bound_limit(out.lower_bound);
  const CostParams cost =
      CostParams::named_or_loaded(options.profile, options.params_file);
  out.profile = cost.profile;  // a parameters file names its own
  // The budgets every schedule is built within: the scenario's, at most --max-staging.
  out.budget = options.max_staging ? cap_budgets(sc.budget, *options.max_staging, sc.topology.gpu_count()) : sc.budget;
  out.source_budget = side_budget(out, sc.scenario.source.gpus);
  out.destination_budget = side_budget(out, sc.scenario.destination.gpus);
  // The systems' profiles, found before anything is built (an unknown name is one error).
  const std::vector<const SystemProfile*> systems = systems_named(options.systems);
  // What the schedules built here share, made once when first needed (a sweep's cached schedules
  // may need none).
  std::once_flag basis_made;
  std::optional<ScheduleBasis> basis;
  auto the_basis = [&]() -> const ScheduleBasis& {
    std::call_once(basis_made, [&] { basis.emplace(ts, sc.inventory, sc.source, sc.destination, sc.topology, out.budget); });
    return *basis;
  };
  if (!sc.cache || options.tune || !systems.empty()) the_basis();
  out.wall.basis = lap(clock);
  // A strategy's schedule on the basis, through the parts' cache when they have one.
  auto schedule_of = [&](const StrategyParams& p) {
    const detail::ScenarioParts::Build build = [&] { return build_schedule(the_basis(), p); };
    return sc.cache ? sc.cache(p, build) : std::make_shared<const Schedule>(build());
  };
  const int threads = thread_count(options.threads);
  RowProgress rows_said([&](std::int64_t done, const std::string& item) { say("strategies", done, strategy_rows, item); });
  auto note = [&](std::size_t row, std::string item, bool last) { rows_said.note(row, std::move(item), last); };
  // Row `row`'s schedule, estimated (and simulated); `described`: named by its full description (a
  // configured strategy).
  auto evaluate = [&](const StrategyParams& p, bool described, std::size_t row) {
    const std::shared_ptr<const Schedule> built = schedule_of(p);
    const Schedule& s = *built;
    CompareRow r{described ? describe(s.params) : std::string(to_string(p.strategy)), s.params,
                 estimate(s, ts, sc.inventory, sc.topology, cost), std::nullopt, "", "", ""};
    note(row, r.name + ": " + format(r.prediction.time) + (options.simulate ? ", simulating" : ""), !options.simulate);
    if (options.simulate) {
      const auto result = sim::simulate_schedule(s, sc.topology, cost, sim::closing_terms(r.prediction));
      r.simulated = result.makespan;
      note(row, r.name + ": simulated " + format(result.makespan), true);
    }
    return r;
  };
  // The named and configured strategies, several at once.
  std::vector<std::pair<StrategyParams, bool>> wanted;
  for (const auto& name : options.strategies) {
    StrategyParams p;
    p.strategy = strategy_named(name);
    wanted.push_back({p, false});
  }
  for (const auto& spec : options.configured) wanted.push_back({parse_strategy(spec), true});
  out.rows.resize(wanted.size());
  rows_said.resize(wanted.size());
  const Processes& processes = options.processes ? *options.processes : one_process();
  parallel_for(
      processes, wanted.size(), threads, [&](std::size_t i) { out.rows[i] = evaluate(wanted[i].first, wanted[i].second, i); },
      [&](std::size_t i) { return row_json(out.rows[i]); },
      [&](std::size_t i, const nlohmann::json& j) {  // a row another process evaluated
        out.rows[i] = row_from_json(j);
        note(i, out.rows[i].name + ": " + format(out.rows[i].prediction.time), true);
      });
  out.wall.strategies = lap(clock);
  if (options.tune) {  // the tuner's deterministic search, scored by the estimate
    TuneOptions topts;
    topts.threads = threads;
    topts.max_staging = options.max_staging;
    topts.processes = options.processes;
    for (const auto& r : out.rows) topts.seeds.push_back({r.params, r.prediction, r.simulated});
    std::atomic<std::int64_t> confirmed = 0;  // counted for the progress line
    if (options.simulate)  // confirm the best candidates by simulation
      topts.confirm = [&](const Schedule& s) {
        say("confirm", confirmed, topts.confirm_top, describe(s.params) + ", simulating");
        const Seconds t = sim::simulated_makespan(s, ts, sc.inventory, sc.topology, cost);
        say("confirm", ++confirmed, topts.confirm_top, describe(s.params) + ": simulated " + format(t));
        return t;
      };
    if (options.progress)  // the budget bounds the candidates; the search may end before it
      topts.progress = [&](const ProgressStep& p) { say("tune", p.done, p.total, p.item); };
    const TuneResult tuned = tune(the_basis(), cost, topts);
    out.rows.push_back({"auto", tuned.best.params, tuned.best.prediction, tuned.best.confirmed, "", "", ""});
    out.candidates = tuned.built;
    out.over_staging = tuned.over_staging;
    out.best = out.rows.size() - 1;
  } else {
    auto time = [&](const CompareRow& r) { return (r.simulated ? *r.simulated : r.prediction.time).value; };
    for (std::size_t i = 1; i < out.rows.size(); ++i)
      if (time(out.rows[i]) < time(out.rows[out.best])) out.best = i;
  }
  out.wall.tune = lap(clock);
  // The other systems, each its own schedule under its own cost terms.
  out.systems.resize(systems.size());
  parallel_for(
      processes, systems.size(), threads,
      [&](std::size_t i) {
        const SystemProfile& sp = *systems[i];
        const std::shared_ptr<const Schedule> built = schedule_of(parse_strategy(sp.strategy));
        const Schedule& s = *built;
        out.systems[i] = {sp.name, s.params, estimate(s, ts, sc.inventory, sc.topology, sp.cost), std::nullopt, "", "", ""};
      },
      [&](std::size_t i) { return row_json(out.systems[i]); },
      [&](std::size_t i, const nlohmann::json& j) { out.systems[i] = row_from_json(j); });
  out.wall.systems = lap(clock);
  for (auto* rows : {&out.rows, &out.systems})
    for (auto& r : *rows) {
      r.limited_by = limited_by(r.prediction);
      r.limit = row_limit(sc.topology, r.prediction, r.limited_by);
      r.bottleneck = link_name(sc.topology, r.prediction.bottleneck);
    }
  return out;
}

}  // namespace detail

CompareResult compare(const LoadedScenario& sc, const CompareOptions& options) {
  auto clock = std::chrono::steady_clock::now();
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination, options.threads);
  const std::vector<Bytes> budget = staging_budgets(sc);
  const Seconds planned = lap(clock);
  CompareResult r = detail::compare({sc.scenario, sc.inventory, sc.topology, sc.source, sc.destination, ts, budget}, options);
  r.wall.plan = planned;
  if (sc.inventory.delta().active()) {
    // The same refit dense: what the delta is measured against.
    Inventory dense = sc.inventory;
    dense.set_delta({});
    const TransferSet dense_ts = plan(dense, sc.source, sc.destination, options.threads);
    CompareOptions o = options;
    o.systems.clear();
    r.delta = sc.inventory.delta().describe();
    r.dense = detail::compare({sc.scenario, dense, sc.topology, sc.source, sc.destination, dense_ts, budget}, o).rows;
  }
  return r;
}

nlohmann::json timings_json(const CompareResult::Phases& w) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, t] : {std::pair{"load_s", w.load}, {"plan_s", w.plan}, {"bound_s", w.bound}, {"basis_s", w.basis},
                                {"strategies_s", w.strategies}, {"tune_s", w.tune}, {"systems_s", w.systems}})
    j[name] = t.value;
  return j;
}

nlohmann::json to_json(const CompareResult& r) {
  nlohmann::json j;
  j["schema"] = "reshard-compare-1";
  j["scenario"] = r.scenario;
  j["source"] = r.source;
  j["destination"] = r.destination;
  j["profile"] = r.profile;
  const LowerBound& lb = r.lower_bound;
  j["lower_bound_s"] = lb.time.value;
  j["bound_cut"] = lb.binding.cut;
  j["bound_where"] = lb.binding.where;
  j["bound_limit"] = r.lower_bound_limit;
  auto& arr = j["strategies"] = nlohmann::json::array();
  const double baseline = r.rows.empty() ? 0 : r.rows.front().prediction.time.value;
  for (const auto& row : r.rows) {
    const auto& p = row.prediction;
    const double t = p.time.value;
    nlohmann::json e = prediction_fields(
        p, {"estimate_s", "network_bytes", "nvlink_bytes", "bandwidth_bound_s", "critical_path_s", "latency_path_s",
            "overheads_s", "convert_source_s", "convert_destination_s", "operations", "peak_staging_bytes",
            "peak_staging_gpu", "over_budget_gpus", "steps", "steps_bound_s"});
    if ((p.delta_source + p.delta_destination).value > 0)
      e.update(prediction_fields(p, {"delta_source_s", "delta_destination_s"}));
    if (!r.dense.empty()) {
      const std::size_t i = static_cast<std::size_t>(&row - r.rows.data());
      e["dense_estimate_s"] = r.dense[i].prediction.time.value;
      e["dense_network_bytes"] = r.dense[i].prediction.network_bytes.value;
    }
    e.update({{"strategy", row.name},
              {"params", describe(row.params)},
              {"simulated_s", row.simulated ? nlohmann::json(row.simulated->value) : nlohmann::json(nullptr)},
              {"bound_ratio", lb.time.value > 0 ? t / lb.time.value : 0.0},
              {"speedup", t > 0 ? baseline / t : 0.0},
              {"limited_by", row.limited_by},
              {"limit", row.limit},
              {"bottleneck", row.bottleneck},
              {"budget_bytes", r.budget_of(p.staging_gpu).value}});
    arr.push_back(std::move(e));
  }
  if (!r.systems.empty()) {
    auto& sys = j["systems"] = nlohmann::json::array();
    const double best = r.rows.empty() ? 0 : r.rows[r.best].prediction.time.value;
    for (const auto& row : r.systems) {
      const auto& p = row.prediction;
      const SystemProfile* sp = find_system_profile(row.name);
      nlohmann::json e = prediction_fields(
          p, {"estimate_s", "bandwidth_bound_s", "critical_path_s", "overheads_s", "barrier_s", "copies_s", "reshard_tensors",
              "broadcast_tensors", "broadcast_buckets", "broadcast_stages", "network_bytes", "nvlink_bytes",
              "peak_staging_bytes"});
      e.update({{"system", row.name},
                {"models", sp ? sp->system : ""},
                {"strategy", describe(row.params)},
                {"vs_best", best > 0 ? p.time.value / best : 0.0},
                {"limited_by", row.limited_by},
                {"bottleneck", row.bottleneck}});
      sys.push_back(std::move(e));
    }
  }
  auto side = [](const CompareResult::SideBudget& b) { return nlohmann::json{{"min_bytes", b.min.value}, {"max_bytes", b.max.value}}; };
  j["staging_budget"] = {{"source", side(r.source_budget)}, {"destination", side(r.destination_budget)}};
  if (!r.delta.empty()) j["delta"] = r.delta;
  j["best"] = r.rows.empty() ? "" : r.rows[r.best].name;
  j["best_params"] = r.rows.empty() ? "" : describe(r.rows[r.best].params);
  j["candidates"] = r.candidates;
  return j;
}

nlohmann::json plan_json(const TransferSet& ts, const LowerBound& lb) {
  nlohmann::json j;
  j["logical_bytes"] = ts.logical_bytes.value;
  j["pieces"] = ts.pieces.size();
  j["bytes_needed"] = ts.bytes_needed.value;
  j["bytes_to_move"] = ts.bytes_to_move.value;
  j["lower_bound_s"] = lb.time.value;
  j["bound_cut"] = lb.binding.cut;
  j["bound_where"] = lb.binding.where;
  auto& cuts = j["cuts"] = nlohmann::json::array();
  for (const auto& c : lb.cuts)
    cuts.push_back({{"cut", c.cut}, {"where", c.where}, {"bytes", c.bytes.value}, {"capacity_Bps", c.capacity.value},
                    {"time_s", c.time().value}});
  return j;
}

LoadedScenario load_scenario_with_overrides(const std::filesystem::path& path, const std::vector<std::string>& sets,
                                            const std::filesystem::path& base_dir) {
  return load_scenario(path, parse_overrides(sets, base_dir));
}

}  // namespace reshard::study

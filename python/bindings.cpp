// The `reshard._reshard` extension (pybind11): scenarios loaded from a path, a dict or a loaded
// Scenario, with `--set` overrides (model/overrides.hpp) given as a dict; plan, compare
// (study/compare.hpp), simulate, sweep (study/sweep.hpp). Results are plain dicts and lists (the
// library's JSON values converted); the `reshard` package (reshard/__init__.py) wraps this module
// and turns sweeps into pandas DataFrames. Library errors become Python exceptions carrying the
// library's message: reshard.ConfigError, PlanError and ScheduleError, each a reshard.Error, which is
// a ValueError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reshard/exec/plan_file.hpp"
#include "reshard/exec/program.hpp"
#include "reshard/exec/verify.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/defaults.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/planned.hpp"
#include "reshard/sim/schedule_sim.hpp"
#include "reshard/sim/simulate_json.hpp"
#include "reshard/study/compare.hpp"
#include "reshard/study/plan_summary.hpp"
#include "reshard/study/sweep.hpp"

namespace py = pybind11;
using namespace reshard;
using namespace reshard::model;

namespace {

// ---- conversions

py::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.get<double>());
    case nlohmann::json::value_t::string: return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& v : j) out.append(to_python(v));
      return out;
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [k, v] : j.items()) out[py::str(k)] = to_python(v);
      return out;
    }
    default: return py::none();
  }
}

// A Python value as a YAML node: dicts, lists and tuples, bools, numbers, strings (and anything
// else by its str()).
YAML::Node to_yaml(const py::handle& v) {
  if (py::isinstance<py::dict>(v)) {
    YAML::Node n(YAML::NodeType::Map);
    for (const auto& [k, x] : py::reinterpret_borrow<py::dict>(v)) n[py::str(k).cast<std::string>()] = to_yaml(x);
    return n;
  }
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    YAML::Node n(YAML::NodeType::Sequence);
    for (const auto& x : v) n.push_back(to_yaml(x));
    return n;
  }
  if (py::isinstance<py::bool_>(v)) return YAML::Node(v.cast<bool>() ? "true" : "false");
  if (v.is_none()) return YAML::Node(YAML::NodeType::Null);
  return YAML::Node(py::str(v).cast<std::string>());
}

std::string yaml_text(const py::handle& v, bool flow) {
  YAML::Emitter out;
  if (flow) out << YAML::Flow;
  out << to_yaml(v);
  return out.c_str();
}

bool is_path(const py::handle& v) {
  return py::isinstance<py::str>(v) || py::hasattr(v, "__fspath__");
}

std::string path_string(const py::handle& v) {
  return py::module_::import("os").attr("fspath")(v).cast<std::string>();
}

// ---- scenarios

// {"destination.tp": 16, "topology.cluster.nic_speed": "800Gbps"} -> "KEY=VALUE" texts, the value
// as YAML ("[0-7, 16-23]" for a list).
std::vector<std::string> override_texts(const py::object& overrides) {
  std::vector<std::string> out;
  if (overrides.is_none()) return out;
  if (!py::isinstance<py::dict>(overrides)) throw py::type_error("overrides: expected a dict {KEY: VALUE}");
  for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(overrides))
    out.push_back(py::str(k).cast<std::string>() + "=" + yaml_text(v, true));
  return out;
}

using Loaded = std::shared_ptr<const LoadedScenario>;

// `scenario`: a path (str or os.PathLike), a dict in the scenario format (relative model and
// topology paths resolved against `base_dir`, default the current directory), or a Scenario
// returned by load() (then `overrides` must be empty).
Loaded load(const py::object& scenario, const py::object& overrides, const py::object& base_dir) {
  if (py::isinstance<LoadedScenario>(scenario)) {
    if (!overrides.is_none() && py::len(overrides) > 0)
      throw py::value_error("overrides apply when a scenario is loaded: pass the path or dict, not a loaded Scenario");
    return scenario.cast<std::shared_ptr<LoadedScenario>>();
  }
  const std::filesystem::path base = base_dir.is_none() ? std::filesystem::current_path()
                                                        : std::filesystem::path(path_string(base_dir));
  if (is_path(scenario))
    return std::make_shared<const LoadedScenario>(
        study::load_scenario_with_overrides(std::filesystem::path(path_string(scenario)), override_texts(overrides), base));
  if (py::isinstance<py::dict>(scenario)) {
    const std::vector<Override> parsed = parse_overrides(override_texts(overrides), base);
    return std::make_shared<const LoadedScenario>(
        load_scenario(Scenario::parse(yaml_text(scenario, false), "<dict>", base, parsed)));
  }
  throw py::type_error("scenario: expected a path, a dict or a reshard.Scenario, got " +
                       py::str(py::type::of(scenario)).cast<std::string>());
}

CostParams cost_params(const std::string& profile, const py::object& params) {
  return CostParams::named_or_loaded(profile, params.is_none() ? std::string() : path_string(params));
}

std::string link_name(const Topology& topo, LinkId l) {
  if (l < 0) return "-";
  const auto& k = topo.link(l);
  return std::string(to_string(k.kind)) + " " + topo.device(k.from).name + " -> " + topo.device(k.to).name;
}

nlohmann::json prediction_json(const Prediction& p, const Topology& topo) {
  nlohmann::json j = prediction_fields(p, {"estimate_s", "bandwidth_bound_s", "pipeline_s", "latency_path_s", "critical_path_s",
                                           "overheads_s", "convert_source_s", "convert_destination_s", "network_bytes",
                                           "nvlink_bytes", "operations", "peak_staging_bytes", "peak_staging_gpu"});
  j["bottleneck"] = link_name(topo, p.bottleneck);
  return j;
}

// The module's way to a schedule: `strategy` (a line or "auto") under `profile` or the parameters
// file `params`, within the scenario's staging budgets, each at most `max_staging` when given.
ScheduleRequest request(const std::string& strategy, const std::string& profile, const py::object& params,
                        const std::optional<Bytes>& max_staging = std::nullopt) {
  ScheduleRequest r;
  r.strategy = strategy;
  r.profile = profile;
  r.params_file = params.is_none() ? std::string() : path_string(params);
  r.max_staging = max_staging;
  return r;
}

nlohmann::json scenario_json(const LoadedScenario& sc) {
  return {{"scenario", sc.scenario.name},
          {"description", sc.scenario.description},
          {"scenario_file", sc.scenario.file},
          {"model", sc.inventory.config().name},
          {"parameters", sc.inventory.parameters()},
          {"topology", sc.topology.name()},
          {"topology_gpus", sc.topology.gpu_count()},
          {"source", sc.source.description()},
          {"destination", sc.destination.description()},
          {"source_gpus", sc.source.world_size()},
          {"destination_gpus", sc.destination.world_size()}};
}

// ---- plan: the transfer set and the lower bound; with a strategy, its validated schedule and estimate.
py::object plan_py(const py::object& scenario, const std::optional<std::string>& strategy, const std::string& profile,
                   const py::object& params, const py::object& overrides, const py::object& base_dir) {
  const Loaded sc = load(scenario, overrides, base_dir);
  const PlannedScenario planned(sc);
  const TransferSet& ts = planned.transfers();
  const LowerBound lb = lower_bound(ts, sc->source, sc->destination, sc->topology);
  nlohmann::json j = scenario_json(*sc);
  j.update(study::plan_json(ts, lb));
  if (strategy) {
    const CostParams cost = cost_params(profile, params);
    const Schedule s = planned.schedule_for(request(*strategy, profile, params));
    validate(s, ts, sc->inventory, sc->source, sc->destination);
    j["strategy"] = to_string(s.params.strategy);
    j["params"] = describe(s.params);
    j["buffers"] = s.buffers.size();
    j["estimate"] = prediction_json(estimate(s, ts, sc->inventory, sc->topology, cost), sc->topology);
  }
  return to_python(j);
}

// ---- simulate: one schedule through the flow simulator; with timeline=True, every op's times and
// the per-link-kind allocated rate over time (columns, ready for a DataFrame).
py::object simulate_py(const py::object& scenario, const std::string& strategy, const std::string& profile,
                       const py::object& params, bool timeline, const py::object& overrides, const py::object& base_dir) {
  const Loaded sc = load(scenario, overrides, base_dir);
  const CostParams cost = cost_params(profile, params);
  const PlannedScenario planned(sc);
  const TransferSet& ts = planned.transfers();
  const LowerBound lb = lower_bound(ts, sc->source, sc->destination, sc->topology);
  const Schedule s = planned.schedule_for(request(strategy, profile, params));
  const Prediction pred = estimate(s, ts, sc->inventory, sc->topology, cost);
  sim::ScheduleSimOptions options = sim::closing_terms(pred);
  options.link_kind_timeline = timeline;
  const sim::ScheduleSimulation r = [&] {
    py::gil_scoped_release release;
    return sim::simulate_schedule(s, sc->topology, cost, options);
  }();
  sim::ScheduleReference ref;
  ref.scenario = sc->scenario.name;
  ref.profile = cost.profile;
  ref.estimate = pred.time;
  ref.staging_peak = pred.staging_peak;
  ref.staging_gpu = pred.staging_gpu;
  ref.lower_bound = lb;
  nlohmann::json j = sim::schedule_simulation_json(s, r, ref);
  if (timeline) {
    // ops: one row per op, in schedule order.
    nlohmann::json src = nlohmann::json::array(), dst = src, bytes = src, phase = src, chain = src, start = src,
                   finish = src;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const auto& op = s.ops[i];
      src.push_back(op.src);
      dst.push_back(op.dst);
      bytes.push_back(op.bytes.value);
      phase.push_back(to_string(op.phase));
      chain.push_back(op.chain >= 0 ? static_cast<std::int64_t>(s.chains[static_cast<std::size_t>(op.chain)].hops.size())
                                    : 0);
      start.push_back(r.ops[i].start.value);
      finish.push_back(r.ops[i].finish.value);
    }
    j["ops"] = {{"src", src}, {"dst", dst}, {"bytes", bytes}, {"phase", phase}, {"chain_hops", chain},
                {"start_s", start}, {"finish_s", finish}};
    // Link kinds: total capacity per kind, and the allocated rate per kind from each time on.
    std::vector<double> capacity(r.link_kind_names.size(), 0.0);
    for (std::size_t l = 0; l < r.link_kind.size(); ++l) {
      const auto k = r.link_kind[l];
      if (k >= 0 && static_cast<std::size_t>(k) < capacity.size()) capacity[static_cast<std::size_t>(k)] += r.network.capacity[l].value;
    }
    nlohmann::json cap = nlohmann::json::object();
    for (std::size_t k = 0; k < capacity.size(); ++k)
      if (capacity[k] > 0) cap[r.link_kind_names[k]] = capacity[k];
    nlohmann::json time = nlohmann::json::array(), kind = time, rate = time, util = time;
    for (const auto& g : r.result.group_timeline) {
      if (g.group < 0 || static_cast<std::size_t>(g.group) >= capacity.size() || capacity[static_cast<std::size_t>(g.group)] <= 0)
        continue;
      time.push_back(g.time.value);
      kind.push_back(r.link_kind_names[static_cast<std::size_t>(g.group)]);
      rate.push_back(g.rate.value);
      util.push_back(g.rate.value / capacity[static_cast<std::size_t>(g.group)]);
    }
    j["link_capacity_Bps"] = cap;
    j["link_timeline"] = {{"time_s", time}, {"kind", kind}, {"rate_Bps", rate}, {"utilization", util}};
  }
  return to_python(j);
}

// ---- compare: study::compare's JSON, each row with what limits it, and the lower bound's cut.
py::object compare_py(const py::object& scenario, const std::string& profile, const py::object& params, bool simulate,
                      bool tune, const std::optional<std::vector<std::string>>& strategies,
                      const std::vector<std::string>& configured, const py::object& overrides, const py::object& base_dir,
                      const std::vector<std::string>& systems) {
  const Loaded sc = load(scenario, overrides, base_dir);
  study::CompareOptions options;
  options.systems = systems;  // "all": every implementation profile
  options.profile = profile;
  if (!params.is_none()) options.params_file = path_string(params);
  options.simulate = simulate;
  options.tune = tune;
  if (strategies) options.strategies = *strategies;
  options.configured = configured;
  const study::CompareResult r = [&] {
    py::gil_scoped_release release;
    return study::compare(*sc, options);
  }();
  return to_python(study::to_json(r));
}

// ---- sweep: the scenario file at every point (one value per key), one JSON object per row.
py::object sweep_py(const py::object& scenario, const std::vector<std::string>& keys, const py::list& points,
                    const std::optional<std::vector<std::string>>& strategies,
                    const std::optional<std::vector<std::string>>& profiles, bool simulate, const py::object& overrides,
                    int threads, const py::object& base_dir) {
  if (!is_path(scenario)) throw py::type_error("sweep: the scenario must be a path (a file the sweep reloads at every point)");
  study::SweepSpec spec;
  spec.name = "python";
  spec.file = "<sweep>";
  spec.base_dir = base_dir.is_none() ? std::filesystem::current_path() : std::filesystem::path(path_string(base_dir));
  spec.scenario = std::filesystem::absolute(path_string(scenario));
  for (Override& o : parse_overrides(override_texts(overrides), spec.base_dir)) spec.base.push_back(std::move(o));
  spec.keys = keys;
  for (const auto& point : points) {
    std::vector<std::string> values;
    for (const auto& v : point) values.push_back(yaml_text(v, true));
    if (values.size() != keys.size()) throw py::value_error("sweep: a point has a value per key");
    spec.points.push_back(std::move(values));
  }
  spec.strategies = strategies ? *strategies : strategy_names();
  spec.profiles = profiles ? *profiles : std::vector<std::string>{kDefaultProfile};
  spec.simulate = simulate;
  study::SweepOptions options;
  options.threads = threads;
  const auto rows = [&] {
    py::gil_scoped_release release;
    return study::run_sweep(spec, options);
  }();
  py::list out;
  for (const auto& row : rows) out.append(to_python(study::to_json(row, spec)));
  return out;
}

// ---- refit plan: the per-GPU programs expanded (exec/plan_file.hpp), as the plan file's text.
std::optional<Bytes> staging_cap(const py::object& staging) {
  if (staging.is_none()) return std::nullopt;
  Bytes b = py::isinstance<py::int_>(staging) ? Bytes{staging.cast<std::int64_t>()} : parse_size(py::str(staging).cast<std::string>());
  if (b.value <= 0) throw ConfigError("staging", 0, py::str(staging).cast<std::string>(), "expected a positive size (bytes, or '1MiB')");
  return b;
}

py::bytes refit_plan_py(const py::object& scenario, const std::string& strategy, const py::object& staging,
                          const std::string& profile, const py::object& params, const py::object& overrides,
                          const py::object& base_dir, const std::vector<std::int32_t>& ranks) {
  const Loaded sc = load(scenario, overrides, base_dir);
  const PlannedScenario planned(sc);
  const Schedule s = planned.schedule_for(request(strategy, profile, params, staging_cap(staging)));
  const exec::RunPlan rp = exec::make_run_plan(*sc, planned.transfers(), s);
  return py::bytes(exec::refit_plan_text(rp, ranks));
}

}  // namespace

PYBIND11_MODULE(_reshard, m) {
  m.doc() = "reshard: resharding of model weights between training and inference layouts (C++ core)";
  static py::exception<Error> error(m, "Error", PyExc_ValueError);
  static py::exception<ConfigError> config_error(m, "ConfigError", error.ptr());
  static py::exception<PlanError> plan_error(m, "PlanError", error.ptr());
  static py::exception<ScheduleError> schedule_error(m, "ScheduleError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      config_error(e.what());
    } catch (const PlanError& e) {
      plan_error(e.what());
    } catch (const ScheduleError& e) {
      schedule_error(e.what());
    } catch (const Error& e) {
      error(e.what());
    }
  });

  py::class_<LoadedScenario, std::shared_ptr<LoadedScenario>>(m, "Scenario",
                                                            "A scenario with its model, topology and both layouts loaded")
      .def_property_readonly("name", [](const LoadedScenario& s) { return s.scenario.name; })
      .def("summary", [](const LoadedScenario& s) { return to_python(scenario_json(s)); },
           "name, model, topology, both layouts and their sizes, as a dict")
      .def(
          "without",
          [](const LoadedScenario& s, const std::vector<GpuId>& gpus) {
            Survivors v = survivors(s, gpus, "gpus");
            auto out = std::make_shared<LoadedScenario>(s);
            out->source = std::move(v.source);
            out->destination = std::move(v.destination);
            return out;
          },
          py::arg("gpus"),
          "The same scenario over the survivors of these lost GPUs (docs/robustness.md): plan, simulate, compare "
          "and _refit_plan take it as they take any Scenario")
      .def(
          "membership",
          [](const LoadedScenario& s, const std::vector<GpuId>& gpus) {
            return to_python(study::membership_json(survivors(s, gpus, "gpus").change));
          },
          py::arg("gpus"),
          "What losing these GPUs changes, as a dict (the `membership` of `reshard plan --without --json`): the "
          "lost GPUs by side, the source bytes they held, the destination units served and out")
      .def("__repr__", [](const LoadedScenario& s) {
        return "<reshard.Scenario " + s.scenario.name + ": " + s.source.description() + " -> " +
               s.destination.description() + ">";
      });

  m.def(
      "load",
      [](const py::object& scenario, const py::object& overrides, const py::object& base_dir) {
        return std::const_pointer_cast<LoadedScenario>(load(scenario, overrides, base_dir));
      },
      py::arg("scenario"), py::arg("overrides") = py::none(), py::arg("base_dir") = py::none(),
      "Loads a scenario (path, dict or Scenario) with overrides ({'destination.tp': 16, ...}) applied");
  m.def("plan", &plan_py, py::arg("scenario"), py::arg("strategy") = py::none(), py::arg("profile") = kDefaultProfile,
        py::arg("params") = py::none(), py::arg("overrides") = py::none(), py::arg("base_dir") = py::none(),
        "The transfer set and the lower bound; with a strategy ('auto' or as `reshard plan` takes it), its "
        "validated schedule's estimate");
  m.def("simulate", &simulate_py, py::arg("scenario"), py::arg("strategy") = kDefaultStrategy, py::arg("profile") = kDefaultProfile,
        py::arg("params") = py::none(), py::arg("timeline") = false, py::arg("overrides") = py::none(),
        py::arg("base_dir") = py::none(),
        "Simulates one strategy's schedule; timeline=True adds per-op times and per-link-kind rates");
  m.def("compare", &compare_py, py::arg("scenario"), py::arg("profile") = kDefaultProfile, py::arg("params") = py::none(),
        py::arg("simulate") = false, py::arg("tune") = true, py::arg("strategies") = py::none(),
        py::arg("configured") = std::vector<std::string>{}, py::arg("overrides") = py::none(),
        py::arg("base_dir") = py::none(), py::arg("systems") = std::vector<std::string>{},
        "`reshard compare --json` as a dict: every strategy estimated (and simulated), the lower bound, the "
        "tuner's choice ('best'), per strategy what limits it, and with systems=['all'] (or profile names) "
        "other refit systems' estimates under 'systems'");
  m.def("_sweep", &sweep_py, py::arg("scenario"), py::arg("keys"), py::arg("points"), py::arg("strategies") = py::none(),
        py::arg("profiles") = py::none(), py::arg("simulate") = false, py::arg("overrides") = py::none(),
        py::arg("threads") = 0, py::arg("base_dir") = py::none(),
        "The rows of a sweep over explicit points (reshard.sweep builds them from axes)");
  m.def("strategy_names", &strategy_names, "The named strategies (not 'auto')");
  m.attr("DEFAULT_STRATEGY") = py::str(kDefaultStrategy);  // simulate's, _refit_plan's and reshard.torch.Refit's
  m.def("_refit_plan", &refit_plan_py, py::arg("scenario"), py::arg("strategy") = kDefaultStrategy, py::arg("staging") = py::none(),
        py::arg("profile") = kDefaultProfile, py::arg("params") = py::none(), py::arg("overrides") = py::none(),
        py::arg("base_dir") = py::none(), py::arg("ranks") = std::vector<std::int32_t>{},
        "The refit plan file's text (exec/plan_file.hpp: a header line, then every GPU's program, or only those "
        "of `ranks`) for a strategy within the staging budgets (staging: at most this many bytes per GPU); "
        "reshard.torch.Refit runs it");
  m.def(
      "_piece_digest",
      [](const py::bytes& data) {
        const std::string_view v(data);
        exec::PieceDigest h;
        h.add(reinterpret_cast<const unsigned char*>(v.data()), static_cast<std::int64_t>(v.size()));
        return h.value();
      },
      py::arg("data"), "exec's piece digest (exec/verify.hpp) of a piece's bytes: the one reshard.torch computes");
}

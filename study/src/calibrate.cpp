#include "reshard/study/calibrate.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "reshard/model/checked.hpp"
#include "reshard/model/digest.hpp"
#include "reshard/model/json_file.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/measurement.hpp"
#include "reshard/model/planned.hpp"
#include "reshard/model/scenario.hpp"

#include <nlohmann/json.hpp>

namespace reshard::study {

using namespace reshard::model;

namespace {
Seconds* duration_field(CostParams& p, int k) {
  Seconds* fields[] = {&p.per_tensor, &p.per_broadcast_tensor, &p.per_bucket, &p.per_stage, nullptr, &p.per_call_rank};
  return fields[k];
}
constexpr int kCopyPasses = 4;  // the one constant that is not a duration
constexpr int kPerCallRank = 5;
}  // namespace

double overhead_value(const CostParams& p, int k) {
  return k == kCopyPasses ? p.copy_passes : duration_field(const_cast<CostParams&>(p), k)->value;
}

void set_overhead_value(CostParams& p, int k, double value) {
  if (k == kCopyPasses) p.copy_passes = value;
  else *duration_field(p, k) = Seconds{value};
}

std::string format_overhead(int k, double value) {
  if (k != kCopyPasses) return format(Seconds{value});
  std::ostringstream s;
  s << std::setprecision(3) << value << (value == 1 ? " pass" : " passes");
  return s.str();
}

// Stays whole: the fit's closures (parts, predict, fit) share the observations and the free set,
// and the regime search, the result and its support table read the same best fit.
Calibration calibrate(const std::vector<Observation>& obs, const CostParams& base, const std::vector<std::string>& free) {
  if (obs.empty()) throw ConfigError("", 0, "", "calibrate needs at least one measurement");
  bool is_free[kOverheadParams];
  for (int k = 0; k < kOverheadParams; ++k)
    // Without names every constant but per_call_rank (a term most profiles do not have) is free.
    is_free[k] = free.empty() ? k != kPerCallRank : std::find(free.begin(), free.end(), kOverheadNames[k]) != free.end();
  for (const auto& f : free)
    if (std::find_if(std::begin(kOverheadNames), std::end(kOverheadNames), [&](const char* n) { return f == n; }) ==
        std::end(kOverheadNames))
      throw ConfigError("", 0, "fit", "unknown parameter '" + f + "'");
  const int n = static_cast<int>(obs.size());
  for (const auto& o : obs)
    if (o.measured.value <= 0) throw ConfigError("", 0, o.label, "measured time must be positive");
  // An observation's time under constants x: the hardware time plus every term, or, when the
  // profile's host work overlaps the GPUs' (CostParams::host_overlaps), the larger of the GPU side
  // (hardware plus the copy term) and the host side (the per-tensor, per-bucket and per-stage terms).
  auto parts = [&](const Observation& o, const Eigen::VectorXd& x) {
    double gpu = o.hardware.value, host = o.host_fixed.value;
    for (int k = 0; k < kOverheadParams; ++k) (k == kCopyPasses ? gpu : host) += o.counts[k] * x(k);
    return std::pair{gpu, host};
  };
  auto predict = [&](const Observation& o, const Eigen::VectorXd& x) {
    const auto [gpu, host] = parts(o, x);
    return o.serial.value + (base.host_overlaps ? std::max(gpu, host) : gpu + host);
  };
  // Least squares on relative errors, every constant >= 0, for the observations' regimes (which
  // side sets each one's time; all "both" when nothing overlaps): every subset of the free
  // constants is solved and the best feasible one kept.
  enum Regime { Both, Gpu, Host };
  auto fit = [&](const std::vector<Regime>& regime) {
    Eigen::MatrixXd A(n, kOverheadParams);
    Eigen::VectorXd y(n);
    for (int i = 0; i < n; ++i) {
      const auto& o = obs[static_cast<std::size_t>(i)];
      const double w = 1.0 / o.measured.value;  // relative errors
      const Regime r = regime[static_cast<std::size_t>(i)];
      // What the fit does not choose: the serial part always, the GPU side's and the host side's
      // fixed parts where they count.
      double rest = o.serial.value + (r == Host ? 0 : o.hardware.value) + (r == Gpu ? 0 : o.host_fixed.value);
      for (int k = 0; k < kOverheadParams; ++k) {
        const bool counts = r == Both || (r == Gpu) == (k == kCopyPasses);
        A(i, k) = counts && is_free[k] ? o.counts[k] * w : 0;
        if (counts && !is_free[k]) rest += o.counts[k] * overhead_value(base, k);
      }
      y(i) = (o.measured.value - rest) * w;
    }
    Eigen::VectorXd best_x(kOverheadParams);
    for (int k = 0; k < kOverheadParams; ++k) best_x(k) = overhead_value(base, k);
    double best_res = std::numeric_limits<double>::infinity();
    for (int mask = 0; mask < (1 << kOverheadParams); ++mask) {
      std::vector<int> cols;
      bool usable = true;
      for (int k = 0; k < kOverheadParams; ++k)
        if ((mask >> k) & 1) {
          if (!is_free[k] || A.col(k).norm() == 0) usable = false;
          cols.push_back(k);
        }
      if (!usable) continue;
      Eigen::VectorXd x = Eigen::VectorXd::Zero(kOverheadParams);
      if (!cols.empty()) {
        Eigen::MatrixXd sub(n, static_cast<int>(cols.size()));
        for (std::size_t j = 0; j < cols.size(); ++j) sub.col(static_cast<int>(j)) = A.col(cols[j]);
        const Eigen::VectorXd sol = sub.colPivHouseholderQr().solve(y);
        bool feasible = true;
        for (std::size_t j = 0; j < cols.size(); ++j) {
          if (sol(static_cast<int>(j)) < 0) feasible = false;
          x(cols[j]) = sol(static_cast<int>(j));
        }
        if (!feasible) continue;
      }
      const double res = (A * x - y).squaredNorm();
      if (res < best_res - 1e-15) {
        best_res = res;
        for (int k = 0; k < kOverheadParams; ++k)
          if (is_free[k] && A.col(k).norm() != 0) best_x(k) = x(k);  // an uninformed one keeps the base value
      }
    }
    return best_x;
  };
  std::vector<Regime> regime(static_cast<std::size_t>(n), Both);
  Eigen::VectorXd best_x = fit(regime);
  if (base.host_overlaps) {
    // Which side sets each observation's time is part of the fit: every assignment is tried (up to
    // 2^12 of them) and the constants whose max-form predictions miss least kept; with more
    // observations, each is put on the side that sets its time under the previous fit, and refitted
    // until none changes side.
    auto misfit = [&](const Eigen::VectorXd& x) {
      double sq = 0;
      for (const auto& o : obs) sq += std::pow((predict(o, x) - o.measured.value) / o.measured.value, 2);
      return sq;
    };
    double best = misfit(best_x);
    if (n <= 12) {
      for (int mask = 0; mask < (1 << n); ++mask) {
        for (int i = 0; i < n; ++i) regime[static_cast<std::size_t>(i)] = (mask >> i) & 1 ? Host : Gpu;
        const Eigen::VectorXd x = fit(regime);
        const double m = misfit(x);
        if (m < best - 1e-15) {
          best = m;
          best_x = x;
        }
      }
    } else {
      for (int round = 0; round <= n + 1; ++round) {
        std::vector<Regime> next;
        for (const auto& o : obs) {
          const auto [gpu, host] = parts(o, best_x);
          next.push_back(host > gpu ? Host : Gpu);
        }
        if (next == regime) break;
        regime = next;
        const Eigen::VectorXd x = fit(regime);
        if (misfit(x) >= best) break;
        best = misfit(x);
        best_x = x;
      }
    }
  }
  Calibration c;
  c.params = base;
  for (int k = 0; k < kOverheadParams; ++k) set_overhead_value(c.params, k, best_x(k));
  double sq = 0;
  for (const auto& o : obs) {
    const double pred = predict(o, best_x);
    const double rel = (pred - o.measured.value) / o.measured.value;
    c.rows.push_back({o.label, o.measured, Seconds{pred}, rel});
    sq += rel * rel;
  }
  c.rms_relative_error = std::sqrt(sq / static_cast<double>(obs.size()));
  // What the fit rests on: per constant, the observations whose count for it is non-zero.
  std::string fitted_names;
  for (int k = 0; k < kOverheadParams; ++k) {
    for (const auto& o : obs)
      if (o.counts[k] != 0) ++c.points[k];
    c.fitted[k] = is_free[k] && c.points[k] > 0;
    if (!c.fitted[k]) continue;
    ++c.fitted_constants;
    fitted_names += (fitted_names.empty() ? "" : ", ") + std::string(kOverheadNames[k]);
  }
  if (c.fitted_constants > 0 && c.fitted_constants >= n) {
    std::ostringstream w;
    w << "fitting " << c.fitted_constants << (c.fitted_constants == 1 ? " constant (" : " constants (") << fitted_names
      << ") to " << n << (n == 1 ? " measurement" : " measurements")
      << ": as many constants as measurements or more, so the measurements cannot check the fit; its rms relative "
         "error ("
      << std::fixed << std::setprecision(1) << 100 * c.rms_relative_error
      << " %) says how well it fits them, not how well it predicts; fit fewer constants or add measurements";
    c.warnings.push_back(w.str());
  }
  for (int k = 0; k < kOverheadParams; ++k)
    if (!free.empty() && is_free[k] && c.points[k] == 0)  // named by --fit, not informed
      c.warnings.push_back(std::string(kOverheadNames[k]) +
                           " was to be fitted, but no measurement has a term for it (its count is 0 in every one): "
                           "not fitted, it keeps the base profile's value (" +
                           format_overhead(k, overhead_value(c.params, k)) + ")");
  return c;
}

namespace {
// The profile with every fittable constant zeroed, but one copy pass: what an Observation's
// hardware time (less that pass) and its copy term per pass are estimated with.
CostParams hardware_only(CostParams p) {
  p.per_tensor = p.per_broadcast_tensor = p.per_bucket = p.per_stage = Seconds{0};
  p.copy_passes = 1;
  p.per_call_rank = Seconds{1e-9};  // a token value, so the estimate counts call_ranks; its time is taken out
  return p;
}

Observation observe(const std::string& label, Seconds measured, const Schedule& s, const TransferSet& ts,
                    const LoadedScenario& sc, const CostParams& hw) {
  const Prediction pr = estimate(s, ts, sc.inventory, sc.topology, hw);
  Observation o;
  o.label = label;
  o.measured = measured;
  // hw runs one copy pass (its time is the copy term's count) and no fittable host work: what host
  // work it has is the fixed part, apart from the GPU side (time = converts + GPUs + overheads).
  o.hardware = pr.time - pr.overheads + pr.device - pr.copies;
  o.host_fixed = pr.host - hw.per_call_rank * (static_cast<double>(pr.call_ranks) / std::max(1, hw.tensor_streams));
  o.serial = pr.host_copies + pr.fixed;
  o.counts[0] = static_cast<double>(pr.reshard_tensors) / std::max(1, hw.tensor_streams);  // per_tensor's calls
  o.counts[1] = static_cast<double>(pr.broadcast_tensors);
  o.counts[2] = static_cast<double>(pr.broadcast_buckets);
  o.counts[3] = static_cast<double>(pr.broadcast_stages);
  o.counts[4] = pr.copies.value;
  o.counts[5] = static_cast<double>(pr.call_ranks) / std::max(1, hw.tensor_streams);
  return o;
}

// A Measurement written by `reshard exec -o`, read as `reshard check` reads it (load_measurement:
// its digest, its scenario with the run's --set overrides): the schedule it ran, validated in full
// against that scenario's plan before anything estimates it, and elapsed_s.
std::vector<Observation> observations_from_measurement(const std::filesystem::path& file, const CostParams& hw,
                                                       bool accept_unverified) {
  const Measurement m = load_measurement(file, accept_unverified);
  if (!(m.elapsed_s > 0))
    throw ConfigError(file.string(), 0, "elapsed_s", "the measured time must be positive, got " + checked::cut(std::to_string(m.elapsed_s)));
  const LoadedScenario sc = load_scenario(std::filesystem::path(m.scenario_path), measurement_overrides(m));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const Schedule& s = m.schedule;
  if (s.piece_count != static_cast<std::int32_t>(ts.pieces.size()))
    throw ConfigError(file.string(), 0, "schedule", "does not match the plan of " + m.scenario_path);
  try {
    check_schedule_gpus(s, sc.topology.gpu_count());
    validate(s, ts, sc.inventory, sc.source, sc.destination);
  } catch (const ScheduleError& e) {
    throw ConfigError(file.string(), 0, "schedule", e.what());
  }
  return {observe(sc.scenario.name + " " + std::string(to_string(s.params.strategy)) + " (measured)", Seconds{m.elapsed_s}, s, ts, sc, hw)};
}
}  // namespace

std::vector<MeasuredRun> read_measured_runs(const std::filesystem::path& csv) {
  check_input_file(csv, "measurements file");
  std::ifstream in(csv);
  if (!in) throw ConfigError(csv.string(), 0, "", "cannot open measurements file");
  std::vector<MeasuredRun> runs;
  std::map<std::string, std::size_t> column;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (column.empty()) {
      // Every column is one reshard reads (or `note`, free text): an unknown one is refused, as a
      // column meant for reshard and ignored would change the fit without a word.
      static const std::set<std::string> known{"scenario", "strategy", "measured_s", "note"};
      for (std::size_t i = 0; i < cells.size(); ++i) {
        std::string name = cells[i];
        name.erase(name.find_last_not_of(" \t\r") + 1);
        if (!known.count(name))
          throw ConfigError(csv.string(), lineno, name,
                            "unknown column; a measurements file has the columns scenario, strategy, measured_s and "
                            "optionally note (free text)");
        if (!column.emplace(name, i).second) throw ConfigError(csv.string(), lineno, name, "column named twice");
      }
      for (const char* need : {"scenario", "strategy", "measured_s"})
        if (!column.count(need))
          throw ConfigError(csv.string(), lineno, need, "header must name the columns scenario,strategy,measured_s");
      continue;
    }
    if (cells.size() > column.size())
      throw ConfigError(csv.string(), lineno, "",
                        std::to_string(cells.size()) + " values, but the header names " + std::to_string(column.size()) +
                            " columns (a comma inside a value?)");
    auto get = [&](const char* name) -> std::string {
      const std::size_t i = column.at(name);
      if (i >= cells.size()) throw ConfigError(csv.string(), lineno, name, "missing value");
      return cells[i];
    };
    MeasuredRun run;
    run.line = lineno;
    std::string text = get("measured_s");
    text.erase(0, text.find_first_not_of(" \t"));
    text.erase(text.find_last_not_of(" \t\r") + 1);
    const auto v = checked::parse_finite(text);
    if (!v) throw ConfigError(csv.string(), lineno, "measured_s", "not a finite number: " + checked::quote(text));
    if (!(*v > 0)) throw ConfigError(csv.string(), lineno, "measured_s", "must be positive, got " + checked::quote(text));
    run.measured = Seconds{*v};
    run.scenario = (csv.parent_path() / get("scenario")).lexically_normal();
    try {
      run.strategy = parse_strategy(get("strategy"));
    } catch (const PlanError& e) {
      throw ConfigError(csv.string(), lineno, "strategy", e.what());
    }
    runs.push_back(std::move(run));
  }
  if (runs.empty())
    throw ConfigError(csv.string(), lineno, "",
                      "no measurements: the file needs a header (scenario,strategy,measured_s) and at least one row");
  return runs;
}

std::vector<Observation> observe_runs(const std::filesystem::path& csv, const std::vector<MeasuredRun>& runs,
                                      const CostParams& base) {
  const CostParams hw = hardware_only(base);
  std::map<std::string, PlannedScenario> planned;
  std::vector<Observation> out;
  for (const auto& run : runs) {
    auto it = planned.find(run.scenario.string());
    if (it == planned.end()) it = planned.emplace(run.scenario.string(), PlannedScenario(load_scenario(run.scenario))).first;
    const LoadedScenario& sc = it->second.scenario();
    const TransferSet& ts = it->second.transfers();
    const Schedule s = [&] {
      try {
        return it->second.schedule_for(run.strategy, it->second.budgets());
      } catch (const PlanError& e) {
        throw ConfigError(csv.string(), run.line, "strategy", e.what());
      }
    }();
    out.push_back(observe(sc.scenario.name + " " + describe(run.strategy), run.measured, s, ts, sc, hw));
  }
  return out;
}

std::vector<Observation> observations_from_csv(const std::filesystem::path& csv, const CostParams& base,
                                               bool accept_unverified) {
  if (csv.extension() == ".json") return observations_from_measurement(csv, hardware_only(base), accept_unverified);
  return observe_runs(csv, read_measured_runs(csv), base);
}

void write_params(const std::filesystem::path& out, const Calibration& c, const std::string& note) {
  std::ofstream f(out);
  if (!f) throw ConfigError(out.string(), 0, "", "cannot write");
  f << "# Cost parameters written by `reshard calibrate`. " << note << "\n";
  f << "# Fit (least squares on relative errors, overheads >= 0); rms relative error "
    << c.rms_relative_error << "\n";
  for (const auto& r : c.rows)
    f << "#   " << r.label << ": measured " << r.measured.value << " s, predicted " << r.predicted.value << " s ("
      << (r.relative_error >= 0 ? "+" : "") << r.relative_error * 100 << " %)\n";
  for (int k = 0; k < kOverheadParams; ++k)
    if (k != kPerCallRank || c.fitted[k] || overhead_value(c.params, k) != 0)  // per_call_rank: where the profile has it
      f << "# " << kOverheadNames[k] << ": "
      << (c.fitted[k] ? "fitted on " : "not fitted (the base profile's value); its term in ") << c.points[k] << " of "
      << c.rows.size() << " measurements\n";
  for (const auto& w : c.warnings) f << "# warning: " << w << "\n";
  const auto& p = c.params;
  f << "profile: " << p.profile << "\n";
  f << "efficiency:\n";
  for (std::size_t k = 0; k < kLinkKinds; ++k) f << "  " << kLinkKindKeys[k] << ": " << p.efficiency[k] << "\n";
  f << "chain_hop_latency:\n";
  for (std::size_t k = 0; k < kLinkKinds; ++k)
    f << "  " << kLinkKindKeys[k] << ": " << p.chain_hop_latency[k].value * 1e6 << "us\n";
  f << "per_op: " << p.per_op.value * 1e6 << "us\n";
  f << "per_tensor: " << p.per_tensor.value * 1e6 << "us\n";
  f << "per_broadcast_tensor: " << p.per_broadcast_tensor.value * 1e6 << "us\n";
  f << "per_bucket: " << p.per_bucket.value * 1e6 << "us\n";
  f << "per_stage: " << p.per_stage.value * 1e6 << "us\n";
  if (p.per_call_rank.value > 0) f << "per_call_rank: " << p.per_call_rank.value * 1e6 << "us\n";
  f << "tensor_streams: " << p.tensor_streams << "\n";
  f << "barriers_per_tensor: " << p.barriers_per_tensor << "\n";
  f << "copy_passes: " << p.copy_passes << "\n";
  // The terms no fit chooses, written when the profile has them (a file for a profile without them
  // reads as before).
  if (p.load_per_tensor.value > 0) f << "load_per_tensor: " << p.load_per_tensor.value * 1e6 << "us\n";
  if (p.load_per_expert.value > 0) f << "load_per_expert: " << p.load_per_expert.value * 1e6 << "us\n";
  if (p.per_read.value > 0) f << "per_read: " << p.per_read.value * 1e6 << "us\n";
  if (p.per_refit.value > 0) f << "per_refit: " << p.per_refit.value * 1e6 << "us\n";
  if (p.host_passes > 0) f << "host_passes: " << p.host_passes << "\n";
  f << "host_overlaps: " << (p.host_overlaps ? "true" : "false") << "\n";
  f << "step_barriers: " << (p.step_barriers ? "true" : "false") << "\n";
}

}  // namespace reshard::study

// reshard sweep SPEC.yaml [-o PREFIX] [--jobs N] [--simulate] [--set KEY=VALUE]...
//
// Every point of a sweep (study/sweep.hpp, docs/sweep.md) compared: PREFIX.csv (tidy, one row per
// point x profile x strategy), PREFIX.jsonl (the same rows as JSON lines) and a summary table on
// stdout, one line per point and profile. Under `mpirun -np N` rank r evaluates the points i with
// i % N == r and rank 0 gathers the rows and writes everything, exactly as a run in one process.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "commands.hpp"
#include "progress.hpp"
#include "reshard/exec/processes.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/units.hpp"
#include "reshard/study/sweep.hpp"
#include "inputs.hpp"
#include "set_option.hpp"
#include "table.hpp"

namespace reshard::cli {

using namespace reshard::model;

namespace {

struct SweepArgs {
  std::string spec, output, params;
  int jobs = 0;
  bool simulate = false;
  bool keep_going = false;
  std::vector<std::string> sets;
  std::string delta;  // --delta D: an axis delta = [dense, D]
};

// Returns the number of failed points.
std::size_t print_summary(const study::SweepSpec& spec, const std::vector<study::SweepRow>& rows) {
  std::vector<std::string> headers{"point>"};
  for (const auto& k : spec.keys) headers.push_back(k);
  if (spec.profiles.size() > 1) headers.push_back("profile");
  for (const char* h : {"lower bound>", "bound limit", "best", "estimate>", "simulated>", "x bound>", "limit", "error"})
    headers.push_back(h);
  Table t(headers);
  std::size_t failed = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    if (i > 0 && rows[i - 1].point == r.point && rows[i - 1].profile == r.profile) continue;  // one line per point
    std::vector<std::string> line{std::to_string(r.point)};
    line.insert(line.end(), r.inputs.begin(), r.inputs.end());
    if (spec.profiles.size() > 1) line.push_back(r.profile);
    if (!r.error.empty()) {
      ++failed;
      line.insert(line.end(), {"-", "-", "-", "-", "-", "-", "-", r.error});
      t.add(line);
      continue;
    }
    const study::SweepRow* best = &r;
    for (std::size_t j = i; j < rows.size() && rows[j].point == r.point && rows[j].profile == r.profile; ++j)
      if (rows[j].strategy == r.best) best = &rows[j];
    line.insert(line.end(),
                {format(Seconds{*r.lower_bound_s}), r.bound_limit, best->params, format(Seconds{*best->estimate_s}),
                 best->simulated_s ? format(Seconds{*best->simulated_s}) : "-",
                 fixed(*best->estimate_s / *r.lower_bound_s, 2), best->limit, ""});
    t.add(line);
  }
  t.print(std::cout);
  std::cout << "\n" << rows.size() << " rows; " << failed << " failed point" << (failed == 1 ? "" : "s")
            << ". best: the fastest strategy of the point ("
            << (spec.simulate ? "simulated" : "estimated")
            << "); limit: what bounds its estimate (host link = the GPU <-> NIC link); bound limit: what forms the "
               "lower bound's binding cut.\n";
  return failed;
}

void run_sweep(const SweepArgs& a) {
  exec::ProcessGroup processes;
  study::SweepSpec spec = study::SweepSpec::load(a.spec);
  if (a.simulate) spec.simulate = true;
  if (!a.params.empty()) spec.use_params_file(a.params);
  for (Override& o : parse_overrides(a.sets)) spec.base.push_back(std::move(o));
  if (!a.delta.empty()) {
    std::vector<std::string> check;
    add_delta_override(a.delta, check);  // refuses a bad density, naming --delta
    spec.add_axis("delta", {"dense", a.delta});
  }
  const bool root = processes.rank() == 0;
  // Every point's inputs are read first: a value no reader takes stops the sweep before it runs.
  if (const auto problems = study::check_points(spec); !problems.empty()) {
    if (root)
      for (const auto& p : problems) std::cerr << "reshard: " << (a.keep_going ? "warning: " : "error: ") << p << '\n';
    if (!a.keep_going) {
      if (root)
        std::cerr << "reshard: error: no point was run (" << problems.size() << " problem"
                  << (problems.size() == 1 ? "" : "s") << " above); --keep-going runs the others and writes the "
                  << "failed points as error rows\n";
      throw ReportedByFirstProcess{2};
    }
  }
  ProgressLine progress(std::cerr, root && isatty(STDERR_FILENO));
  study::SweepOptions options;
  options.threads = a.jobs;
  options.rank = processes.rank();
  options.ranks = processes.size();
  options.progress = [&](std::size_t done, std::size_t total, std::size_t failed) {
    progress.update({"points", static_cast<std::int64_t>(done), static_cast<std::int64_t>(total),
                     failed ? std::to_string(failed) + " failed" : ""});
  };
  std::vector<study::SweepRow> rows = study::run_sweep(spec, options);
  progress.clear();

  if (processes.size() > 1) {  // every rank's rows as JSON lines to rank 0, back into point order
    std::string mine;
    for (const auto& r : rows) mine += to_json(r, spec).dump() + "\n";
    const auto all = processes.gather(mine);
    if (!root) return;
    std::map<std::int64_t, std::vector<study::SweepRow>> by_point;
    for (const auto& text : all) {
      std::istringstream in(text);
      for (std::string line; std::getline(in, line);) {
        auto r = study::sweep_row_from_json(nlohmann::json::parse(line), spec);
        by_point[r.point].push_back(std::move(r));
      }
    }
    rows.clear();
    for (auto& [point, point_rows] : by_point)
      for (auto& r : point_rows) rows.push_back(std::move(r));
  }
  const std::string prefix = a.output.empty() ? spec.name : a.output;
  std::ofstream csv(prefix + ".csv"), jsonl(prefix + ".jsonl");
  if (!csv || !jsonl) throw ConfigError(prefix, 0, "--output", "cannot write " + prefix + ".csv and " + prefix + ".jsonl");
  csv << study::csv_header(spec) << '\n';
  for (const auto& r : rows) {
    csv << study::to_csv(r) << '\n';
    nlohmann::json j = to_json(r, spec);
    j["schema"] = "reshard-sweep-row-1";  // docs/json-schema.md
    jsonl << j.dump() << '\n';
  }
  const std::size_t failed = print_summary(spec, rows);
  std::cout << "wrote " << prefix << ".csv and " << prefix << ".jsonl (" << spec.points.size() << " points, "
            << processes.size() << " process" << (processes.size() == 1 ? "" : "es") << ")\n";
  if (failed > 0 && !a.keep_going) {
    std::cerr << "reshard: error: " << failed << " point" << (failed == 1 ? "" : "s")
              << " failed (the error column above); --keep-going exits 0 with error rows\n";
    throw ReportedByFirstProcess{1};
  }
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  auto* cmd = app.add_subcommand("sweep",
                                 "What if, over many points: axes of --set overrides on a scenario, every strategy "
                                 "estimated (mpirun -np N splits the points)");
  cmd->add_option("spec", a->spec, "Sweep spec YAML (docs/sweep.md)")->required();
  cmd->add_option("-o,--output", a->output, "Write PREFIX.csv and PREFIX.jsonl (default: the spec's name)");
  cmd->add_option("-j,--jobs", a->jobs, "Threads per process (default: every core)")->check(CLI::PositiveNumber);
  cmd->add_flag("--simulate", a->simulate, "Also simulate every schedule");
  cmd->add_flag("--keep-going", a->keep_going,
                "Run the points that read even when others do not, and exit 0 when points fail (their rows "
                "carry the error)");
  cmd->add_option("--params", a->params,
                  "Cost parameters file (as written by reshard calibrate); replaces the spec's profiles");
  add_set_option(cmd, a->sets);
  cmd->add_option("--delta", a->delta,
                  "Each point also as a delta refit in which this share of every tensor's elements changed, in (0, 1]: "
                  "an axis delta with values dense and DENSITY (docs/sweep.md)");
  cmd->callback([a] { run_sweep(*a); });
}

}  // namespace reshard::cli

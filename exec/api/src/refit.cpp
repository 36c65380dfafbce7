#include "reshard/exec/refit.hpp"

#include <cstdio>

#ifdef RESHARD_HAVE_MPI
#include <mpi.h>
#endif

#include "reshard/exec/backend.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/overrides.hpp"
#include "reshard/model/planned.hpp"

namespace reshard::exec {

using namespace reshard::model;

struct Refit::State {
  Options options;
  std::string scenario_path;
  std::unique_ptr<PlannedScenario> planned;
  std::unique_ptr<Schedule> schedule;
  RunPlan plan;
  std::shared_ptr<BackendSession> session;
};

Refit::Refit(const std::filesystem::path& scenario, const Options& options) : state_(std::make_unique<State>()) {
  State& st = *state_;
  st.options = options;
  st.scenario_path = std::filesystem::absolute(scenario).string();
  st.planned = std::make_unique<PlannedScenario>(load_scenario(scenario, parse_overrides(options.sets)));
  ScheduleRequest request;
  request.strategy = options.strategy;
  request.profile = options.profile;
  request.max_staging = options.max_staging;
  request.threads = 1;  // every process of the launch tunes: the same answer, without oversubscribing the node
  st.schedule = std::make_unique<Schedule>(st.planned->schedule_for(request));
  const LoadedScenario& sc = st.planned->scenario();
  st.plan = make_run_plan(sc, st.planned->transfers(), *st.schedule);
  const Backend& t = backend_named(options.backend);
  if (!t.available) throw ExecError(std::string("the ") + t.name + " backend is not built: it " + t.detail, -1, -1);
  st.session = t.open_session();
}

Refit::~Refit() = default;

int Refit::world_size() const { return static_cast<int>(state_->plan.gpus.size()); }
const RunPlan& Refit::plan() const { return state_->plan; }
const Schedule& Refit::schedule() const { return *state_->schedule; }

int Refit::rank() const {
#ifdef RESHARD_HAVE_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
#endif
  return 0;
}

std::vector<ShardRef> Refit::shards(int rank) const {
  const RunPlan& rp = state_->plan;
  if (rank < 0 || rank >= world_size())
    throw ExecError("rank " + std::to_string(rank) + " is outside the refit's " + std::to_string(world_size()) + " processes",
                    rank, -1);
  const GpuProgram prog = build_program(rp, rp.gpus[static_cast<std::size_t>(rank)]);
  std::vector<ShardRef> out;
  for (const Region& r : prog.regions) {
    if (r.kind != Region::Kind::Source && r.kind != Region::Kind::Destination) continue;
    const auto& t = rp.scenario->inventory.tensor(r.tensor);
    out.push_back({prog.gpu, r.kind == Region::Kind::Source ? Side::Source : Side::Destination, r.tensor, t.name, r.box,
                   r.bytes, static_cast<std::int32_t>(dtype_size(t.dtype))});
  }
  return out;
}

ShardBinding Refit::binding(const ShardRef& s, void* data, std::int64_t bytes, MemoryKind memory) const {
  return {s.gpu, s.side, s.tensor, s.box, data, bytes, memory};
}

RefitStats Refit::run(const MemoryBinding& binding) {
  State& st = *state_;
  ExecOptions o;
  o.backend = st.options.backend;
  o.verification = st.options.verification;
  o.binding = &binding;
  o.timeout_s = st.options.timeout_s;
  o.profile = st.options.profile;
  o.scenario_path = st.scenario_path;
  o.scenario_sets = st.options.sets;
  o.session = st.session;
  // Rank 0 learns the outcome (mpi_finish): it tells every process, so that each returns the same
  // figures or throws the same verification failure. A fatal error (a timeout) is thrown where it
  // is seen and leaves the others blocked: the caller aborts the launch.
  struct Outcome {
    int failed = 0, rank = -1, peer = -1, verified = 0;
    double seconds = 0;
    long long bytes = 0, staging = 0;
    char message[1024] = {};
  } out;
  try {
    const RunResult r = execute(st.plan, o);
    out.seconds = r.measurement.elapsed_s;
    out.bytes = r.measurement.bytes_verified;
    out.verified = r.measurement.verified;
    for (const GpuStaging& g : r.measurement.staging) out.staging = std::max(out.staging, static_cast<long long>(g.bytes));
  } catch (const ExecError& e) {
    if (e.fatal()) throw;
    out.failed = 1;
    out.rank = e.rank();
    out.peer = e.peer();
    std::snprintf(out.message, sizeof out.message, "%s", e.what());
  }
#ifdef RESHARD_HAVE_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Bcast(&out, sizeof out, MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
  if (out.failed) throw ExecError(out.message, out.rank, out.peer);
  RefitStats stats;
  stats.seconds = out.seconds;
  stats.bytes_verified = out.bytes;
  stats.verified = out.verified != 0;
  stats.staging_peak_bytes = out.staging;
  return stats;
}

void Refit::abort(int code) noexcept {
  abandon_run(code);
  std::abort();
}

}  // namespace reshard::exec

// The C API over reshard::exec::Refit (reshard/exec/refit_c.h): exceptions become -1 and a message.
#include "reshard/exec/refit_c.h"

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "reshard/exec/refit.hpp"
#include "reshard/model/units.hpp"

struct reshard_refit {
  std::unique_ptr<reshard::exec::Refit> refit;
  std::vector<reshard::exec::ShardRef> shards;  // this process's
  std::vector<bool> bound;
  reshard::exec::MemoryBinding binding;
  std::string strategy;
};

namespace {

void say(char* error, std::size_t size, const std::string& message) {
  if (error && size > 0) std::snprintf(error, size, "%s", message.c_str());
}

}  // namespace

extern "C" {

reshard_refit* reshard_refit_create(const char* scenario_path, const char* strategy, int64_t max_staging_bytes,
                                    const char* backend, double timeout_s, const char* verification, char* error,
                                    size_t error_size) {
  try {
    if (!scenario_path) throw std::invalid_argument("no scenario path");
    reshard::exec::Refit::Options o;
    if (strategy) o.strategy = strategy;
    if (max_staging_bytes > 0) o.max_staging = reshard::model::Bytes{max_staging_bytes};
    if (backend) o.backend = backend;
    if (timeout_s > 0) o.timeout_s = timeout_s;
    if (verification) o.verification = reshard::model::verification_named(verification, "verification");
    auto r = std::make_unique<reshard_refit>();
    r->refit = std::make_unique<reshard::exec::Refit>(scenario_path, o);
    r->shards = r->refit->shards(r->refit->rank());
    r->bound.assign(r->shards.size(), false);
    r->strategy = reshard::model::describe(r->refit->schedule().params);
    return r.release();
  } catch (const std::exception& e) {
    say(error, error_size, e.what());
    return nullptr;
  }
}

void reshard_refit_destroy(reshard_refit* refit) { delete refit; }

int reshard_refit_world_size(const reshard_refit* refit) { return refit ? refit->refit->world_size() : 0; }
int reshard_refit_rank(const reshard_refit* refit) { return refit ? refit->refit->rank() : -1; }
const char* reshard_refit_strategy(const reshard_refit* refit) { return refit ? refit->strategy.c_str() : ""; }
int reshard_refit_shard_count(const reshard_refit* refit) { return refit ? static_cast<int>(refit->shards.size()) : 0; }

int reshard_refit_shard(const reshard_refit* refit, int index, reshard_shard* out, char* error, size_t error_size) {
  if (!refit || !out || index < 0 || index >= static_cast<int>(refit->shards.size())) {
    say(error, error_size, "shard " + std::to_string(index) + " is not one of this process's " +
                               std::to_string(refit ? refit->shards.size() : 0) + " shards");
    return -1;
  }
  const auto& s = refit->shards[static_cast<std::size_t>(index)];
  if (s.box.dims.size() > RESHARD_MAX_DIMS) {
    say(error, error_size, "tensor '" + s.name + "' has more than " + std::to_string(RESHARD_MAX_DIMS) + " dimensions");
    return -1;
  }
  out->side = s.side == reshard::exec::Side::Source ? 0 : 1;
  out->tensor = s.name.c_str();
  out->dims = static_cast<int>(s.box.dims.size());
  for (std::size_t d = 0; d < s.box.dims.size(); ++d) {
    out->lo[d] = s.box.dims[d].lo;
    out->hi[d] = s.box.dims[d].hi;
  }
  out->bytes = s.bytes;
  out->element_size = s.element_size;
  return 0;
}

int reshard_refit_bind(reshard_refit* refit, int index, void* data, int64_t bytes, char* error, size_t error_size) {
  if (!refit || index < 0 || index >= static_cast<int>(refit->shards.size())) {
    say(error, error_size, "shard " + std::to_string(index) + " is not one of this process's shards");
    return -1;
  }
  const auto& s = refit->shards[static_cast<std::size_t>(index)];
  if (!data || bytes < s.bytes) {
    say(error, error_size, "shard " + std::to_string(index) + " ('" + s.name + "') needs a buffer of " +
                               std::to_string(s.bytes) + " bytes, got " + std::to_string(bytes));
    return -1;
  }
  refit->binding.bind(refit->refit->binding(s, data, bytes));
  refit->bound[static_cast<std::size_t>(index)] = true;
  return 0;
}

int reshard_refit_run(reshard_refit* refit, reshard_run_stats* stats, char* error, size_t error_size) {
  if (stats) *stats = reshard_run_stats{0, 0, 0, 0, -1, -1};
  if (!refit) return -1;
  for (std::size_t i = 0; i < refit->bound.size(); ++i)
    if (!refit->bound[i]) {
      say(error, error_size, "shard " + std::to_string(i) + " ('" + refit->shards[i].name + "') is not bound");
      return -1;
    }
  try {
    const reshard::exec::RefitStats st = refit->refit->run(refit->binding);
    if (stats) *stats = reshard_run_stats{st.seconds, st.bytes_verified, st.verified ? 1 : 0, st.staging_peak_bytes, -1, -1};
    return 0;
  } catch (const reshard::exec::ExecError& e) {
    if (stats) {
      stats->rank = e.rank();
      stats->peer = e.peer();
    }
    say(error, error_size, e.what());
    return -1;
  } catch (const std::exception& e) {
    say(error, error_size, e.what());
    return -1;
  }
}

void reshard_refit_abort(reshard_refit* refit, int code) {
  if (refit) refit->refit->abort(code);
}

}  // extern "C"

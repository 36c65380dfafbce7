/* The refit engine's C API (docs/execution.md, "Refit from your own code"), for embedding reshard in
 * a program of another language: plan once, bind this process's shards to buffers, run every step.
 * It wraps reshard::exec::Refit (reshard/exec/refit.hpp). Every process of an MPI launch (one per
 * GPU of the run) calls the same functions in the same order. Functions that can fail return 0 on
 * success and -1 on failure, with the error's message written to `error` (at most error_size bytes,
 * NUL-terminated; NULL for none); a failed run also gives the rank and the peer it waited for. */
#ifndef RESHARD_EXEC_REFIT_C_H
#define RESHARD_EXEC_REFIT_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct reshard_refit reshard_refit;

#define RESHARD_MAX_DIMS 8

/* One shard of this process: side 0 a source it holds, 1 a destination it fills. Its buffer holds
 * the box's elements row-major in the tensor's dtype: `bytes` bytes. */
typedef struct {
  int side;
  const char* tensor; /* HF name; valid as long as the refit */
  int dims;
  int64_t lo[RESHARD_MAX_DIMS], hi[RESHARD_MAX_DIMS];
  int64_t bytes;
  int element_size;
} reshard_shard;

typedef struct {
  double seconds;
  int64_t bytes_verified;
  int verified;
  int64_t staging_peak_bytes;
  int rank, peer; /* of a failed run: this process, and the peer it waited for (-1: none) */
} reshard_run_stats;

/* Plans the refit: the scenario file, a strategy ("auto", or as `reshard plan --strategy` takes
 * it; NULL: the default, auto), the most staging one GPU may hold (0: the scenario's budgets),
 * the backend ("host" or "nccl"), the timeout in seconds and the verification ("digest",
 * "pattern" or "none"). NULL on failure. */
reshard_refit* reshard_refit_create(const char* scenario_path, const char* strategy, int64_t max_staging_bytes,
                                    const char* backend, double timeout_s, const char* verification, char* error,
                                    size_t error_size);
void reshard_refit_destroy(reshard_refit* refit);

int reshard_refit_world_size(const reshard_refit* refit);
/* This process's rank in the launch. */
int reshard_refit_rank(const reshard_refit* refit);
/* The strategy the refit runs, with its parameters ("hybrid chunk=512KiB max_chain=2"). */
const char* reshard_refit_strategy(const reshard_refit* refit);
/* The number of shards of this process, and shard `index` of them. */
int reshard_refit_shard_count(const reshard_refit* refit);
int reshard_refit_shard(const reshard_refit* refit, int index, reshard_shard* out, char* error, size_t error_size);
/* Binds shard `index` of this process to `bytes` bytes of host memory at `data`. */
int reshard_refit_bind(reshard_refit* refit, int index, void* data, int64_t bytes, char* error, size_t error_size);
/* One refit over the bound buffers (every shard bound): collective over the launch. */
int reshard_refit_run(reshard_refit* refit, reshard_run_stats* stats, char* error, size_t error_size);
/* After a failed run whose error was fatal (a timeout): ends every process of the launch. */
void reshard_refit_abort(reshard_refit* refit, int code);

#ifdef __cplusplus
}
#endif

#endif

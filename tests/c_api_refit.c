/* The refit engine from a C program (reshard/exec/refit_c.h), under mpirun: every process fills its
 * source shards with values of its own making -- a hash of the tensor's name, the element's
 * coordinates and the run -- binds them and zeroed destination buffers, runs the refit, and checks
 * every destination element against the same hash: an independent check of the bytes reshard moved.
 * Three runs on one refit (the communicator and the plan kept), digest verification on.
 *
 *   mpirun -np N c_api_refit SCENARIO STRATEGY RUNS      exit 0 when every byte is right
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reshard/exec/refit_c.h"

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static uint64_t name_hash(const char* s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* The element at coordinates c of tensor `name` in run `run`. */
static uint64_t value(uint64_t name, const int64_t* c, int dims, int run) {
  uint64_t h = mix(name ^ (uint64_t)run);
  for (int d = 0; d < dims; ++d) h = mix(h ^ (uint64_t)c[d]);
  return h;
}

/* Calls f on every element of the shard's box, row-major, with its coordinates and its offset. */
static int64_t walk(const reshard_shard* s, unsigned char* buf, uint64_t name, int run, int check) {
  int64_t c[RESHARD_MAX_DIMS], wrong = 0, i = 0;
  for (int d = 0; d < s->dims; ++d) c[d] = s->lo[d];
  for (;;) {
    const uint64_t v = value(name, c, s->dims, run);
    unsigned char* e = buf + i * s->element_size;
    for (int b = 0; b < s->element_size; ++b) {
      const unsigned char want = (unsigned char)(v >> (8 * (b % 8)));
      if (check) wrong += e[b] != want;
      else e[b] = want;
    }
    ++i;
    int d = s->dims - 1;
    while (d >= 0 && ++c[d] == s->hi[d]) {
      c[d] = s->lo[d];
      --d;
    }
    if (d < 0) break;
  }
  return wrong;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: c_api_refit SCENARIO STRATEGY RUNS\n");
    return 2;
  }
  char error[1024];
  reshard_refit* refit = reshard_refit_create(argv[1], argv[2], 0, "host", 30.0, "digest", error, sizeof error);
  if (!refit) {
    fprintf(stderr, "c_api_refit: %s\n", error);
    return 2;
  }
  const int rank = reshard_refit_rank(refit), n = reshard_refit_shard_count(refit);
  reshard_shard* shards = calloc((size_t)n + 1, sizeof *shards);
  unsigned char** bufs = calloc((size_t)n + 1, sizeof *bufs);
  for (int k = 0; k < n; ++k) {
    if (reshard_refit_shard(refit, k, &shards[k], error, sizeof error) != 0 ||
        !(bufs[k] = calloc((size_t)shards[k].bytes + 1, 1)) ||
        reshard_refit_bind(refit, k, bufs[k], shards[k].bytes, error, sizeof error) != 0) {
      fprintf(stderr, "c_api_refit: rank %d: %s\n", rank, error);
      return 2;
    }
  }
  int64_t wrong = 0, checked = 0;
  for (int run = 0; run < atoi(argv[3]); ++run) {
    for (int k = 0; k < n; ++k) {
      if (shards[k].side == 0) walk(&shards[k], bufs[k], name_hash(shards[k].tensor), run, 0);
      else memset(bufs[k], 0, (size_t)shards[k].bytes);
    }
    reshard_run_stats st;
    if (reshard_refit_run(refit, &st, error, sizeof error) != 0) {
      fprintf(stderr, "c_api_refit: rank %d: run %d failed (rank %d, peer %d): %s\n", rank, run, st.rank, st.peer, error);
      reshard_refit_abort(refit, 3);
    }
    if (!st.verified) ++wrong;
    for (int k = 0; k < n; ++k)
      if (shards[k].side == 1) {
        wrong += walk(&shards[k], bufs[k], name_hash(shards[k].tensor), run, 1);
        checked += shards[k].bytes;
      }
    if (rank == 0)
      printf("run %d: %s, %.3f s, %lld bytes verified by digest, staging peak %lld bytes\n", run,
             reshard_refit_strategy(refit), st.seconds, (long long)st.bytes_verified, (long long)st.staging_peak_bytes);
  }
  if (wrong) fprintf(stderr, "c_api_refit: rank %d: %lld wrong destination bytes\n", rank, (long long)wrong);
  else printf("rank %d: %lld destination bytes right\n", rank, (long long)checked);
  for (int k = 0; k < n; ++k) free(bufs[k]);
  free(bufs);
  free(shards);
  reshard_refit_destroy(refit);
  return wrong ? 1 : 0;
}

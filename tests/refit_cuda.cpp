// The C++ refit engine on CUDA buffers (reshard/exec/refit.hpp, backend cuda): one process holds
// every GPU of the scenario as a virtual rank on device 0; each shard is a cudaMalloc'd buffer of
// the caller's, filled from the host with values of this program's own making (a hash of the
// tensor's name, the element's coordinates and the run), bound with MemoryKind::Device, refitted
// RUNS times on one Refit with digest verification, copied back and checked byte by byte.
//
//   refit_cuda SCENARIO STRATEGY RUNS [MAX_STAGING_BYTES] [KEY=VALUE ...]   exit 0 when every byte is right
// (KEY=VALUE: the scenario changed as `reshard plan --set` changes it, e.g. model=../models/qwen3-0.6b.yaml)
// Run by scripts/gpu-check.sh on a GPU; without one it says so and exits 77 (skipped).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <string>
#include <vector>

#include "reshard/exec/refit.hpp"

namespace {

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t name_hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// The shard's bytes of run `run`, row-major over its box: element (c0, .., cn) holds the low bytes
// of H(name, run, c0..cn-1) + cn * K -- one hash per row, so 33 GB take seconds, and every element's
// value depends on its global coordinates alone (the same in any shard that holds it).
std::vector<unsigned char> values(const reshard::exec::ShardRef& s, int run) {
  constexpr std::uint64_t K = 0x9e3779b97f4a7c15ULL;
  std::vector<unsigned char> out(static_cast<std::size_t>(s.bytes));
  const auto& dims = s.box.dims;
  const std::size_t n = dims.size();
  const std::int64_t row = n ? dims[n - 1].hi - dims[n - 1].lo : 1;
  const std::int64_t lo = n ? dims[n - 1].lo : 0;
  std::vector<std::int64_t> c;
  for (std::size_t d = 0; d + 1 < n; ++d) c.push_back(dims[d].lo);
  const std::uint64_t name = mix(name_hash(s.name) ^ static_cast<std::uint64_t>(run));
  const auto es = static_cast<std::size_t>(s.element_size);
  for (std::size_t at = 0; at < out.size(); at += static_cast<std::size_t>(row) * es) {
    std::uint64_t h = name;
    for (auto x : c) h = mix(h ^ static_cast<std::uint64_t>(x));
    for (std::int64_t x = 0; x < row; ++x) {
      const std::uint64_t v = h + static_cast<std::uint64_t>(lo + x) * K;
      std::memcpy(&out[at + static_cast<std::size_t>(x) * es], &v, std::min<std::size_t>(es, 8));
    }
    for (int d = static_cast<int>(c.size()) - 1; d >= 0; --d) {
      if (++c[static_cast<std::size_t>(d)] < dims[static_cast<std::size_t>(d)].hi) break;
      c[static_cast<std::size_t>(d)] = dims[static_cast<std::size_t>(d)].lo;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: refit_cuda SCENARIO STRATEGY RUNS [MAX_STAGING_BYTES] [KEY=VALUE ...]\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is printed, under a timeout too
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("refit_cuda: no GPU; skipped\n");
    return 77;
  }
  try {
    reshard::exec::Refit::Options o;
    o.strategy = argv[2];
    o.backend = "cuda";
    o.timeout_s = 120;
    o.verification = reshard::exec::Verification::Digest;
    for (int a = 4; a < argc; ++a) {
      const std::string arg = argv[a];
      if (arg.find('=') != std::string::npos) o.sets.push_back(arg);
      else o.max_staging = reshard::model::Bytes{std::stoll(arg)};
    }
    reshard::exec::Refit refit(argv[1], o);
    std::vector<reshard::exec::ShardRef> shards;
    for (int r = 0; r < refit.world_size(); ++r)
      for (const auto& s : refit.shards(r)) shards.push_back(s);
    std::vector<unsigned char*> buffers(shards.size(), nullptr);
    reshard::exec::MemoryBinding binding;
    std::int64_t total = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      if (cudaMalloc(reinterpret_cast<void**>(&buffers[i]), static_cast<std::size_t>(shards[i].bytes)) != cudaSuccess) {
        std::fprintf(stderr, "refit_cuda: cudaMalloc of %lld bytes failed\n", static_cast<long long>(shards[i].bytes));
        return 2;
      }
      binding.bind(refit.binding(shards[i], buffers[i], shards[i].bytes, reshard::exec::MemoryKind::Device));
      total += shards[i].bytes;
    }
    long long wrong = 0;
    const int runs = std::atoi(argv[3]);
    for (int run = 0; run < runs; ++run) {
      for (std::size_t i = 0; i < shards.size(); ++i) {
        const bool source = shards[i].side == reshard::exec::Side::Source;
        const std::vector<unsigned char> v = source ? values(shards[i], run) : std::vector<unsigned char>(static_cast<std::size_t>(shards[i].bytes), 0);
        cudaMemcpy(buffers[i], v.data(), v.size(), cudaMemcpyHostToDevice);
      }
      const reshard::exec::RefitStats st = refit.run(binding);
      long long bad = 0;
      for (std::size_t i = 0; i < shards.size(); ++i) {
        if (shards[i].side != reshard::exec::Side::Destination) continue;
        std::vector<unsigned char> got(static_cast<std::size_t>(shards[i].bytes));
        cudaMemcpy(got.data(), buffers[i], got.size(), cudaMemcpyDeviceToHost);
        const std::vector<unsigned char> want = values(shards[i], run);
        if (std::memcmp(got.data(), want.data(), got.size()) != 0)
          for (std::size_t b = 0; b < got.size(); ++b) bad += got[b] != want[b];
      }
      wrong += bad;
      std::printf("refit_cuda run %d: %s, %zu shards (%.1f MB) in the caller's device buffers, %.3f ms, %lld bytes verified "
                  "by digest, staging peak %lld bytes, %lld wrong bytes\n",
                  run, reshard::model::describe(refit.schedule().params).c_str(), shards.size(), total / 1e6, st.seconds * 1e3,
                  static_cast<long long>(st.bytes_verified), static_cast<long long>(st.staging_peak_bytes), bad);
    }
    for (unsigned char* b : buffers) cudaFree(b);
    return wrong ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "refit_cuda: %s\n", e.what());
    return 2;
  }
}

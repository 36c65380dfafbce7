// The device part the GPU backends share (device_run.hpp).
#include "device_run.hpp"

#include <climits>
#include <thread>

#include "reshard/exec/staging.hpp"

namespace reshard::exec::detail {

using namespace reshard::model;

void cuda_check(cudaError_t e, const char* what, int rank) {
  if (e != cudaSuccess) throw ExecError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e), rank, -1, true);
}

namespace {

template <class T>
T* to_device(const std::vector<T>& v, int rank) {
  T* p = nullptr;
  if (v.empty()) return nullptr;
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&p), v.size() * sizeof(T)), "cudaMalloc", rank);
  cuda_check(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy", rank);
  // A pageable upload may return before its last bytes land, on the legacy stream, which the
  // non-blocking work streams never wait for: wait here.
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after an upload", rank);
  return p;
}

}  // namespace

// The hops of op's stream: its chain's, or a plain transfer's one hop.
std::vector<ChainHop> stream_hops(const Schedule& s, const Op& op) {
  if (op.chain >= 0) return s.chains[static_cast<std::size_t>(op.chain)].hops;
  return {ChainHop{op.src, op.dst, -1}};
}

namespace {

constexpr std::int64_t kWorkElements = 1 << 16;  // elements per thread block in fill/check
constexpr std::int64_t kCopyChunk = 64 << 10;    // bytes per thread block in copies (a 512 KiB chunk spreads over 8 SMs)

void add_copies(DeviceRun& d, std::size_t prog, const std::vector<CopyRun>& runs) {
  for (const CopyRun& c : runs)
    for (std::int64_t done = 0; done < c.bytes; done += kCopyChunk)
      d.copies.push_back({d.at(prog, c.src) + c.src_offset + done, d.at(prog, c.dst) + c.dst_offset + done,
                          std::min(kCopyChunk, c.bytes - done)});
}

DeviceShard device_shard(const Region& r, const Inventory& inv, std::int64_t offset, int rank) {
  const TensorInfo& t = inv.tensor(r.tensor);
  if (r.box.dims.size() > static_cast<std::size_t>(kMaxDims))
    throw ExecError("tensor '" + t.name + "' has more than 8 dimensions", rank, -1, true);
  DeviceShard s;
  s.offset = offset;
  s.elements = r.box.elements();
  s.tensor = r.tensor;
  s.element_size = static_cast<std::int32_t>(dtype_size(t.dtype));
  s.dims = static_cast<std::int32_t>(r.box.dims.size());
  for (std::size_t i = 0; i < r.box.dims.size(); ++i) {
    s.lo[i] = r.box.dims[i].lo;
    s.extent[i] = r.box.dims[i].size();
    s.shape[i] = t.shape[i];
  }
  return s;
}

void add_work(std::vector<ShardWork>& work, std::int32_t shard, std::int64_t elements) {
  for (std::int64_t b = 0; b < elements; b += kWorkElements) work.push_back({shard, b, std::min(kWorkElements, elements - b)});
}

// Each chunk's copy runs of a stream role (for_each_chunk_copy), as device copies.
DeviceRun::Local chunked(DeviceRun& d, std::size_t prog, const OpStream& t, bool send) {
  DeviceRun::Local l{prog, &t, {}};
  for (std::int64_t k = 0; k < t.chunks(); ++k) {
    const auto first = static_cast<std::int64_t>(d.copies.size());
    for_each_chunk_copy(t, send, k, [&](const CopyRun& c) { add_copies(d, prog, {c}); });
    l.chunk_copies.emplace_back(first, static_cast<std::int64_t>(d.copies.size()) - first);
  }
  return l;
}

}  // namespace

// Queues copies [first, first + count) of d.copies on `stream`, counting their bytes.
void run_range(DeviceRun& d, const std::pair<std::int64_t, std::int64_t>& range, cudaStream_t stream) {
  if (range.second <= 0) return;
  launch_copies(d.arena, d.d_copies + range.first, range.second, stream);
  for (std::int64_t i = range.first; i < range.first + range.second; ++i) d.copied += d.copies[static_cast<std::size_t>(i)].bytes;
}

// Lays out and uploads the programs of `gpus`; fills the sources (pattern verification) and makes
// the local copies. Shards first -- in the arena, or the caller's device buffers (ExecOptions::
// binding), addressed by their distance from the arena -- then the staging regions laid out by
// steps (staging.hpp).
void prepare(DeviceRun& d, const RunPlan& plan, const std::vector<GpuId>& gpus, cudaStream_t stream, const ExecOptions& options) {
  const Inventory& inv = plan.scenario->inventory;
  for (GpuId g : gpus) d.progs.push_back(build_program(plan, g));
  std::vector<std::vector<const ShardBinding*>> bound(d.progs.size());
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    d.offset.emplace_back(d.progs[p].regions.size(), 0);
    bound[p].assign(d.progs[p].regions.size(), nullptr);
    for (std::size_t i = 0; i < d.progs[p].regions.size(); ++i) {
      const Region& r = d.progs[p].regions[i];
      if (r.kind != Region::Kind::Source && r.kind != Region::Kind::Destination) continue;
      const ShardBinding* b = options.binding ? options.binding->find(d.progs[p].gpu, r.kind == Region::Kind::Source ? Side::Source : Side::Destination,
                                                                       r.tensor, r.box)
                                              : nullptr;
      if (b) {
        const std::string what = "the binding of GPU " + std::to_string(d.progs[p].gpu) + "'s " +
                                 (r.kind == Region::Kind::Source ? "source" : "destination") + " shard of '" +
                                 inv.tensor(r.tensor).name + "' " + to_string(r.box);
        if (b->memory != MemoryKind::Device) throw ExecError(what + " is host memory; the GPU backends take device memory", d.rank, -1, true);
        if (b->bytes < r.bytes || !b->data)
          throw ExecError(what + " holds " + std::to_string(b->bytes) + " bytes; the shard has " + std::to_string(r.bytes), d.rank, -1, true);
        bound[p][i] = b;
        continue;
      }
      d.offset[p][i] = d.bytes;
      d.bytes += (r.bytes + 255) / 256 * 256;
    }
  }
  std::vector<std::vector<std::int64_t>> request_of;
  const std::vector<StagingRequest> requests = staging_requests(plan, d.progs, request_of);
  d.staging = staging_per_program(requests, request_of);
  std::size_t free_bytes = 0, total_bytes = 0;
  cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", d.rank);
  // Room for the copy and work lists, and NCCL's own buffers.
  const auto reserve = static_cast<std::int64_t>(free_bytes / 32) + (std::int64_t{1} << 30);
  const StagingPlan staging = plan_staging(requests, static_cast<std::int64_t>(free_bytes) - d.bytes - reserve, true);
  for (std::size_t p = 0; p < d.progs.size(); ++p)
    for (std::size_t i = 0; i < d.progs[p].regions.size(); ++i)
      if (const std::int64_t q = request_of[p][i]; q >= 0) d.offset[p][i] = d.bytes + staging.offset[static_cast<std::size_t>(q)];
  d.bytes += staging.bytes;
  if (static_cast<std::size_t>(d.bytes) > free_bytes)
    throw ExecError("the run needs " + format(Bytes{d.bytes}) + " of GPU memory, " + format(Bytes{static_cast<std::int64_t>(free_bytes)}) +
                        " are free",
                    d.rank, -1, true);
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&d.arena), static_cast<std::size_t>(std::max<std::int64_t>(d.bytes, 256))),
             "cudaMalloc arena", d.rank);
  cuda_check(cudaMemsetAsync(d.arena, 0, static_cast<std::size_t>(std::max<std::int64_t>(d.bytes, 256)), stream), "cudaMemset", d.rank);
  // A bound shard is addressed from the arena's start like the others: by its distance from it
  // (the kernels take arena + offset, in one flat device address space).
  for (std::size_t p = 0; p < d.progs.size(); ++p)
    for (std::size_t i = 0; i < bound[p].size(); ++i)
      if (bound[p][i])
        d.offset[p][i] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(bound[p][i]->data) -
                                                   reinterpret_cast<std::intptr_t>(d.arena));
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    const GpuProgram& prog = d.progs[p];
    for (std::size_t i = 0; i < prog.regions.size(); ++i) {
      const Region& r = prog.regions[i];
      if (r.kind == Region::Kind::Source) {
        if (options.verification == Verification::Pattern)
          add_work(d.fill_work, static_cast<std::int32_t>(d.sources.size()), r.box.elements());
        d.sources.push_back(device_shard(r, inv, d.at(p, static_cast<std::int32_t>(i)), d.rank));
      } else if (r.kind == Region::Kind::Destination) {
        if (options.verification == Verification::Pattern)
          add_work(d.check_work, static_cast<std::int32_t>(d.destinations.size()), r.box.elements());
        d.destinations.push_back(device_shard(r, inv, d.at(p, static_cast<std::int32_t>(i)), d.rank));
        d.destination_region.emplace_back(p, static_cast<std::int32_t>(i));
      }
    }
    add_copies(d, p, prog.local);
  }
  d.local_copies = static_cast<std::int64_t>(d.copies.size());
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    for (const OpStream& t : d.progs[p].sends) d.send_of[t.op] = chunked(d, p, t, true);
    for (const OpStream& t : d.progs[p].receives) d.receive_of[t.op].push_back(chunked(d, p, t, false));
  }
  d.d_sources = to_device(d.sources, d.rank);
  d.d_destinations = to_device(d.destinations, d.rank);
  d.d_fill = to_device(d.fill_work, d.rank);
  d.d_check = to_device(d.check_work, d.rank);
  d.d_copies = to_device(d.copies, d.rank);
  if (!d.fill_work.empty())
    launch_fill(d.arena, d.d_sources, d.d_fill, static_cast<std::int64_t>(d.fill_work.size()), stream);
  run_range(d, {0, d.local_copies}, stream);
  cuda_check(cudaGetLastError(), "fill kernel", d.rank);
  cuda_check(cudaStreamSynchronize(stream), "fill", d.rank);
}

// Digest verification (exec/verify.hpp): every piece this process's GPUs hold or need, digested on
// the host from a copy of its shard.
void device_digests(const DeviceRun& d, const RunPlan& plan, std::vector<PieceDigest>& out) {
  const Inventory& inv = plan.scenario->inventory;
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    const GpuProgram& prog = d.progs[p];
    std::map<std::int32_t, std::vector<unsigned char>> host;  // region -> its bytes
    for (int side = 0; side < 2; ++side)
      for (const auto& [piece, region] : side == 0 ? prog.source_pieces : prog.destination_pieces) {
        const Region& r = prog.regions[static_cast<std::size_t>(region)];
        auto [it, fresh] = host.try_emplace(region);
        if (fresh) {
          it->second.resize(static_cast<std::size_t>(r.bytes));
          cuda_check(cudaMemcpy(it->second.data(), d.arena + d.at(p, region), it->second.size(), cudaMemcpyDeviceToHost),
                     "cudaMemcpy (digest)", d.rank);
        }
        const Piece& pc = plan.transfers->pieces[static_cast<std::size_t>(piece)];
        out.push_back({piece, prog.gpu, side,
                       piece_digest(pc.box, r.box, static_cast<int>(dtype_size(inv.tensor(pc.tensor).dtype)), it->second.data())});
      }
  }
}

// Checks every destination shard on the device; returns "" or the first wrong element.
std::string check(DeviceRun& d, const Inventory& inv, std::int64_t& bytes, cudaStream_t stream) {
  if (d.destinations.empty() || d.check_work.empty()) return {};
  std::vector<unsigned long long> first(d.destinations.size(), ULLONG_MAX);
  d.d_first_bad = to_device(first, d.rank);
  launch_check(d.arena, d.d_destinations, d.d_check, static_cast<std::int64_t>(d.check_work.size()), d.d_first_bad, stream);
  cuda_check(cudaGetLastError(), "check kernel", d.rank);
  cuda_check(cudaStreamSynchronize(stream), "check", d.rank);
  cuda_check(cudaMemcpy(first.data(), d.d_first_bad, first.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost),
             "cudaMemcpy", d.rank);
  for (std::size_t i = 0; i < first.size(); ++i) {
    const auto [p, region] = d.destination_region[i];
    if (first[i] == ULLONG_MAX) {
      bytes += d.progs[p].regions[static_cast<std::size_t>(region)].bytes;
      continue;
    }
    const auto offset = static_cast<std::int64_t>(first[i]);
    unsigned char got[8] = {};
    const auto es = static_cast<std::size_t>(d.destinations[i].element_size);
    cuda_check(cudaMemcpy(got, d.arena + d.destinations[i].offset + offset * static_cast<std::int64_t>(es), std::min<std::size_t>(es, 8),
                          cudaMemcpyDeviceToHost),
               "cudaMemcpy", d.rank);
    return wrong_element(d.progs[p], inv, d.rank, region, offset, got);
  }
  return {};
}

// Waits for `event` until the deadline (steady clock); false on timeout.
bool wait_event(cudaEvent_t event, std::chrono::steady_clock::time_point deadline, int rank) {
  while (true) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) cuda_check(e, "cudaEventQuery", rank);
    (void)cudaGetLastError();  // NotReady is not an error; the runtime keeps it as the last one

    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

double seconds_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return ms / 1000.0;
}

// The staging each GPU of the run held at most (DeviceRun::staging), as the Measurement lists it.
void add_staging(Measurement& m, const DeviceRun& d) {
  for (std::size_t p = 0; p < d.progs.size(); ++p) m.staging.push_back({d.progs[p].gpu, d.staging[p]});
}

}  // namespace reshard::exec::detail

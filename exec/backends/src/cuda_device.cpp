// The CUDA device of the GPU backends (device_run.hpp): one stream, the arena, the lists and work
// copied to the device at commit, walks launched cooperatively, events from a pool reused run after
// run. Every call a run makes is one Device call, counted there as the CUDA calls made here.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

#include "device_run.hpp"

namespace reshard::exec::detail {

namespace {

void cuda_check(cudaError_t e, const char* what, int rank) {
  if (e != cudaSuccess) throw ExecError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e), rank, -1, true);
}

// Host bytes laid out for one device allocation: each part 16-byte aligned.
struct Pack {
  std::vector<unsigned char> bytes;
  template <class T>
  std::size_t add(const std::vector<T>& v) {
    const std::size_t at = (bytes.size() + 15) / 16 * 16;
    bytes.resize(at + v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(bytes.data() + at, v.data(), v.size() * sizeof(T));
    return at;
  }
};

class CudaDevice : public Device {
 public:
  CudaDevice(int index, int rank) : rank_(rank) {
    cuda_check(cudaSetDevice(index), "cudaSetDevice", rank);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate", rank);
    cuda_check(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, index), "cudaDeviceGetAttribute", rank);
    int cooperative = 0;
    cuda_check(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, index), "cudaDeviceGetAttribute", rank);
    if (!cooperative) throw ExecError("the GPU backends need a GPU with cooperative launches (compute capability 6.0 or later)", rank, -1, true);
    resident_ = sms_ * walk_blocks_per_sm();
  }
  ~CudaDevice() override {
    cudaStreamSynchronize(stream_);
    clear();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (arena_) cudaFree(arena_);
    cudaStreamDestroy(stream_);
  }

  std::int64_t free_bytes() override {
    std::size_t free = 0, total = 0;
    cuda_check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", rank_);
    return static_cast<std::int64_t>(free) + arena_bytes_;  // the arena held is reused
  }

  unsigned char* arena(std::int64_t bytes) override {
    if (bytes > arena_bytes_) {
      if (arena_) cuda_check(cudaFree(arena_), "cudaFree", rank_);
      arena_ = nullptr;
      cuda_check(cudaMalloc(reinterpret_cast<void**>(&arena_), static_cast<std::size_t>(bytes)), "cudaMalloc arena", rank_);
      arena_bytes_ = bytes;
    }
    cuda_check(cudaMemsetAsync(arena_, 0, static_cast<std::size_t>(arena_bytes_), stream_), "cudaMemset", rank_);
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", rank_);
    return arena_;
  }

  std::int32_t add_list(list::List l) override {
    pending_.push_back(std::move(l));
    return static_cast<std::int32_t>(lists_.size() + pending_.size()) - 1;
  }

  void add_counters(std::int32_t counters, std::int32_t ops) override {
    free_one(state_);
    counters_ = counters;
    ops_ = ops;
    state_bytes_ = static_cast<std::size_t>(2 * ops + 1) * 8 + static_cast<std::size_t>(counters) * 4;
    cuda_check(cudaMalloc(&state_, state_bytes_), "cudaMalloc", rank_);
  }

  void set_shards(std::vector<DeviceShard> sources, std::vector<ShardWork> fill, std::vector<DeviceShard> destinations,
                  std::vector<ShardWork> check) override {
    sources_ = std::move(sources);
    fill_ = std::move(fill);
    destinations_ = std::move(destinations);
    check_ = std::move(check);
    work_dirty_ = true;
  }

  void set_digest_runs(std::vector<DigestRun> runs, std::int32_t slots) override {
    digest_runs_ = std::move(runs);
    digest_slots_ = slots;
    work_dirty_ = true;
  }

  // One allocation for the lists added since the last commit, one for the verification work.
  void commit() override {
    if (!pending_.empty()) {
      Pack pack;
      struct At {
        std::size_t tasks, runs, waits, order, first;
        std::int32_t blocks;
        bool cooperative;
      };
      std::vector<At> at;
      for (const list::List& l : pending_) {
        At a{pack.add(l.tasks), pack.add(l.runs), pack.add(l.waits), 0, 0, 0, l.has_waits()};
        if (l.has_waits()) {
          a.blocks = std::max<std::int32_t>(1, std::min<std::int32_t>(l.lanes, resident_));
          const list::WalkOrder w = list::walk_order(l, a.blocks);
          a.order = pack.add(w.order);
          a.first = pack.add(w.block_first);
        } else {
          a.blocks = static_cast<std::int32_t>(std::min<std::int64_t>(static_cast<std::int64_t>(l.tasks.size()), 8 * resident_));
        }
        at.push_back(a);
      }
      void* buffer = nullptr;
      cuda_check(cudaMalloc(&buffer, std::max<std::size_t>(pack.bytes.size(), 16)), "cudaMalloc lists", rank_);
      buffers_.push_back(buffer);
      cuda_check(cudaMemcpy(buffer, pack.bytes.data(), pack.bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy lists", rank_);
      auto* base = static_cast<unsigned char*>(buffer);
      for (std::size_t i = 0; i < pending_.size(); ++i) {
        Launch x;
        x.view.tasks = reinterpret_cast<const list::Task*>(base + at[i].tasks);
        x.view.runs = reinterpret_cast<const list::Run*>(base + at[i].runs);
        x.view.waits = reinterpret_cast<const list::Wait*>(base + at[i].waits);
        if (at[i].cooperative) {
          x.view.order = reinterpret_cast<const std::int32_t*>(base + at[i].order);
          x.view.block_first = reinterpret_cast<const std::int64_t*>(base + at[i].first);
        }
        x.view.task_count = static_cast<std::int64_t>(pending_[i].tasks.size());
        x.blocks = at[i].blocks;
        x.cooperative = at[i].cooperative;
        lists_.push_back(x);
      }
      pending_.clear();
    }
    if (work_dirty_) {
      free_one(work_);
      Pack pack;
      const std::size_t s = pack.add(sources_), f = pack.add(fill_), d = pack.add(destinations_), c = pack.add(check_),
                        r = pack.add(digest_runs_);
      const std::size_t bad = pack.add(std::vector<unsigned long long>(destinations_.size(), 0));
      const std::size_t sums = pack.add(std::vector<unsigned long long>(static_cast<std::size_t>(digest_slots_), 0));
      cuda_check(cudaMalloc(&work_, std::max<std::size_t>(pack.bytes.size(), 16)), "cudaMalloc work", rank_);
      cuda_check(cudaMemcpy(work_, pack.bytes.data(), pack.bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy work", rank_);
      auto* base = static_cast<unsigned char*>(work_);
      d_sources_ = reinterpret_cast<DeviceShard*>(base + s);
      d_fill_ = reinterpret_cast<ShardWork*>(base + f);
      d_destinations_ = reinterpret_cast<DeviceShard*>(base + d);
      d_check_ = reinterpret_cast<ShardWork*>(base + c);
      d_digest_runs_ = reinterpret_cast<DigestRun*>(base + r);
      d_first_bad_ = reinterpret_cast<unsigned long long*>(base + bad);
      d_sums_ = reinterpret_cast<unsigned long long*>(base + sums);
      work_dirty_ = false;
    }
  }

  void clear() override {
    cudaStreamSynchronize(stream_);
    for (void* b : buffers_) cudaFree(b);
    buffers_.clear();
    lists_.clear();
    pending_.clear();
    free_one(state_);
    free_one(work_);
  }

  void* stream() override { return stream_; }

 private:
  struct Launch {
    list::View view;
    std::int32_t blocks = 0;
    bool cooperative = false;
  };

  void free_one(void*& p) {
    if (p) {
      cudaStreamSynchronize(stream_);
      cudaFree(p);
    }
    p = nullptr;
  }
  unsigned long long* times() const { return static_cast<unsigned long long*>(state_); }
  std::int32_t* counters() const {
    return reinterpret_cast<std::int32_t*>(static_cast<unsigned char*>(state_) + static_cast<std::size_t>(2 * ops_ + 1) * 8);
  }

  void do_reset() override {
    next_event_ = 0;
    if (state_) cuda_check(cudaMemsetAsync(state_, 0, state_bytes_, stream_), "cudaMemsetAsync", rank_);
  }

  void do_launch(std::int32_t id) override {
    Launch x = lists_.at(static_cast<std::size_t>(id));
    x.view.base = arena_;
    x.view.counters = state_ ? counters() : nullptr;
    x.view.op_times = state_ ? times() : nullptr;
    x.view.ops = ops_;
    cuda_check(static_cast<cudaError_t>(launch_walk(x.view, x.blocks, x.cooperative, stream_)), "list walk launch", rank_);
  }

  void do_fill() override {
    if (!fill_.empty()) launch_fill(arena_, d_sources_, d_fill_, static_cast<std::int64_t>(fill_.size()), stream_);
    cuda_check(cudaGetLastError(), "fill kernel", rank_);
  }

  std::vector<std::int64_t> do_check() override {
    std::vector<unsigned long long> first(destinations_.size(), ULLONG_MAX);
    std::vector<std::int64_t> out(first.size(), -1);
    if (first.empty()) return out;
    cuda_check(cudaMemsetAsync(d_first_bad_, 0xff, first.size() * 8, stream_), "cudaMemsetAsync", rank_);
    if (!check_.empty())
      launch_check(arena_, d_destinations_, d_check_, static_cast<std::int64_t>(check_.size()), d_first_bad_, stream_);
    cuda_check(cudaGetLastError(), "check kernel", rank_);
    copy_back(first.data(), d_first_bad_, first.size() * 8);
    for (std::size_t i = 0; i < first.size(); ++i)
      if (first[i] != ULLONG_MAX) out[i] = static_cast<std::int64_t>(first[i]);
    return out;
  }

  std::vector<std::uint64_t> do_digests() override {
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(digest_slots_), 0);
    if (sums.empty()) return sums;
    cuda_check(cudaMemsetAsync(d_sums_, 0, sums.size() * 8, stream_), "cudaMemsetAsync", rank_);
    if (!digest_runs_.empty())
      launch_digest(arena_, d_digest_runs_, static_cast<std::int64_t>(digest_runs_.size()), d_sums_, stream_);
    cuda_check(cudaGetLastError(), "digest kernel", rank_);
    copy_back(sums.data(), d_sums_, sums.size() * 8);
    return sums;
  }

  std::vector<std::pair<double, double>> do_op_times(std::int32_t ops) override {
    std::vector<std::pair<double, double>> out(static_cast<std::size_t>(ops), {-1.0, -1.0});
    if (!state_ || ops != ops_) return out;
    std::vector<unsigned long long> t(2 * static_cast<std::size_t>(ops) + 1, 0);
    copy_back(t.data(), times(), t.size() * 8);
    const unsigned long long t0 = ~t.back();
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (t[2 * i]) out[i].first = static_cast<double>(~t[2 * i] - t0) * 1e-9;
      if (t[2 * i + 1]) out[i].second = static_cast<double>(t[2 * i + 1] - t0) * 1e-9;
    }
    return out;
  }

  int do_record() override {
    if (next_event_ == events_.size()) {
      cudaEvent_t e = nullptr;
      cuda_check(cudaEventCreate(&e), "cudaEventCreate", rank_);
      events_.push_back(e);
    }
    cuda_check(cudaEventRecord(events_[next_event_], stream_), "cudaEventRecord", rank_);
    return static_cast<int>(next_event_++);
  }

  bool do_wait(int e, std::chrono::steady_clock::time_point deadline) override {
    while (true) {
      const cudaError_t r = cudaEventQuery(events_.at(static_cast<std::size_t>(e)));
      if (r == cudaSuccess) return true;
      if (r != cudaErrorNotReady) cuda_check(r, "cudaEventQuery", rank_);
      (void)cudaGetLastError();  // NotReady is not an error; the runtime keeps it as the last one
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  double do_seconds(int from, int to) override {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, events_.at(static_cast<std::size_t>(from)), events_.at(static_cast<std::size_t>(to))) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    return ms / 1000.0;
  }

  void do_read(void* host, const unsigned char* at, std::int64_t bytes) override { copy_back(host, at, static_cast<std::size_t>(bytes)); }

  void copy_back(void* host, const void* device, std::size_t bytes) {
    cuda_check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync", rank_);
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", rank_);
  }

  int rank_;
  cudaStream_t stream_ = nullptr;
  int sms_ = 0;
  std::int32_t resident_ = 1;
  unsigned char* arena_ = nullptr;
  std::int64_t arena_bytes_ = 0;
  std::vector<list::List> pending_;
  std::vector<Launch> lists_;
  std::vector<void*> buffers_;
  void* state_ = nullptr;  // the stamps (2 ops + 1 uint64), then the counters
  std::size_t state_bytes_ = 0;
  std::int32_t counters_ = 0, ops_ = 0;
  std::vector<DeviceShard> sources_, destinations_;
  std::vector<ShardWork> fill_, check_;
  std::vector<DigestRun> digest_runs_;
  std::int32_t digest_slots_ = 0;
  bool work_dirty_ = false;
  void* work_ = nullptr;
  DeviceShard *d_sources_ = nullptr, *d_destinations_ = nullptr;
  ShardWork *d_fill_ = nullptr, *d_check_ = nullptr;
  DigestRun* d_digest_runs_ = nullptr;
  unsigned long long *d_first_bad_ = nullptr, *d_sums_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::size_t next_event_ = 0;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int index, int rank) { return std::make_unique<CudaDevice>(index, rank); }

}  // namespace reshard::exec::detail

namespace reshard::exec {

int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

}  // namespace reshard::exec

// Device copy lists (docs/execution.md, "The GPU engine"): a GPU backend's step compiled once into
// data -- copy runs, the tasks that group them, the waits that order them -- and walked by one CUDA
// kernel (exec/backends/src/kernels.cu) or by the host twin (exec/backends/src/device_run.hpp, what
// the tests run): the format, what a task does and when it may run are defined here once, for both.
//
// A task copies its runs (byte offsets from the arena's base; a shard in the caller's buffer is
// addressed by its distance from it) once each of its waits holds (counter >= value), and then
// sets its signal counter to its value. Runs [0, split) land before runs [split, count) start, so a
// task can receive a chunk and unpack it. Tasks are numbered in one global order, and a wait names
// only a counter that a task earlier in that order sets; every task belongs to a lane, and the tasks
// of a lane set their counters to increasing values. A launch hands each thread block some lanes
// (walk_order) and the block walks their tasks in global order: with every block resident at once
// (a cooperative launch sized to the device), the earliest unfinished task always has its waits
// met, so the walk cannot deadlock, however many lanes share a block.
#pragma once

#include <cstdint>
#include <vector>

#if defined(__CUDACC__)
#define RESHARD_LIST_HD __host__ __device__ inline
#else
#define RESHARD_LIST_HD inline
#endif

namespace reshard::exec::list {

// bytes [src, src + bytes) -> [dst, dst + bytes), byte offsets from the arena's base.
struct Run {
  std::int64_t src = 0, dst = 0, bytes = 0;
};

// Holds once counter `counter` >= `value`.
struct Wait {
  std::int32_t counter = 0, value = 0;
};

// What a task stamps into its op's times (View::op_times): its start as the op's start (the
// earliest counts), its end as an end of the op (the latest counts).
inline constexpr std::uint32_t kStampStart = 1;
inline constexpr std::uint32_t kStampEnd = 2;

struct Task {
  std::int64_t run_first = 0;     // runs [run_first, run_first + run_count) of the list
  std::int32_t run_count = 0;
  std::int32_t run_split = 0;     // runs [0, split) land before the flip and runs [split, count)
  std::int64_t wait_first = 0;    // waits [wait_first, wait_first + wait_count)
  std::int32_t wait_count = 0;
  std::int32_t signal = -1;       // the counter set to signal_value once the task is done (-1: none)
  std::int32_t signal_value = 0;
  std::int32_t lane = 0;
  std::int32_t op = -1;           // the operation whose bytes it moves (its stamps), -1: none
  std::uint32_t stamps = 0;       // kStampStart | kStampEnd
  std::int64_t flip_at = -1;      // test-only fault (corrupt:OP): the arena byte XORed with 0x5a after runs [0, split)
};

// A list as one memory space holds it (the device's, or the host's): what a walk reads.
struct View {
  const Task* tasks = nullptr;
  const Run* runs = nullptr;
  const Wait* waits = nullptr;
  // Block b walks tasks order[block_first[b]] .. order[block_first[b + 1] - 1], ascending. Null
  // order: block b walks tasks b, b + blocks, b + 2 blocks, ... (a list without waits).
  const std::int32_t* order = nullptr;
  const std::int64_t* block_first = nullptr;
  std::int64_t task_count = 0;
  std::int32_t* counters = nullptr;
  // Per op: [2 op] its start, [2 op + 1] its end, in the walker's clock (ns); [2 ops] when the
  // first block of a walk started. A start is stored as its bitwise complement, so that one
  // atomic max keeps the earliest start and the latest end of a zeroed array. Null: no stamps.
  unsigned long long* op_times = nullptr;
  std::int32_t ops = 0;
  unsigned char* base = nullptr;
};

// Whether every wait of `t` holds; load(counter pointer) reads a counter (on the device, with
// acquire ordering).
template <class Load>
RESHARD_LIST_HD bool ready(const View& v, const Task& t, Load&& load) {
  for (std::int32_t w = 0; w < t.wait_count; ++w) {
    const Wait& x = v.waits[t.wait_first + w];
    if (load(v.counters + x.counter) < x.value) return false;
  }
  return true;
}

// Runs task `t` once it is ready, with a walker `x` that provides:
//   x.lead()                  whether this thread does the task's single-thread work (the host: always)
//   x.copy(dst, src, bytes)   its share of one run (the device: the block's threads together)
//   x.sync()                  every thread's copies so far have landed (the device: a block barrier)
//   x.now()                   the walker's clock (ns)
//   x.stamp_max(p, t)         atomic max of a time (a start is stamped as ~t: the earliest wins)
//   x.signal(counter, value)  publishes the task's writes, then sets the counter (release)
template <class Walker>
RESHARD_LIST_HD void run_task(const View& v, const Task& t, Walker& x) {
  if (v.op_times && (t.stamps & kStampStart) && x.lead()) x.stamp_max(v.op_times + 2 * t.op, ~x.now());
  for (std::int32_t r = 0; r < t.run_split; ++r) {
    const Run& c = v.runs[t.run_first + r];
    x.copy(v.base + c.dst, v.base + c.src, c.bytes);
  }
  if (t.run_split < t.run_count || t.flip_at >= 0) x.sync();
  if (t.flip_at >= 0 && x.lead()) v.base[t.flip_at] ^= 0x5a;
  if (t.flip_at >= 0) x.sync();
  for (std::int32_t r = t.run_split; r < t.run_count; ++r) {
    const Run& c = v.runs[t.run_first + r];
    x.copy(v.base + c.dst, v.base + c.src, c.bytes);
  }
  x.sync();
  if (x.lead()) {
    if (v.op_times && (t.stamps & kStampEnd)) x.stamp_max(v.op_times + 2 * t.op + 1, x.now());
    if (t.signal >= 0) x.signal(v.counters + t.signal, t.signal_value);
  }
}

// A list as the compiler writes it (host memory): its tasks in global order, their runs and waits.
struct List {
  std::vector<Task> tasks;
  std::vector<Run> runs;
  std::vector<Wait> waits;
  std::int32_t lanes = 0;
  std::int64_t bytes = 0;  // what its runs copy
  bool has_waits() const { return !waits.empty(); }
};

// How `blocks` thread blocks walk a list (View::order, View::block_first): its lanes dealt to the
// blocks by bytes (the largest lane first, to the block with the fewest), each block's tasks in
// global order. blocks >= 1; a block may get no lane.
struct WalkOrder {
  std::vector<std::int32_t> order;
  std::vector<std::int64_t> block_first;  // blocks + 1 entries
};
WalkOrder walk_order(const List& l, std::int32_t blocks);

}  // namespace reshard::exec::list

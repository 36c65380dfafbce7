// Work spread over the local cores: f(0) .. f(count - 1), each index once, on at most `threads`
// threads (the calling one among them). The results must not depend on the order the indices run
// in: callers write f(i)'s result into slot i. When calls throw, the exception of the lowest such
// index is rethrown once every call has ended, as a loop in index order would have thrown it
// (calls past it have run too, their results unused).
//
// And over processes (Processes: those of an MPI launch, exec::ProcessGroup): process r of N runs
// the indices i with i % N == r on its threads, then every process gets every result, as text, so
// that every process continues with the same values, as one process would have computed them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace reshard::model {

// `requested` threads, or one per hardware thread when 0 or less; at least 1.
inline int thread_count(int requested) {
  if (requested > 0) return requested;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

template <class F>
void parallel_for(std::size_t count, int threads, F&& f) {
  std::vector<std::exception_ptr> errors(count);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next++) < count;) {
      try {
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const std::size_t helpers = std::min<std::size_t>(count, static_cast<std::size_t>(std::max(1, threads))) - (count > 0 ? 1 : 0);
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (std::size_t t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The processes that share a piece of work. This base is one process alone (rank 0 of 1);
// exec::ProcessGroup is those of an MPI launch.
class Processes {
 public:
  virtual ~Processes() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  // Collective (every process calls it, in the same order): every process's text, in rank order,
  // on every process.
  virtual std::vector<std::string> all_gather(const std::string& mine) const { return {mine}; }
};
// The one-process group: what a null `const Processes*` option means.
const Processes& one_process();

// An exception as JSON, to cross to other processes: its class (a model::Error's: ConfigError with
// its file, line, key and reason, OverrideError with its override, PlanError, IndexError,
// ScheduleError, Error; any other std::exception as "internal") and its message. error_from_json
// makes the same class with the same message again.
nlohmann::json error_json(const std::exception_ptr& error);
std::exception_ptr error_from_json(const nlohmann::json& j);

// parallel_for over processes, each with `threads` threads: process r runs f(i) for the i with
// i % size == r; then `write(i)` turns each result it made into JSON and every other process reads
// it with `read(i, json)`. When calls throw, every process rethrows the exception of the lowest
// such index (error_json's class and message where another process threw it), as parallel_for
// does. One process alone is parallel_for, nothing written.
template <class F, class Write, class Read>
void parallel_for(const Processes& processes, std::size_t count, int threads, F&& f, Write&& write, Read&& read) {
  const auto size = static_cast<std::size_t>(processes.size()), rank = static_cast<std::size_t>(processes.rank());
  if (size == 1) return parallel_for(count, threads, f);
  const std::size_t mine = count > rank ? (count - rank + size - 1) / size : 0;
  std::vector<std::exception_ptr> errors(mine);
  parallel_for(mine, threads, [&](std::size_t k) {
    try {
      f(rank + k * size);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  });
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t k = 0; k < mine; ++k)
    out.push_back(errors[k] ? nlohmann::json{{"error", error_json(errors[k])}} : nlohmann::json{{"result", write(rank + k * size)}});
  const std::vector<std::string> all = processes.all_gather(out.dump());
  std::size_t first = count;  // the lowest index that threw, and its exception
  std::exception_ptr error;
  for (std::size_t r = 0; r < size; ++r) {
    const nlohmann::json theirs = r == rank ? nlohmann::json() : nlohmann::json::parse(all[r]);
    for (std::size_t k = 0, i = r; i < count; ++k, i += size) {
      std::exception_ptr e = r == rank ? errors[k] : nullptr;
      if (r != rank) {
        if (theirs.at(k).contains("error")) e = error_from_json(theirs.at(k).at("error"));
        else read(i, theirs.at(k).at("result"));
      }
      if (e && i < first) {
        first = i;
        error = e;
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace reshard::model

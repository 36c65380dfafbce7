// Work spread over the local cores: f(0) .. f(count - 1), each index once, on at most `threads`
// threads (the calling one among them). The results must not depend on the order the indices run
// in: callers write f(i)'s result into slot i. When calls throw, the exception of the lowest such
// index is rethrown once every call has ended, as a loop in index order would have thrown it
// (calls past it have run too, their results unused).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

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

}  // namespace reshard::model

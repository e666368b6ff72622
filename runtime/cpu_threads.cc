#include "runtime/cpu_threads.h"

#include <string>
#include <system_error>
#include <utility>

#include "core/error.h"

namespace tessel::runtime::cpu {

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::start(int n, std::function<void(int)> job) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Missing threads first (creating one may throw): they wait for the next generation.
  while (static_cast<int>(threads_.size()) < n) {
    const int d = static_cast<int>(threads_.size());
    try {
      threads_.emplace_back([this, d, seen = generation_] { loop(d, seen); });
    } catch (const std::system_error& e) {
      throw ResourceError("CPU executor: cannot start worker thread " + std::to_string(d + 1) + " of " +
                          std::to_string(n) + ": " + e.what());
    }
  }
  job_ = std::move(job);
  active_ = n;
  pending_ = n;
  error_ = nullptr;
  ++generation_;
  lock.unlock();
  wake_.notify_all();
}

void WorkerPool::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void WorkerPool::loop(int d, std::uint64_t seen) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (d >= active_) continue;
    }
    std::exception_ptr error;
    try {
      job_(d);  // job_ is not reassigned before every active thread has finished
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_all();
  }
}

}  // namespace tessel::runtime::cpu

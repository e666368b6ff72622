#pragma once
// The CPU executor's thread machinery (internal to runtime/): the ready queue each lane
// serves, the pool of threads that serve them, kept across runs, and how a waiting
// thread spins.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel::runtime::cpu {

// Ready tasks of one lane (a device's worker or its copy lane): the highest priority
// first, ties by core's ready_tie (a move's stagger step, then the task id:
// core/ready_order.h), as the simulator orders them.
struct ReadyQueue {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::int32_t> heap;
  std::atomic<std::int32_t> size{0};  // heap.size(), readable without the lock
};

// A worker's spin before it sleeps: 20,000 pause instructions, ~490 us on the development
// machine's AMD EPYC (about 63 cycles each at 2.6 GHz; min of 200 loops, measured
// 2026-11-24). Its length is the CPU's pause latency times 20,000, so it differs by CPU.
inline constexpr int kSpins = 20000;
inline constexpr std::chrono::microseconds kLinkSpin{50};  // with a RemoteLink: yields instead

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The executor's threads, kept from one run to the next: thread d of every run is the
// same thread, so its stack pages (Eigen's GEMM packs its blocks on the stack), its
// allocator arena and its core's caches are warm when the clock starts, as they are in a
// training loop that runs the same step again. A thread's first GEMM of a shape
// otherwise costs 10-20 us more than the next (the stack pages fault in), which a
// fine-grained graph pays on every worker and every run. The executor runs its workers
// as threads 0..D-1 and, with copy lanes, device d's copy lane as thread D + d.
class WorkerPool {
 public:
  WorkerPool() = default;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool();

  // Starts job(i) on threads i = 0..n-1 and returns at once; wait() returns when all
  // have returned, rethrowing the first exception a job let escape. A thread that cannot
  // be created is a ResourceError.
  void start(int n, std::function<void(int)> job);
  void wait();

 private:
  void loop(int d, std::uint64_t seen);

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  std::function<void(int)> job_;
  std::exception_ptr error_;
  std::uint64_t generation_ = 0;
  int active_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace tessel::runtime::cpu

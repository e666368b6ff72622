#include "runtime/measure.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <barrier>
#include <chrono>
#include <thread>
#include <vector>

namespace tessel::runtime {

void pin_to_core(int worker) {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(worker) % cores, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

namespace {
constexpr int kBatches = 5;
}  // namespace

double per_call_seconds(int workers, double min_seconds, const std::function<void(int)>& setup,
                        const std::function<void(int)>& body) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> per_call(static_cast<std::size_t>(workers));
  std::barrier sync(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      pin_to_core(w);
      setup(w);
      sync.arrive_and_wait();  // bodies may touch other workers' memory
      body(w);                 // warm-up
      sync.arrive_and_wait();
      // kBatches batches, each timed on its own; the median batch's time per call, so
      // that one preemption (a shared VM's host takes the core for a millisecond now and
      // then) spoils one batch rather than the figure.
      std::array<double, kBatches> batch{};
      for (double& b : batch) {
        auto t0 = Clock::now();
        long calls = 0;
        double elapsed = 0;
        do {
          body(w);
          ++calls;
          elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        } while (elapsed < min_seconds / kBatches);
        b = elapsed / static_cast<double>(calls);
      }
      std::sort(batch.begin(), batch.end());
      per_call[static_cast<std::size_t>(w)] = batch[kBatches / 2];
      sync.arrive_and_wait();  // keep every worker busy until all have measured
    });
  for (auto& t : threads) t.join();
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace tessel::runtime

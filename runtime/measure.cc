#include "runtime/measure.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <latch>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/stats.h"
#include "core/error.h"

namespace tessel::runtime {

int pinnable_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

void pin_to_core(int worker) {
  const auto cores = static_cast<unsigned>(pinnable_cores());
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(worker) % cores, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

namespace {
// The affinity mask the process started with (taskset, numactl, mpirun's binding), taken
// when the library is loaded, on the main thread, before any thread pins itself.
cpu_set_t starting_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) == 0)
    for (int c = 0; c < pinnable_cores() && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<unsigned>(c), &set);
  return set;
}
const cpu_set_t kStartingAffinity = starting_affinity();
}  // namespace

void unpin_thread() { pthread_setaffinity_np(pthread_self(), sizeof(kStartingAffinity), &kStartingAffinity); }

void set_worker_float_mode() {
#if defined(__x86_64__) || defined(__i386__)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#elif defined(__aarch64__)
  std::uint64_t fpcr = 0;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  asm volatile("msr fpcr, %0" : : "r"(fpcr | (std::uint64_t{1} << 24)));  // FZ
#endif
}

namespace {
constexpr int kBatches = 5;
}  // namespace

namespace {

// calls_per_batch == 0: batches of calls timed together until each lasts
// min_seconds / kBatches; otherwise that many calls per batch, each after `before` and
// a barrier, timed one by one.
std::vector<double> measure_calls(int workers, double min_seconds, const std::function<void(int)>& setup,
                     const std::function<void(int)>* before, long calls_per_batch,
                     const std::function<void(int)>& body) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> per_call(static_cast<std::size_t>(workers));
  std::barrier sync(workers);
  std::vector<std::thread> threads;
  // Workers wait on `go` until all exist: when creating one fails, the others return
  // instead of waiting on the barrier for it, and are joined before the error leaves.
  std::latch go(1);
  std::atomic<bool> abandon{false};
  auto start = [&](int w, auto&& fn) {
    try {
      threads.emplace_back(fn);
    } catch (const std::system_error& e) {
      abandon = true;
      go.count_down();
      for (auto& t : threads) t.join();
      throw ResourceError("cannot start measuring thread " + std::to_string(w + 1) + " of " +
                          std::to_string(workers) + ": " + e.what());
    }
  };
  // A worker whose setup, before or body throws records the first exception; from then
  // on every worker skips its calls but still arrives at every barrier (their number is
  // fixed), so that none waits forever, and the error leaves after the join instead of
  // terminating the process from a thread.
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto attempt = [&](const std::function<void(int)>& f, int w) {
    if (failed.load(std::memory_order_relaxed)) return false;
    try {
      f(w);
      return true;
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
      return false;
    }
  };
  for (int w = 0; w < workers; ++w)
    start(w, [&, w] {
      go.wait();
      if (abandon) return;
      pin_to_core(w);
      set_worker_float_mode();
      attempt(setup, w);
      sync.arrive_and_wait();  // bodies may touch other workers' memory
      if (before) attempt(*before, w);
      attempt(body, w);        // warm-up
      sync.arrive_and_wait();
      // kBatches batches, each timed on its own; the median batch's time per call, so
      // that one preemption (a shared VM's host takes the core for a millisecond now and
      // then) spoils one batch rather than the figure.
      std::array<double, kBatches> batch{};
      for (double& b : batch) {
        long calls = 0;
        double elapsed = 0;
        if (!before) {
          auto t0 = Clock::now();
          do {
            if (!attempt(body, w)) break;
            ++calls;
            elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
          } while (elapsed < min_seconds / kBatches);
        } else {
          for (; calls < calls_per_batch; ++calls) {
            attempt(*before, w);
            sync.arrive_and_wait();  // every worker's `before` is over
            auto t0 = Clock::now();
            attempt(body, w);
            elapsed += std::chrono::duration<double>(Clock::now() - t0).count();
          }
        }
        b = calls > 0 ? elapsed / static_cast<double>(calls) : 0.0;
      }
      per_call[static_cast<std::size_t>(w)] = stats::median({batch.begin(), batch.end()});
      sync.arrive_and_wait();  // keep every worker busy until all have measured
    });
  go.count_down();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return per_call;
}

long calls_for(double min_seconds, double expected_call_seconds) {
  const double wanted = min_seconds / kBatches / std::max(expected_call_seconds, 1e-9);
  return std::clamp(static_cast<long>(std::ceil(wanted)), 3L, 200L);
}

}  // namespace

double per_call_seconds(int workers, double min_seconds, const std::function<void(int)>& setup,
                        const std::function<void(int)>& body) {
  return stats::median(per_call_seconds_each(workers, min_seconds, setup, body));
}

double per_call_seconds_after(int workers, double min_seconds, double expected_call_seconds,
                              const std::function<void(int)>& setup, const std::function<void(int)>& before,
                              const std::function<void(int)>& body) {
  return stats::median(per_call_seconds_after_each(workers, min_seconds, expected_call_seconds, setup, before, body));
}

std::vector<double> per_call_seconds_each(int workers, double min_seconds, const std::function<void(int)>& setup,
                                          const std::function<void(int)>& body) {
  return measure_calls(workers, min_seconds, setup, nullptr, 0, body);
}

std::vector<double> per_call_seconds_after_each(int workers, double min_seconds, double expected_call_seconds,
                                                const std::function<void(int)>& setup,
                                                const std::function<void(int)>& before,
                                                const std::function<void(int)>& body) {
  return measure_calls(workers, min_seconds, setup, &before, calls_for(min_seconds, expected_call_seconds), body);
}

// Not instrumented under the sanitizers: a fill of the evictor's own vector (its size
// checked first) that calibration and the in-place profile's cold calls repeat thousands
// of times: 54% of `calibrate -d 2 --seconds 0.005`'s CPU time in the plain build
// (perf, 2026-11-29), the more under the sanitizers' instrumentation.
#if defined(__clang__) || defined(__GNUC__)
__attribute__((no_sanitize("address", "undefined")))
#endif
void CacheEvictor::push() {
  if (data_.empty()) fail("cache evictor: nothing to write (fewer than 4 bytes asked for)");
  const float v = data_[0] + 1.f;
  std::fill(data_.begin(), data_.end(), v);
}

bool can_flush_caches() {
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

bool flush_from_caches(const void* data, std::size_t bytes) {
  if (!can_flush_caches()) return false;
  // 64 bytes: the line of every x86-64 and of the AArch64 cores this runs on; a smaller
  // line would leave some lines in the caches (the time still falls toward DRAM's).
  constexpr std::size_t kLine = 64;
  const auto* p = static_cast<const char*>(data);
#if defined(__x86_64__) || defined(__i386__)
  for (std::size_t o = 0; o < bytes; o += kLine) _mm_clflush(p + o);
  if (bytes > 0) _mm_clflush(p + bytes - 1);
  _mm_mfence();
#elif defined(__aarch64__)
  for (std::size_t o = 0; o < bytes; o += kLine) asm volatile("dc civac, %0" : : "r"(p + o) : "memory");
  if (bytes > 0) asm volatile("dc civac, %0" : : "r"(p + bytes - 1) : "memory");
  asm volatile("dsb ish" : : : "memory");
#else
  (void)p;
  (void)bytes;
#endif
  return true;
}

std::int64_t per_core_cache_bytes() {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<std::int64_t>(l2) : std::int64_t{1} << 20;
}

std::vector<double> bsp_boundary_gaps(const TaskGraph& tg, const Timeline& bsp) {
  std::map<std::int32_t, std::pair<double, double>> phase;  // first start, last end
  for (const Span& sp : bsp.spans) {
    const Task& t = tg.task(sp.task);
    if (t.kind != TaskKind::compute) continue;
    auto [it, fresh] = phase.try_emplace(bsp_phase(t), sp.start_s, sp.end_s);
    if (!fresh) {
      it->second.first = std::min(it->second.first, sp.start_s);
      it->second.second = std::max(it->second.second, sp.end_s);
    }
  }
  std::vector<double> gaps;
  for (auto it = phase.begin(); it != phase.end() && std::next(it) != phase.end(); ++it)
    gaps.push_back(std::next(it)->second.first - it->second.second);
  return gaps;
}

std::vector<double> same_device_compute_gaps(const TaskGraph& tg, const Timeline& timeline) {
  std::map<std::int32_t, std::vector<const Span*>> by_device;
  for (const Span& sp : timeline.spans)
    if (tg.task(sp.task).kind == TaskKind::compute) by_device[sp.device.value].push_back(&sp);
  std::vector<double> gaps;
  for (auto& [d, spans] : by_device) {
    std::sort(spans.begin(), spans.end(), [](const Span* x, const Span* y) { return x->start_s < y->start_s; });
    for (std::size_t i = 1; i < spans.size(); ++i) gaps.push_back(spans[i]->start_s - spans[i - 1]->end_s);
  }
  return gaps;
}

}  // namespace tessel::runtime

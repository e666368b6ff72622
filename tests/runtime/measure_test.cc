// The timing loop's failure behaviour: an exception in one worker's setup, before or
// body reaches the caller after every thread has been joined; no worker waits forever
// at a barrier and nothing terminates the process.
#include "runtime/measure.h"

#include <sched.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <new>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/stats.h"

namespace tessel::runtime {
namespace {

// unpin_thread() gives a pinned thread back the mask the process started with, not every
// core (meaningful under a narrower mask: `taskset -c 0 build/bin/tessel_tests
// --gtest_filter='Measure.Unpin*'`, where widening to all cores fails it).
TEST(Measure, UnpinRestoresTheMaskTheProcessStartedWith) {
  cpu_set_t before, after;
  CPU_ZERO(&before);
  CPU_ZERO(&after);
  std::thread([&] {
    sched_getaffinity(0, sizeof(before), &before);  // inherited from the main thread, never pinned
    pin_to_core(0);
    unpin_thread();
    sched_getaffinity(0, sizeof(after), &after);
  }).join();
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << CPU_COUNT(&before) << " cores before, " << CPU_COUNT(&after) << " after";
}

// A flushed buffer keeps its data (dirty lines are written back, not dropped).
TEST(Measure, FlushFromCachesKeepsTheData) {
  std::vector<int> v(100000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i * 7);
  const bool flushed = flush_from_caches(v.data(), v.size() * sizeof(int));
  EXPECT_EQ(flushed, can_flush_caches());
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<int>(i * 7)) << i;
  EXPECT_EQ(flush_from_caches(v.data(), 0), can_flush_caches());  // nothing to flush: no access
}

// Its point: the next read of a flushed buffer comes from DRAM, several times slower than
// a read of the same 256 KiB from the per-core cache (the medians of 15 reads each).
TEST(Measure, TimingAReadAfterFlushFromCachesIsSlowerThanACachedOne) {
  if (!can_flush_caches()) GTEST_SKIP() << "this CPU cannot flush its caches";
  std::vector<float> v(64 * 1024, 1.f);
  volatile float sink = 0;
  auto read = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    float s = 0;
    for (std::size_t i = 0; i < v.size(); i += 16) s += v[i];
    sink = sink + s;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> cached, flushed;
  for (int k = 0; k < 15; ++k) {
    (void)read();
    cached.push_back(read());
    ASSERT_TRUE(flush_from_caches(v.data(), v.size() * sizeof(float)));
    flushed.push_back(read());
  }
  const double c = stats::median(cached), f = stats::median(flushed);
  EXPECT_GT(f, 1.5 * c) << "cached " << c << " s, flushed " << f << " s";
}

TEST(Measure, AWorkerThatThrowsInSetupEndsTheMeasurementWithItsError) {
  auto setup = [](int w) {
    if (w == 1) throw Error("worker 1 could not set up");
  };
  try {
    (void)per_call_seconds(2, 0.01, setup, [](int) {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "worker 1 could not set up");
  }
}

TEST(Measure, AWorkerThatThrowsInItsBodyEndsTheMeasurementUnderBothLoops) {
  std::atomic<int> calls{0};
  auto body = [&](int w) {
    if (w == 0 && ++calls == 3) throw std::bad_alloc();
  };
  EXPECT_THROW((void)per_call_seconds(2, 0.01, [](int) {}, body), std::bad_alloc);
  calls = 0;
  // With `before`, workers meet at a barrier before every call: the one that failed
  // keeps arriving.
  EXPECT_THROW((void)per_call_seconds_after(3, 0.01, 1e-6, [](int) {}, [](int) {}, body), std::bad_alloc);
  calls = 0;
  auto before = [&](int w) {
    if (w == 2 && ++calls == 5) throw Error("before failed");
  };
  EXPECT_THROW((void)per_call_seconds_after(3, 0.01, 1e-6, [](int) {}, before, [](int) {}), Error);
  // And without a failure it still measures.
  EXPECT_GT(per_call_seconds(2, 0.01, [](int) {}, [](int) {}), 0.0);
}

}  // namespace
}  // namespace tessel::runtime

// The timing loop's failure behaviour: an exception in one worker's setup, before or
// body reaches the caller after every thread has been joined; no worker waits forever
// at a barrier and nothing terminates the process.
#include "runtime/measure.h"

#include <sched.h>

#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <thread>

#include "core/error.h"

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

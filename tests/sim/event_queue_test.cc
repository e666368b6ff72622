#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <random>

namespace tessel::sim {
namespace {

TEST(EventQueue, PopsByTimeThenInsertionOrder) {
  EventQueue<int> q;
  q.push(30, 0);
  q.push(10, 1);
  q.push(20, 2);
  q.push(10, 3);
  q.push(10, 4);
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.pop());
  EXPECT_EQ(order, (std::vector<int>{1, 3, 4, 2, 0}));
  EXPECT_EQ(q.now(), 30);
}

TEST(EventQueue, ManyTiesComeOutInInsertionOrder) {
  // A heap is not stable by itself: the sequence number must make it so.
  EventQueue<int> q;
  std::mt19937 rng(7);
  for (int i = 0; i < 10000; ++i) q.push(static_cast<SimTime>(rng() % 16), i);
  SimTime last_time = -1;
  int last_payload = -1;
  while (!q.empty()) {
    SimTime t = q.next_time();
    int p = q.pop();
    if (t == last_time) {
      EXPECT_GT(p, last_payload);
    }
    EXPECT_GE(t, last_time);
    last_time = t;
    last_payload = p;
  }
}

TEST(EventQueue, PicosecondClockHoldsNanosecondsAndHours) {
  EXPECT_EQ(to_sim_time(1e-9), 1000);
  EXPECT_EQ(to_sim_time(3600.0), 3'600'000'000'000'000);
  EXPECT_DOUBLE_EQ(to_seconds(to_sim_time(3600.0) + 1000), 3600.000000001);
}

TEST(EventQueue, DiscardTopKeepsTheClock) {
  EventQueue<int> q;
  q.push(5, 0);
  q.push(50, 1);
  (void)q.pop();
  q.discard_top();
  EXPECT_EQ(q.now(), 5);
  EXPECT_TRUE(q.empty());
}

// TimeBucketQueue pops in EventQueue's order — by time, then in the order pushed — over
// pushes with many ties, pushes at the time being popped, and discarded events.
TEST(EventQueue, TimeBucketsPopInTheHeapsOrder) {
  EventQueue<int> heap;
  TimeBucketQueue<int> buckets;
  std::uint64_t x = 12345;
  auto next = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x >> 33;
  };
  int id = 0;
  SimTime now = 0;
  for (int round = 0; round < 2000; ++round) {
    const int pushes = static_cast<int>(next() % 4);
    for (int k = 0; k < pushes; ++k) {
      const SimTime t = now + static_cast<SimTime>(next() % 5) * 10;  // five times: ties are the rule
      heap.push(t, id);
      buckets.push(t, id);
      ++id;
    }
    ASSERT_EQ(heap.size(), buckets.size());
    if (heap.empty()) continue;
    ASSERT_EQ(heap.next_time(), buckets.next_time());
    ASSERT_EQ(heap.top(), buckets.top());
    if (next() % 7 == 0) {
      heap.discard_top();
      buckets.discard_top();
    } else {
      now = heap.next_time();
      ASSERT_EQ(heap.pop(), buckets.pop());
      EXPECT_EQ(heap.now(), buckets.now());
    }
  }
  while (!heap.empty()) {
    ASSERT_EQ(heap.next_time(), buckets.next_time());
    ASSERT_EQ(heap.pop(), buckets.pop());
  }
  EXPECT_TRUE(buckets.empty());
  EXPECT_EQ(buckets.next_time(), kNever);
}

}  // namespace
}  // namespace tessel::sim

#pragma once
// The simulator's clock and event queue.
//
// Time is an integer count of picoseconds (SimTime). int64 picoseconds resolve a
// nanosecond kernel a thousand times over; the clock's range is kMaxSimTime, 4e18 ps
// (4,000,000 s, about 46 days), so a task of a few nanoseconds and a month-long run share
// one exact clock. Durations are rounded to the nearest picosecond once, when a task
// starts, and sums of integers never drift. Every duration saturates at kMaxSimTime and
// every event the loop reaches lies below it, so a time plus a duration (at most 8e18)
// never overflows; a run that would pass the limit stops with an Error naming it.
//
// EventQueue is a binary heap ordered by (time, sequence number): events at the same
// time come out in the order they were pushed, and time never goes backwards (pushing
// an event earlier than the last one popped is a programming error, asserted). The
// same inputs therefore give the same event order, bit for bit.

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <unordered_map>
#include <vector>

namespace tessel::sim {

/// Simulated time in picoseconds.
using SimTime = std::int64_t;
inline constexpr SimTime kNever = std::numeric_limits<SimTime>::max();
inline constexpr double kPicosecondsPerSecond = 1e12;

/// The clock's range: 4e18 ps = 4,000,000 s (46.3 days). Twice it fits int64.
inline constexpr SimTime kMaxSimTime = 4'000'000'000'000'000'000;
inline constexpr double kMaxSimSeconds = static_cast<double>(kMaxSimTime) / kPicosecondsPerSecond;

// Picoseconds → SimTime, rounded to the nearest picosecond, saturating at kMaxSimTime
// (infinity and NaN too): the caller compares with kMaxSimTime where it can name the task.
[[nodiscard]] inline SimTime to_sim_ps(double ps) {
  assert(!(ps < 0));
  if (!(ps < static_cast<double>(kMaxSimTime))) return kMaxSimTime;
  return static_cast<SimTime>(std::llround(ps));
}
// Seconds → picoseconds, rounded to the nearest picosecond, saturating at kMaxSimTime.
[[nodiscard]] inline SimTime to_sim_time(double seconds) { return to_sim_ps(seconds * kPicosecondsPerSecond); }
// a + b for two times within the range, saturating at kMaxSimTime.
[[nodiscard]] inline SimTime add_sim_time(SimTime a, SimTime b) { return std::min(a + b, kMaxSimTime); }
[[nodiscard]] inline double to_seconds(SimTime t) { return static_cast<double>(t) / kPicosecondsPerSecond; }

template <class Payload>
class EventQueue {
 public:
  void push(SimTime time, const Payload& payload) {
    assert(time >= now_);
    heap_.push_back(Entry{time, seq_++, payload});
    sift_up(heap_.size() - 1);
  }
  [[nodiscard]] bool empty() const { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const { return heap_.size(); }
  // Time of the earliest event, kNever when empty.
  [[nodiscard]] SimTime next_time() const { return heap_.empty() ? kNever : heap_.front().time; }
  [[nodiscard]] const Payload& top() const { return heap_.front().payload; }
  // Removes the earliest event; the clock moves to its time.
  Payload pop() {
    assert(!heap_.empty());
    now_ = heap_.front().time;
    Payload p = heap_.front().payload;
    discard_top();
    return p;
  }
  // Removes the earliest event without moving the clock (a cancelled event).
  void discard_top() {
    assert(!heap_.empty());
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
  }
  // Time of the last event popped (0 before the first).
  [[nodiscard]] SimTime now() const { return now_; }
  void reserve(std::size_t n) { heap_.reserve(n); }

 private:
  struct Entry {
    SimTime time;
    std::uint64_t seq;
    Payload payload;
  };
  static bool before(const Entry& a, const Entry& b) { return a.time < b.time || (a.time == b.time && a.seq < b.seq); }
  void sift_up(std::size_t i) {
    Entry e = heap_[i];
    while (i > 0) {
      std::size_t parent = (i - 1) / 2;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  void sift_down(std::size_t i) {
    const std::size_t n = heap_.size();
    Entry e = heap_[i];
    for (;;) {
      std::size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && before(heap_[c + 1], heap_[c])) ++c;
      if (!before(heap_[c], e)) break;
      heap_[i] = heap_[c];
      i = c;
    }
    heap_[i] = e;
  }

  std::vector<Entry> heap_;
  std::uint64_t seq_ = 0;
  SimTime now_ = 0;
};

// The same order as EventQueue — by time, then in the order pushed — kept as one FIFO per
// distinct time under a binary heap of those times. Where many events share a time (the
// ranks of a collective finish their steps together) a push appends to its time's bucket
// and a pop takes the bucket's next event, instead of sifting through a heap of ties.
template <class Payload>
class TimeBucketQueue {
 public:
  void push(SimTime time, const Payload& payload) {
    assert(time >= now_);
    if (time != last_time_ || last_ < 0) {
      auto [it, fresh] = index_.try_emplace(time, 0);
      if (fresh) {
        std::int32_t b = 0;
        if (free_.empty()) {
          b = static_cast<std::int32_t>(buckets_.size());
          buckets_.emplace_back();
        } else {
          b = free_.back();
          free_.pop_back();
        }
        it->second = b;
        times_.push_back(Time{time, b});
        std::push_heap(times_.begin(), times_.end(), std::greater<>());
      }
      last_time_ = time;
      last_ = it->second;
    }
    buckets_[static_cast<std::size_t>(last_)].items.push_back(payload);
    ++size_;
  }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] SimTime next_time() const { return times_.empty() ? kNever : times_.front().time; }
  [[nodiscard]] const Payload& top() const {
    const Bucket& b = buckets_[static_cast<std::size_t>(times_.front().bucket)];
    return b.items[b.head];
  }
  Payload pop() {
    assert(size_ > 0);
    now_ = times_.front().time;
    Payload p = top();
    discard_top();
    return p;
  }
  void discard_top() {
    assert(size_ > 0);
    const Time front = times_.front();
    Bucket& b = buckets_[static_cast<std::size_t>(front.bucket)];
    --size_;
    if (++b.head < b.items.size()) return;
    b.items.clear();  // its time is done: the bucket (and its capacity) serves another
    b.head = 0;
    std::pop_heap(times_.begin(), times_.end(), std::greater<>());
    times_.pop_back();
    index_.erase(front.time);
    free_.push_back(front.bucket);
    if (last_ == front.bucket) last_ = -1;
  }
  [[nodiscard]] SimTime now() const { return now_; }

 private:
  struct Time {
    SimTime time;
    std::int32_t bucket;
    friend bool operator>(const Time& a, const Time& b) { return a.time > b.time; }  // times are distinct
  };
  struct Bucket {
    std::vector<Payload> items;
    std::size_t head = 0;
  };
  std::vector<Time> times_;
  std::vector<Bucket> buckets_;
  std::vector<std::int32_t> free_;
  std::unordered_map<SimTime, std::int32_t> index_;
  std::size_t size_ = 0;
  SimTime last_time_ = 0;
  std::int32_t last_ = -1;
  SimTime now_ = 0;
};

}  // namespace tessel::sim

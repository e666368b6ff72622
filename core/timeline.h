#pragma once
// Timeline: one span per executed task, written by the simulator and by every
// executor in the same schema so that a task's simulated and measured spans can be
// matched by task id. Chrome trace JSON (pid = device, tid = lane) opens in Perfetto.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/task_graph.h"

namespace tessel {

enum class Lane : std::uint8_t { compute, comm, copy };
[[nodiscard]] std::string_view to_string(Lane l);

struct Span {
  TaskId task;
  DeviceId device;
  Lane lane = Lane::compute;
  double start_s = 0;
  double end_s = 0;
  friend bool operator==(const Span&, const Span&) = default;
};

struct Timeline {
  std::string source;  // "sim", "cpu", "reference", ...
  std::vector<Span> spans;

  [[nodiscard]] double makespan_s() const;
  friend bool operator==(const Timeline&, const Timeline&) = default;
};

// The lane a task of this kind occupies: compute and input/output on compute, moves
// on comm, touches, evicts and loads on copy.
[[nodiscard]] Lane default_lane(TaskKind kind);

// Trace threads. Spans of one device and lane that overlap in time (a device's moves
// on several comm channels; in the simulator a move also ends a route latency after
// it frees its channel) cannot share a Chrome-trace thread: Perfetto would draw them
// as invalid nesting. Each lane is split into tracks, assigned after the run, greedily
// in start order (ties by end, then task): a span takes the lowest-numbered track
// whose previous span has ended. A lane's track 0 keeps the lane's historical tid
// (compute 0, comm 1, copy 2); track k > 0 of lane L has tid 3k + L, so tid % 3 is the
// lane and tid / 3 the track, and a measured trace (one track per lane) lines up with
// a simulated one row for row. One entry per span of `tl`, deterministic.
[[nodiscard]] std::vector<int> trace_tids(const Timeline& tl);
[[nodiscard]] inline int trace_tid(Lane lane, int track) { return 3 * track + static_cast<int>(lane); }
// "compute", "comm", "copy" for track 0 (as before tracks existed), "comm 1", ... after.
[[nodiscard]] std::string trace_thread_name(int tid);

// Parses a device list such as "0-7,64" (comma-separated numbers and inclusive A-B
// ranges) against `num_devices`: one flag per device. Errors name `option` and the bad
// piece.
[[nodiscard]] std::vector<bool> parse_device_list(std::string_view text, int num_devices, std::string_view option);

// Chrome trace JSON. With `tg`, events are named after their task kind and node. With
// `devices`, only the spans of devices whose flag is set are written. Threads (tid) as
// trace_tids; each gets a thread_name and a thread_sort_index (lane, then track)
// metadata event. Streams the events: a million spans write in about a second.
void write_chrome_trace(std::ostream& os, const Timeline& tl, const TaskGraph* tg = nullptr,
                        const Graph* g = nullptr, const std::vector<bool>* devices = nullptr);

}  // namespace tessel

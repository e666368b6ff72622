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
// on comm, touches on copy.
[[nodiscard]] Lane default_lane(TaskKind kind);

// Chrome trace JSON. With `tg`, events are named after their task kind and node.
void write_chrome_trace(std::ostream& os, const Timeline& tl, const TaskGraph* tg = nullptr,
                        const Graph* g = nullptr);

}  // namespace tessel

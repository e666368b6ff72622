#include "core/timeline.h"

#include <algorithm>
#include <ostream>

#include <nlohmann/json.hpp>

namespace tessel {

std::string_view to_string(Lane l) {
  switch (l) {
    case Lane::compute: return "compute";
    case Lane::comm: return "comm";
    case Lane::copy: return "copy";
  }
  return "?";
}

double Timeline::makespan_s() const {
  double m = 0;
  for (const Span& s : spans) m = std::max(m, s.end_s);
  return m;
}

Lane default_lane(TaskKind kind) {
  switch (kind) {
    case TaskKind::move: return Lane::comm;
    case TaskKind::touch: return Lane::copy;
    default: return Lane::compute;
  }
}

void write_chrome_trace(std::ostream& os, const Timeline& tl, const TaskGraph* tg, const Graph* g) {
  nlohmann::json events = nlohmann::json::array();
  std::vector<bool> seen_device;
  for (const Span& s : tl.spans) {
    if (s.device.index() >= seen_device.size()) seen_device.resize(s.device.index() + 1, false);
    if (!seen_device[s.device.index()]) {
      seen_device[s.device.index()] = true;
      events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", s.device.value},
                        {"args", {{"name", "device " + std::to_string(s.device.value)}}}});
      for (Lane l : {Lane::compute, Lane::comm, Lane::copy})
        events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", s.device.value},
                          {"tid", static_cast<int>(l)}, {"args", {{"name", std::string(to_string(l))}}}});
    }
    std::string name = "task " + std::to_string(s.task.value);
    nlohmann::json args = {{"task", s.task.value}};
    if (tg && s.task.valid() && s.task.index() < tg->tasks.size()) {
      const Task& t = tg->task(s.task);
      name = std::string(to_string(t.kind));
      if (g && t.node.valid() && t.node.index() < g->size()) name += " " + g->node(t.node).name;
      args["bytes"] = t.bytes;
      args["flops"] = t.flops;
      if (t.kind == TaskKind::move) args["to_device"] = t.dst_device.value;
    }
    events.push_back({{"name", name},
                      {"ph", "X"},
                      {"pid", s.device.value},
                      {"tid", static_cast<int>(s.lane)},
                      {"ts", s.start_s * 1e6},
                      {"dur", (s.end_s - s.start_s) * 1e6},
                      {"args", args}});
  }
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ns"}, {"otherData", {{"source", tl.source}}}};
  os << doc.dump() << '\n';
}

}  // namespace tessel

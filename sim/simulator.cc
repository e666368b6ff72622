#include "sim/simulator.h"

#include <chrono>

#include "core/error.h"
#include "sim/collective_engine.h"
#include "sim/run.h"

namespace tessel::sim {

std::string_view to_string(Policy p) { return p == Policy::bsp ? "bsp" : "async"; }
std::string_view to_string(Priority p) { return p == Priority::fifo ? "fifo" : "longest-path"; }

Policy parse_policy(std::string_view s, std::string_view what) {
  if (s == "async") return Policy::async;
  if (s == "bsp") return Policy::bsp;
  fail(what, ": unknown policy '", s, "' (expected async or bsp)");
}

Priority parse_priority(std::string_view s, std::string_view what) {
  if (s == "longest-path") return Priority::longest_path;
  if (s == "fifo") return Priority::fifo;
  fail(what, ": unknown priority '", s, "' (expected longest-path or fifo)");
}

namespace detail {

SimResult Run::run() {
  auto wall0 = std::chrono::steady_clock::now();
  setup();
  loop();
  SimResult r;
  if (stopped_ < 0) r = finish();
  else r.stopped = true, r.cancelled = cancelled_, r.makespan_s = to_seconds(stopped_), r.events = events_;
  r.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

}  // namespace detail

SimResult simulate(const TaskGraph& tg, const Machine& m, const SimOptions& options) {
  if (tg.has_collectives()) return simulate_collective_node(tg, m, options);  // collective_engine.h
  return detail::Run(tg, m, options).run();
}

}  // namespace tessel::sim

#pragma once
// Pinning and timing helpers shared by the CPU executor, calibration and kernel
// profiling (internal to runtime/).

#include <functional>

namespace tessel::runtime {

// Pins the calling thread to core `worker` modulo the cores (best effort), as the CPU
// executor pins its workers.
void pin_to_core(int worker);

// Runs body(worker) repeatedly on `workers` pinned threads at once — after setup(worker)
// and one untimed call each — until each has spent at least `min_seconds`, in five
// batches timed apart; returns the median over workers of each one's median batch's
// seconds per call. Every worker keeps running until all have
// measured, so that each call is timed with all workers busy.
[[nodiscard]] double per_call_seconds(int workers, double min_seconds, const std::function<void(int)>& setup,
                                      const std::function<void(int)>& body);

}  // namespace tessel::runtime

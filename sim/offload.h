#pragma once
// How the simulator models memory offload (core/memory_plan.h): an evict or a load is a
// copy of a whole buffer between a device and its host's RAM. Loads and evicts queue
// apart, one at a time per direction of the device's host link (the links are
// directional, PCIe is full duplex and a GPU has copy engines for each direction: a load
// and an evict run at once, and neither waits for touches; their time counts as the copy
// lane's; on a single-lane CPU worker they run on the worker, or with the device type's
// host_copy_lane on one copy lane of their own for both directions, beside the worker, as
// the CPU executor's copy-lane thread runs them) and take the latency of
// the device's host route plus its bytes at the rate of the route's slowest link for a
// copy of that size (Machine::host_route: the PCIe link of the GPU presets, per
// direction; a CPU worker's memory copy, whose rate by size `tessel calibrate` measures:
// Link::bytes_per_s_by_size). The bytes are counted on those links, but the copy does not
// share their bandwidth with moves that cross them at the same time (on the presets
// with NVLink no move crosses a GPU's PCIe link). Host buffers are not device memory;
// every host's RAM must hold all the host buffers of its devices at once.

#include <cstdint>
#include <vector>

#include "core/machine.h"
#include "core/task_graph.h"
#include "sim/event_queue.h"

namespace tessel::sim {

// The undisturbed duration of evict or load `t` on machine `m`; adds its bytes to
// `link_bytes` (one entry per machine link).
[[nodiscard]] SimTime host_copy_ps(const Machine& m, const Task& t, std::vector<std::int64_t>& link_bytes);

// Throws Error naming the host when the host buffers of its devices exceed its
// memory_capacity_bytes (0: unknown, not checked).
void check_host_memory(const TaskGraph& tg, const Machine& m);

}  // namespace tessel::sim

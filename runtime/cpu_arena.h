#pragma once
// The CPU executor's memory for memory-capped task graphs (core/memory_plan.h): each
// worker's device memory is one arena of the planned size, and every device buffer
// lives at the offset plan_memory() gave it; a host arena beside it holds the device's
// host buffers (evicted copies, host-resident input blocks) one after another. The
// executor computes in float or double whatever the graph's dtype, so an element may
// take more bytes than the plan counted (f16: 2, computed as a 4-byte float): offsets and
// the arena are scaled by the largest such factor, `widen` (1 for f32 graphs), so the
// arena holds `widen` × the planned bytes.

#include <cstdint>
#include <vector>

#include "core/memory_plan.h"
#include "core/task_graph.h"

namespace tessel::runtime {

// A buffer's memory: its own vector, or a view into an arena.
template <class T>
struct BufferStore {
  std::vector<T> owned;
  T* view = nullptr;
  std::size_t count = 0;
  [[nodiscard]] T* data() { return view ? view : owned.data(); }
  [[nodiscard]] const T* data() const { return view ? view : owned.data(); }
  [[nodiscard]] std::size_t size() const { return view ? count : owned.size(); }
  [[nodiscard]] bool empty() const { return size() == 0; }
  void release() {
    std::vector<T>().swap(owned);
    view = nullptr;
    count = 0;
  }
};

// Where each buffer of a memory-planned graph lives, in elements of T.
struct ArenaLayout {
  bool planned = false;  // some buffer has a planned offset or lives on the host
  std::vector<std::int64_t> device_elements, host_elements;  // per device: the arenas' sizes
  std::vector<std::int64_t> element_offset;  // per buffer: in its arena, -1: not in one
};

template <class T>
ArenaLayout arena_layout(const TaskGraph& tg) {
  ArenaLayout a;
  a.planned = memory_planned(tg);
  if (!a.planned) return a;
  std::int64_t widen = 1;
  for (const Buffer& b : tg.buffers)
    widen = std::max<std::int64_t>(widen, (static_cast<std::int64_t>(sizeof(T)) + dtype_bytes(b.dtype) - 1) / dtype_bytes(b.dtype));
  const auto d = static_cast<std::size_t>(tg.num_devices);
  a.device_elements.assign(d, 0);
  a.host_elements.assign(d, 0);
  a.element_offset.assign(tg.buffers.size(), -1);
  constexpr auto size_of = static_cast<std::int64_t>(sizeof(T));
  for (std::size_t i = 0; i < tg.buffers.size(); ++i) {
    const Buffer& b = tg.buffers[i];
    const std::int64_t n = elements(b.shape);
    const std::size_t dev = b.device.index();
    if (b.host) {  // one after another, each from a multiple of kMemoryAlignment bytes
      a.element_offset[i] = a.host_elements[dev];
      a.host_elements[dev] += (n * size_of + kMemoryAlignment - 1) / kMemoryAlignment * kMemoryAlignment / size_of;
    } else if (b.offset_bytes >= 0) {
      a.element_offset[i] = b.offset_bytes * widen / size_of;
      a.device_elements[dev] = std::max(a.device_elements[dev], a.element_offset[i] + n);
    }
  }
  return a;
}

}  // namespace tessel::runtime

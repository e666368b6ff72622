// The stagger among moves of equal priority (core/ready_order.h) in the simulator: a lowered
// all-to-all (a repartition from row blocks to column blocks) in closed form.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/ready_order.h"
#include "core/task_graph.h"
#include "sim/simulator.h"
#include "tests/sim/sim_test_util.h"
#include "tests/support/all_to_all.h"

namespace tessel::sim {
namespace {

using testing::switch_machine;

// Each device's moves in the order they started.
std::vector<std::vector<const Task*>> moves_by_start(const TaskGraph& tg, const SimResult& r) {
  std::vector<std::vector<const Span*>> spans(static_cast<std::size_t>(tg.num_devices));
  for (const Span& s : r.timeline.spans)
    if (tg.task(s.task).kind == TaskKind::move) spans[tg.task(s.task).device.index()].push_back(&s);
  std::vector<std::vector<const Task*>> out(spans.size());
  for (std::size_t d = 0; d < spans.size(); ++d) {
    std::stable_sort(spans[d].begin(), spans[d].end(), [](const Span* a, const Span* b) { return a->start_s < b->start_s; });
    for (const Span* s : spans[d]) out[d].push_back(&tg.task(s->task));
  }
  return out;
}

TEST(Stagger, LoweredAllToAllFinishesAtTheBusiestLinkBound) {
  // n devices on a full-bisection switch (one link up and one down per device, B bytes/s,
  // no latency, computation and copies free): each up link carries (n − 1)·S bytes, the
  // bound. In task order every sender's first move went to the same receiver, whose down
  // link the n − 1 senders shared: under flow n/2 times the bound (1.98x, 3.96x and 7.92x at
  // 4, 8 and 16 devices), under alpha-beta, which grants a free route to whichever move
  // waits for it, 1.29x and 1.27x at 8 and 16.
  const double bw = 1e10;
  for (const std::string network : {"flow", "alpha-beta"})
    for (int n : {4, 8, 16}) {
      SCOPED_TRACE(network + ", " + std::to_string(n) + " devices");
      const std::int64_t b = 128;
      const TaskGraph tg = tessel::testing::lowered_all_to_all(n, b).tg;
      ASSERT_EQ(tg.summary().count[static_cast<int>(TaskKind::move)], n * (n - 1));
      SimOptions o;
      o.network = network;
      const SimResult r = simulate(tg, switch_machine(n, 0, bw), o);
      const double bound_s = (n - 1) * static_cast<double>(b * b * 4) / bw;
      EXPECT_GE(r.makespan_s, bound_s * (1 - 1e-9));
      EXPECT_LE(r.makespan_s, bound_s * 1.01);
      // In step k every device sends to the one k after it.
      const auto moves = moves_by_start(tg, r);
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(moves[static_cast<std::size_t>(i)].size(), static_cast<std::size_t>(n - 1));
        for (int k = 1; k < n; ++k)
          EXPECT_EQ(moves[static_cast<std::size_t>(i)][static_cast<std::size_t>(k - 1)]->dst_device.value, (i + k) % n)
              << "device " << i << ", step " << k;
      }
    }
}

}  // namespace
}  // namespace tessel::sim

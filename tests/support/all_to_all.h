#pragma once
// A lowered all-to-all for the stagger tests (core/ready_order.h): y = x, x split into n row
// blocks on devices 0..n−1 and y into n column blocks, so that device i sends block (i, j)
// of b × b f32 elements to every other device j — emitted by lower() consumer block by
// consumer block, every move of one size and one priority.

#include <cstdint>
#include <string>

#include "core/graph.h"
#include "core/task_graph.h"
#include "experiments/cli.h"

namespace tessel::testing {

struct AllToAll {
  Graph graph;
  TaskGraph tg;
};

inline AllToAll lowered_all_to_all(int n, std::int64_t b) {
  GraphBuilder gb;
  const NodeId x = gb.input("x", Shape{n * b, n * b});
  gb.output(gb.map("x0", x, "y"), "out");
  AllToAll a{gb.build(), {}};
  const std::string d = std::to_string(n);
  a.tg = lower(a.graph, cli::decomposition_from_parts_spec(a.graph, n, "x=" + d + "x1,y=1x" + d + ",out=1x" + d));
  return a;
}

}  // namespace tessel::testing

#pragma once
// TaskGraph JSON, so that hand-written task graphs (golden scenarios, micro-workloads)
// can be simulated without a Graph and a Decomposition:
//
//   {"devices": 2,
//    "buffers": [{"device": 0, "shape": [1024], "dtype": "f32", "init": "none", "node": 0}, ...],
//    "tasks": [{"kind": "compute", "device": 0, "writes": 0, "flops": 2e9, "bytes": 4096},
//              {"kind": "move", "device": 0, "dst_device": 1, "reads": [0], "writes": 1,
//               "bytes": 4096, "deps": [0]},
//              {"kind": "touch", "device": 1, "reads": [1], "writes": 2, "op": "accumulate",
//               "agg": "sum", "bytes": 4096, "flops": 1024}, ...]}
//
// Optional: a buffer's dtype (f32), init (none), node (0); a task's dst_device (= device),
// node (0), block (-1), reads ([]), writes (none: output tasks only), flops (0), bytes
// (the written buffer's bytes; an output's: its read buffer's), op (copy), agg (none),
// src / dst ({"offset": [...], "size": [...]}, default the whole buffer), deps (default:
// every task that writes a buffer the task reads). Tasks must be listed in topological
// order; a dependency cycle is reported as such, with the tasks on it.

#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/task_graph.h"

namespace tessel::sim {

[[nodiscard]] nlohmann::json to_json(const TaskGraph& tg);
// `what` names the input in error messages (a file name, say).
[[nodiscard]] TaskGraph task_graph_from_json(const nlohmann::json& j, std::string_view what = "task graph");

}  // namespace tessel::sim

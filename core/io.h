#pragma once
// JSON round trip for graphs and decompositions, and file helpers that never leave a
// partial output file behind.
//
// Graph JSON:
//   {"dtype": "f32", "nodes": [
//     {"name": "x", "kind": "input", "shape": [4, 8], "role": "data", "index_roles": {"batch": 0}},
//     {"name": "w", "kind": "input", "shape": [8, 8], "role": "weight"},
//     {"name": "y", "kind": "einsum", "inputs": ["x", "w"], "einsum": "ij,jk->ik",
//      "join": "mul(x0,x1)", "agg": "sum"},
//     {"name": "s", "kind": "select", "inputs": ["y"], "shape": [2, 8],
//      "pieces": [{"input": 0, "src_offset": [0,0], "dst_offset": [0,0], "size": [2,8]}]},
//     {"name": "m", "kind": "fill", "shape": [8, 8], "fill": "lower_triangular", "value": 0, "value_off": "-inf"},
//     {"name": "out", "kind": "output", "inputs": ["y"]}]}
//
// Decomposition JSON:
//   {"devices": 4, "nodes": [{"name": "y", "parts": [2, 2, 1], "devices": [0,1,2,3]},
//                            {"name": "x", "bounds": [[0,1,4],[0,8]]}]}
// Nodes left out get one block; "devices" defaults to round-robin. An input or fill node
// may hold each block on further devices as well, present before the first step
// ("replicas": one list of devices per block, as NodePlan::replicas).
//
// An input's "role" (data or weight) and "index_roles" (batch, sequence, heads: the
// dimension each names) are optional annotations for the planner (core/graph.h).

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/graph.h"
#include "core/output_files.h"
#include "core/partition.h"
#include "core/task_graph.h"

namespace tessel {

[[nodiscard]] nlohmann::json to_json(const Graph& g);
// `what` names the input in error messages (a file name, say).
[[nodiscard]] Graph graph_from_json(const nlohmann::json& j, std::string_view what = "graph");

[[nodiscard]] nlohmann::json to_json(const Decomposition& d, const Graph& g);
[[nodiscard]] Decomposition decomposition_from_json(const nlohmann::json& j, const Graph& g,
                                                    std::string_view what = "decomposition");

[[nodiscard]] nlohmann::json summary_json(const TaskGraph& tg);

// Reads a whole file; Error naming the path when it cannot.
[[nodiscard]] std::string read_file(const std::string& path);
// Parses JSON text read from `what`; Error naming `what` and the position when malformed,
// nested deeper than json_read::kMaxDepth, or holding a number beyond double (1e400).
[[nodiscard]] nlohmann::json parse_json(std::string_view text, std::string_view what);
// parse_json(read_file(path), path).
[[nodiscard]] nlohmann::json read_json_file(const std::string& path);
}  // namespace tessel

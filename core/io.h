#pragma once
// JSON round trip for graphs and decompositions, and file helpers that never leave a
// partial output file behind.
//
// Graph JSON:
//   {"dtype": "f32", "nodes": [
//     {"name": "x", "kind": "input", "shape": [4, 8]},
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
// Nodes left out get one block; "devices" defaults to round-robin.

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/graph.h"
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
// Parses JSON text; Error naming `what` and the parser's position when malformed.
[[nodiscard]] nlohmann::json parse_json(std::string_view text, std::string_view what);
// read_file + parse_json, the path naming the input.
[[nodiscard]] nlohmann::json read_json_file(const std::string& path);
// Writes to a temporary file beside `path` and renames it into place, so that a
// failure never leaves a partial file at `path`.
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace tessel

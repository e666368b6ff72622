// Graph JSON as `-g FILE` reads it (core/io.h). An accepted graph must write and read
// back to the same JSON, and lower onto two devices.
#include "core/io.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "tests/fuzz/fuzz_util.h"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > tessel::fuzz::kMaxInputBytes) return 0;
  return tessel::fuzz::guarded("graph_json", [&] {
    tessel::Graph g = tessel::graph_from_json(tessel::parse_json(tessel::fuzz::as_text(data, size), "fuzz.json"), "fuzz.json");
    const std::string text = tessel::to_json(g).dump();
    const std::string again = tessel::to_json(tessel::graph_from_json(nlohmann::json::parse(text), "round trip")).dump();
    tessel::fuzz::require(again == text, "graph_json", "JSON round trip changed the graph: " + text + " -> " + again);
    (void)tessel::summary_json(tessel::lower(g, tessel::split_largest(g, 2)));
  });
}

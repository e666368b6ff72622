// Decomposition JSON as `--decomposition FILE` reads it, against a small built-in graph
// (the first byte picks which); an accepted decomposition must lower.
#include "core/io.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "tests/fuzz/fuzz_util.h"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > tessel::fuzz::kMaxInputBytes) return 0;
  static const tessel::Graph graphs[] = {
      tessel::build_workload("chain:size=8"),
      tessel::build_workload("chain-sum:size=6"),
      tessel::build_workload("ffn:tokens=8,dim=4,hidden=8"),
  };
  const tessel::Graph& g = graphs[data[0] % 3];
  return tessel::fuzz::guarded("decomposition_json", [&] {
    auto j = tessel::parse_json(tessel::fuzz::as_text(data + 1, size - 1), "fuzz.json");
    tessel::Decomposition d = tessel::decomposition_from_json(j, g, "fuzz.json");
    (void)tessel::to_json(d, g);
    (void)tessel::summary_json(tessel::lower(g, d));
  });
}

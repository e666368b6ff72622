// Workload strings as `-w` takes them ("chain:size=512", "llama-block:model=7b,seq=64"):
// an accepted workload must lower onto two devices (split-largest) with non-negative
// byte and flop totals.
#include "core/io.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "tests/fuzz/fuzz_util.h"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 512) return 0;
  return tessel::fuzz::guarded("workload", [&] {
    tessel::Graph g = tessel::build_workload(tessel::fuzz::as_text(data, size));
    nlohmann::json s = tessel::summary_json(tessel::lower(g, tessel::split_largest(g, 2)));
    tessel::fuzz::require(s["bytes_moved"].get<double>() >= 0 && s["flops"].get<double>() >= 0, "workload",
                          "negative totals: " + s.dump());
  });
}

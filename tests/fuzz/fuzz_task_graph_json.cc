// Task graph JSON as `simulate --task-graph FILE` reads it (sim/task_graph_json.h). An
// accepted task graph must write and read back to the same JSON, and simulate on the
// "cpu" preset sized to its devices when it has few.
#include "core/io.h"
#include "core/machine.h"
#include "sim/simulator.h"
#include "sim/task_graph_json.h"
#include "tests/fuzz/fuzz_util.h"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > tessel::fuzz::kMaxInputBytes) return 0;
  return tessel::fuzz::guarded("task_graph_json", [&] {
    tessel::TaskGraph tg =
        tessel::sim::task_graph_from_json(tessel::parse_json(tessel::fuzz::as_text(data, size), "fuzz.json"), "fuzz.json");
    const std::string text = tessel::sim::to_json(tg).dump();
    const std::string again =
        tessel::sim::to_json(tessel::sim::task_graph_from_json(nlohmann::json::parse(text), "round trip")).dump();
    tessel::fuzz::require(again == text, "task_graph_json", "JSON round trip changed the task graph");
    if (tg.num_devices < 1 || tg.num_devices > 8 || tg.size() > 256) return;
    tessel::Machine m = tessel::machine_preset("cpu:" + std::to_string(tg.num_devices));
    (void)tessel::sim::simulate(tg, m);
  });
}

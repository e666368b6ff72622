// Machine descriptions as `-m` takes them: JSON (machine_from_json) when the input starts
// with '{', else a preset name (machine_preset: "cpu:N", "cluster:4xh100-sxm-8", ...).
// An accepted JSON machine must write and read back equal.
#include "core/io.h"
#include "core/machine.h"
#include "tests/fuzz/fuzz_util.h"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > tessel::fuzz::kMaxInputBytes) return 0;
  return tessel::fuzz::guarded("machine_json", [&] {
    std::string_view text = tessel::fuzz::as_text(data, size);
    if (text.empty() || text[0] != '{') {
      if (text.size() > 256) return;
      tessel::Machine m = tessel::machine_preset(text);
      m.validate();
      return;
    }
    tessel::Machine m = tessel::machine_from_json(tessel::parse_json(text, "fuzz.json"), "fuzz.json");
    m.validate();
    tessel::Machine back = tessel::machine_from_json(tessel::to_json(m), "round trip");
    tessel::fuzz::require(tessel::to_json(back) == tessel::to_json(m), "machine_json", "JSON round trip changed the machine");
  });
}

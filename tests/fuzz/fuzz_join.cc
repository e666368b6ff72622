// Join expressions (ScalarOp::parse): mul(x0,x1), exp(sub(x0,x1)), select(gt(x0,0),x0,0.01).
// An accepted expression must print and parse back to the same text, and evaluate.
#include <vector>

#include "core/scalar_op.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > tessel::fuzz::kMaxInputBytes) return 0;
  return tessel::fuzz::guarded("join", [&] {
    tessel::ScalarOp op = tessel::ScalarOp::parse(tessel::fuzz::as_text(data, size));
    const std::string text = op.to_string();
    const std::string again = tessel::ScalarOp::parse(text).to_string();
    tessel::fuzz::require(again == text, "join", "print/parse round trip: '" + text + "' came back as '" + again + "'");
    const int holes = op.num_holes();
    if (holes >= 0 && holes <= 64) {
      std::vector<double> inputs(static_cast<std::size_t>(holes) + 1, 0.5);
      (void)op.eval(inputs.data());
    }
    (void)op.flops();
  });
}

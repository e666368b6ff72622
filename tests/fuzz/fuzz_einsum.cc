// Einsum subscripts as `tessel einsum` takes them: numpy's syntax parsed, an einsum node
// built over operands whose sizes follow from the letters (2 or 3 each), and — when the
// join space is small — evaluated by the reference evaluator and by the block executor
// on two devices, which must agree.
#include <cmath>
#include <map>
#include <string>

#include "core/einsum.h"
#include "core/graph.h"
#include "core/partition.h"
#include "core/task_graph.h"
#include "runtime/executor.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  return tessel::fuzz::guarded("einsum", [&] {
    const std::string text(tessel::fuzz::as_text(data, size));
    tessel::Subscripts subs = tessel::parse_subscripts(text);
    std::map<char, std::int64_t> sizes;
    std::int64_t join_elements = 1;
    for (const auto& in : subs.inputs)
      for (char c : in)
        if (!sizes.count(c)) {
          sizes[c] = 2 + (static_cast<unsigned char>(c) % 2);
          join_elements = join_elements > (1 << 20) ? join_elements : join_elements * sizes[c];
        }
    tessel::GraphBuilder b(tessel::DType::f64);
    std::vector<tessel::NodeId> args;
    for (std::size_t i = 0; i < subs.inputs.size(); ++i) {
      tessel::Shape shape;
      for (char c : subs.inputs[i]) shape.push_back(sizes[c]);
      args.push_back(b.input("in" + std::to_string(i), shape));
    }
    tessel::NodeId e = b.einsum(text, args, {}, std::nullopt, "einsum");
    b.output(e, "result");
    tessel::Graph g = b.build();
    if (join_elements > 4096) return;
    tessel::runtime::TensorMap inputs = tessel::runtime::random_inputs(g, 1);
    tessel::runtime::TensorMap want = tessel::runtime::evaluate_reference(g, inputs);
    tessel::TaskGraph tg = tessel::lower(g, tessel::split_largest(g, 2));
    tessel::runtime::BlockExecutor exec;
    tessel::runtime::TensorMap got = exec.run(g, tg, inputs).outputs;
    const tessel::Tensor& a = want.at("result");
    const tessel::Tensor& r = got.at("result");
    tessel::fuzz::require(a.shape == r.shape && a.data.size() == r.data.size(), "einsum", "result shapes differ");
    for (std::size_t k = 0; k < a.data.size(); ++k)
      tessel::fuzz::require(std::abs(a.data[k] - r.data[k]) <= 1e-9 * (1 + std::abs(a.data[k])), "einsum",
                            "block executor differs from the reference at element " + std::to_string(k) + ": " +
                                std::to_string(r.data[k]) + " vs " + std::to_string(a.data[k]));
  });
}

#pragma once
// Executors run a TaskGraph for real and report the outputs and a measured Timeline
// in the simulator's schema. The reference evaluator computes a Graph directly; every
// executor must agree with it.

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/graph.h"
#include "core/task_graph.h"
#include "core/tensor.h"
#include "core/timeline.h"

namespace tessel::runtime {

using TensorMap = std::map<std::string, Tensor>;  // by node name

struct RunResult {
  TensorMap outputs;  // by output node name
  Timeline timeline;
  // The CUDA backend under --launch graph: the same run once more as a graph without the
  // per-task marks that the timeline needs, its span (events on the launching stream
  // around one cudaGraphLaunch, so the launch latency included): what the task graph
  // takes when nobody watches each task. -1 where not measured.
  double unmarked_span_s = -1;
};

// A kernel profile for compare's profiled compute model: per task, the seconds per call
// of its compute kernel (-1 for other tasks), and the share of its chip it occupies when
// alone (sim::SimOptions::task_chip_share; empty: whole chips).
struct KernelProfile {
  std::vector<double> seconds;
  std::vector<double> chip_share;
};

class Executor {
 public:
  virtual ~Executor() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  // `inputs` holds one tensor per input node, by name, of the node's shape.
  [[nodiscard]] virtual RunResult run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) = 0;
};

// Evaluates the graph node by node on whole tensors (in double, f32 nodes rounded to
// float). With `storage_rounding`, inputs and every node's result are also rounded to the
// precision its dtype is stored in (f16, bf16: Tensor::round_to_storage), as a backend
// that stores those dtypes computes them (CUDA: f32 arithmetic, f16/bf16 in memory);
// without it they are held in float, as the CPU backends compute them. Large einsums run
// on every core, with the result of one thread.
[[nodiscard]] TensorMap evaluate_reference(const Graph& g, const TensorMap& inputs, bool storage_rounding = false);

// The normwise error (max |error| / max(1, max |reference|)) an executor's output may
// have against the reference evaluator, by the graph's dtype: 1e-9 for f64, 1e-4 for f32
// (the CPU backends compute f16/bf16 graphs in float, well within it); a backend that
// stores f16 or bf16 (CUDA) is checked against the reference with storage rounding and
// meets 1e-2 and 3e-2: every stored value rounded to 11 and 8 significant bits, but at
// other points than the reference where a decomposition keeps partial sums, sums
// accumulated in f32.
[[nodiscard]] double output_tolerance(DType t);
[[nodiscard]] double output_tolerance(DType t, std::string_view backend);

// Random inputs for every input node, reproducible from the seed.
[[nodiscard]] TensorMap random_inputs(const Graph& g, std::uint64_t seed);

// Checks that `inputs` has exactly one tensor of the right shape per input node;
// throws Error naming the input otherwise.
void check_inputs(const Graph& g, const TensorMap& inputs);

// Under bsp: throws Error when a dependency of `tg` points to a later phase
// (core's first_backward_bsp_dependency: a memory-capped graph typically has one),
// naming it; `who` starts the message ("cpu executor").
void refuse_backward_bsp_dependencies(const Graph& g, const TaskGraph& tg, std::string_view who);

// Runs the task graph block by block on one thread with a separate memory per device.
// Checks as it goes that every task reads only buffers on its own device, and that
// every output element is written exactly once.
class BlockExecutor final : public Executor {
 public:
  [[nodiscard]] std::string name() const override { return "block"; }
  [[nodiscard]] RunResult run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) override;
};

}  // namespace tessel::runtime

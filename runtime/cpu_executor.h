#pragma once
// CpuExecutor: runs a TaskGraph on the CPU with one worker thread per device (pinned to
// a core where possible), each device with its own memory. Contractions run as Eigen
// GEMMs, other block einsums through vectorised generic loops; touches are strided
// copies or accumulations, moves real copies between device memories (run by the
// receiving device's worker when it is free).
//
// Ready tasks run longest-path-to-the-end first (estimated with rough CPU costs), as
// the simulator's async policy orders them.
// Policies: `async` runs any ready task at once, no barriers (Einsummable); `bsp` adds
// the barriers of core's bsp_phase(), the same the simulator's bsp policy uses.
// Computes in float unless some node is f64. A task that throws stops the run and
// surfaces as an Error naming the task.

#include "runtime/executor.h"

namespace tessel::runtime {

enum class Policy : std::uint8_t { async, bsp };
[[nodiscard]] Policy parse_policy(std::string_view s);
[[nodiscard]] std::string_view to_string(Policy p);

struct CpuOptions {
  Policy policy = Policy::async;
  bool pin_threads = true;
};

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(CpuOptions options = {}) : options_(options) {}
  [[nodiscard]] std::string name() const override { return "cpu"; }
  [[nodiscard]] RunResult run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) override;

 private:
  CpuOptions options_;
};

}  // namespace tessel::runtime

#pragma once
// Overlap options shared by simulate, compare and sweep:
//   --comm-priority normal|high   the communication stream's priority (the machine's
//                                 interference.comm_priority; on compare also the CUDA
//                                 backend's comm stream)
//   --comm-sms N                  SMs reserved for communication (interference.comm_sms);
//                                 more than a device type's SMs is an error
//   --comm-mechanism sm-kernels|copy-engine   how communication moves bytes
//   --ready-order longest-path|fifo           the async ready-queue order
//   --priority                    deprecated alias of --ready-order (warns)
//   --fuse-collectives            GEMMs send their output tiles as they finish (sim/fuse.h)

#include <string>

#include <CLI/CLI.hpp>

#include "core/machine.h"
#include "core/task_graph.h"
#include "sim/simulator.h"

namespace tessel::cli {

struct OverlapOptions {
  std::string comm_priority;  // empty: the machine's
  int comm_sms = -1;          // < 0: the machine's
  std::string comm_mechanism;
  std::string ready_order;
  std::string priority_alias;  // --priority (deprecated)
  bool fuse_collectives = false;

  // with_comm_priority false: the command registers --comm-priority itself (compare's
  // CUDA options) and copies it into comm_priority before using these.
  void add(CLI::App& app, bool with_comm_priority = true, bool with_fuse = true);
  // The interference settings chosen (Error naming the option on a bad value).
  [[nodiscard]] InterferenceSettings interference() const;
  // --ready-order, or --priority with a warning on stderr; longest-path by default.
  [[nodiscard]] sim::Priority ready() const;
  // Applies the interference settings to `m` (Error naming --comm-sms when too many).
  void apply(Machine& m) const { interference().apply(m, "--comm-sms"); }
};

// With --fuse-collectives: rewrites `tg` (sim/fuse.h) and sets so.task_seconds and
// so.fused; warns and leaves everything unfused when nothing can be fused. Returns the
// number of GEMMs fused.
int apply_fusion(bool fuse, TaskGraph& tg, const Machine& m, sim::SimOptions& so, const std::string& what);

}  // namespace tessel::cli

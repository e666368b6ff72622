// Overlap options shared by simulate, compare and sweep (experiments/overlap_cli.h).
#include "experiments/overlap_cli.h"

#include <cstdio>

#include "core/error.h"
#include "sim/fuse.h"

namespace tessel::cli {

void OverlapOptions::add(CLI::App& app, bool with_comm_priority, bool with_fuse) {
  if (with_comm_priority)
    app.add_option("--comm-priority", comm_priority,
                   "communication stream priority the simulator assumes: normal or high (default: the machine's "
                   "interference.comm_priority)")
        ->check(CLI::IsMember({"normal", "high"}));
  app.add_option("--comm-sms", comm_sms,
                 "SMs reserved for communication (compute runs on the rest while communication runs; default: the "
                 "machine's interference.comm_sms); more than a device's SM count is an error")
      ->check(CLI::Range(0, 1'000'000));
  app.add_option("--comm-mechanism", comm_mechanism,
                 "how communication moves bytes: sm-kernels (NCCL-style copy kernels on SMs) or copy-engine "
                 "(cudaMemcpyAsync); picks the machine's interference row (default: the machine's)")
      ->check(CLI::IsMember({"sm-kernels", "sm_kernels", "copy-engine", "copy_engine"}));
  app.add_option("--ready-order", ready_order, "async ready-queue order: longest-path (default) or fifo")
      ->check(CLI::IsMember({"longest-path", "fifo"}));
  app.add_option("--priority", priority_alias, "deprecated: use --ready-order (the ready-queue order, not the stream "
                                                "priority; see --comm-priority)")
      ->check(CLI::IsMember({"longest-path", "fifo"}));
  if (with_fuse)
    app.add_flag("--fuse-collectives", fuse_collectives,
                 "fuse each GEMM with the moves its output feeds (arXiv 2305.06942): output tiles are sent as they "
                 "finish, the GEMM pays the machine's fused.comm_occupancy (12.5%); simulator only");
}

InterferenceSettings OverlapOptions::interference() const {
  InterferenceSettings s;
  if (!comm_priority.empty()) {
    s.set_priority = true;
    s.comm_priority = parse_comm_priority(comm_priority, "--comm-priority");
  }
  if (comm_sms >= 0) {
    s.set_sms = true;
    s.comm_sms = comm_sms;
  }
  if (!comm_mechanism.empty()) {
    s.set_mechanism = true;
    s.comm_mechanism = parse_comm_mechanism(comm_mechanism, "--comm-mechanism");
  }
  return s;
}

sim::Priority OverlapOptions::ready() const {
  if (!priority_alias.empty()) {
    if (!ready_order.empty() && ready_order != priority_alias)
      fail("--priority ", priority_alias, " and --ready-order ", ready_order,
           " disagree (--priority is the deprecated name of --ready-order)");
    std::fprintf(stderr,
                 "tessel: warning: --priority is deprecated and will be removed: use --ready-order %s (the ready-queue "
                 "order; --comm-priority sets the communication stream's priority)\n",
                 priority_alias.c_str());
    return sim::parse_priority(priority_alias, "--priority");
  }
  return ready_order.empty() ? sim::Priority::longest_path : sim::parse_priority(ready_order, "--ready-order");
}

int apply_fusion(bool fuse, TaskGraph& tg, const Machine& m, sim::SimOptions& so, const std::string& what) {
  if (!fuse) return 0;
  const int fused = sim::fuse_collectives_into(tg, m, so);
  if (fused == 0)
    std::fprintf(stderr,
                 "tessel: warning: --fuse-collectives: %s has nothing to fuse (no contraction's output is moved to "
                 "another device); running it unfused\n",
                 what.c_str());
  return fused;
}

}  // namespace tessel::cli

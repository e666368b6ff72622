#pragma once
// `tessel reproduce fused-collective` and `overlap-priority` (experiments/reproduce.h):
// the overlap models of sim/fuse.h and core/machine.h (Interference) against the
// published figures.

#include <string>

#include "experiments/reproduce.h"

namespace tessel::experiments {

// Bulk (GEMM, then its collective) against fused (sim/fuse.h) for GEMM + all-to-all,
// GEMV + all-reduce and embedding + all-to-all, 8 GPUs in a node and 2 × 8 across
// nodes; published (arXiv 2305.06942): up to 20% / 22% / 32% lower.
[[nodiscard]] ReproduceResult reproduce_fused_collective(const ReproduceOptions& o, const std::string& summary);

// Normal against high communication priority, without and with SMs reserved for
// communication, on the H100 and A100 presets; published (arXiv 2606.09200): up to
// 25.5% lower total time.
[[nodiscard]] ReproduceResult reproduce_overlap_priority(const ReproduceOptions& o, const std::string& summary);

}  // namespace tessel::experiments

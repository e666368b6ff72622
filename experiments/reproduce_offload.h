#pragma once
// `tessel reproduce offload`: memory-bounded execution (TURNIP, arXiv 2405.16283) of one
// LLaMA block on 8 simulated H100s with every device's memory capped at 100%, 75%, 50%
// and 25% of its uncapped peak (order_peak_bytes; core/memory_plan.h), the planned graph run with its free
// order (async) beside the ZeRO-Offload-style fixed order with synchronous transfers
// (fixed_order); time against cap. Beside the numbers: issue 16's target (makespan <=
// 1.25x uncapped at a 50% cap; CSV columns target_max_slowdown and meets_target, judged at
// 50% and above) and, for the fixed order, the nearest published comparison with a
// ZeRO-Offload baseline (ZeRO-Offload++ Twin-Flow: another system and workload).

#include <string>

#include "experiments/reproduce.h"

namespace tessel::experiments {

[[nodiscard]] ReproduceResult offload_reproduction(const ReproduceOptions& o, const std::string& summary);

}  // namespace tessel::experiments

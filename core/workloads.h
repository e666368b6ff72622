#pragma once
// Built-in workloads, named and parameterised as on the command line:
//   chain:size=512          X·Y·Z, or m=,k=,n=,p= for each dimension
//   chain-sum:skewed=1      A·B + C·(D·E)
//   ffn:tokens=256          a SiLU-gated feed-forward layer
//   llama-block:model=7b,batch=1,seq=1000
//   gemm-alltoall, gemv-allreduce, embedding-alltoall   a producer and a consumer whose
//                           partitions make lowering move the collective named (fused
//                           computation-collective experiments, arXiv 2305.06942)

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/graph.h"

namespace tessel {

struct WorkloadParam {
  std::string name;
  std::string default_value;
  std::string help;
};

struct WorkloadInfo {
  std::string name;
  std::string help;
  std::vector<WorkloadParam> params;
};

[[nodiscard]] const std::vector<WorkloadInfo>& workloads();

// "NAME[:key=value,...]" → graph. Throws Error naming the workload or parameter.
[[nodiscard]] Graph build_workload(std::string_view spec);

// Parses "key=value,key=value" into a map; Error naming `what` on a malformed item.
[[nodiscard]] std::map<std::string, std::string> parse_key_values(std::string_view text, std::string_view what);

}  // namespace tessel

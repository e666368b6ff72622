#include "sim/network.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace tessel::sim {

std::int32_t RouteTable::add(const Machine& m, const std::vector<LinkId>& route) {
  SimTime lat = 0;
  double bw = std::numeric_limits<double>::infinity();
  const auto begin = static_cast<std::ptrdiff_t>(links.size());
  for (LinkId l : route) {
    if (std::find(links.begin() + begin, links.end(), l) != links.end()) continue;
    links.push_back(l);
    const Link& link = m.link(l);
    lat += to_sim_time(link.latency_s);
    bw = std::min(bw, link.bytes_per_s);
  }
  offset.push_back(static_cast<std::int32_t>(links.size()));
  latency.push_back(lat);
  bytes_per_s.push_back(bw);
  return size() - 1;
}

const std::vector<NetworkModelInfo>& network_models() {
  static const std::vector<NetworkModelInfo> models = {
      {"alpha-beta", "latency + bytes/bandwidth per transfer; each link serves one transfer at a time, in order",
       make_alpha_beta_model},
      {"flow", "flow-level max-min fair sharing of every link, recomputed incrementally as flows start and end",
       make_flow_model},
  };
  return models;
}

std::unique_ptr<NetworkModel> make_network_model(std::string_view name, const NetworkContext& ctx) {
  std::string list;
  for (const auto& m : network_models()) {
    if (m.name == name) return m.make(ctx);
    list += (list.empty() ? "" : ", ") + m.name;
  }
  fail("unknown network model '", name, "' (expected ", list, ")");
}

}  // namespace tessel::sim

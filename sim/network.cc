#include "sim/network.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace tessel::sim {

std::int32_t RouteTable::add(const Machine& m, const std::vector<LinkId>& route) {
  Entry e;
  e.bytes_per_s = std::numeric_limits<double>::infinity();
  e.offset = static_cast<std::int32_t>(links.size());
  for (LinkId l : route) {
    if (std::find(links.begin() + e.offset, links.end(), l) != links.end()) continue;
    links.push_back(l);
    const Link& link = m.link(l);
    e.latency = add_sim_time(e.latency, to_sim_time(link.latency_s));
    e.bytes_per_s = std::min(e.bytes_per_s, link.bytes_per_s);
  }
  e.length = static_cast<std::int32_t>(links.size()) - e.offset;
  max_length = std::max(max_length, e.length);
  entries.push_back(e);
  return size() - 1;
}

std::int32_t ChannelRoutes::get(std::int32_t r, DeviceId src, DeviceId dst, std::uint32_t channel,
                                std::int32_t max_length) {
  if (channel == 0 || !on_) return r;
  const std::int64_t key = (static_cast<std::int64_t>(r) << 20) | static_cast<std::int64_t>(channel & 0xFFFFF);
  auto [it, fresh] = map_.try_emplace(key, r);
  if (!fresh) return it->second;
  m_->route(src, dst, scratch_, channel);
  const auto base = routes_->route(r);
  if (std::equal(scratch_.begin(), scratch_.end(), base.begin(), base.end())) return r;
  if (static_cast<std::int32_t>(scratch_.size()) > max_length) return r;
  it->second = routes_->add(*m_, scratch_);
  return it->second;
}

const std::vector<NetworkModelInfo>& network_models() {
  static const std::vector<NetworkModelInfo> models = {
      {"flow", "flow-level max-min fair sharing of every link, recomputed incrementally as flows start and end",
       make_flow_model},
      {"alpha-beta",
       "latency + bytes/bandwidth per transfer; a link carries one transfer at a time, granted greedily when its "
       "whole route is free",
       make_alpha_beta_model},
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

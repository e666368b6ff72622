// Symmetry reduction of a collective running alone: the check on the machine's routes
// and the reduced result read as the full run's (collective_symmetry.h).
#include "sim/collective_symmetry.h"

#include <algorithm>
#include <utility>

#include "core/checked.h"

namespace tessel::sim {

std::string check_shift_symmetry(const Machine& m, int n, int period, int channels, const SymmetryPeersFn& peers,
                                 const SymmetryRouteFn& route, std::vector<std::int32_t>& link_canon) {
  link_canon.clear();
  if (period < 1 || period >= n || n % period != 0)
    return "period " + std::to_string(period) + " does not divide " + std::to_string(n) + " ranks into several";
  for (int d = period; d < n; ++d)
    if (m.device(DeviceId(d)).type != m.device(DeviceId(d % period)).type)
      return "devices " + std::to_string(d) + " and " + std::to_string(d % period) + " differ in type";
  const std::size_t num_links = m.links.size();
  // The transfers of the simulated ranks: one per (rank, peer, channel).
  struct Flow {
    int src, dst;
    std::uint32_t channel;
    std::vector<LinkId> links;
  };
  std::vector<Flow> flows;
  std::vector<int> to;
  for (int r = 0; r < period; ++r) {
    to.clear();
    peers(r, to);
    for (int dst : to)
      for (int c = 0; c < channels; ++c) {
        Flow f{r, dst, static_cast<std::uint32_t>(c), {}};
        route(r, dst, f.channel, f.links);
        flows.push_back(std::move(f));
      }
  }
  std::vector<std::int32_t> canon(num_links, -1), reduced(num_links, 0);
  for (const Flow& f : flows)
    for (LinkId l : f.links) {
      canon[l.index()] = l.value;
      ++reduced[l.index()];
    }
  // Every shifted copy of every transfer: its links stand, position by position, for the
  // original's links; (link, transfer) pairs of the full run, to count below.
  std::vector<std::pair<std::int32_t, std::int32_t>> crossings;
  std::vector<LinkId> links;
  const int copies = n / period;
  for (int k = 1; k < copies; ++k)
    for (std::size_t id = 0; id < flows.size(); ++id) {
      const Flow& f = flows[id];
      const int src = (f.src + k * period) % n, dst = (f.dst + k * period) % n;
      route(src, dst, f.channel, links);
      if (links.size() != f.links.size())
        return "the route " + std::to_string(src) + " -> " + std::to_string(dst) + " crosses " +
               std::to_string(links.size()) + " links, its shift " + std::to_string(f.src) + " -> " +
               std::to_string(f.dst) + " " + std::to_string(f.links.size());
      for (std::size_t t = 0; t < links.size(); ++t) {
        const LinkId full = links[t], mine = f.links[t];
        std::int32_t& c = canon[full.index()];
        if (c == -1) {
          c = mine.value;
        } else if (c != mine.value) {
          return "link '" + m.link(full).name + "' would stand for both '" + m.link(LinkId(c)).name + "' and '" +
                 m.link(mine).name + "'";
        }
        const Link &a = m.link(full), &b = m.link(mine);
        if (a.bytes_per_s != b.bytes_per_s || a.latency_s != b.latency_s)
          return "links '" + a.name + "' and '" + b.name + "' differ in bandwidth or latency";
        crossings.emplace_back(full.value, static_cast<std::int32_t>(id));
      }
    }
  for (std::size_t id = 0; id < flows.size(); ++id)
    for (LinkId l : flows[id].links) crossings.emplace_back(l.value, static_cast<std::int32_t>(id));
  // Each link of the full run carries each transfer of the reduced run at most once, and
  // as many as its image carries: the same flows share it in both runs.
  std::sort(crossings.begin(), crossings.end());
  for (std::size_t i = 0; i < crossings.size();) {
    std::size_t j = i;
    while (j < crossings.size() && crossings[j].first == crossings[i].first) {
      if (j > i && crossings[j].second == crossings[j - 1].second)
        return "link '" + m.link(LinkId(crossings[i].first)).name + "' carries several copies of one transfer";
      ++j;
    }
    const std::int32_t l = crossings[i].first;
    if (static_cast<std::int32_t>(j - i) != reduced[static_cast<std::size_t>(canon[static_cast<std::size_t>(l)])])
      return "link '" + m.link(LinkId(l)).name + "' carries other transfers than the link it stands for";
    i = j;
  }
  link_canon = std::move(canon);
  return {};
}

void expand_symmetric_result(SimResult& r, int n, int period, const std::vector<std::int32_t>& link_canon) {
  const int copies = n / period;
  r.bytes_moved = checked_mul(r.bytes_moved, copies, "simulate: bytes moved");
  r.events_unreduced = checked_mul(r.events, copies, "simulate: events of the full run");
  std::vector<std::int64_t> bytes(r.link_bytes.size(), 0);
  for (std::size_t l = 0; l < bytes.size(); ++l)
    if (link_canon[l] >= 0) bytes[l] = r.link_bytes[static_cast<std::size_t>(link_canon[l])];
  r.link_bytes = std::move(bytes);
  r.devices.resize(static_cast<std::size_t>(n));
  for (int d = period; d < n; ++d) r.devices[static_cast<std::size_t>(d)] = r.devices[static_cast<std::size_t>(d % period)];
  r.symmetry_period = period;
}

}  // namespace tessel::sim

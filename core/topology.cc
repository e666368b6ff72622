#include "core/topology.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/pending/queue.hpp>

#include "core/error.h"

namespace tessel {

// ---- the router -----------------------------------------------------------------

namespace {

using SwitchGraph = boost::compressed_sparse_row_graph<boost::directedS>;

// splitmix64's finaliser: a fixed, platform-independent mix.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

struct TopologyRouterGraph {
  SwitchGraph reversed;  // switch s -> switch r for every link r -> s between switches
};

namespace {
std::shared_ptr<const TopologyRouterGraph> build_graph(const Machine& m) {
  const std::int32_t devices = m.num_devices();
  std::vector<std::pair<std::size_t, std::size_t>> edges;
  for (const Link& l : m.links)
    if (l.from >= devices && l.to >= devices)
      edges.emplace_back(static_cast<std::size_t>(l.to - devices), static_cast<std::size_t>(l.from - devices));
  auto g = std::make_shared<TopologyRouterGraph>();
  g->reversed = SwitchGraph(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), m.switches.size());
  return g;
}
}  // namespace

TopologyRouter::TopologyRouter(const Machine& m)
    : m_(&m), devices_(m.num_devices()), switches_(static_cast<std::int32_t>(m.switches.size())) {
  const std::int32_t nodes = devices_ + switches_;
  out_offset_.assign(static_cast<std::size_t>(nodes) + 1, 0);
  in_offset_.assign(static_cast<std::size_t>(devices_) + 1, 0);
  for (const Link& l : m.links) {
    if (l.from < 0 || l.to < 0) continue;
    ++out_offset_[static_cast<std::size_t>(l.from) + 1];
    if (l.to < devices_ && l.from >= devices_) ++in_offset_[static_cast<std::size_t>(l.to) + 1];
  }
  for (std::size_t i = 1; i < out_offset_.size(); ++i) out_offset_[i] += out_offset_[i - 1];
  for (std::size_t i = 1; i < in_offset_.size(); ++i) in_offset_[i] += in_offset_[i - 1];
  out_.resize(static_cast<std::size_t>(out_offset_.back()));
  in_sw_.resize(static_cast<std::size_t>(in_offset_.back()));
  std::vector<std::int32_t> out_pos(out_offset_.begin(), out_offset_.end() - 1);
  std::vector<std::int32_t> in_pos(in_offset_.begin(), in_offset_.end() - 1);
  for (std::size_t i = 0; i < m.links.size(); ++i) {  // in link order: sorted by link id per node
    const Link& l = m.links[i];
    if (l.from < 0 || l.to < 0) continue;
    out_[static_cast<std::size_t>(out_pos[static_cast<std::size_t>(l.from)]++)] = {static_cast<std::int32_t>(i), l.to};
    if (l.to < devices_ && l.from >= devices_)
      in_sw_[static_cast<std::size_t>(in_pos[static_cast<std::size_t>(l.to)]++)] = l.from - devices_;
  }
  for (std::int32_t d = 0; d < devices_; ++d) {  // distinct switches, sorted
    auto b = in_sw_.begin() + in_offset_[static_cast<std::size_t>(d)];
    auto e = in_sw_.begin() + in_offset_[static_cast<std::size_t>(d) + 1];
    std::sort(b, e);
    // Duplicates stay (parallel links); the route takes the minimum over them anyway.
  }
  sole_in_.assign(static_cast<std::size_t>(switches_), -2);
  for (const Link& l : m.links)
    if (l.from >= devices_ && l.to >= devices_ && l.from != l.to) {
      std::int32_t& s = sole_in_[static_cast<std::size_t>(l.to - devices_)];
      s = s == -2 || s == l.from - devices_ ? l.from - devices_ : -1;
    }
  graph_ = build_graph(m);
}

std::vector<TopologyRouter::Dist> TopologyRouter::search(const std::vector<std::int32_t>& targets) const {
  const auto& g = graph_;
  const auto n = static_cast<std::size_t>(switches_);
  std::vector<Dist> dist(n, kInf);
  std::vector<boost::default_color_type> color(n, boost::white_color);
  std::vector<std::size_t> sources;
  for (std::int32_t t : targets) {
    dist[static_cast<std::size_t>(t)] = 0;
    sources.push_back(static_cast<std::size_t>(t));
  }
  boost::queue<std::size_t> q;
  const auto index = get(boost::vertex_index, g->reversed);
  boost::breadth_first_search(
      g->reversed, sources.begin(), sources.end(), q,
      boost::make_bfs_visitor(boost::record_distances(boost::make_iterator_property_map(dist.begin(), index),
                                                      boost::on_tree_edge())),
      boost::make_iterator_property_map(color.begin(), index));
  return dist;
}

TopologyRouter::Target TopologyRouter::distances_to(std::int32_t sw) {
  const std::int32_t u = sole_in_[static_cast<std::size_t>(sw)];
  if (u == -2) return {sw, nullptr, 0};
  if (u >= 0) return {sw, table_of(u), 1};
  return {sw, table_of(sw), 0};
}

std::shared_ptr<const std::vector<TopologyRouter::Dist>> TopologyRouter::table_of(std::int32_t sw) {
  if (auto it = cache_.find(sw); it != cache_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.dist;
  }
  auto dist = std::make_shared<const std::vector<Dist>>(search({sw}));
  ++searches_;
  const std::size_t bytes = dist->size() * sizeof(Dist);
  while (!lru_.empty() && bytes_ + bytes > kRouterCacheBytes) {
    auto old = cache_.find(lru_.back());
    bytes_ -= old->second.dist->size() * sizeof(Dist);
    cache_.erase(old);
    lru_.pop_back();
  }
  lru_.push_front(sw);
  cache_.emplace(sw, CacheEntry{dist, lru_.begin()});
  bytes_ += bytes;
  return dist;
}

void TopologyRouter::route(DeviceId src, DeviceId dst, std::uint32_t channel, std::vector<LinkId>& out) {
  out.clear();
  if (src == dst) return;
  const std::int32_t s = src.value, d = dst.value;
  // The distance tables of the switches with a link into dst.
  std::vector<Target> tables;
  {
    std::lock_guard lock(mu_);
    for (std::int32_t k = in_offset_[static_cast<std::size_t>(d)]; k < in_offset_[static_cast<std::size_t>(d) + 1]; ++k)
      if (k == in_offset_[static_cast<std::size_t>(d)] || in_sw_[static_cast<std::size_t>(k)] != in_sw_[static_cast<std::size_t>(k) - 1])
        tables.push_back(distances_to(in_sw_[static_cast<std::size_t>(k)]));
  }
  constexpr std::int32_t inf = std::numeric_limits<std::int32_t>::max();
  // Hops from node y to dst: 0 at dst, none through another device.
  const auto cost = [&](std::int32_t y) -> std::int32_t {
    if (y == d) return 0;
    if (y < devices_) return inf;
    std::int32_t best = inf;
    for (const Target& t : tables) {
      if (y - devices_ == t.sw) return 1;
      if (!t.table) continue;
      const Dist v = (*t.table)[static_cast<std::size_t>(y - devices_)];
      if (v != kInf) best = std::min<std::int32_t>(best, v + t.offset + 1);
    }
    return best;
  };
  const auto links_of = [&](std::int32_t u) {
    return std::span<const Hop>(out_.data() + out_offset_[static_cast<std::size_t>(u)],
                                out_.data() + out_offset_[static_cast<std::size_t>(u) + 1]);
  };
  std::int32_t remaining = inf;
  for (const Hop& h : links_of(s)) {
    const std::int32_t c = cost(h.to);
    if (c != inf) remaining = std::min(remaining, c + 1);
  }
  if (remaining == inf)
    fail("machine ", m_->name, ": no route from device ", s, " ('", m_->node_name(s), "') to device ", d, " ('",
         m_->node_name(d), "') in the topology graph and no entry in routes");
  const std::uint64_t flow = mix(mix((static_cast<std::uint64_t>(static_cast<std::uint32_t>(s)) << 32) |
                                     static_cast<std::uint32_t>(d)) ^
                                 channel);
  std::vector<const Hop*> next;
  for (std::int32_t u = s; u != d;) {
    next.clear();
    for (const Hop& h : links_of(u))
      if (const std::int32_t c = cost(h.to); c != inf && c + 1 == remaining) next.push_back(&h);
    // Never empty: `remaining` is the shortest distance from u, reached through some link.
    if (next.empty()) fail("internal: topology route from ", s, " to ", d, " lost its way at '", m_->node_name(u), "'");
    const Hop* h = next.size() == 1 ? next[0] : next[mix(flow ^ static_cast<std::uint64_t>(u)) % next.size()];
    out.emplace_back(h->link);
    u = h->to;
    --remaining;
  }
}

std::size_t TopologyRouter::cache_bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

std::int64_t TopologyRouter::searches() const {
  std::lock_guard lock(mu_);
  return searches_;
}

std::pair<std::int32_t, std::int32_t> TopologyRouter::unreachable_pair(const Machine& m) {
  // Fast: every device sends to and receives from some switch, and the switches form one
  // strongly connected component: then every pair has a route.
  bool attached = switches_ > 0;
  for (std::int32_t dv = 0; attached && dv < devices_; ++dv) {
    bool sends = false;
    for (std::int32_t k = out_offset_[static_cast<std::size_t>(dv)]; k < out_offset_[static_cast<std::size_t>(dv) + 1]; ++k)
      sends = sends || out_[static_cast<std::size_t>(k)].to >= devices_;
    attached = sends && in_offset_[static_cast<std::size_t>(dv)] < in_offset_[static_cast<std::size_t>(dv) + 1];
  }
  if (attached) {
    // Switches linked to no other switch (an NVSwitch) only add paths: they are left out.
    const auto& g = graph_;
    std::vector<bool> linked(static_cast<std::size_t>(switches_), false);
    for (const Link& l : m.links)
      if (l.from >= devices_ && l.to >= devices_)
        linked[static_cast<std::size_t>(l.from - devices_)] = linked[static_cast<std::size_t>(l.to - devices_)] = true;
    std::vector<std::size_t> component(static_cast<std::size_t>(switches_));
    const auto index = get(boost::vertex_index, g->reversed);
    boost::strong_components(g->reversed, boost::make_iterator_property_map(component.begin(), index));
    std::optional<std::size_t> core;
    bool one = true;
    for (std::int32_t s = 0; s < switches_ && one; ++s)
      if (linked[static_cast<std::size_t>(s)]) {
        if (!core) core = component[static_cast<std::size_t>(s)];
        one = component[static_cast<std::size_t>(s)] == *core;
      }
    // Every device sends to and receives from a switch of that one component.
    const auto in_core = [&](std::int32_t node) {
      return node >= devices_ && linked[static_cast<std::size_t>(node - devices_)] &&
             component[static_cast<std::size_t>(node - devices_)] == *core;
    };
    for (std::int32_t dv = 0; one && core && dv < devices_; ++dv) {
      bool sends = false, receives = false;
      for (std::int32_t k = out_offset_[static_cast<std::size_t>(dv)]; k < out_offset_[static_cast<std::size_t>(dv) + 1]; ++k)
        sends = sends || in_core(out_[static_cast<std::size_t>(k)].to);
      for (std::int32_t k = in_offset_[static_cast<std::size_t>(dv)]; k < in_offset_[static_cast<std::size_t>(dv) + 1]; ++k)
        receives = receives || in_core(devices_ + in_sw_[static_cast<std::size_t>(k)]);
      one = sends && receives;
    }
    if (one && core) return {-1, -1};
  }
  // Slow: per destination, the switches that reach it; the first pair without a route.
  std::set<std::pair<std::int32_t, std::int32_t>> explicit_routes;
  for (const RouteEntry& r : m.routes) explicit_routes.emplace(r.src.value, r.dst.value);
  for (std::int32_t d = 0; d < devices_; ++d) {
    std::vector<std::int32_t> targets(in_sw_.begin() + in_offset_[static_cast<std::size_t>(d)],
                                      in_sw_.begin() + in_offset_[static_cast<std::size_t>(d) + 1]);
    const std::vector<Dist> reach = switches_ > 0 ? search(targets) : std::vector<Dist>{};
    for (std::int32_t s = 0; s < devices_; ++s) {
      if (s == d || explicit_routes.contains({s, d})) continue;
      bool ok = false;
      for (std::int32_t k = out_offset_[static_cast<std::size_t>(s)]; !ok && k < out_offset_[static_cast<std::size_t>(s) + 1]; ++k) {
        const std::int32_t y = out_[static_cast<std::size_t>(k)].to;
        ok = y == d || (y >= devices_ && reach[static_cast<std::size_t>(y - devices_)] != kInf);
      }
      if (!ok) return {s, d};
    }
  }
  return {-1, -1};
}

// RouterCache lives in machine.h; its router is built here, on the first graph route.
std::shared_ptr<TopologyRouter> RouterCache::get(const Machine& m) const {
  std::lock_guard lock(mu_);
  if (!router_) router_ = std::make_shared<TopologyRouter>(m);
  return router_;
}

void RouterCache::reset() const {
  std::lock_guard lock(mu_);
  router_.reset();
}

// ---- validation -----------------------------------------------------------------

void validate_topology(const Machine& m, const std::string& what) {
  if (!m.has_topology()) return;
  const std::int32_t devices = m.num_devices();
  const std::int32_t nodes = m.num_nodes();
  if (m.switches.size() >= TopologyRouter::max_switches())
    fail(what, ".switches: ", m.switches.size(), " switches exceed the maximum of ", TopologyRouter::max_switches() - 1);
  std::map<std::string, std::string> names;  // node name -> the field that names it
  for (std::int32_t d = 0; d < devices; ++d) {
    const std::string w = what + ".devices[" + std::to_string(d) + "]";
    if (auto [it, fresh] = names.emplace(m.node_name(d), w); !fresh)
      fail(w, ".name: '", m.node_name(d), "' is also the name of ", it->second,
           m.devices[static_cast<std::size_t>(d)].name.empty() ? " (an unnamed device is d<index>)" : "");
  }
  for (std::size_t s = 0; s < m.switches.size(); ++s) {
    const std::string w = what + ".switches[" + std::to_string(s) + "].name";
    if (m.switches[s].name.empty()) fail(w, ": must not be empty");
    if (auto [it, fresh] = names.emplace(m.switches[s].name, w); !fresh)
      fail(w, ": '", m.switches[s].name, "' is also the name of ", it->second);
  }
  for (std::size_t i = 0; i < m.links.size(); ++i) {
    const Link& l = m.links[i];
    const std::string w = what + ".links[" + std::to_string(i) + "]";
    if ((l.from == kNoNode) != (l.to == kNoNode))
      fail(w, l.from == kNoNode ? ".from" : ".to", ": a link of the topology graph needs both ends (from and to)");
    if (l.from == kNoNode) continue;
    if (l.from < 0 || l.from >= nodes) fail(w, ".from: node ", l.from, " does not exist (the graph has ", nodes, ")");
    if (l.to < 0 || l.to >= nodes) fail(w, ".to: node ", l.to, " does not exist (the graph has ", nodes, ")");
    if (l.from == l.to)
      fail(w, ".to: a link from '", m.node_name(l.from), "' to itself is a loop that no route can use");
  }
  for (std::size_t i = 0; i < m.routes.size(); ++i) {
    const RouteEntry& r = m.routes[i];
    if (r.src == r.dst) continue;
    const std::string w = what + ".routes[" + std::to_string(i) + "].links";
    std::set<std::int32_t> seen{r.src.value};
    std::int32_t at = r.src.value;
    for (std::size_t k = 0; k < r.links.size(); ++k) {
      const Link& l = m.link(r.links[k]);
      if (l.from == kNoNode)
        fail(w, "[", k, "]: link '", l.name, "' has no ends (from, to) in the topology graph");
      if (l.from != at)
        fail(w, "[", k, "]: link '", l.name, "' starts at '", m.node_name(l.from), "', not at '", m.node_name(at),
             "' where the route is");
      at = l.to;
      if (!seen.insert(at).second)
        fail(w, "[", k, "]: the route comes back to '", m.node_name(at), "': a routing loop");
    }
    if (at != r.dst.value)
      fail(w, ": the route ends at '", m.node_name(at), "', not at device ", r.dst.value, " ('", m.node_name(r.dst.value),
           "')");
  }
  TopologyRouter router(m);
  if (auto [s, d] = router.unreachable_pair(m); s >= 0)
    fail(what, ": no route from device ", s, " ('", m.node_name(s), "') to device ", d, " ('", m.node_name(d),
         "'): the topology graph has no path between them (routes pass through switches, never through "
         "another device) and routes has no entry for them");
}

// ---- presets --------------------------------------------------------------------

namespace {

// A machine under construction: a link's ends are (is switch, index) until the device
// count is known.
struct Builder {
  struct End {
    bool sw = false;
    std::int32_t i = -1;
    bool operator==(const End&) const = default;
  };
  Machine m;
  std::vector<std::pair<End, End>> ends;

  End add_switch(std::string name) {
    m.switches.push_back(Switch{std::move(name)});
    return End{true, static_cast<std::int32_t>(m.switches.size()) - 1};
  }
  void add_link(std::string name, LinkKind kind, double bytes_per_s, double latency_s, End from, End to) {
    m.links.push_back(Link{std::move(name), kind, bytes_per_s, latency_s, kNoNode, kNoNode});
    ends.emplace_back(from, to);
  }
  // Both directions of a cable: NAME.up (a -> b) and NAME.down (b -> a).
  void add_cable(const std::string& name, LinkKind kind, double bytes_per_s, End a, End b) {
    add_link(name + ".up", kind, bytes_per_s, 0, a, b);
    add_link(name + ".down", kind, bytes_per_s, 0, b, a);
  }
  Machine finish() {
    const auto devices = static_cast<std::int32_t>(m.devices.size());
    for (std::size_t i = 0; i < m.links.size(); ++i) {
      const auto node = [&](End e) { return e.sw ? devices + e.i : e.i; };
      m.links[i].from = node(ends[i].first);
      m.links[i].to = node(ends[i].second);
    }
    return std::move(m);
  }
};

// The NIC (transmit) links of a single-node machine, in link order: NIC i is the i-th.
std::vector<std::int32_t> nic_links(const Machine& node) {
  std::set<std::int32_t> s;
  for (const Device& d : node.devices)
    if (!d.network_out.empty()) s.insert(d.network_out.back().value);
  return {s.begin(), s.end()};
}

double injection_bytes_per_s(const Machine& node) {
  double b = 0;
  for (std::int32_t l : nic_links(node)) b += node.links[static_cast<std::size_t>(l)].bytes_per_s;
  return b;
}

// Appends server `n` (a copy of the single-host machine `node`) to the builder: its
// devices, one switch where its intra-node fabric links meet (the NVSwitch, or the PCIe
// root), and its links with ends; NIC links end at attach(nic index). The rule routes of
// `node` (fabric_out + fabric_in; network_out ... network_in) become graph paths with the
// same links, so that traffic inside a server and through a NIC sees what cluster: gives.
void add_server(Builder& b, const Machine& node, int n, const std::function<Builder::End(int nic)>& attach,
                const std::string& preset) {
  if (node.hosts.size() != 1 || !node.routes.empty() || !node.hosts[0].network_out.empty() ||
      !node.hosts[0].network_in.empty())
    fail("machine preset '", preset, "': node preset '", node.name, "' cannot be laid out as a graph");
  const std::string prefix = "node" + std::to_string(n);
  const auto host = static_cast<std::int32_t>(b.m.hosts.size());
  b.m.hosts.push_back(Host{prefix, node.hosts[0].memory_capacity_bytes, {}, {}});
  const auto base = static_cast<std::int32_t>(b.m.devices.size());
  const std::vector<std::int32_t> nics = nic_links(node);
  std::vector<std::pair<Builder::End, Builder::End>> ends(node.links.size());
  std::vector<bool> set(node.links.size(), false);
  std::optional<Builder::End> hub;
  // NIC i: a switch node between the device side (its tx and rx links) and the network
  // (a cable of the NIC's bandwidth, no latency, to attach(i)), so that a path out through
  // a NIC and back is longer than one through the NVSwitch or PCIe root.
  std::vector<std::optional<Builder::End>> nic_node(nics.size());
  const auto nic_at = [&](int nic) {
    auto& e = nic_node[static_cast<std::size_t>(nic)];
    if (!e) {
      const std::string name = prefix + ".nic" + std::to_string(nic);
      e = b.add_switch(name);
      const double bw = node.links[static_cast<std::size_t>(nics[static_cast<std::size_t>(nic)])].bytes_per_s;
      b.add_cable(name + ".port", LinkKind::network, bw, *e, attach(nic));
    }
    return *e;
  };
  const auto cannot = [&](const char* why) {
    fail("machine preset '", preset, "': node preset '", node.name, "' cannot be laid out as a graph (", why, ")");
  };
  const auto place = [&](LinkId l, Builder::End from, Builder::End to) {
    const auto i = l.index();
    if (set[i] && !(ends[i].first == from && ends[i].second == to)) cannot("a link with two different ends");
    set[i] = true;
    ends[i] = {from, to};
  };
  for (std::size_t k = 0; k < node.devices.size(); ++k) {
    const Device& d = node.devices[k];
    const Builder::End me{false, base + static_cast<std::int32_t>(k)};
    Device c;
    c.name = prefix + ".gpu" + std::to_string(k);
    c.type = d.type;
    c.host = host;
    b.m.devices.push_back(std::move(c));
    if (!d.fabric_out.empty() || !d.fabric_in.empty()) {
      if (d.fabric_out.size() != 1 || d.fabric_in.size() != 1) cannot("fabric paths of more than one link");
      if (!hub)
        hub = b.add_switch(prefix + (node.link(d.fabric_out[0]).kind == LinkKind::nvlink ? ".nvswitch" : ".pcie"));
      place(d.fabric_out[0], me, *hub);
      place(d.fabric_in[0], *hub, me);
    }
    if (d.network_out.empty() != d.network_in.empty()) cannot("a NIC in one direction only");
    if (d.network_out.empty()) continue;
    const auto nic = static_cast<int>(std::find(nics.begin(), nics.end(), d.network_out.back().value) - nics.begin());
    const Builder::End net = nic_at(nic);
    Builder::End at = me;
    for (std::size_t i = 0; i < d.network_out.size(); ++i) {
      const LinkId l = d.network_out[i];
      if (set[l.index()]) {
        if (!(ends[l.index()].first == at)) cannot("a NIC path that leaves the device's fabric path");
        at = ends[l.index()].second;
      } else {
        if (i + 1 != d.network_out.size()) cannot("a NIC path of more than two links");
        place(l, at, net);
      }
    }
    at = me;
    for (std::size_t i = d.network_in.size(); i-- > 0;) {
      const LinkId l = d.network_in[i];
      if (set[l.index()]) {
        if (!(ends[l.index()].second == at)) cannot("a NIC path that leaves the device's fabric path");
        at = ends[l.index()].first;
      } else {
        if (i != 0) cannot("a NIC path of more than two links");
        place(l, net, at);
      }
    }
  }
  for (std::size_t i = 0; i < node.links.size(); ++i)
    if (set[i]) {
      const Link& l = node.links[i];
      b.add_link(prefix + "." + l.name, l.kind, l.bytes_per_s, l.latency_s, ends[i].first, ends[i].second);
    }
}

[[noreturn]] void bad(std::string_view preset, const std::string& msg) {
  fail("machine preset '", preset, "': ", msg);
}

int positive(std::string_view preset, std::string_view key, std::string_view v) {
  int x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < 1)
    bad(preset, std::string(key) + " '" + std::string(v) + "' must be a positive integer");
  return x;
}

double real_at_least(std::string_view preset, std::string_view key, std::string_view v, double lo, bool open) {
  std::string s(v);
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x) || (open ? !(x > lo) : !(x >= lo))) {
    std::ostringstream os;
    os << key << " '" << v << "' must be a number " << (open ? "> " : ">= ") << lo;
    bad(preset, os.str());
  }
  return x;
}

struct Parsed {
  std::vector<int> counts;  // NODES, or the torus dimensions
  std::string node;         // the node preset
  std::map<std::string, std::string, std::less<>> options;
};

// KIND:Nx...xPRESET[,key=value]...
Parsed parse(std::string_view preset, std::string_view kind, const std::set<std::string_view>& keys,
             std::string_view syntax) {
  Parsed p;
  std::string_view spec = preset.substr(kind.size() + 1);
  std::string_view head = spec.substr(0, spec.find(','));
  std::string_view rest = head.size() < spec.size() ? spec.substr(head.size() + 1) : std::string_view{};
  while (!head.empty() && head[0] >= '0' && head[0] <= '9') {
    const auto x = head.find('x');
    if (x == std::string_view::npos) break;
    p.counts.push_back(positive(preset, "count", head.substr(0, x)));
    head = head.substr(x + 1);
  }
  if (p.counts.empty() || head.empty()) bad(preset, "expected " + std::string(syntax));
  p.node = std::string(head);
  while (!rest.empty()) {
    std::string_view opt = rest.substr(0, rest.find(','));
    rest = opt.size() < rest.size() ? rest.substr(opt.size() + 1) : std::string_view{};
    const auto eq = opt.find('=');
    const std::string_view key = opt.substr(0, eq);
    if (eq == std::string_view::npos || !keys.contains(key)) {
      std::string list;
      for (std::string_view k : keys) list += (list.empty() ? "" : ", ") + std::string(k) + "=";
      bad(preset, "unknown option '" + std::string(opt) + "' (expected " + list + ")");
    }
    if (!p.options.emplace(std::string(key), std::string(opt.substr(eq + 1))).second)
      bad(preset, "option " + std::string(key) + " given twice");
  }
  return p;
}

void check_size(std::string_view preset, std::int64_t nodes, const Machine& node) {
  if (nodes * static_cast<std::int64_t>(node.devices.size()) > kMaxDevices)
    bad(preset, std::to_string(nodes) + " nodes of " + std::to_string(node.devices.size()) +
                    " devices exceed the maximum of " + std::to_string(kMaxDevices) + " devices");
  if (nic_links(node).empty()) bad(preset, "node preset '" + node.name + "' has no NIC to connect");
  for (const Device& d : node.devices)
    if (d.network_out.empty()) bad(preset, "a device of node preset '" + node.name + "' has no NIC");
}

Machine start(std::string_view preset, const Machine& node) {
  Builder b;
  b.m.name = std::string(preset);
  b.m.device_types = node.device_types;
  b.m.interference = node.interference;
  b.m.barrier_latency_s = node.barrier_latency_s;
  return std::move(b.m);
}

Machine fat_tree(std::string_view preset, const std::function<Machine(std::string_view)>& make_node) {
  const Parsed p = parse(preset, "fat-tree", {"leaf", "pod", "spines", "oversubscription"},
                         "fat-tree:NODESxPRESET[,leaf=L][,pod=P][,spines=S][,oversubscription=R]");
  if (p.counts.size() != 1) bad(preset, "expected fat-tree:NODESxPRESET");
  const int nodes = p.counts[0];
  const Machine node = make_node(p.node);
  check_size(preset, nodes, node);
  const auto opt = [&](const char* k, int def) {
    auto it = p.options.find(k);
    return it == p.options.end() ? def : positive(preset, k, it->second);
  };
  const int leaf = std::min(opt("leaf", 4), nodes);
  const int pod = opt("pod", nodes);
  const int spines = opt("spines", 1);
  const double r = p.options.contains("oversubscription")
                       ? real_at_least(preset, "oversubscription", p.options.at("oversubscription"), 1, false)
                       : 1.0;
  if (pod < nodes && pod % leaf != 0) bad(preset, "pod=" + std::to_string(pod) + " must be a multiple of leaf=" + std::to_string(leaf));
  const int leaves = (nodes + leaf - 1) / leaf;
  const int pods = (nodes + pod - 1) / pod;
  // One pod holds every leaf (also a last, partly filled one: 5 nodes on leaves of 4);
  // several pods hold pod / leaf leaves each (pod is a multiple of leaf there).
  const int leaves_per_pod = pods == 1 ? leaves : pod / leaf;
  if (r != 1 && pods == 1 && leaves == 1) bad(preset, "oversubscription needs more than one leaf switch");
  const double inj = injection_bytes_per_s(node);
  Builder b;
  b.m = start(preset, node);
  std::vector<Builder::End> leaf_sw, core;
  std::vector<std::vector<Builder::End>> spine(static_cast<std::size_t>(pods));
  for (int l = 0; l < leaves; ++l) leaf_sw.push_back(b.add_switch("leaf" + std::to_string(l)));
  const bool has_spines = leaves > 1;
  if (has_spines)
    for (int q = 0; q < pods; ++q)
      for (int s = 0; s < spines; ++s)
        spine[static_cast<std::size_t>(q)].push_back(b.add_switch("pod" + std::to_string(q) + ".spine" + std::to_string(s)));
  if (pods > 1)
    for (int c = 0; c < spines; ++c) core.push_back(b.add_switch("core" + std::to_string(c)));
  // R:1 at the top level: between pods, or between leaves where there is one pod.
  const double leaf_up = leaf * inj / spines / (pods == 1 ? r : 1.0);
  for (int l = 0; l < leaves && has_spines; ++l) {
    const auto q = static_cast<std::size_t>(l / leaves_per_pod);
    for (int s = 0; s < spines; ++s)
      b.add_cable("leaf" + std::to_string(l) + "-spine" + std::to_string(s), LinkKind::network, leaf_up,
                  leaf_sw[static_cast<std::size_t>(l)], spine[q][static_cast<std::size_t>(s)]);
  }
  const double pod_up = static_cast<double>(std::min(pod, nodes)) * inj / (r * spines * spines);
  for (int q = 0; q < pods && pods > 1; ++q)
    for (int s = 0; s < spines; ++s)
      for (int c = 0; c < spines; ++c)
        b.add_cable("pod" + std::to_string(q) + ".spine" + std::to_string(s) + "-core" + std::to_string(c),
                    LinkKind::network, pod_up, spine[static_cast<std::size_t>(q)][static_cast<std::size_t>(s)],
                    core[static_cast<std::size_t>(c)]);
  for (int n = 0; n < nodes; ++n)
    add_server(b, node, n, [&](int) { return leaf_sw[static_cast<std::size_t>(n / leaf)]; }, std::string(preset));
  return b.finish();
}

Machine rail(std::string_view preset, const std::function<Machine(std::string_view)>& make_node) {
  const Parsed p = parse(preset, "rail", {"group", "spines", "oversubscription"},
                         "rail:NODESxPRESET[,group=G][,spines=S][,oversubscription=R]");
  if (p.counts.size() != 1) bad(preset, "expected rail:NODESxPRESET");
  const int nodes = p.counts[0];
  const Machine node = make_node(p.node);
  check_size(preset, nodes, node);
  const std::vector<std::int32_t> nics = nic_links(node);
  const auto rails = static_cast<int>(nics.size());
  const auto opt = [&](const char* k, int def) {
    auto it = p.options.find(k);
    return it == p.options.end() ? def : positive(preset, k, it->second);
  };
  const int group = std::min(opt("group", nodes), nodes);
  const int spines = opt("spines", rails);
  const double r = p.options.contains("oversubscription")
                       ? real_at_least(preset, "oversubscription", p.options.at("oversubscription"), 1, false)
                       : 1.0;
  const int groups = (nodes + group - 1) / group;
  Builder b;
  b.m = start(preset, node);
  std::vector<Builder::End> rail_sw, spine;
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < rails; ++i)
      rail_sw.push_back(b.add_switch("group" + std::to_string(g) + ".rail" + std::to_string(i)));
  if (groups * rails > 1) {
    for (int s = 0; s < spines; ++s) spine.push_back(b.add_switch("spine" + std::to_string(s)));
    for (int g = 0; g < groups; ++g)
      for (int i = 0; i < rails; ++i) {
        const double bw = group * node.links[static_cast<std::size_t>(nics[static_cast<std::size_t>(i)])].bytes_per_s /
                          (r * spines);
        for (int s = 0; s < spines; ++s)
          b.add_cable("group" + std::to_string(g) + ".rail" + std::to_string(i) + "-spine" + std::to_string(s),
                      LinkKind::network, bw, rail_sw[static_cast<std::size_t>(g * rails + i)],
                      spine[static_cast<std::size_t>(s)]);
      }
  } else if (r != 1) {
    bad(preset, "oversubscription needs more than one rail switch");
  }
  for (int n = 0; n < nodes; ++n)
    add_server(
        b, node, n, [&](int nic) { return rail_sw[static_cast<std::size_t>((n / group) * rails + nic)]; },
        std::string(preset));
  return b.finish();
}

Machine torus(std::string_view preset, const std::function<Machine(std::string_view)>& make_node) {
  const Parsed p = parse(preset, "torus", {"link_bytes_per_s"}, "torus:AxB[xC]xPRESET[,link_bytes_per_s=W]");
  if (p.counts.size() != 2 && p.counts.size() != 3) bad(preset, "a torus has 2 or 3 dimensions (torus:AxBxPRESET or torus:AxBxCxPRESET)");
  const Machine node = make_node(p.node);
  std::int64_t nodes = 1;
  for (int c : p.counts) {
    nodes *= c;  // each factor <= 2^31 - 1 and the running product <= kMaxDevices: no overflow
    if (nodes > kMaxDevices) bad(preset, "more than " + std::to_string(kMaxDevices) + " nodes");
  }
  check_size(preset, nodes, node);
  const double w = p.options.contains("link_bytes_per_s")
                       ? real_at_least(preset, "link_bytes_per_s", p.options.at("link_bytes_per_s"), 0, true)
                       : injection_bytes_per_s(node);
  const std::vector<int>& dims = p.counts;
  const auto coords = [&](std::int64_t n) {
    std::vector<int> c;
    for (int dsz : dims) {
      c.push_back(static_cast<int>(n % dsz));
      n /= dsz;
    }
    return c;
  };
  const auto index = [&](const std::vector<int>& c) {
    std::int64_t n = 0;
    for (std::size_t k = dims.size(); k-- > 0;) n = n * dims[k] + c[k];
    return n;
  };
  const auto label = [&](std::int64_t n) {
    std::string s = "r";
    for (int c : coords(n)) s += (s.size() > 1 ? "." : "") + std::to_string(c);
    return s;
  };
  Builder b;
  b.m = start(preset, node);
  std::vector<Builder::End> router;
  for (std::int64_t n = 0; n < nodes; ++n) router.push_back(b.add_switch(label(n)));
  static constexpr char kAxis[] = {'x', 'y', 'z'};
  for (std::int64_t n = 0; n < nodes; ++n)
    for (std::size_t k = 0; k < dims.size(); ++k) {
      if (dims[k] == 1) continue;
      std::vector<int> c = coords(n);
      c[k] = (c[k] + 1) % dims[k];
      const std::int64_t next = index(c);
      b.add_link(label(n) + "." + kAxis[k] + "+", LinkKind::network, w, 0, router[static_cast<std::size_t>(n)],
                 router[static_cast<std::size_t>(next)]);
      b.add_link(label(next) + "." + kAxis[k] + "-", LinkKind::network, w, 0, router[static_cast<std::size_t>(next)],
                 router[static_cast<std::size_t>(n)]);
    }
  for (std::int64_t n = 0; n < nodes; ++n)
    add_server(b, node, static_cast<int>(n), [&](int) { return router[static_cast<std::size_t>(n)]; },
               std::string(preset));
  return b.finish();
}

}  // namespace

bool is_topology_preset(std::string_view name) {
  return name.starts_with("fat-tree:") || name.starts_with("rail:") || name.starts_with("torus:");
}

Machine topology_preset(std::string_view name, const std::function<Machine(std::string_view)>& node) {
  const auto make_node = [&](std::string_view inner) {
    if (inner.find(':') != std::string_view::npos)
      bad(name, "the node preset must be a single node (h100-sxm-8, a100-sxm-8, h100-pcie-4), got '" +
                    std::string(inner) + "'");
    return node(inner);
  };
  if (name.starts_with("fat-tree:")) return fat_tree(name, make_node);
  if (name.starts_with("rail:")) return rail(name, make_node);
  return torus(name, make_node);
}

}  // namespace tessel

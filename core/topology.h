#pragma once
// Topologies as graphs: switches and links between devices and switches, routes computed
// from the graph (Boost.Graph breadth-first search), equal-cost paths chosen by a hash.
//
//   nodes    the devices (node d = device d) and the machine's `switches` (node
//            num_devices() + s): leaf, spine and core switches, NICs, NVSwitches, torus
//            routers. A route passes through switches only, never through a third device
//            (GPUs do not forward packets; a torus gives each device a router).
//   links    directed, with `from` and `to` nodes; a full-duplex cable is two links.
//   routes   route(a, b): an explicit entry of `routes` if there is one, otherwise a
//            shortest path in hops from a to b. Where several next links lie on shortest
//            paths, the route takes the one a hash of (a, b, channel, the current node)
//            picks (ECMP as switches do it, per flow and per hop): deterministic, the same
//            on every run and platform, and spread evenly over the candidates.
//
// Routes are computed on demand, not stored for every pair: per switch t that some device
// hangs off, the hop distance of every switch to t (one breadth-first search of the
// switch graph), kept in a cache bounded by kRouterCacheBytes. A route then walks from a
// to b choosing at each node among the links that get one hop closer.
//
// Validation (Machine::validate) checks that every link has both ends or neither, that
// the ends name existing nodes, that no link goes from a node to itself, that explicit
// routes over the graph are connected paths without loops, and that every ordered pair of
// devices has a route (naming the first pair that has none).
//
// Presets (machine_preset; PRESET is a single-node preset such as h100-sxm-8, laid out as
// a graph: its GPUs hang off an NVSwitch node — or a PCIe root that its NIC hangs off too
// —, and each NIC link runs from the GPU to the first network switch):
//   fat-tree:NODESxPRESET[,leaf=L][,pod=P][,spines=S][,oversubscription=R]
//       L nodes per leaf switch (default 4), P nodes per pod (default all: one pod), S
//       spine switches per pod and S core switches (default 1). Leaf–spine links carry the
//       leaf's NIC bandwidth / S (full bisection within a pod); spine–core links the pod's
//       NIC bandwidth / (R·S²), so traffic between pods gets 1/R of its NICs (R:1).
//   rail:NODESxPRESET[,group=G][,spines=S][,oversubscription=R]
//       rail-optimised: NIC i of every node of a group of G nodes (default all) connects
//       to the group's rail switch i; rail switches connect to S spines (default: the
//       NICs per node) with the rail's NIC bandwidth / (R·S) per link. Same-rail traffic
//       crosses one switch, cross-rail traffic goes through a spine.
//   torus:AxB[xC]xPRESET[,link_bytes_per_s=W]
//       a 2-D or 3-D torus of nodes: each node's NICs connect to its router, routers to
//       their ± neighbours in every dimension with links of W bytes/s (default: one
//       node's NIC bandwidth). Shortest routes, wrapping around.

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/machine.h"

namespace tessel {

// Distance tables the router keeps at most (bytes); beyond it the least recently used go.
inline constexpr std::size_t kRouterCacheBytes = 64u << 20;

struct TopologyRouterGraph;

class TopologyRouter {
 public:
  // Hop distances are 16-bit: a graph has fewer switches than this.
  [[nodiscard]] static constexpr std::size_t max_switches() { return 0xFFFF; }
  explicit TopologyRouter(const Machine& m);
  // The graph route (Machine::route's rule when no explicit entry exists). Error naming
  // the pair when none exists. Thread-safe.
  void route(DeviceId src, DeviceId dst, std::uint32_t channel, std::vector<LinkId>& out);
  // Bytes the distance tables hold now, and how many searches ran (for tests and benches).
  [[nodiscard]] std::size_t cache_bytes() const;
  [[nodiscard]] std::int64_t searches() const;
  // The first ordered device pair (src, dst) with no graph route and no explicit route,
  // or {-1, -1}.
  [[nodiscard]] std::pair<std::int32_t, std::int32_t> unreachable_pair(const Machine& m);

 private:
  using Dist = std::uint16_t;
  static constexpr Dist kInf = 0xFFFF;
  struct Hop {
    std::int32_t link;
    std::int32_t to;
  };
  // Hops from every switch to switch `sw`: a table and an offset to add (a switch whose
  // only switch in-neighbour is u — a NIC behind its leaf — shares u's table, + 1), or no
  // table where no switch links into `sw` (an NVSwitch). The caller holds mu_.
  struct Target {
    std::int32_t sw;
    std::shared_ptr<const std::vector<Dist>> table;
    std::int32_t offset;
  };
  Target distances_to(std::int32_t sw);
  std::shared_ptr<const std::vector<Dist>> table_of(std::int32_t sw);  // caller holds mu_
  std::vector<Dist> search(const std::vector<std::int32_t>& targets) const;

  const Machine* m_;  // for names in errors only (the router lives inside it)
  std::int32_t devices_ = 0, switches_ = 0;
  std::vector<std::int32_t> out_offset_;  // per node: out-links out_[offset, next offset)
  std::vector<Hop> out_;                  // sorted by link id per node
  std::vector<std::int32_t> in_offset_;   // per device: the switches with a link into it
  std::vector<std::int32_t> in_sw_;
  std::vector<std::int32_t> sole_in_;     // per switch: its one switch in-neighbour, -1 several, -2 none
  std::shared_ptr<const TopologyRouterGraph> graph_;  // the switch graph reversed (Boost CSR)
  struct CacheEntry {
    std::shared_ptr<const std::vector<Dist>> dist;
    std::list<std::int32_t>::iterator lru;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::int32_t, CacheEntry> cache_;
  std::list<std::int32_t> lru_;  // most recent first
  std::size_t bytes_ = 0;
  std::int64_t searches_ = 0;
};

// Machine::validate's part for the topology graph (a no-op without one).
void validate_topology(const Machine& m, const std::string& what);

// "fat-tree:...", "rail:...", "torus:..." (see above); `node` builds the single-node preset
// named after NODESx. Error naming the preset and the option on bad syntax.
[[nodiscard]] bool is_topology_preset(std::string_view name);
[[nodiscard]] Machine topology_preset(std::string_view name,
                                      const std::function<Machine(std::string_view)>& node);

}  // namespace tessel

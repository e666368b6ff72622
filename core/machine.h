#pragma once
// Machine: what the simulator (and later the runtime's calibration) knows about the
// hardware a task graph runs on. A plain value type with integer ids and a JSON round
// trip; presets carry the source of every figure.
//
//   device types   peak flop/s per dtype, memory bandwidth and capacity, kernel launch
//                  latency, SM count, an efficiency table by task size (calibration fills it)
//   hosts          one per server ("node"); host RAM; the node's links to the inter-node
//                  network core (their bandwidth carries the oversubscription)
//   devices        a type, a host, and the links that attach them to the fabrics:
//                  fabric_out/_in   to and from the intra-node fabric (NVSwitch or PCIe tree)
//                  network_out/_in  to and from the inter-node network (the device's NIC)
//                  host_out/_in     to and from its host's RAM (PCIe), which evicts
//                                   and loads (core/memory_plan.h) cross; left empty,
//                                   fabric_out/_in (a CPU worker's memory copy)
//   links          directed (one per direction of a full-duplex connection), bandwidth and
//                  latency; links listed by several devices are shared by them
//   switches       (optional) the nodes of a topology graph that are not devices; on
//                  such a machine every link has `from` and `to` nodes and routes are
//                  shortest paths over the graph, ECMP by a hash (core/topology.h)
//   routes         route(a, b): an explicit entry of `routes` if there is one, otherwise
//                  on a topology graph a shortest path (core/topology.h), otherwise
//                    same host:       a.fabric_out + b.fabric_in
//                    different hosts: a.network_out + host(a).network_out
//                                     + host(b).network_in + b.network_in
//                  The latency of a route is the sum of its links' latencies, its
//                  bandwidth that of its slowest link.
//   interference   how compute and communication on one device slow each other down
//
// Machine JSON (every bandwidth in bytes/s, every time in seconds):
//   {"name": "ring4",
//    "device_types": [{"name": "gpu", "peak_flops_per_s": {"f32": 1e12, "bf16": 1e13},
//                      "memory_bytes_per_s": 1e12, "memory_capacity_bytes": 1e10,
//                      "launch_latency_s": 0, "sm_count": 100, "efficiency": [[1e6, 0.5], [1e9, 1]]}],
//    "hosts": [{"name": "node0", "memory_capacity_bytes": 1e12, "network_out": [], "network_in": []}],
//    "links": [{"name": "l01", "kind": "nvlink", "bytes_per_s": 1e11, "latency_s": 1e-6,
//               "bytes_per_s_by_size": [{"bytes": 65536, "bytes_per_s": 4e10}, ...]}, ...],
//    "devices": [{"type": "gpu", "host": 0, "fabric_out": ["l01"], "fabric_in": ["l30"],
//                 "network_out": [], "network_in": []}, ...],
//    "routes": [{"src": 0, "dst": 1, "links": ["l01"]}, ...],
//    "interference": {"comm_priority": "normal", "comm_sms": 0,
//                     "normal": {"compute_slowdown": 1.189, "comm_slowdown": 2.98},
//                     "high": {"compute_slowdown": 1.4, "comm_slowdown": 1.71}},
//                     (every field: core/interference.h — copy-engine rows, measured
//                     reserved-SM rows, "measured", the fused-task model)
//    "barrier_latency_s": 0}
// Optional fields: a device type's peak_flops_per_s entries (a dtype left out cannot be
// simulated), launch_latency_s (0), dispatch_interval_s (0), sm_count (0), efficiency ([] = 1); a device's link
// lists ([]); a link's bytes_per_s_by_size ([]: bytes_per_s at every size; points with
// bytes > 0 rising from point to point and bytes_per_s > 0); hosts (one host "host0" when
// left out); routes ([]); interference (the
// defaults below); barrier_latency_s (0); and a device type's CPU-worker fields (0 or
// false: not modelled): generic_flops_per_s, transcendental_flops_per_s, single_lane,
// host_copy_lane, cache_capacity_bytes, cache_bytes_per_s, outer_cache_capacity_bytes,
// outer_cache_bytes_per_s, copy_row_s, generic_row_s. Errors name the field: "machine.links[2].bytes_per_s: ...".
//
// A topology graph adds (core/topology.h): "switches": [{"name": "leaf0"}, ...]; on every
// link "from" and "to" naming a device (its optional "name", else "d<index>") or a switch.
//
// Presets (machine_preset): h100-sxm-8, a100-sxm-8, h100-pcie-4, cpu (cpu:N),
// cluster:NODESxPRESET[,oversubscription=R] — e.g. cluster:128xh100-sxm-8; graphs:
// fat-tree:..., rail:..., torus:... (core/topology.h).

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/ids.h"
#include "core/types.h"

namespace tessel {

using LinkId = Id<struct LinkTag>;

enum class LinkKind : std::uint8_t { nvlink, pcie, nic, network, memory, custom };
[[nodiscard]] std::string_view to_string(LinkKind k);
[[nodiscard]] LinkKind parse_link_kind(std::string_view s, std::string_view what = "link kind");

// A node of the topology graph: device d is node d, switch s is node num_devices() + s.
inline constexpr std::int32_t kNoNode = -1;

// The rate one transfer of `bytes` reaches over a link (Link::bytes_per_s_by_size).
struct SizeRate {
  double bytes = 0;
  double bytes_per_s = 0;
  friend bool operator==(const SizeRate&, const SizeRate&) = default;
};

struct Link {
  std::string name;
  LinkKind kind = LinkKind::custom;
  double bytes_per_s = 0;  // per direction: links are directed
  double latency_s = 0;
  // Its ends in the topology graph (core/topology.h), or kNoNode for both on machines
  // that route by the device and host link lists.
  std::int32_t from = kNoNode, to = kNoNode;
  // The rate of one transfer by its size, where it depends on the size (a CPU's memory
  // copy of a buffer that fits in its caches runs several times faster than one that
  // streams through RAM); sorted by bytes, empty: bytes_per_s at every size. Evicts and
  // loads (sim/offload.h), which share no bandwidth, take it (bytes_per_s_at); moves
  // keep bytes_per_s, the capacity the network model shares between them.
  std::vector<SizeRate> bytes_per_s_by_size{};

  // bytes_per_s_by_size interpolated linearly in log(bytes) between its points,
  // constant beyond its ends; bytes_per_s when it is empty.
  [[nodiscard]] double bytes_per_s_at(double bytes) const;
  friend bool operator==(const Link&, const Link&) = default;
};

// A node of the topology graph that is not a device: a switch, a NIC, a torus router, an
// NVSwitch. Routes pass through switches, never through another device.
struct Switch {
  std::string name;
  friend bool operator==(const Switch&, const Switch&) = default;
};

// Efficiency of a kernel by its size: the fraction of peak flop/s a task of `flops`
// reaches. Interpolated linearly in log(flops) between points, constant beyond the ends.
struct EfficiencyPoint {
  double flops = 0;
  double efficiency = 1;
  friend bool operator==(const EfficiencyPoint&, const EfficiencyPoint&) = default;
};

inline constexpr int kNumDTypes = 4;  // DType::f16 .. DType::f64

struct DeviceType {
  std::string name;
  std::array<double, kNumDTypes> peak_flops_per_s{};  // indexed by DType; 0 = not supported
  double memory_bytes_per_s = 0;
  std::int64_t memory_capacity_bytes = 0;
  double launch_latency_s = 0;
  // The least time between two task starts on one chip (Device::chip; a device without
  // one is its own chip): a GPU's front end takes the executor's graph nodes one after
  // another, so tasks of every stream and virtual device on it start no faster than one
  // per dispatch_interval_s (the H200 measured ~5 us per marked task). The simulator holds
  // a ready task's lane until the chip's next start is due. 0 = no limit (every preset).
  double dispatch_interval_s = 0;
  int sm_count = 0;
  std::vector<EfficiencyPoint> efficiency;  // sorted by flops; empty = 1 everywhere
  // Rate of compute tasks that are not contractions (elementwise, reductions), flop/s;
  // 0 = the same roofline as contractions. CPUs need it: their GEMMs run tens of times
  // faster per flop than transcendental elementwise work.
  double generic_flops_per_s = 0;
  // Rate of transcendental operations (exp, silu, ...) in such tasks; 0 = no distinction.
  double transcendental_flops_per_s = 0;
  // One worker does everything: compute, touches and outgoing moves of a device share a
  // single lane (the CPU executor's one thread per device). False: separate compute,
  // copy and comm lanes (GPU streams and copy engines).
  bool single_lane = false;
  // With single_lane: the device's evicts and loads (core/memory_plan.h) run on a copy
  // lane of their own, one at a time in both directions (the CPU executor's copy-lane
  // thread, CopyLane::thread), beside the worker's lane instead of on it. Needs
  // single_lane (a GPU's host copies have lanes of their own anyway).
  bool host_copy_lane = false;
  // Tasks whose memory traffic fits in a cache run at its bandwidth instead of
  // memory_bytes_per_s (0 = no cache modelled). CPUs: the per-core L2.
  std::int64_t cache_capacity_bytes = 0;
  double cache_bytes_per_s = 0;
  // A second, larger level (a last-level cache, this device's share of it) for tasks
  // past the first: 0 = none. Its capacity must exceed the first level's.
  std::int64_t outer_cache_capacity_bytes = 0;
  double outer_cache_bytes_per_s = 0;
  // Seconds a strided copy (a touch) spends per contiguous run (row) it copies, beside
  // its bytes: a CPU pays its loop and address arithmetic per row, so copying a
  // [b, h, s, 16] block costs far more than its bytes say. 0 = none (GPUs' copy kernels).
  double copy_row_s = 0;
  // Seconds a generic (non-contraction) kernel spends per row of its block's innermost
  // dimension beside its flops: the CPU's generic loop pays its setup per row, so a
  // softmax over rows of 64 costs more per element than one over rows of 1024. 0 = none.
  double generic_row_s = 0;

  [[nodiscard]] double peak(DType t) const { return peak_flops_per_s[static_cast<int>(t)]; }
  [[nodiscard]] double efficiency_at(double flops) const;
  friend bool operator==(const DeviceType&, const DeviceType&) = default;
};

struct Device {
  std::string name;       // its node name in the topology graph; empty = "d<index>"
  std::int32_t type = 0;  // index into Machine::device_types
  std::int32_t host = 0;  // index into Machine::hosts
  // Devices with the same chip (>= 0) are virtual devices of one physical chip (the CUDA
  // backend's --gpus 1): their compute shares its SMs, so the simulator runs k compute
  // tasks at once on a chip each k times slower (processor sharing). -1: a chip of its own.
  std::int32_t chip = -1;
  std::vector<LinkId> fabric_out, fabric_in;
  std::vector<LinkId> network_out, network_in;
  std::vector<LinkId> host_out, host_in;  // to and from the host's RAM; empty: fabric_out/_in
  friend bool operator==(const Device&, const Device&) = default;
};

struct Host {
  std::string name;
  // Host RAM: bounds what memory-capped runs evict to it (core/memory_plan.h); 0 = unknown.
  std::int64_t memory_capacity_bytes = 0;
  std::vector<LinkId> network_out, network_in;
  friend bool operator==(const Host&, const Host&) = default;
};

struct RouteEntry {
  DeviceId src, dst;
  std::vector<LinkId> links;
  friend bool operator==(const RouteEntry&, const RouteEntry&) = default;
};

struct Machine;

enum class CommPriority : std::uint8_t { normal, high };
[[nodiscard]] std::string_view to_string(CommPriority p);
[[nodiscard]] CommPriority parse_comm_priority(std::string_view s, std::string_view what = "comm_priority");

// How a device's communication moves its bytes: SM copy kernels (NCCL's, one CTA per
// channel, competing with compute for SMs) or the copy engines (cudaMemcpyAsync: DMA,
// no SMs, only HBM bandwidth shared).
enum class CommMechanism : std::uint8_t { sm_kernels, copy_engine };
[[nodiscard]] std::string_view to_string(CommMechanism m);  // "sm_kernels", "copy_engine"
// Accepts "sm_kernels"/"sm-kernels"/"sm" and "copy_engine"/"copy-engine"/"ce".
[[nodiscard]] CommMechanism parse_comm_mechanism(std::string_view s, std::string_view what = "comm_mechanism");

// Multipliers (>= 1) on the duration of work while both the compute lane and the
// communication lane of a device are busy: compute runs 1/compute_slowdown as fast,
// communication 1/comm_slowdown. 1 and 1 = perfect overlap. `source` names where the
// figures come from (a paper and section, or "measured: tessel calibrate ... on DEVICE").
struct SlowdownFactors {
  double compute_slowdown = 1;
  double comm_slowdown = 1;
  std::string source;
  friend bool operator==(const SlowdownFactors&, const SlowdownFactors&) = default;
};

// A measured configuration with SMs reserved for communication (SM copy kernels).
struct ReservedFactors {
  CommPriority comm_priority = CommPriority::normal;
  int comm_sms = 0;  // > 0
  SlowdownFactors factors;
  friend bool operator==(const ReservedFactors&, const ReservedFactors&) = default;
};

// A fused computation-collective task (arXiv 2305.06942): a GEMM whose output is sent in
// `tiles` pieces as they finish, its compute running at (1 - comm_occupancy) of its
// speed because the communication code holds that share of the occupancy.
struct FusedModel {
  int tiles = 16;               // pieces a fused GEMM's output is sent in (a modelling choice)
  double comm_occupancy = 0.125;  // arXiv 2305.06942 (SC24): 12.5% occupancy for the communication code
  friend bool operator==(const FusedModel&, const FusedModel&) = default;
};

// The interference model (core/interference.cc). Which row applies: the run's mechanism,
// stream priority and reserved SMs (comm_mechanism, comm_priority, comm_sms):
//  - SM copy kernels, no SMs reserved: `normal` or `high`.
//  - copy engines: `copy_engine_normal` / `copy_engine_high` (their published default
//    where the JSON gives none); reserved SMs only set the compute floor below.
//  - SM copy kernels with comm_sms > 0: the `reserved` entry of that priority and SM
//    count if the JSON has one (measured), otherwise the rule: compute
//    max(normal.compute, sm_count / (sm_count − comm_sms)) at either priority (compute
//    runs on the SMs left; communication takes none of them, so priority has nothing to
//    arbitrate), communication min(row.comm, copy-engine row's comm) (its kernels find
//    their SMs free, so only the HBM contention a copy engine also meets is left).
// With `measured` true (tessel calibrate --overlap writes it) no published default fills a
// configuration the JSON lacks: resolving it is an Error naming the missing field.
//
// Published defaults (every figure's derivation in docs: sim/README.md, "Interference"):
//  - normal priority: compute 18.9% slower on average under concurrent communication
//    (arXiv 2507.03114, A100/H100/MI250/MI210). Communication: concurrent execution
//    captures 21% of the ideal overlap speedup by default (arXiv 2412.14335); for equal
//    compute and communication work W that means a finish at (2 − 0.21)·W = 1.79·W, which
//    with compute at 1.189 requires communication at 1/2.98 speed while both run
//    (1.189 + 1 − 1.189/c = 1.79 → c = 2.98).
//  - high priority (a prioritised communication stream with CU/SM partitioning):
//    compute up to 40% slower (the maximum of arXiv 2507.03114); 42% of the ideal overlap
//    captured (arXiv 2412.14335) gives 1.4 + 1 − 1.4/c = 1.58 → c = 1.71.
//  - copy engines: 72% of the ideal overlap captured with copy-engine (DMA) collectives
//    (arXiv 2412.14335); both sides assumed slowed alike (HBM bandwidth is all they
//    share): s·W = (2 − 0.72)·W → s = 1.28 for compute and communication. Stream priority
//    orders thread blocks on SMs only (CUDA programming guide, stream priorities), so the
//    high row equals the normal one.
//  - comm_sms: SMs reserved for communication (NCCL runs one CTA per channel, up to 64;
//    the resource-aware overlap paper, arXiv 2606.09200, caps the compute kernel's
//    occupancy through its shared-memory request to the same effect). 0 = not reserved
//    (the measured slowdowns already include the SMs communication takes).
struct Interference {
  CommPriority comm_priority = CommPriority::normal;
  int comm_sms = 0;
  SlowdownFactors normal{1.189, 2.98, "arXiv 2507.03114 (18.9% mean compute slowdown); arXiv 2412.14335 (21% of ideal overlap)"};
  SlowdownFactors high{1.40, 1.71, "arXiv 2507.03114 (40% max compute slowdown); arXiv 2412.14335 (42% of ideal overlap with priority + CU partitioning)"};
  CommMechanism comm_mechanism = CommMechanism::sm_kernels;
  // Copy-engine rows; empty source = not given (the published default applies).
  SlowdownFactors copy_engine_normal{}, copy_engine_high{};
  std::vector<ReservedFactors> reserved;  // measured points, SM copy kernels
  bool measured = false;
  FusedModel fused;

  // The factors a run with these settings uses on a device with `sm_count` SMs; Error
  // naming the missing field on a measured machine without that configuration.
  [[nodiscard]] SlowdownFactors resolve(int sm_count, std::string_view what = "machine.interference") const;
  // The compute slowdown on a device with `sm_count` SMs, the SM floor included.
  [[nodiscard]] double compute_slowdown(int sm_count) const { return resolve(sm_count).compute_slowdown; }
  [[nodiscard]] double comm_slowdown(int sm_count = 0) const { return resolve(sm_count).comm_slowdown; }
  [[nodiscard]] static Interference none();
  friend bool operator==(const Interference&, const Interference&) = default;
};

// Published copy-engine row (see above).
[[nodiscard]] SlowdownFactors published_copy_engine_factors();

// Interference settings chosen on the command line (--comm-priority, --comm-sms,
// --comm-mechanism); unset fields keep the machine's.
struct InterferenceSettings {
  bool set_priority = false, set_sms = false, set_mechanism = false;
  CommPriority comm_priority = CommPriority::normal;
  int comm_sms = 0;
  CommMechanism comm_mechanism = CommMechanism::sm_kernels;
  // Sets them on `m`; Error naming `option_sms` when comm_sms leaves a device type no SM
  // ("--comm-sms 200: device type 'h100-sxm5' has 132 SMs").
  void apply(Machine& m, std::string_view option_sms = "--comm-sms") const;
  [[nodiscard]] bool any() const { return set_priority || set_sms || set_mechanism; }
};

class TopologyRouter;

// The topology's lazily built router, shared by copies of a machine until one of them is
// assigned to: a cache, not part of the machine's value (copies compare equal).
class RouterCache {
 public:
  RouterCache() = default;
  RouterCache(const RouterCache&) {}
  RouterCache& operator=(const RouterCache&) {
    reset();
    return *this;
  }
  friend bool operator==(const RouterCache&, const RouterCache&) { return true; }
  [[nodiscard]] std::shared_ptr<TopologyRouter> get(const Machine& m) const;
  void reset() const;

 private:
  mutable std::mutex mu_;
  mutable std::shared_ptr<TopologyRouter> router_;
};

struct Machine {
  std::string name;
  std::vector<DeviceType> device_types;
  std::vector<Host> hosts;
  std::vector<Device> devices;
  std::vector<Link> links;
  std::vector<RouteEntry> routes;  // explicit routes; take precedence over the rules
  // The topology graph's nodes beyond the devices (core/topology.h). A machine whose links
  // have ends (Link::from/to) routes over that graph; one without, by the link lists.
  std::vector<Switch> switches;
  Interference interference;
  // Under the bsp policy: the time from the end of a phase's last task until the next
  // phase's tasks may start (the barrier's synchronisation and wake-up cost). 0 = free.
  double barrier_latency_s = 0;
  RouterCache router;  // built on the first route over a topology graph

  [[nodiscard]] int num_devices() const { return static_cast<int>(devices.size()); }
  [[nodiscard]] const Device& device(DeviceId d) const { return devices.at(d.index()); }
  [[nodiscard]] const DeviceType& type_of(DeviceId d) const { return device_types.at(device(d).type); }
  [[nodiscard]] const Link& link(LinkId l) const { return links.at(l.index()); }
  // The links a transfer from `src` to `dst` crosses, in order. Error naming both
  // devices when the machine has no route between them; empty when src == dst. On a
  // topology graph `channel` picks among equal-cost paths (ECMP, core/topology.h).
  [[nodiscard]] std::vector<LinkId> route(DeviceId src, DeviceId dst, std::uint32_t channel = 0) const;
  // The same into `out` (cleared first), for callers that build many routes.
  void route(DeviceId src, DeviceId dst, std::vector<LinkId>& out, std::uint32_t channel = 0) const;
  // Whether routes come from the topology graph (some link has ends).
  [[nodiscard]] bool has_topology() const;
  // Topology graph nodes: devices first, then switches.
  [[nodiscard]] std::int32_t num_nodes() const { return num_devices() + static_cast<std::int32_t>(switches.size()); }
  [[nodiscard]] std::string node_name(std::int32_t node) const;
  // Call after changing a link's ends or the switches of a machine already routed.
  void invalidate_routes() const { router.reset(); }
  // The links an evict (to_host) or a load crosses between device `d` and its host's
  // RAM: its host_out / host_in, or where those are empty its fabric_out / fabric_in.
  // Error naming the device when it has neither.
  [[nodiscard]] std::vector<LinkId> host_route(DeviceId d, bool to_host) const;
  [[nodiscard]] double route_latency_s(const std::vector<LinkId>& route) const;
  [[nodiscard]] double route_bytes_per_s(const std::vector<LinkId>& route) const;
  // The rate of one transfer of `bytes` alone on `route`: its slowest link's
  // bytes_per_s_at(bytes) (evicts and loads).
  [[nodiscard]] double route_bytes_per_s(const std::vector<LinkId>& route, double bytes) const;
  // Throws Error naming the field ("machine.links[2].bytes_per_s: ...") when a figure is
  // missing, negative or out of range, or an index points nowhere.
  void validate(std::string_view what = "machine") const;
  friend bool operator==(const Machine&, const Machine&) = default;
};

// "h100-sxm-8", "a100-sxm-8", "h100-pcie-4", "cpu", "cpu:N",
// "cluster:NODESxPRESET[,oversubscription=R]", "fat-tree:...", "rail:...", "torus:..."
// (core/topology.h). Error listing the presets on an unknown name.
[[nodiscard]] Machine machine_preset(std::string_view name);
[[nodiscard]] std::vector<std::string> machine_preset_names();
// A preset name, or else the path of a machine JSON file.
[[nodiscard]] Machine load_machine(const std::string& preset_or_file);

// `nodes` copies of the single-host machine `node`, connected by a switched network.
// With oversubscription R > 1 every host gets one link to and one from the network core
// of Σ(NIC bandwidth of the node) / R bytes/s; with R = 1 (full bisection) the NICs
// are the only limit and no such link is added.
[[nodiscard]] Machine make_cluster(const Machine& node, int nodes, double oversubscription = 1.0);

[[nodiscard]] nlohmann::json to_json(const Machine& m);
// `what` names the input in error messages (a file name, say).
[[nodiscard]] Machine machine_from_json(const nlohmann::json& j, std::string_view what = "machine");

}  // namespace tessel

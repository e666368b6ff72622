#include "core/machine.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "core/interference.h"
#include "core/io.h"
#include "core/topology.h"

namespace tessel {

using nlohmann::json;

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::pcie: return "pcie";
    case LinkKind::nic: return "nic";
    case LinkKind::network: return "network";
    case LinkKind::memory: return "memory";
    case LinkKind::custom: return "custom";
  }
  return "?";
}

LinkKind parse_link_kind(std::string_view s, std::string_view what) {
  for (LinkKind k : {LinkKind::nvlink, LinkKind::pcie, LinkKind::nic, LinkKind::network, LinkKind::memory,
                     LinkKind::custom})
    if (s == to_string(k)) return k;
  fail(what, ": unknown link kind '", s, "' (expected nvlink, pcie, nic, network, memory or custom)");
}

std::string_view to_string(CommPriority p) { return p == CommPriority::high ? "high" : "normal"; }

double DeviceType::efficiency_at(double flops) const {
  if (efficiency.empty()) return 1.0;
  if (flops <= efficiency.front().flops) return efficiency.front().efficiency;
  if (flops >= efficiency.back().flops) return efficiency.back().efficiency;
  auto hi = std::upper_bound(efficiency.begin(), efficiency.end(), flops,
                             [](double f, const EfficiencyPoint& p) { return f < p.flops; });
  auto lo = hi - 1;
  double x = (std::log(flops) - std::log(lo->flops)) / (std::log(hi->flops) - std::log(lo->flops));
  return lo->efficiency + x * (hi->efficiency - lo->efficiency);
}

double Link::bytes_per_s_at(double bytes) const {
  const std::vector<SizeRate>& t = bytes_per_s_by_size;
  if (t.empty()) return bytes_per_s;
  if (bytes <= t.front().bytes) return t.front().bytes_per_s;
  if (bytes >= t.back().bytes) return t.back().bytes_per_s;
  auto hi = std::upper_bound(t.begin(), t.end(), bytes, [](double b, const SizeRate& p) { return b < p.bytes; });
  auto lo = hi - 1;
  const double x = (std::log(bytes) - std::log(lo->bytes)) / (std::log(hi->bytes) - std::log(lo->bytes));
  return lo->bytes_per_s + x * (hi->bytes_per_s - lo->bytes_per_s);
}

// ---- routes ---------------------------------------------------------------------

std::vector<LinkId> Machine::route(DeviceId src, DeviceId dst, std::uint32_t channel) const {
  std::vector<LinkId> out;
  route(src, dst, out, channel);
  return out;
}

bool Machine::has_topology() const {
  // Validation makes it all or nothing: on a topology graph every link has ends.
  return !switches.empty() || (!links.empty() && links.front().from != kNoNode);
}

std::string Machine::node_name(std::int32_t node) const {
  if (node >= 0 && node < num_devices()) {
    const std::string& n = devices[static_cast<std::size_t>(node)].name;
    return n.empty() ? "d" + std::to_string(node) : n;
  }
  if (node >= num_devices() && node < num_nodes()) return switches[static_cast<std::size_t>(node - num_devices())].name;
  return "node " + std::to_string(node);
}

void Machine::route(DeviceId src, DeviceId dst, std::vector<LinkId>& out, std::uint32_t channel) const {
  if (!src.valid() || src.value >= num_devices() || !dst.valid() || dst.value >= num_devices())
    fail("machine ", name, ": no route from device ", src.value, " to device ", dst.value, " (the machine has ",
         num_devices(), " devices)");
  out.clear();
  for (const RouteEntry& r : routes)
    if (r.src == src && r.dst == dst) {
      out = r.links;
      return;
    }
  if (src == dst) return;
  if (has_topology()) {
    router.get(*this)->route(src, dst, channel, out);
    return;
  }
  const Device& a = device(src);
  const Device& b = device(dst);
  const auto append = [&out](const std::vector<LinkId>& ls) { out.insert(out.end(), ls.begin(), ls.end()); };
  if (a.host == b.host) {
    if (a.fabric_out.empty() || b.fabric_in.empty())
      fail("machine ", name, ": no route from device ", src.value, " to device ", dst.value,
           " (no intra-node fabric links and no entry in routes)");
    append(a.fabric_out);
    append(b.fabric_in);
    return;
  }
  if (a.network_out.empty() || b.network_in.empty())
    fail("machine ", name, ": no route from device ", src.value, " to device ", dst.value,
         " (no network links between hosts ", a.host, " and ", b.host, " and no entry in routes)");
  append(a.network_out);
  append(hosts.at(a.host).network_out);
  append(hosts.at(b.host).network_in);
  append(b.network_in);
}

std::vector<LinkId> Machine::host_route(DeviceId d, bool to_host) const {
  const Device& dev = device(d);
  const std::vector<LinkId>& own = to_host ? dev.host_out : dev.host_in;
  const std::vector<LinkId>& fabric = to_host ? dev.fabric_out : dev.fabric_in;
  if (!own.empty()) return own;
  if (fabric.empty())
    fail("machine ", name, ": device ", d.value, " has no link to its host's memory (devices[", d.value, "].",
         to_host ? "host_out" : "host_in", " and .", to_host ? "fabric_out" : "fabric_in", " are empty)");
  return fabric;
}

double Machine::route_latency_s(const std::vector<LinkId>& r) const {
  double s = 0;
  for (LinkId l : r) s += link(l).latency_s;
  return s;
}

double Machine::route_bytes_per_s(const std::vector<LinkId>& r) const {
  double b = std::numeric_limits<double>::infinity();
  for (LinkId l : r) b = std::min(b, link(l).bytes_per_s);
  return b;
}

double Machine::route_bytes_per_s(const std::vector<LinkId>& r, double bytes) const {
  double b = std::numeric_limits<double>::infinity();
  for (LinkId l : r) b = std::min(b, link(l).bytes_per_s_at(bytes));
  return b;
}

// ---- validation -----------------------------------------------------------------

namespace {

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }
bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0; }

void check_links(const std::vector<LinkId>& ls, std::size_t num_links, const std::string& what) {
  for (std::size_t i = 0; i < ls.size(); ++i)
    if (!ls[i].valid() || ls[i].index() >= num_links)
      fail(what, "[", i, "]: link ", ls[i].value, " does not exist (the machine has ", num_links, " links)");
}

}  // namespace

void Machine::validate(std::string_view what_sv) const {
  const std::string what(what_sv);
  if (device_types.empty()) fail(what, ".device_types: at least one device type is required");
  for (std::size_t i = 0; i < device_types.size(); ++i) {
    const DeviceType& t = device_types[i];
    std::string w = what + ".device_types[" + std::to_string(i) + "]";
    bool any = false;
    for (int k = 0; k < kNumDTypes; ++k) {
      double p = t.peak_flops_per_s[k];
      if (!finite_non_negative(p))
        fail(w, ".peak_flops_per_s.", to_string(static_cast<DType>(k)), ": must be a finite number >= 0, got ", p);
      any = any || p > 0;
    }
    if (!any) fail(w, ".peak_flops_per_s: no dtype has a positive peak");
    if (!finite_positive(t.memory_bytes_per_s))
      fail(w, ".memory_bytes_per_s: must be a finite number > 0, got ", t.memory_bytes_per_s);
    if (t.memory_capacity_bytes <= 0) fail(w, ".memory_capacity_bytes: must be > 0, got ", t.memory_capacity_bytes);
    if (!finite_non_negative(t.launch_latency_s))
      fail(w, ".launch_latency_s: must be a finite number >= 0, got ", t.launch_latency_s);
    if (!finite_non_negative(t.dispatch_interval_s))
      fail(w, ".dispatch_interval_s: must be a finite number >= 0, got ", t.dispatch_interval_s);
    if (t.sm_count < 0) fail(w, ".sm_count: must be >= 0, got ", t.sm_count);
    if (t.cache_capacity_bytes < 0) fail(w, ".cache_capacity_bytes: must be >= 0, got ", t.cache_capacity_bytes);
    if (!finite_non_negative(t.cache_bytes_per_s))
      fail(w, ".cache_bytes_per_s: must be a finite number >= 0, got ", t.cache_bytes_per_s);
    if (t.outer_cache_capacity_bytes < 0)
      fail(w, ".outer_cache_capacity_bytes: must be >= 0, got ", t.outer_cache_capacity_bytes);
    if (!finite_non_negative(t.outer_cache_bytes_per_s))
      fail(w, ".outer_cache_bytes_per_s: must be a finite number >= 0, got ", t.outer_cache_bytes_per_s);
    if (t.outer_cache_capacity_bytes > 0 && t.outer_cache_capacity_bytes <= t.cache_capacity_bytes)
      fail(w, ".outer_cache_capacity_bytes: must exceed cache_capacity_bytes (", t.cache_capacity_bytes, "), got ",
           t.outer_cache_capacity_bytes);
    if (!finite_non_negative(t.copy_row_s))
      fail(w, ".copy_row_s: must be a finite number >= 0, got ", t.copy_row_s);
    if (!finite_non_negative(t.generic_row_s))
      fail(w, ".generic_row_s: must be a finite number >= 0, got ", t.generic_row_s);
    if (!finite_non_negative(t.transcendental_flops_per_s))
      fail(w, ".transcendental_flops_per_s: must be a finite number >= 0, got ", t.transcendental_flops_per_s);
    if (!finite_non_negative(t.generic_flops_per_s))
      fail(w, ".generic_flops_per_s: must be a finite number >= 0, got ", t.generic_flops_per_s);
    if (t.host_copy_lane && !t.single_lane)
      fail(w, ".host_copy_lane: needs single_lane (a device with separate lanes already copies to and from its "
              "host on lanes of its own)");
    for (std::size_t p = 0; p < t.efficiency.size(); ++p) {
      const EfficiencyPoint& e = t.efficiency[p];
      std::string we = w + ".efficiency[" + std::to_string(p) + "]";
      if (!finite_positive(e.flops)) fail(we, ": flops must be a finite number > 0, got ", e.flops);
      if (!(e.efficiency > 0 && e.efficiency <= 1)) fail(we, ": efficiency must be in (0, 1], got ", e.efficiency);
      if (p > 0 && !(e.flops > t.efficiency[p - 1].flops)) fail(we, ": flops must increase from point to point");
    }
    if (interference.comm_sms > 0 && t.sm_count > 0 && interference.comm_sms >= t.sm_count)
      fail(what, ".interference.comm_sms: ", interference.comm_sms, " SMs for communication leave none of the ",
           t.sm_count, " SMs of device type '", t.name, "' to compute");
  }
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < links.size(); ++i) {
    const Link& l = links[i];
    std::string w = what + ".links[" + std::to_string(i) + "]";
    if (l.name.empty()) fail(w, ".name: must not be empty");
    if (!names.insert(l.name).second) fail(w, ".name: '", l.name, "' is used by another link");
    if (!finite_positive(l.bytes_per_s)) fail(w, ".bytes_per_s: must be a finite number > 0, got ", l.bytes_per_s);
    if (!finite_non_negative(l.latency_s)) fail(w, ".latency_s: must be a finite number >= 0, got ", l.latency_s);
    for (std::size_t p = 0; p < l.bytes_per_s_by_size.size(); ++p) {
      const SizeRate& r = l.bytes_per_s_by_size[p];
      const std::string wp = w + ".bytes_per_s_by_size[" + std::to_string(p) + "]";
      if (!finite_positive(r.bytes)) fail(wp, ".bytes: must be a finite number > 0, got ", r.bytes);
      if (!finite_positive(r.bytes_per_s)) fail(wp, ".bytes_per_s: must be a finite number > 0, got ", r.bytes_per_s);
      if (p > 0 && !(r.bytes > l.bytes_per_s_by_size[p - 1].bytes))
        fail(wp, ".bytes: must be larger than the point before it (", l.bytes_per_s_by_size[p - 1].bytes, "), got ",
             r.bytes);
    }
  }
  if (hosts.empty()) fail(what, ".hosts: at least one host is required");
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const Host& h = hosts[i];
    std::string w = what + ".hosts[" + std::to_string(i) + "]";
    if (h.memory_capacity_bytes < 0) fail(w, ".memory_capacity_bytes: must be >= 0, got ", h.memory_capacity_bytes);
    check_links(h.network_out, links.size(), w + ".network_out");
    check_links(h.network_in, links.size(), w + ".network_in");
  }
  if (devices.empty()) fail(what, ".devices: at least one device is required");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const Device& d = devices[i];
    std::string w = what + ".devices[" + std::to_string(i) + "]";
    if (d.type < 0 || static_cast<std::size_t>(d.type) >= device_types.size())
      fail(w, ".type: device type ", d.type, " does not exist (the machine has ", device_types.size(), ")");
    if (d.host < 0 || static_cast<std::size_t>(d.host) >= hosts.size())
      fail(w, ".host: host ", d.host, " does not exist (the machine has ", hosts.size(), ")");
    // A chip per physical GPU: there cannot be more chips than devices.
    if (d.chip < -1 || (d.chip >= 0 && static_cast<std::size_t>(d.chip) >= devices.size()))
      fail(w, ".chip: ", d.chip, " is not a chip index: devices sharing a GPU name it by a number from 0 to ",
           devices.size() - 1, " (the machine has ", devices.size(), " device", devices.size() == 1 ? "" : "s", ")");
    check_links(d.fabric_out, links.size(), w + ".fabric_out");
    check_links(d.fabric_in, links.size(), w + ".fabric_in");
    check_links(d.network_out, links.size(), w + ".network_out");
    check_links(d.network_in, links.size(), w + ".network_in");
    check_links(d.host_out, links.size(), w + ".host_out");
    check_links(d.host_in, links.size(), w + ".host_in");
  }
  for (std::size_t i = 0; i < routes.size(); ++i) {
    const RouteEntry& r = routes[i];
    std::string w = what + ".routes[" + std::to_string(i) + "]";
    if (!r.src.valid() || r.src.value >= num_devices())
      fail(w, ".src: device ", r.src.value, " does not exist (the machine has ", num_devices(), " devices)");
    if (!r.dst.valid() || r.dst.value >= num_devices())
      fail(w, ".dst: device ", r.dst.value, " does not exist (the machine has ", num_devices(), " devices)");
    if (r.src != r.dst && r.links.empty()) fail(w, ".links: a route between two devices needs at least one link");
    check_links(r.links, links.size(), w + ".links");
  }
  if (!finite_non_negative(barrier_latency_s))
    fail(what, ".barrier_latency_s: must be a finite number >= 0, got ", barrier_latency_s);
  if (has_topology())
    for (std::size_t i = 0; i < links.size(); ++i)
      if (links[i].from == kNoNode || links[i].to == kNoNode)
        fail(what, ".links[", i, "].", links[i].from == kNoNode ? "from" : "to",
             ": on a topology graph (a machine with switches, or links with from and to) every link needs both ends");
  const std::string wi = what + ".interference";
  validate_interference(interference, wi);
  validate_topology(*this, what);
}

// ---- presets --------------------------------------------------------------------
//
// Figures from NVIDIA's datasheets (dense rates without sparsity) and NCCL's tuner for
// per-hop latencies, unless a comment says otherwise; each names its origin.

namespace {

constexpr double kGB = 1e9;
constexpr double kTFLOP = 1e12;
constexpr double kUs = 1e-6;

// NCCL src/graph/tuning.cc per-hop latencies of the Simple protocol (the one NCCL uses
// for large transfers): NVLink 3.4 µs, PCIe 5.7 µs, network 14 µs. A hop
// is charged once, on the sending side's link; the receiving side's link has latency 0.
constexpr double kNvlinkHopLatency = 3.4 * kUs;
constexpr double kPcieHopLatency = 5.7 * kUs;
constexpr double kNetworkHopLatency = 14.0 * kUs;

void set_peaks(DeviceType& t, double f16, double bf16, double f32, double f64) {
  t.peak_flops_per_s[static_cast<int>(DType::f16)] = f16;
  t.peak_flops_per_s[static_cast<int>(DType::bf16)] = bf16;
  t.peak_flops_per_s[static_cast<int>(DType::f32)] = f32;
  t.peak_flops_per_s[static_cast<int>(DType::f64)] = f64;
}

LinkId add_link(Machine& m, std::string name, LinkKind kind, double bytes_per_s, double latency_s) {
  m.links.push_back(Link{std::move(name), kind, bytes_per_s, latency_s});
  return LinkId(static_cast<std::int32_t>(m.links.size() - 1));
}

struct NodeSpec {
  std::string name;
  DeviceType type;
  int gpus = 8;
  std::int64_t host_memory_bytes = 0;
  bool nvswitch = true;            // false: GPUs talk over the PCIe tree
  double fabric_bytes_per_s = 0;   // NVLink to the switch, or PCIe, per direction
  double host_pcie_bytes_per_s = 0;
  int nics = 8;                    // NIC i serves GPUs i·gpus/nics ...
  double nic_bytes_per_s = 0;
  bool nic_behind_pcie = false;    // the GPU's PCIe link is on its path to the NIC
};

// One server: GPUs, their host links, the intra-node fabric and the NICs.
Machine make_node(const NodeSpec& s) {
  Machine m;
  m.name = s.name;
  m.device_types = {s.type};
  m.hosts = {Host{"host0", s.host_memory_bytes, {}, {}}};
  std::vector<LinkId> nic_tx, nic_rx;
  for (int n = 0; n < s.nics; ++n) {
    std::string p = "nic" + std::to_string(n);
    nic_tx.push_back(add_link(m, p + ".tx", LinkKind::nic, s.nic_bytes_per_s, kNetworkHopLatency));
    nic_rx.push_back(add_link(m, p + ".rx", LinkKind::nic, s.nic_bytes_per_s, 0));
  }
  for (int g = 0; g < s.gpus; ++g) {
    std::string p = "gpu" + std::to_string(g);
    Device d;
    d.type = 0;
    d.host = 0;
    LinkId pcie_out = add_link(m, p + ".pcie.out", LinkKind::pcie, s.host_pcie_bytes_per_s, kPcieHopLatency);
    LinkId pcie_in = add_link(m, p + ".pcie.in", LinkKind::pcie, s.host_pcie_bytes_per_s, 0);
    d.host_out = {pcie_out};
    d.host_in = {pcie_in};
    if (s.nvswitch) {
      d.fabric_out = {add_link(m, p + ".nvlink.out", LinkKind::nvlink, s.fabric_bytes_per_s, kNvlinkHopLatency)};
      d.fabric_in = {add_link(m, p + ".nvlink.in", LinkKind::nvlink, s.fabric_bytes_per_s, 0)};
    } else {
      d.fabric_out = {pcie_out};
      d.fabric_in = {pcie_in};
    }
    if (s.nics > 0) {
      int nic = g * s.nics / s.gpus;
      if (s.nic_behind_pcie) {
        d.network_out = {pcie_out, nic_tx[nic]};
        d.network_in = {nic_rx[nic], pcie_in};
      } else {
        d.network_out = {nic_tx[nic]};
        d.network_in = {nic_rx[nic]};
      }
    }
    m.devices.push_back(std::move(d));
  }
  return m;
}

Machine h100_sxm_8() {
  NodeSpec s;
  s.name = "h100-sxm-8";
  s.type.name = "h100-sxm";
  // H100 SXM5: ~989 TFLOP/s bf16/fp16 tensor (dense), ~67 TFLOP/s fp32 (non-tensor; TF32
  // tensor math would give ~495). fp64: 34 TFLOP/s, NVIDIA H100 datasheet.
  set_peaks(s.type, 989 * kTFLOP, 989 * kTFLOP, 67 * kTFLOP, 34 * kTFLOP);
  s.type.memory_bytes_per_s = 3.35e12;        // 3.35 TB/s HBM3
  s.type.memory_capacity_bytes = 80'000'000'000;  // 80 GB HBM3
  s.type.sm_count = 132;  // H100 SXM5: 132 SMs, NVIDIA H100 architecture whitepaper
  // No published launch-latency figure is used: 0 until calibration measures it.
  s.type.launch_latency_s = 0;
  s.gpus = 8;                           // DGX H100: 8 H100 SXM5
  s.host_memory_bytes = 2'000'000'000'000;  // DGX H100: 2 TB host RAM
  s.nvswitch = true;                    // DGX H100: 4 NVSwitch chips
  s.fabric_bytes_per_s = 450 * kGB;     // NVLink 4: 900 GB/s total, 450 per direction
  s.host_pcie_bytes_per_s = 64 * kGB;   // PCIe Gen5 x16: ~64 GB/s per direction
  s.nics = 8;                           // DGX H100: 8 × 400 Gb/s ConnectX-7 (compute fabric)
  s.nic_bytes_per_s = 50 * kGB;         // 400 Gb/s = 50 GB/s each
  // GPUDirect RDMA: each GPU reaches its NIC through a PCIe Gen5 switch (64 GB/s > 50 GB/s,
  // never the bottleneck alone); that hop is not modelled.
  s.nic_behind_pcie = false;
  return make_node(s);
}

Machine a100_sxm_8() {
  NodeSpec s;
  s.name = "a100-sxm-8";
  s.type.name = "a100-sxm-80gb";
  // A100 SXM4 80GB: ~312 TFLOP/s bf16/fp16 tensor, ~19.5 fp32 (TF32 tensor ~156). fp64:
  // 9.7 TFLOP/s, NVIDIA A100 datasheet.
  set_peaks(s.type, 312 * kTFLOP, 312 * kTFLOP, 19.5 * kTFLOP, 9.7 * kTFLOP);
  s.type.memory_bytes_per_s = 2.0e12;            // ~2.0 TB/s HBM2e
  s.type.memory_capacity_bytes = 80'000'000'000;  // 80 GB HBM2e
  s.type.sm_count = 108;  // A100: 108 SMs, NVIDIA A100 architecture whitepaper
  s.type.launch_latency_s = 0;  // calibration fills it
  s.gpus = 8;                   // DGX A100: 8 A100, 6 NVSwitch
  // DGX A100 host RAM: 1 TB, NVIDIA DGX A100 datasheet.
  s.host_memory_bytes = 1'000'000'000'000;
  s.nvswitch = true;
  s.fabric_bytes_per_s = 300 * kGB;  // NVLink 3: 600 GB/s total, 300 per direction
  // PCIe Gen4 x16: ~32 GB/s per direction, half of Gen5's 64.
  s.host_pcie_bytes_per_s = 32 * kGB;
  s.nics = 8;                    // DGX A100: 8 × 200 Gb/s HDR NICs
  s.nic_bytes_per_s = 25 * kGB;  // 200 Gb/s = 25 GB/s each
  s.nic_behind_pcie = false;
  return make_node(s);
}

Machine h100_pcie_4() {
  NodeSpec s;
  s.name = "h100-pcie-4";
  s.type.name = "h100-pcie";
  // H100 PCIe: ~756 TFLOP/s bf16/fp16 tensor, ~51 fp32 (TF32 tensor ~378). fp64: 26 TFLOP/s,
  // NVIDIA H100 datasheet.
  set_peaks(s.type, 756 * kTFLOP, 756 * kTFLOP, 51 * kTFLOP, 26 * kTFLOP);
  s.type.memory_bytes_per_s = 2.0e12;            // 2.0 TB/s HBM2e
  s.type.memory_capacity_bytes = 80'000'000'000;  // 80 GB HBM2e
  s.type.sm_count = 114;  // H100 PCIe: 114 SMs, NVIDIA H100 architecture whitepaper
  s.type.launch_latency_s = 0;  // calibration fills it
  s.gpus = 4;
  // A generic 4-GPU PCIe server (no published reference system): 1 TB host RAM
  // and one 400 Gb/s NIC like DGX H100's ConnectX-7 are assumptions.
  s.host_memory_bytes = 1'000'000'000'000;
  s.nvswitch = false;                 // GPUs talk over the PCIe tree (no NVLink bridges)
  s.fabric_bytes_per_s = 64 * kGB;    // PCIe Gen5 x16: ~64 GB/s per direction
  s.host_pcie_bytes_per_s = 64 * kGB;
  s.nics = 1;
  s.nic_bytes_per_s = 50 * kGB;
  s.nic_behind_pcie = true;
  return make_node(s);
}

// Threads of one CPU process as devices. Every figure here is a placeholder, not a
// measurement: no published figure applies to an unknown CPU, and the runtime's
// calibration replaces them with measured ones.
Machine cpu_machine(int devices) {
  if (devices < 1 || devices > kMaxDevices)
    fail("machine preset cpu:", devices, ": the number of devices must be in [1, ", kMaxDevices, "]");
  Machine m;
  m.name = devices == 4 ? "cpu" : "cpu:" + std::to_string(devices);
  DeviceType t;
  t.name = "cpu-core";
  set_peaks(t, 2e10, 2e10, 5e10, 2.5e10);  // placeholder: one AVX2 core, order of magnitude
  t.memory_bytes_per_s = 1e10;              // placeholder
  t.memory_capacity_bytes = 4'000'000'000;  // placeholder: a share of host RAM
  t.launch_latency_s = 0;
  t.sm_count = 0;
  m.device_types = {t};
  m.hosts = {Host{"host0", 16'000'000'000, {}, {}}};
  for (int d = 0; d < devices; ++d) {
    std::string p = "core" + std::to_string(d);
    Device dev;
    // A move between threads is a memcpy through shared memory: placeholder bandwidth.
    dev.fabric_out = {add_link(m, p + ".mem.out", LinkKind::memory, 1e10, 0)};
    dev.fabric_in = {add_link(m, p + ".mem.in", LinkKind::memory, 1e10, 0)};
    m.devices.push_back(std::move(dev));
  }
  // Threads on one core do not disturb each other's "communication": no interference.
  m.interference = Interference::none();
  return m;
}

int parse_positive(std::string_view s, std::string_view what) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 1) fail(what, ": '", s, "' is not a positive integer");
  return v;
}

Machine single_node_preset(std::string_view name, std::string_view full) {
  if (name == "h100-sxm-8") return h100_sxm_8();
  if (name == "a100-sxm-8") return a100_sxm_8();
  if (name == "h100-pcie-4") return h100_pcie_4();
  if (name == "cpu") return cpu_machine(4);
  if (name.starts_with("cpu:")) return cpu_machine(parse_positive(name.substr(4), "machine preset cpu:N"));
  std::string list;
  for (const auto& n : machine_preset_names()) list += (list.empty() ? "" : ", ") + n;
  fail("unknown machine preset '", full, "' (expected ", list, ", or a machine JSON file)");
}

std::string prefixed(const std::string& prefix, const std::string& name) { return prefix + "." + name; }

}  // namespace

std::vector<std::string> machine_preset_names() {
  return {"h100-sxm-8",
          "a100-sxm-8",
          "h100-pcie-4",
          "cpu",
          "cpu:N",
          "cluster:NODESxPRESET[,oversubscription=R]",
          "fat-tree:NODESxPRESET[,leaf=L][,pod=P][,spines=S][,oversubscription=R]",
          "rail:NODESxPRESET[,group=G][,spines=S][,oversubscription=R]",
          "torus:AxB[xC]xPRESET[,link_bytes_per_s=W]"};
}

Machine make_cluster(const Machine& node, int nodes, double oversubscription) {
  node.validate(node.name);
  if (node.hosts.size() != 1) fail("cluster of '", node.name, "': a cluster node must be a single-host machine");
  if (nodes < 1) fail("cluster of '", node.name, "': the number of nodes must be >= 1, got ", nodes);
  if (static_cast<std::int64_t>(nodes) * static_cast<std::int64_t>(node.devices.size()) > kMaxDevices)
    fail("cluster of '", node.name, "': ", nodes, " nodes of ", node.devices.size(), " devices exceed the maximum of ",
         kMaxDevices, " devices");
  if (!(std::isfinite(oversubscription) && oversubscription >= 1))
    fail("cluster of '", node.name, "': oversubscription must be a finite number >= 1, got ", oversubscription);
  if (nodes > 1)
    for (std::size_t d = 0; d < node.devices.size(); ++d)
      if (node.devices[d].network_out.empty() || node.devices[d].network_in.empty())
        fail("cluster of '", node.name, "': device ", d, " has no network links (no NIC)");
  // The node's injection bandwidth: the distinct first links of its devices' network paths.
  std::set<std::int32_t> nic_links;
  for (const Device& d : node.devices)
    if (!d.network_out.empty()) nic_links.insert(d.network_out.back().value);
  double injection = 0;
  for (std::int32_t l : nic_links) injection += node.links[static_cast<std::size_t>(l)].bytes_per_s;

  Machine m;
  m.name = "cluster:" + std::to_string(nodes) + "x" + node.name;
  if (oversubscription != 1) {
    std::ostringstream os;
    os << ",oversubscription=" << oversubscription;
    m.name += os.str();
  }
  m.device_types = node.device_types;
  m.interference = node.interference;
  m.barrier_latency_s = node.barrier_latency_s;
  m.links.reserve(node.links.size() * static_cast<std::size_t>(nodes) + 2 * static_cast<std::size_t>(nodes));
  m.devices.reserve(node.devices.size() * static_cast<std::size_t>(nodes));
  auto shift = [](std::vector<LinkId> ls, std::int32_t base) {
    for (LinkId& l : ls) l = LinkId(l.value + base);
    return ls;
  };
  std::vector<std::int32_t> link_base;  // index of node n's first link
  for (int n = 0; n < nodes; ++n) {
    const std::string prefix = "node" + std::to_string(n);
    const auto base = static_cast<std::int32_t>(m.links.size());
    link_base.push_back(base);
    for (const Link& l : node.links) {
      m.links.push_back(Link{prefixed(prefix, l.name), l.kind, l.bytes_per_s, l.latency_s});
      m.links.back().bytes_per_s_by_size = l.bytes_per_s_by_size;
    }
    Host h = node.hosts[0];
    h.name = prefix;
    h.network_out = shift(h.network_out, base);
    h.network_in = shift(h.network_in, base);
    if (nodes > 1 && injection > 0 && oversubscription > 1) {
      // Switched inter-node network: the node's uplink to the network core carries at
      // most its NICs' injection bandwidth divided by the oversubscription. Without
      // oversubscription (a full-bisection fabric) the NIC links are the only limit and
      // no uplink is added: it could never be the bottleneck of any set of transfers.
      h.network_out.push_back(add_link(m, prefix + ".net.out", LinkKind::network, injection / oversubscription, 0));
      h.network_in.push_back(add_link(m, prefix + ".net.in", LinkKind::network, injection / oversubscription, 0));
    }
    m.hosts.push_back(std::move(h));
    for (const Device& d : node.devices) {
      Device c = d;
      c.host = n;
      c.fabric_out = shift(c.fabric_out, base);
      c.fabric_in = shift(c.fabric_in, base);
      c.network_out = shift(c.network_out, base);
      c.network_in = shift(c.network_in, base);
      c.host_out = shift(c.host_out, base);
      c.host_in = shift(c.host_in, base);
      m.devices.push_back(std::move(c));
    }
  }
  const auto per_node = static_cast<std::int32_t>(node.devices.size());
  for (int n = 0; n < nodes; ++n)
    for (const RouteEntry& r : node.routes)
      m.routes.push_back(RouteEntry{DeviceId(r.src.value + per_node * n), DeviceId(r.dst.value + per_node * n),
                                    shift(r.links, link_base[static_cast<std::size_t>(n)])});
  return m;
}

Machine machine_preset(std::string_view name) {
  if (is_topology_preset(name))
    return topology_preset(name, [name](std::string_view inner) { return single_node_preset(inner, name); });
  if (name.starts_with("cluster:")) {
    std::string_view spec = name.substr(8);
    double oversubscription = 1.0;
    if (auto comma = spec.find(','); comma != std::string_view::npos) {
      std::string_view opt = spec.substr(comma + 1);
      spec = spec.substr(0, comma);
      const std::string_view key = "oversubscription=";
      if (!opt.starts_with(key))
        fail("machine preset '", name, "': unknown option '", opt, "' (expected oversubscription=R)");
      std::string v(opt.substr(key.size()));
      char* end = nullptr;
      oversubscription = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(oversubscription >= 1) || !std::isfinite(oversubscription))
        fail("machine preset '", name, "': oversubscription '", v, "' must be a number >= 1");
    }
    auto x = spec.find('x');
    if (x == std::string_view::npos)
      fail("machine preset '", name, "': expected cluster:NODESxPRESET, e.g. cluster:128xh100-sxm-8");
    int nodes = parse_positive(spec.substr(0, x), std::string("machine preset '") + std::string(name) + "': NODES");
    std::string_view inner = spec.substr(x + 1);
    if (inner.starts_with("cluster:")) fail("machine preset '", name, "': a cluster of clusters is not supported");
    return make_cluster(single_node_preset(inner, name), nodes, oversubscription);
  }
  return single_node_preset(name, name);
}

Machine load_machine(const std::string& preset_or_file) {
  std::error_code ec;
  bool looks_like_file = preset_or_file.ends_with(".json") || std::filesystem::is_regular_file(preset_or_file, ec);
  if (looks_like_file) return machine_from_json(read_json_file(preset_or_file), preset_or_file);
  return machine_preset(preset_or_file);
}

// ---- JSON -----------------------------------------------------------------------

namespace {

json link_names(const Machine& m, const std::vector<LinkId>& ls) {
  json a = json::array();
  for (LinkId l : ls) a.push_back(m.link(l).name);
  return a;
}

using json_read::field;
using json_read::integer;
using json_read::number;
using json_read::number_field;
using json_read::number_field_or;

std::string string_field(const json& j, const char* key, const std::string& what) {
  const json& v = field(j, key, what);
  if (!v.is_string()) fail(what, ".", key, ": expected a string, got ", json_read::describe(v));
  return v.get<std::string>();
}

const json& array_field_or_empty(const json& j, const char* key, const std::string& what) {
  static const json empty = json::array();
  if (!j.contains(key)) return empty;
  const json& v = j.at(key);
  if (!v.is_array()) fail(what, ".", key, ": expected an array, got ", json_read::describe(v));
  return v;
}

std::vector<LinkId> links_from(const json& a, const std::map<std::string, std::int32_t>& by_name,
                               const std::string& what) {
  std::vector<LinkId> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::string w = what + "[" + std::to_string(i) + "]";
    if (!a[i].is_string()) fail(w, ": expected a link name, got ", json_read::describe(a[i]));
    auto it = by_name.find(a[i].get<std::string>());
    if (it == by_name.end()) fail(w, ": unknown link '", a[i].get<std::string>(), "'");
    out.emplace_back(it->second);
  }
  return out;
}

}  // namespace

json to_json(const Machine& m) {
  json types = json::array();
  for (const DeviceType& t : m.device_types) {
    json peaks = json::object();
    for (int k = 0; k < kNumDTypes; ++k)
      if (t.peak_flops_per_s[k] > 0) peaks[std::string(to_string(static_cast<DType>(k)))] = t.peak_flops_per_s[k];
    json eff = json::array();
    for (const EfficiencyPoint& p : t.efficiency) eff.push_back({p.flops, p.efficiency});
    types.push_back({{"name", t.name},
                     {"peak_flops_per_s", peaks},
                     {"memory_bytes_per_s", t.memory_bytes_per_s},
                     {"memory_capacity_bytes", t.memory_capacity_bytes},
                     {"launch_latency_s", t.launch_latency_s},
                     {"dispatch_interval_s", t.dispatch_interval_s},
                     {"sm_count", t.sm_count},
                     {"efficiency", eff},
                     {"generic_flops_per_s", t.generic_flops_per_s},
                     {"transcendental_flops_per_s", t.transcendental_flops_per_s},
                     {"cache_capacity_bytes", t.cache_capacity_bytes},
                     {"cache_bytes_per_s", t.cache_bytes_per_s},
                     {"outer_cache_capacity_bytes", t.outer_cache_capacity_bytes},
                     {"outer_cache_bytes_per_s", t.outer_cache_bytes_per_s},
                     {"copy_row_s", t.copy_row_s},
                     {"generic_row_s", t.generic_row_s},
                     {"single_lane", t.single_lane},
                     {"host_copy_lane", t.host_copy_lane}});
  }
  json hosts = json::array();
  for (const Host& h : m.hosts)
    hosts.push_back({{"name", h.name},
                     {"memory_capacity_bytes", h.memory_capacity_bytes},
                     {"network_out", link_names(m, h.network_out)},
                     {"network_in", link_names(m, h.network_in)}});
  json links = json::array();
  for (const Link& l : m.links) {
    links.push_back({{"name", l.name},
                     {"kind", std::string(to_string(l.kind))},
                     {"bytes_per_s", l.bytes_per_s},
                     {"latency_s", l.latency_s}});
    if (!l.bytes_per_s_by_size.empty()) {
      json by_size = json::array();
      for (const SizeRate& r : l.bytes_per_s_by_size) by_size.push_back({{"bytes", r.bytes}, {"bytes_per_s", r.bytes_per_s}});
      links.back()["bytes_per_s_by_size"] = std::move(by_size);
    }
    if (l.from != kNoNode) links.back()["from"] = m.node_name(l.from);
    if (l.to != kNoNode) links.back()["to"] = m.node_name(l.to);
  }
  json devices = json::array();
  for (const Device& d : m.devices) {
    json dj = {{"type", m.device_types.at(d.type).name},
               {"host", d.host},
               {"fabric_out", link_names(m, d.fabric_out)},
               {"fabric_in", link_names(m, d.fabric_in)},
               {"network_out", link_names(m, d.network_out)},
               {"network_in", link_names(m, d.network_in)}};
    if (!d.host_out.empty()) dj["host_out"] = link_names(m, d.host_out);
    if (!d.host_in.empty()) dj["host_in"] = link_names(m, d.host_in);
    if (!d.name.empty()) dj["name"] = d.name;
    if (d.chip >= 0) dj["chip"] = d.chip;
    devices.push_back(std::move(dj));
  }
  json routes = json::array();
  for (const RouteEntry& r : m.routes)
    routes.push_back({{"src", r.src.value}, {"dst", r.dst.value}, {"links", link_names(m, r.links)}});
  const json interference = interference_to_json(m.interference);
  json out = {{"name", m.name},     {"device_types", types}, {"hosts", hosts},
              {"links", links},      {"devices", devices},    {"routes", routes},
              {"interference", interference}, {"barrier_latency_s", m.barrier_latency_s}};
  if (!m.switches.empty()) {
    json sw = json::array();
    for (const Switch& s : m.switches) sw.push_back({{"name", s.name}});
    out["switches"] = sw;
  }
  return out;
}

Machine machine_from_json(const json& j, std::string_view what_sv) {
  const std::string what(what_sv);
  if (!j.is_object()) fail(what, ": expected a machine object, got ", json_read::describe(j));
  Machine m;
  m.name = j.contains("name") ? string_field(j, "name", what) : what;

  const json& types = field(j, "device_types", what);
  if (!types.is_array()) fail(what, ".device_types: expected an array");
  std::map<std::string, std::int32_t> type_by_name;
  for (std::size_t i = 0; i < types.size(); ++i) {
    const json& tj = types[i];
    std::string w = what + ".device_types[" + std::to_string(i) + "]";
    DeviceType t;
    t.name = string_field(tj, "name", w);
    const json& peaks = field(tj, "peak_flops_per_s", w);
    if (!peaks.is_object()) fail(w, ".peak_flops_per_s: expected an object {\"f32\": flop/s, ...}");
    for (const auto& [key, v] : peaks.items()) {
      DType dt = parse_dtype(key, w + ".peak_flops_per_s");
      t.peak_flops_per_s[static_cast<int>(dt)] = number(v, w + ".peak_flops_per_s." + key);
    }
    t.memory_bytes_per_s = number_field(tj, "memory_bytes_per_s", w);
    double cap = number_field(tj, "memory_capacity_bytes", w);
    if (!(cap > 0 && cap < 9.2e18)) fail(w, ".memory_capacity_bytes: must be > 0, got ", json_read::describe(field(tj, "memory_capacity_bytes", w)));
    t.memory_capacity_bytes = static_cast<std::int64_t>(cap);
    t.launch_latency_s = number_field_or(tj, "launch_latency_s", w, 0.0);
    t.dispatch_interval_s = number_field_or(tj, "dispatch_interval_s", w, 0.0);
    if (tj.contains("sm_count")) t.sm_count = static_cast<int>(integer(tj.at("sm_count"), w + ".sm_count"));
    t.generic_flops_per_s = number_field_or(tj, "generic_flops_per_s", w, 0.0);
    t.transcendental_flops_per_s = number_field_or(tj, "transcendental_flops_per_s", w, 0.0);
    t.cache_bytes_per_s = number_field_or(tj, "cache_bytes_per_s", w, 0.0);
    // Byte counts: finite, and within an int64 before the conversion.
    auto bytes_field = [&](const char* key) {
      const double v = number_field_or(tj, key, w, 0.0);
      if (!(v >= 0 && v < 9.2e18)) fail(w, ".", key, ": must be a number of bytes >= 0, got ", json_read::describe(tj.at(key)));
      return static_cast<std::int64_t>(v);
    };
    t.cache_capacity_bytes = bytes_field("cache_capacity_bytes");
    t.outer_cache_bytes_per_s = number_field_or(tj, "outer_cache_bytes_per_s", w, 0.0);
    t.outer_cache_capacity_bytes = bytes_field("outer_cache_capacity_bytes");
    t.copy_row_s = number_field_or(tj, "copy_row_s", w, 0.0);
    t.generic_row_s = number_field_or(tj, "generic_row_s", w, 0.0);
    if (tj.contains("single_lane")) {
      if (!tj.at("single_lane").is_boolean()) fail(w, ".single_lane: expected true or false, got ", json_read::describe(tj.at("single_lane")));
      t.single_lane = tj.at("single_lane").get<bool>();
    }
    if (tj.contains("host_copy_lane")) {
      if (!tj.at("host_copy_lane").is_boolean())
        fail(w, ".host_copy_lane: expected true or false, got ", json_read::describe(tj.at("host_copy_lane")));
      t.host_copy_lane = tj.at("host_copy_lane").get<bool>();
    }
    const json& eff = array_field_or_empty(tj, "efficiency", w);
    for (std::size_t p = 0; p < eff.size(); ++p) {
      std::string we = w + ".efficiency[" + std::to_string(p) + "]";
      if (!eff[p].is_array() || eff[p].size() != 2) fail(we, ": expected [flops, efficiency], got ", json_read::describe(eff[p]));
      t.efficiency.push_back({number(eff[p][0], we + "[0]"), number(eff[p][1], we + "[1]")});
    }
    if (!type_by_name.emplace(t.name, static_cast<std::int32_t>(i)).second)
      fail(w, ".name: '", t.name, "' is used by another device type");
    m.device_types.push_back(std::move(t));
  }

  const json& links = array_field_or_empty(j, "links", what);
  std::map<std::string, std::int32_t> link_by_name;
  std::vector<std::pair<std::string, std::string>> link_ends(links.size());  // node names, resolved below
  for (std::size_t i = 0; i < links.size(); ++i) {
    const json& lj = links[i];
    std::string w = what + ".links[" + std::to_string(i) + "]";
    Link l;
    l.name = string_field(lj, "name", w);
    l.kind = lj.contains("kind") ? parse_link_kind(string_field(lj, "kind", w), w + ".kind") : LinkKind::custom;
    l.bytes_per_s = number_field(lj, "bytes_per_s", w);
    l.latency_s = number_field_or(lj, "latency_s", w, 0.0);
    const json& by_size = array_field_or_empty(lj, "bytes_per_s_by_size", w);
    for (std::size_t p = 0; p < by_size.size(); ++p) {
      const std::string wp = w + ".bytes_per_s_by_size[" + std::to_string(p) + "]";
      if (!by_size[p].is_object())
        fail(wp, ": expected {\"bytes\": ..., \"bytes_per_s\": ...}, got ", json_read::describe(by_size[p]));
      l.bytes_per_s_by_size.push_back({number_field(by_size[p], "bytes", wp), number_field(by_size[p], "bytes_per_s", wp)});
    }
    if (lj.contains("from")) link_ends[i].first = string_field(lj, "from", w);
    if (lj.contains("to")) link_ends[i].second = string_field(lj, "to", w);
    if (!link_by_name.emplace(l.name, static_cast<std::int32_t>(i)).second)
      fail(w, ".name: '", l.name, "' is used by another link");
    m.links.push_back(std::move(l));
  }

  if (j.contains("hosts")) {
    const json& hosts = j.at("hosts");
    if (!hosts.is_array()) fail(what, ".hosts: expected an array");
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const json& hj = hosts[i];
      std::string w = what + ".hosts[" + std::to_string(i) + "]";
      if (!hj.is_object()) fail(w, ": expected an object, got ", json_read::describe(hj));
      Host h;
      h.name = hj.contains("name") ? string_field(hj, "name", w) : "host" + std::to_string(i);
      h.memory_capacity_bytes = hj.contains("memory_capacity_bytes")
                                    ? integer(hj.at("memory_capacity_bytes"), w + ".memory_capacity_bytes")
                                    : 0;
      h.network_out = links_from(array_field_or_empty(hj, "network_out", w), link_by_name, w + ".network_out");
      h.network_in = links_from(array_field_or_empty(hj, "network_in", w), link_by_name, w + ".network_in");
      m.hosts.push_back(std::move(h));
    }
  } else {
    m.hosts.push_back(Host{"host0", 0, {}, {}});
  }

  const json& devices = field(j, "devices", what);
  if (!devices.is_array()) fail(what, ".devices: expected an array");
  if (devices.size() > static_cast<std::size_t>(kMaxDevices))
    fail(what, ".devices: ", devices.size(), " devices exceed the maximum of ", kMaxDevices);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const json& dj = devices[i];
    std::string w = what + ".devices[" + std::to_string(i) + "]";
    Device d;
    if (dj.contains("name")) d.name = string_field(dj, "name", w);
    std::string type = string_field(dj, "type", w);
    auto it = type_by_name.find(type);
    if (it == type_by_name.end()) fail(w, ".type: unknown device type '", type, "'");
    d.type = it->second;
    d.host = dj.contains("host") ? json_read::index(dj.at("host"), w + ".host") : 0;
    d.chip = dj.contains("chip") ? json_read::index(dj.at("chip"), w + ".chip") : -1;
    d.fabric_out = links_from(array_field_or_empty(dj, "fabric_out", w), link_by_name, w + ".fabric_out");
    d.fabric_in = links_from(array_field_or_empty(dj, "fabric_in", w), link_by_name, w + ".fabric_in");
    d.network_out = links_from(array_field_or_empty(dj, "network_out", w), link_by_name, w + ".network_out");
    d.network_in = links_from(array_field_or_empty(dj, "network_in", w), link_by_name, w + ".network_in");
    d.host_out = links_from(array_field_or_empty(dj, "host_out", w), link_by_name, w + ".host_out");
    d.host_in = links_from(array_field_or_empty(dj, "host_in", w), link_by_name, w + ".host_in");
    m.devices.push_back(std::move(d));
  }

  const json& switches = array_field_or_empty(j, "switches", what);
  for (std::size_t i = 0; i < switches.size(); ++i) {
    const std::string w = what + ".switches[" + std::to_string(i) + "]";
    if (!switches[i].is_object()) fail(w, ": expected an object {\"name\": ...}, got ", json_read::describe(switches[i]));
    m.switches.push_back(Switch{string_field(switches[i], "name", w)});
  }
  // Link ends by node name: devices (their name, or d<index>) and switches.
  std::map<std::string, std::int32_t> node_by_name;
  for (std::int32_t n = 0; n < m.num_nodes(); ++n) node_by_name.emplace(m.node_name(n), n);
  for (std::size_t i = 0; i < link_ends.size(); ++i)
    for (const auto& [key, name] : {std::pair{"from", link_ends[i].first}, std::pair{"to", link_ends[i].second}}) {
      if (!links[i].contains(key)) continue;
      auto it = node_by_name.find(name);
      if (it == node_by_name.end())
        fail(what, ".links[", i, "].", key, ": unknown node '", name, "' (not the name of a device or a switch)");
      (key == std::string_view("from") ? m.links[i].from : m.links[i].to) = it->second;
    }

  const json& routes = array_field_or_empty(j, "routes", what);
  for (std::size_t i = 0; i < routes.size(); ++i) {
    const json& rj = routes[i];
    std::string w = what + ".routes[" + std::to_string(i) + "]";
    RouteEntry r;
    r.src = DeviceId(json_read::index(field(rj, "src", w), w + ".src"));
    r.dst = DeviceId(json_read::index(field(rj, "dst", w), w + ".dst"));
    const json& ls = field(rj, "links", w);
    if (!ls.is_array()) fail(w, ".links: expected an array of link names");
    r.links = links_from(ls, link_by_name, w + ".links");
    m.routes.push_back(std::move(r));
  }

  if (j.contains("interference")) interference_from_json(j.at("interference"), what + ".interference", m.interference);
  m.barrier_latency_s = number_field_or(j, "barrier_latency_s", what, 0.0);
  m.validate(what);
  return m;
}

}  // namespace tessel

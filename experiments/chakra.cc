#include "experiments/chakra.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/io.h"
#include "sim/compute_model.h"

#if TESSEL_HAVE_CHAKRA
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "et_def.pb.h"
#endif

namespace tessel::experiments {

const ChakraAttr* ChakraNode::attr(const std::string& n) const {
  for (const auto& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

#if TESSEL_HAVE_CHAKRA

bool chakra_available() { return true; }

namespace {

namespace pb = ChakraProtoMsg;

void add_int64(pb::Node& n, const char* name, std::int64_t v) {
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(v);
}

void append_delimited(std::string& out, const google::protobuf::MessageLite& m) {
  google::protobuf::io::StringOutputStream zs(&out);
  google::protobuf::io::CodedOutputStream cs(&zs);
  cs.WriteVarint32(static_cast<std::uint32_t>(m.ByteSizeLong()));
  m.SerializeWithCachedSizes(&cs);
}

// Chakra's CollectiveCommType (et_def.proto), as ASTRA-sim's feeder reads comm_type: int64.
std::int64_t collective_comm_type(Collective c) {
  switch (c) {
    case Collective::allreduce: return pb::ALL_REDUCE;
    case Collective::reducescatter: return pb::REDUCE_SCATTER;
    case Collective::allgather: return pb::ALL_GATHER;
    case Collective::alltoall: return pb::ALL_TO_ALL;
  }
  return pb::ALL_REDUCE;
}

std::string node_name(const Task& t, TaskId id, const Graph& g) {
  std::string s = std::string(to_string(t.kind)) + "_" + std::to_string(id.value);
  if (t.node.valid() && t.node.index() < g.size()) s += "_" + g.node(t.node).name;
  return s;
}

}  // namespace

std::vector<std::string> write_chakra(const TaskGraph& tg, const Graph& g, const Machine& machine,
                                      const std::string& dir) {
  OutputBatch out;
  out.add_folder("chakra trace folder", dir);
  std::vector<std::string> files = stage_chakra(tg, g, machine, dir, out);
  out.commit();
  return files;
}

std::vector<std::string> stage_chakra(const TaskGraph& tg, const Graph& g, const Machine& machine,
                                      const std::string& dir, OutputBatch& out) {
  if (tg.num_devices > machine.num_devices())
    fail("--chakra: the task graph uses ", tg.num_devices, " devices but machine '", machine.name, "' has ",
         machine.num_devices());
  const auto nd = static_cast<std::size_t>(tg.num_devices);
  std::vector<std::vector<pb::Node>> nodes(nd);
  auto dep_here = [&](TaskId dep, std::size_t device, const Task& of, TaskId of_id) -> bool {
    const Task& d = tg.task(dep);
    if (d.kind == TaskKind::input) return false;  // resident from the start
    bool here = d.kind == TaskKind::move ? static_cast<std::size_t>(d.dst_device.value) == device
                                         : static_cast<std::size_t>(d.device.value) == device;
    if (d.kind == TaskKind::collective)  // its node on this device's rank
      for (DeviceId r : tg.collectives[static_cast<std::size_t>(d.block)].devices)
        here = here || static_cast<std::size_t>(r.value) == device;
    if (!here)
      fail("--chakra: task ", of_id.value, " (", to_string(of.kind), " of node '",
           of.node.valid() && of.node.index() < g.size() ? g.node(of.node).name : std::string("?"), "') on device ",
           device, " depends on task ", dep.value, " on another device without a move; Chakra's per-rank traces "
           "cannot express that");
    return true;
  };
  for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
    const Task& t = tg.tasks[i];
    const TaskId id{static_cast<std::int32_t>(i)};
    if (t.kind == TaskKind::input || t.kind == TaskKind::output) continue;
    const auto dev = static_cast<std::size_t>(t.device.value);
    if (t.kind == TaskKind::collective) {  // one COMM_COLL_NODE per rank, data deps on its own input's writers
      const CollectiveSpec& s = tg.collectives[static_cast<std::size_t>(t.block)];
      if (!s.lowered()) fail("--chakra: task ", i, " is a collective node that is not lowered");
      for (std::size_t r = 0; r < s.devices.size(); ++r) {
        const auto rd = static_cast<std::size_t>(s.devices[r].value);
        pb::Node n;
        n.set_id(i);
        n.set_name(node_name(t, id, g) + "_rank" + std::to_string(r));
        n.set_type(pb::COMM_COLL_NODE);
        for (TaskId d : t.deps) {
          const Task& dt = tg.task(d);
          const auto at = static_cast<std::size_t>((dt.kind == TaskKind::move ? dt.dst_device : dt.device).value);
          if (at == rd && dt.kind != TaskKind::input) n.add_data_deps(static_cast<std::uint64_t>(d.value));
        }
        add_int64(n, "comm_type", collective_comm_type(s.collective));
        add_int64(n, "comm_size", s.bytes);
        nodes[rd].push_back(std::move(n));
      }
      continue;
    }
    if (t.kind == TaskKind::compute || t.kind == TaskKind::touch) {
      pb::Node n;
      n.set_id(i);
      n.set_name(node_name(t, id, g));
      n.set_type(pb::COMP_NODE);
      for (TaskId d : t.deps)
        if (dep_here(d, dev, t, id)) n.add_data_deps(static_cast<std::uint64_t>(d.value));
      const double s = sim::compute_seconds(t, tg, machine.type_of(t.device));
      n.set_duration_micros(static_cast<std::uint64_t>(std::llround(s * 1e6)));
      add_int64(n, "num_ops", static_cast<std::int64_t>(std::llround(t.flops)));
      add_int64(n, "tensor_size", t.bytes);
      pb::AttributeProto* cpu = n.add_attr();
      cpu->set_name("is_cpu_op");
      cpu->set_bool_val(false);
      nodes[dev].push_back(std::move(n));
      continue;
    }
    // A move: a send on the source, a receive on the destination.
    const auto dst = static_cast<std::size_t>(t.dst_device.value);
    pb::Node send, recv;
    for (pb::Node* n : {&send, &recv}) {
      n->set_id(i);
      add_int64(*n, "comm_src", t.device.value);
      add_int64(*n, "comm_dst", t.dst_device.value);
      add_int64(*n, "comm_tag", static_cast<std::int64_t>(i));
      add_int64(*n, "comm_size", t.bytes);
    }
    send.set_name(node_name(t, id, g) + "_send");
    send.set_type(pb::COMM_SEND_NODE);
    for (TaskId d : t.deps)
      if (dep_here(d, dev, t, id)) send.add_data_deps(static_cast<std::uint64_t>(d.value));
    recv.set_name(node_name(t, id, g) + "_recv");
    recv.set_type(pb::COMM_RECV_NODE);
    nodes[dev].push_back(std::move(send));
    nodes[dst].push_back(std::move(recv));
  }
  // Serialise every file before writing any, and write each whole or not at all.
  std::vector<std::string> contents(nd);
  for (std::size_t d = 0; d < nd; ++d) {
    pb::GlobalMetadata meta;
    meta.set_version("0.0.4");
    pb::AttributeProto* a = meta.add_attr();
    a->set_name("producer");
    a->set_string_val("tessel");
    append_delimited(contents[d], meta);
    for (const pb::Node& n : nodes[d]) append_delimited(contents[d], n);
  }
  std::vector<std::string> written;
  for (std::size_t d = 0; d < nd; ++d) {
    std::string path = (std::filesystem::path(dir) / ("tessel." + std::to_string(d) + ".et")).string();
    out.stage(path, contents[d]);
    written.push_back(path);
  }
  return written;
}

ChakraTrace read_chakra(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  google::protobuf::io::ArrayInputStream zs(data.data(), static_cast<int>(data.size()));
  google::protobuf::io::CodedInputStream cs(&zs);
  auto read_one = [&](google::protobuf::MessageLite& m) {
    std::uint32_t size = 0;
    if (!cs.ReadVarint32(&size)) return false;
    auto limit = cs.PushLimit(static_cast<int>(size));
    if (!m.ParseFromCodedStream(&cs) || !cs.ConsumedEntireMessage()) fail("'", path, "': a malformed message");
    cs.PopLimit(limit);
    return true;
  };
  ChakraTrace out;
  pb::GlobalMetadata meta;
  if (!read_one(meta)) fail("'", path, "': no GlobalMetadata");
  out.version = meta.version();
  pb::Node n;
  while (read_one(n)) {
    ChakraNode c;
    c.id = n.id();
    c.name = n.name();
    c.type = static_cast<int>(n.type());
    c.data_deps.assign(n.data_deps().begin(), n.data_deps().end());
    c.duration_micros = n.duration_micros();
    for (const auto& a : n.attr()) {
      ChakraAttr ca;
      ca.name = a.name();
      switch (a.value_case()) {
        case pb::AttributeProto::kInt64Val: ca.kind = ChakraAttr::Kind::int64; ca.int_value = a.int64_val(); break;
        case pb::AttributeProto::kUint64Val:
          ca.kind = ChakraAttr::Kind::uint64;
          ca.int_value = static_cast<std::int64_t>(a.uint64_val());
          break;
        case pb::AttributeProto::kBoolVal: ca.kind = ChakraAttr::Kind::boolean; ca.int_value = a.bool_val(); break;
        case pb::AttributeProto::kStringVal:
          ca.kind = ChakraAttr::Kind::string;
          ca.string_value = a.string_val();
          break;
        default: break;
      }
      c.attrs.push_back(std::move(ca));
    }
    out.nodes.push_back(std::move(c));
    n.Clear();
  }
  return out;
}

#else  // no protobuf in this build

bool chakra_available() { return false; }

std::vector<std::string> write_chakra(const TaskGraph&, const Graph&, const Machine&, const std::string&) {
  fail("--chakra: this build has no protobuf (install libprotobuf-dev and protobuf-compiler, "
       "scripts/install-deps.sh does, and configure again)");
}

std::vector<std::string> stage_chakra(const TaskGraph& tg, const Graph& g, const Machine& m, const std::string& dir,
                                      OutputBatch&) {
  return write_chakra(tg, g, m, dir);
}

ChakraTrace read_chakra(const std::string&) { fail("this build has no protobuf"); }

#endif

}  // namespace tessel::experiments

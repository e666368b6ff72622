#include "core/io.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"

namespace tessel {

using nlohmann::json;

namespace {

json number_json(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double number_from(const json& j, const std::string& what) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  fail(what, ": expected a number (or \"inf\" / \"-inf\"), got ", json_read::describe(j));
}

int int_from(const json& v, const std::string& what) {
  const std::int64_t x = json_read::integer(v, what);
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
    fail(what, ": ", x, " is outside the range of a 32-bit integer");
  return static_cast<int>(x);
}

// j[key] as T (std::string, int, std::vector<int>, std::vector<std::vector<std::int64_t>>);
// Error naming the field on a missing field, a wrong type or an integer out of range.
template <class T>
T get_field(const json& j, const char* key, const std::string& what) {
  if (!j.is_object()) fail(what, ": expected an object, got ", json_read::describe(j));
  if (!j.contains(key)) fail(what, ": missing field \"", key, "\"");
  const json& v = j.at(key);
  const std::string w = what + ": " + key;
  if constexpr (std::is_same_v<T, std::string>) {
    return json_read::string(v, w);
  } else if constexpr (std::is_same_v<T, int>) {
    return int_from(v, w);
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    if (!v.is_array()) fail(w, ": expected an array of integers, got ", json_read::describe(v));
    T out;
    for (const json& e : v) out.push_back(int_from(e, w));
    return out;
  } else {
    static_assert(std::is_same_v<T, std::vector<std::vector<std::int64_t>>>);
    if (!v.is_array()) fail(w, ": expected an array of arrays of integers, got ", json_read::describe(v));
    T out;
    for (const json& row : v) {
      if (!row.is_array()) fail(w, ": expected an array of integers, got ", json_read::describe(row));
      auto& r = out.emplace_back();
      for (const json& e : row) r.push_back(json_read::integer(e, w));
    }
    return out;
  }
}

Shape shape_from(const json& j, const std::string& what) {
  if (!j.is_array()) fail(what, ": expected an array of sizes, got ", json_read::describe(j));
  Shape s;
  for (const auto& v : j) {
    if (!v.is_number_integer()) fail(what, ": expected integer sizes, got ", json_read::describe(j));
    s.push_back(v.get<std::int64_t>());
  }
  return s;
}

}  // namespace

json to_json(const Graph& g) {
  json nodes = json::array();
  for (const Node& n : g.nodes()) {
    json o = {{"name", n.name}, {"kind", std::string(to_string(n.kind))}};
    json inputs = json::array();
    for (NodeId in : n.inputs) inputs.push_back(g.node(in).name);
    if (!n.inputs.empty()) o["inputs"] = inputs;
    o["dtype"] = std::string(to_string(n.dtype));
    switch (n.kind) {
      case NodeKind::input: {
        o["shape"] = n.shape;
        if (n.role != InputRole::unspecified) o["role"] = std::string(to_string(n.role));
        json roles = json::object();
        if (n.index_roles.batch >= 0) roles["batch"] = n.index_roles.batch;
        if (n.index_roles.sequence >= 0) roles["sequence"] = n.index_roles.sequence;
        if (n.index_roles.heads >= 0) roles["heads"] = n.index_roles.heads;
        if (!roles.empty()) o["index_roles"] = roles;
        break;
      }
      case NodeKind::output: break;
      case NodeKind::einsum:
        o["einsum"] = n.einsum.subscripts();
        o["join"] = n.einsum.join.to_string();
        o["agg"] = std::string(to_string(n.einsum.agg));
        break;
      case NodeKind::select: {
        o["shape"] = n.shape;
        json pieces = json::array();
        for (const auto& p : n.pieces)
          pieces.push_back({{"input", p.input}, {"src_offset", p.src_offset}, {"dst_offset", p.dst_offset},
                            {"size", p.size}});
        o["pieces"] = pieces;
        break;
      }
      case NodeKind::fill:
        o["shape"] = n.shape;
        o["fill"] = n.fill.kind == Fill::Kind::constant ? "constant" : "lower_triangular";
        o["value"] = number_json(n.fill.value);
        if (n.fill.kind == Fill::Kind::lower_triangular) o["value_off"] = number_json(n.fill.value_off);
        break;
    }
    nodes.push_back(std::move(o));
  }
  return {{"nodes", nodes}};
}

Graph graph_from_json(const json& j, std::string_view what_in) {
  std::string what(what_in);
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array())
    fail(what, ": expected an object with a \"nodes\" array");
  DType default_dtype = DType::f32;
  if (j.contains("dtype")) default_dtype = parse_dtype(get_field<std::string>(j, "dtype", what), what + ": dtype");
  Graph g;
  for (std::size_t i = 0; i < j["nodes"].size(); ++i) {
    const json& o = j["nodes"][i];
    std::string where = what + ": node " + std::to_string(i);
    Node n;
    n.name = get_field<std::string>(o, "name", where);
    where += " ('" + n.name + "')";
    std::string kind = get_field<std::string>(o, "kind", where);
    n.dtype = o.contains("dtype") ? parse_dtype(get_field<std::string>(o, "dtype", where), where) : default_dtype;
    if (o.contains("inputs")) {
      for (const auto& in : o["inputs"]) {
        if (!in.is_string()) fail(where, ": inputs must be node names, got ", json_read::describe(in));
        auto id = g.find(in.get<std::string>());
        if (!id) fail(where, ": input '", in.get<std::string>(), "' is not an earlier node");
        n.inputs.push_back(*id);
      }
    }
    if (kind == "input") {
      n.kind = NodeKind::input;
      n.shape = shape_from(o.value("shape", json()), where + ": shape");
      if (o.contains("role")) {
        std::string r = json_read::string(o["role"], where + ": role");
        if (r == "data") {
          n.role = InputRole::data;
        } else if (r == "weight") {
          n.role = InputRole::weight;
        } else {
          fail(where, ": unknown role '", r, "' (expected data or weight)");
        }
      }
      if (o.contains("index_roles")) {
        const json& ir = o["index_roles"];
        if (!ir.is_object()) fail(where, ": index_roles must be an object such as {\"batch\": 0}");
        for (const auto& [key, value] : ir.items()) {
          int dim = get_field<int>(ir, key.c_str(), where + ": index_roles");
          if (key == "batch") {
            n.index_roles.batch = dim;
          } else if (key == "sequence") {
            n.index_roles.sequence = dim;
          } else if (key == "heads") {
            n.index_roles.heads = dim;
          } else {
            fail(where, ": index_roles: unknown role '", key, "' (expected batch, sequence or heads)");
          }
          if (dim < 0) fail(where, ": index_roles: ", key, " must name an index >= 0, got ", dim);
        }
      }
    } else if (kind == "output") {
      n.kind = NodeKind::output;
      if (n.inputs.size() != 1) fail(where, ": an output takes exactly one input");
      n.shape = g.node(n.inputs[0]).shape;
    } else if (kind == "einsum") {
      n.kind = NodeKind::einsum;
      std::vector<Shape> shapes;
      for (NodeId in : n.inputs) shapes.push_back(g.node(in).shape);
      std::optional<ScalarOp> join;
      std::optional<Agg> agg;
      try {
        if (o.contains("join")) join = ScalarOp::parse(get_field<std::string>(o, "join", where));
        if (o.contains("agg")) agg = parse_agg(get_field<std::string>(o, "agg", where), where + ": agg");
        n.einsum = Einsum::from_subscripts(get_field<std::string>(o, "einsum", where), shapes, join, agg, n.dtype);
      } catch (const Error& e) {
        if (std::string(e.what()).rfind(where, 0) == 0) throw;
        fail(where, ": ", e.what());
      }
      n.shape = n.einsum.out_shape();
    } else if (kind == "select") {
      n.kind = NodeKind::select;
      n.shape = shape_from(o.value("shape", json()), where + ": shape");
      if (!o.contains("pieces") || !o["pieces"].is_array()) fail(where, ": missing \"pieces\" array");
      for (const auto& p : o["pieces"]) {
        SelectPiece pc;
        pc.input = get_field<int>(p, "input", where + ": piece");
        pc.src_offset = shape_from(p.value("src_offset", json()), where + ": piece src_offset");
        pc.dst_offset = shape_from(p.value("dst_offset", json()), where + ": piece dst_offset");
        pc.size = shape_from(p.value("size", json()), where + ": piece size");
        n.pieces.push_back(std::move(pc));
      }
    } else if (kind == "fill") {
      n.kind = NodeKind::fill;
      n.shape = shape_from(o.value("shape", json()), where + ": shape");
      std::string fk = o.contains("fill") ? json_read::string(o["fill"], where + ": fill") : "constant";
      if (fk == "constant") {
        n.fill.kind = Fill::Kind::constant;
      } else if (fk == "lower_triangular") {
        n.fill.kind = Fill::Kind::lower_triangular;
      } else {
        fail(where, ": unknown fill '", fk, "' (expected constant or lower_triangular)");
      }
      n.fill.value = o.contains("value") ? number_from(o["value"], where + ": value") : 0.0;
      n.fill.value_off = o.contains("value_off") ? number_from(o["value_off"], where + ": value_off") : 0.0;
    } else {
      fail(where, ": unknown kind '", kind, "' (expected input, einsum, output, select or fill)");
    }
    try {
      g.add(std::move(n));
    } catch (const Error& e) {
      if (std::string(e.what()).rfind(what, 0) == 0) throw;
      fail(what, ": ", e.what());
    }
  }
  return g;
}

json to_json(const Decomposition& d, const Graph& g) {
  json nodes = json::array();
  for (NodeId id : g.ids()) {
    const NodePlan& p = d.plan(id);
    json o = {{"name", g.node(id).name}};
    if (p.partition.is_even()) {
      o["parts"] = p.partition.parts();
    } else {
      o["bounds"] = p.partition.bounds();
    }
    json devs = json::array();
    for (DeviceId dv : p.devices) devs.push_back(dv.value);
    o["devices"] = devs;
    if (p.output) {
      if (p.output->is_even()) {
        o["output_parts"] = p.output->parts();
      } else {
        o["output_bounds"] = p.output->bounds();
      }
    }
    if (!p.agg_devices.empty()) {
      json a = json::array();
      for (DeviceId dv : p.agg_devices) a.push_back(dv.value);
      o["agg_devices"] = a;
    }
    if (!p.replicas.empty()) {
      json r = json::array();
      for (const auto& block : p.replicas) {
        json devs = json::array();
        for (DeviceId dv : block) devs.push_back(dv.value);
        r.push_back(std::move(devs));
      }
      o["replicas"] = r;
    }
    nodes.push_back(std::move(o));
  }
  return {{"devices", d.num_devices}, {"nodes", nodes}};
}

Decomposition decomposition_from_json(const json& j, const Graph& g, std::string_view what_in) {
  std::string what(what_in);
  if (!j.is_object()) fail(what, ": expected an object with \"devices\" and \"nodes\"");
  int devices = get_field<int>(j, "devices", what);
  if (devices < 1 || devices > kMaxDevices) fail(what, ": \"devices\" must be in [1, ", kMaxDevices, "], got ", devices);
  Decomposition d = decomposition_from_parts(g, devices, {});
  std::vector<bool> seen(g.size(), false);
  if (j.contains("nodes")) {
    if (!j["nodes"].is_array()) fail(what, ": \"nodes\" must be an array");
    for (std::size_t i = 0; i < j["nodes"].size(); ++i) {
      const json& o = j["nodes"][i];
      std::string where = what + ": nodes[" + std::to_string(i) + "]";
      std::string name = get_field<std::string>(o, "name", where);
      auto id = g.find(name);
      if (!id) fail(where, ": the graph has no node named '", name, "'");
      where += " ('" + name + "')";
      if (seen[id->index()]) fail(where, ": node listed twice");
      seen[id->index()] = true;
      NodePlan& plan = d.nodes[id->index()];
      Shape js = g.join_shape(*id);
      try {
        if (o.contains("parts")) {
          plan.partition = Partition::even(js, get_field<std::vector<int>>(o, "parts", where));
        } else if (o.contains("bounds")) {
          plan.partition =
              Partition::from_bounds(get_field<std::vector<std::vector<std::int64_t>>>(o, "bounds", where));
          if (plan.partition.shape() != js)
            fail("bounds cover ", to_string(plan.partition.shape()), " but the join shape is ", to_string(js));
        } else {
          fail("needs \"parts\" or \"bounds\"");
        }
      } catch (const Error& e) {
        if (std::string(e.what()).rfind(where, 0) == 0) throw;
        fail(where, ": ", e.what());
      }
      plan.devices.clear();
      if (o.contains("devices")) {
        for (int v : get_field<std::vector<int>>(o, "devices", where)) plan.devices.emplace_back(v);
      } else {
        for (std::int64_t b = 0; b < plan.partition.num_blocks(); ++b)
          plan.devices.emplace_back(static_cast<std::int32_t>(b % devices));
      }
      plan.output.reset();
      try {
        if (o.contains("output_parts"))
          plan.output = Partition::even(g.node(*id).shape, get_field<std::vector<int>>(o, "output_parts", where));
        else if (o.contains("output_bounds"))
          plan.output =
              Partition::from_bounds(get_field<std::vector<std::vector<std::int64_t>>>(o, "output_bounds", where));
      } catch (const Error& e) {
        if (std::string(e.what()).rfind(where, 0) == 0) throw;
        fail(where, ": output partition: ", e.what());
      }
      plan.agg_devices.clear();
      if (o.contains("agg_devices"))
        for (int v : get_field<std::vector<int>>(o, "agg_devices", where)) plan.agg_devices.emplace_back(v);
      plan.replicas.clear();
      if (o.contains("replicas"))
        for (const auto& block : get_field<std::vector<std::vector<std::int64_t>>>(o, "replicas", where)) {
          plan.replicas.emplace_back();
          for (std::int64_t v : block) {
            if (v < 0 || v >= devices) fail(where, ": replicas: device ", v, " out of range [0, ", devices, ")");
            plan.replicas.back().emplace_back(static_cast<std::int32_t>(v));
          }
        }
    }
  }
  try {
    d.validate(g);
  } catch (const Error& e) {
    fail(what, ": ", e.what());
  }
  return d;
}

json summary_json(const TaskGraph& tg) {
  auto s = tg.summary();
  json counts = json::object();
  for (int k = 0; k < kNumTaskKinds; ++k) {
    const auto kind = static_cast<TaskKind>(k);
    // evict and load only in memory-planned graphs
    if ((kind == TaskKind::evict || kind == TaskKind::load || kind == TaskKind::collective) && s.count[k] == 0) continue;
    counts[std::string(to_string(kind))] = s.count[k];
  }
  json j = {{"devices", tg.num_devices}, {"tasks", s.tasks},        {"by_kind", counts},
            {"edges", s.edges},          {"buffers", tg.buffers.size()}, {"bytes_moved", s.bytes_moved},
            {"bytes_touched", s.bytes_touched}, {"flops", s.flops}};
  if (s.count[static_cast<int>(TaskKind::evict)] + s.count[static_cast<int>(TaskKind::load)] > 0) {
    j["bytes_evicted"] = s.bytes_evicted;
    j["bytes_loaded"] = s.bytes_loaded;
  }
  return j;
}

std::string read_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail(path, ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(path, ": read error");
  return ss.str();
}

json parse_json(std::string_view text, std::string_view what) {
  return json_read::parse(std::string(text), std::string(what));
}

json read_json_file(const std::string& path) {
  return parse_json(read_file(path), path);
}

}  // namespace tessel

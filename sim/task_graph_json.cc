#include "sim/task_graph_json.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "core/checked.h"
#include "core/error.h"
#include "core/json_read.h"

namespace tessel::sim {

using nlohmann::json;

namespace {

json rect_json(const Rect& r) {
  return {{"offset", std::vector<std::int64_t>(r.offset.begin(), r.offset.begin() + r.rank)},
          {"size", std::vector<std::int64_t>(r.size.begin(), r.size.begin() + r.rank)}};
}

using json_read::field;
using json_read::integer;

std::int32_t id_field(const json& j, const char* key, const std::string& what, std::int64_t limit, const char* of) {
  std::int64_t v = integer(field(j, key, what), what + "." + key);
  if (v < 0 || v >= limit) fail(what, ".", key, ": ", of, " ", v, " does not exist (there are ", limit, ")");
  return static_cast<std::int32_t>(v);
}

Rect rect_from(const json& j, const Shape& whole, const std::string& what) {
  if (!j.is_object()) fail(what, ": expected {\"offset\": [...], \"size\": [...]}, got ", json_read::describe(j));
  const json& off = field(j, "offset", what);
  const json& size = field(j, "size", what);
  if (!off.is_array() || !size.is_array() || off.size() != size.size() || off.size() > static_cast<std::size_t>(kMaxRank))
    fail(what, ": offset and size must be arrays of the same length (at most ", kMaxRank, ")");
  Rect r;
  r.rank = static_cast<int>(off.size());
  for (int d = 0; d < r.rank; ++d) {
    r.offset[d] = integer(off[static_cast<std::size_t>(d)], what + ".offset");
    r.size[d] = integer(size[static_cast<std::size_t>(d)], what + ".size");
    if (r.offset[d] < 0 || r.size[d] < 0) fail(what, ": negative offset or size");
  }
  (void)whole;
  return r;
}

// A dependency cycle as "a → b → ... → a" (each task depends on the next); empty if none.
std::string find_cycle(const TaskGraph& tg) {
  const std::size_t n = tg.tasks.size();
  std::vector<char> state(n, 0);  // 0 new, 1 on stack, 2 done
  std::vector<std::pair<std::size_t, std::size_t>> stack;
  std::vector<std::size_t> path;
  for (std::size_t s = 0; s < n; ++s) {
    if (state[s]) continue;
    stack.push_back({s, 0});
    state[s] = 1;
    path.push_back(s);
    while (!stack.empty()) {
      auto& [v, k] = stack.back();
      const auto& deps = tg.tasks[v].deps;
      if (k == deps.size()) {
        state[v] = 2;
        path.pop_back();
        stack.pop_back();
        continue;
      }
      std::size_t w = deps[k++].index();
      if (state[w] == 1) {
        auto it = std::find(path.begin(), path.end(), w);
        std::string out;
        for (auto p = it; p != path.end(); ++p) out += std::to_string(*p) + " → ";
        return out + std::to_string(w);
      }
      if (state[w] == 0) {
        state[w] = 1;
        path.push_back(w);
        stack.push_back({w, 0});
      }
    }
  }
  return {};
}

}  // namespace

json to_json(const TaskGraph& tg) {
  json buffers = json::array();
  for (const Buffer& b : tg.buffers)
    buffers.push_back({{"device", b.device.value},
                       {"shape", b.shape},
                       {"dtype", std::string(to_string(b.dtype))},
                       {"init", std::string(to_string(b.init))},
                       {"node", b.node.value}});
  for (std::size_t b = 0; b < tg.buffers.size(); ++b) {  // memory-planned graphs only
    if (tg.buffers[b].host) buffers[b]["host"] = true;
    if (tg.buffers[b].offset_bytes >= 0) buffers[b]["offset_bytes"] = tg.buffers[b].offset_bytes;
  }
  json tasks = json::array();
  for (const Task& t : tg.tasks) {
    json o = {{"kind", std::string(to_string(t.kind))}, {"device", t.device.value}, {"node", t.node.value}};
    if (t.dst_device != t.device) o["dst_device"] = t.dst_device.value;
    if (t.block >= 0) o["block"] = t.block;
    json reads = json::array();
    for (BufferId b : t.reads) reads.push_back(b.value);
    o["reads"] = reads;
    if (t.writes.valid()) o["writes"] = t.writes.value;
    o["src"] = rect_json(t.src);
    if (t.kind == TaskKind::touch) {
      o["dst"] = rect_json(t.dst);
      o["op"] = t.op == TouchOp::accumulate ? "accumulate" : "copy";
      o["agg"] = std::string(to_string(t.agg));
    }
    o["flops"] = t.flops;
    o["bytes"] = t.bytes;
    json deps = json::array();
    for (TaskId d : t.deps) deps.push_back(d.value);
    o["deps"] = deps;
    tasks.push_back(std::move(o));
  }
  return {{"devices", tg.num_devices}, {"buffers", buffers}, {"tasks", tasks}};
}

TaskGraph task_graph_from_json(const json& j, std::string_view what_sv) {
  const std::string what(what_sv);
  if (!j.is_object()) fail(what, ": expected a task graph object, got ", json_read::describe(j));
  TaskGraph tg;
  std::int64_t devices = integer(field(j, "devices", what), what + ".devices");
  if (devices < 1 || devices > kMaxDevices) fail(what, ".devices: must be in [1, ", kMaxDevices, "], got ", devices);
  tg.num_devices = static_cast<int>(devices);

  const json& buffers = field(j, "buffers", what);
  if (!buffers.is_array()) fail(what, ".buffers: expected an array");
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const json& bj = buffers[i];
    std::string w = what + ".buffers[" + std::to_string(i) + "]";
    if (!bj.is_object()) fail(w, ": expected an object, got ", json_read::describe(bj));
    Buffer b;
    b.device = DeviceId(id_field(bj, "device", w, devices, "device"));
    const json& shape = field(bj, "shape", w);
    if (!shape.is_array() || shape.size() > static_cast<std::size_t>(kMaxRank))
      fail(w, ".shape: expected an array of at most ", kMaxRank, " sizes");
    for (const json& s : shape) {
      std::int64_t v = integer(s, w + ".shape");
      if (v < 0) fail(w, ".shape: negative size ", v);
      b.shape.push_back(v);
    }
    if (bj.contains("dtype")) b.dtype = parse_dtype(json_read::string(bj.at("dtype"), w + ".dtype"), w + ".dtype");
    if (bj.contains("init")) b.init = parse_agg(json_read::string(bj.at("init"), w + ".init"), w + ".init");
    try {
      (void)checked_mul(elements(b.shape), dtype_bytes(b.dtype), "bytes");
    } catch (const Error& e) {
      fail(w, ".shape: ", e.what());
    }
    b.node = NodeId(bj.contains("node") ? json_read::index(bj.at("node"), w + ".node") : 0);
    if (bj.contains("host")) {
      if (!bj.at("host").is_boolean()) fail(w, ".host: expected true or false, got ", json_read::describe(bj.at("host")));
      b.host = bj.at("host").get<bool>();
    }
    if (bj.contains("offset_bytes")) {
      b.offset_bytes = integer(bj.at("offset_bytes"), w + ".offset_bytes");
      if (b.offset_bytes < 0) fail(w, ".offset_bytes: must be >= 0");
    }
    tg.buffers.push_back(std::move(b));
  }
  const auto nb = static_cast<std::int64_t>(tg.buffers.size());

  const json& tasks = field(j, "tasks", what);
  if (!tasks.is_array()) fail(what, ".tasks: expected an array");
  const auto nt = static_cast<std::int64_t>(tasks.size());
  std::vector<std::vector<TaskId>> writers(tg.buffers.size());
  std::vector<char> explicit_deps(tasks.size(), 0);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const json& tj = tasks[i];
    std::string w = what + ".tasks[" + std::to_string(i) + "]";
    if (!tj.is_object()) fail(w, ": expected an object, got ", json_read::describe(tj));
    Task t;
    const std::string kind = field(tj, "kind", w).is_string() ? tj.at("kind").get<std::string>() : "";
    if (kind == "input") t.kind = TaskKind::input;
    else if (kind == "compute") t.kind = TaskKind::compute;
    else if (kind == "touch") t.kind = TaskKind::touch;
    else if (kind == "move") t.kind = TaskKind::move;
    else if (kind == "output") t.kind = TaskKind::output;
    else if (kind == "evict") t.kind = TaskKind::evict;
    else if (kind == "load") t.kind = TaskKind::load;
    else fail(w, ".kind: expected input, compute, touch, move, output, evict or load, got ", json_read::describe(tj.at("kind")));
    t.device = DeviceId(id_field(tj, "device", w, devices, "device"));
    t.dst_device = tj.contains("dst_device") ? DeviceId(id_field(tj, "dst_device", w, devices, "device")) : t.device;
    if (t.kind == TaskKind::move && !tj.contains("dst_device")) fail(w, ": a move needs \"dst_device\"");
    t.node = NodeId(tj.contains("node") ? json_read::index(tj.at("node"), w + ".node") : 0);
    if (t.node.value < 0) fail(w, ".node: must be >= 0");
    if (tj.contains("block")) t.block = integer(tj.at("block"), w + ".block");
    if (tj.contains("reads")) {
      const json& reads = tj.at("reads");
      if (!reads.is_array()) fail(w, ".reads: expected an array of buffer ids");
      for (std::size_t r = 0; r < reads.size(); ++r) {
        std::int64_t b = integer(reads[r], w + ".reads");
        if (b < 0 || b >= nb) fail(w, ".reads[", r, "]: buffer ", b, " does not exist (there are ", nb, ")");
        t.reads.emplace_back(static_cast<std::int32_t>(b));
      }
    }
    if (tj.contains("writes")) t.writes = BufferId(id_field(tj, "writes", w, nb, "buffer"));
    if (t.kind != TaskKind::output && !t.writes.valid()) fail(w, ": missing field \"writes\"");
    if (t.kind == TaskKind::output && t.reads.size() != 1) fail(w, ".reads: an output reads exactly one buffer");
    if ((t.kind == TaskKind::move || t.kind == TaskKind::touch || t.kind == TaskKind::evict ||
         t.kind == TaskKind::load) && t.reads.size() != 1)
      fail(w, ".reads: a ", kind, " reads exactly one buffer");
    if (t.kind == TaskKind::evict || t.kind == TaskKind::load) {
      const Buffer& from = tg.buffer(t.reads[0]);
      const Buffer& to = tg.buffer(t.writes);
      const bool to_host = t.kind == TaskKind::evict;
      if (from.host == to_host || to.host != to_host || from.device != t.device || to.device != t.device ||
          from.shape != to.shape)
        fail(w, ": ", to_host ? "an evict copies a device buffer to a host buffer" : "a load copies a host buffer to a device buffer",
             " of the same shape, both of its device");
    }
    if (t.kind != TaskKind::evict && t.kind != TaskKind::load && t.kind != TaskKind::input)
      for (BufferId b : t.reads)
        if (tg.buffer(b).host) fail(w, ".reads: buffer ", b.value, " is a host buffer; only a load reads one");
    if (t.kind == TaskKind::touch && tg.buffer(t.reads[0]).device != t.device)
      fail(w, ": a touch reads a buffer on its own device (buffer ", t.reads[0].value, " is on device ",
           tg.buffer(t.reads[0]).device.value, ")");
    if (t.writes.valid()) {
      DeviceId where = t.kind == TaskKind::move ? t.dst_device : t.device;
      if (tg.buffer(t.writes).device != where)
        fail(w, ".writes: buffer ", t.writes.value, " lives on device ", tg.buffer(t.writes).device.value,
             ", not on device ", where.value, " where the task writes");
    }
    const Buffer& shape_of = t.writes.valid() ? tg.buffer(t.writes) : tg.buffer(t.reads[0]);
    const Buffer& src_of = t.reads.empty() ? shape_of : tg.buffer(t.reads[0]);
    t.src = tj.contains("src") ? rect_from(tj.at("src"), src_of.shape, w + ".src") : Rect::whole(src_of.shape);
    t.dst = tj.contains("dst") ? rect_from(tj.at("dst"), shape_of.shape, w + ".dst") : Rect::whole(shape_of.shape);
    if (tj.contains("op")) {
      std::string op = tj.at("op").is_string() ? tj.at("op").get<std::string>() : "";
      if (op == "copy") t.op = TouchOp::copy;
      else if (op == "accumulate") t.op = TouchOp::accumulate;
      else fail(w, ".op: expected copy or accumulate, got ", json_read::describe(tj.at("op")));
    }
    if (tj.contains("agg")) t.agg = parse_agg(json_read::string(tj.at("agg"), w + ".agg"), w + ".agg");
    if (tj.contains("flops")) {
      const json& f = tj.at("flops");
      if (!f.is_number() || !(f.get<double>() >= 0) || !std::isfinite(f.get<double>()))
        fail(w, ".flops: expected a finite number >= 0, got ", json_read::describe(f));
      t.flops = f.get<double>();
    }
    t.bytes = tj.contains("bytes") ? integer(tj.at("bytes"), w + ".bytes") : shape_of.bytes();
    if (t.bytes < 0) fail(w, ".bytes: must be >= 0, got ", t.bytes);
    if (tj.contains("deps")) {
      explicit_deps[i] = 1;
      const json& deps = tj.at("deps");
      if (!deps.is_array()) fail(w, ".deps: expected an array of task ids");
      for (std::size_t k = 0; k < deps.size(); ++k) {
        std::int64_t d = integer(deps[k], w + ".deps");
        if (d < 0 || d >= nt) fail(w, ".deps[", k, "]: task ", d, " does not exist (there are ", nt, ")");
        t.deps.emplace_back(static_cast<std::int32_t>(d));
      }
    }
    if (t.writes.valid()) writers[t.writes.index()].emplace_back(static_cast<std::int32_t>(i));
    tg.tasks.push_back(std::move(t));
  }
  for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
    Task& t = tg.tasks[i];
    if (!explicit_deps[i])
      for (BufferId b : t.reads)
        for (TaskId wtask : writers[b.index()])
          if (wtask.index() != i) t.deps.push_back(wtask);
    std::sort(t.deps.begin(), t.deps.end());
    t.deps.erase(std::unique(t.deps.begin(), t.deps.end()), t.deps.end());
  }
  std::string cycle = find_cycle(tg);
  if (!cycle.empty()) fail(what, ": dependency cycle (each task depends on the next): tasks ", cycle);
  for (std::size_t i = 0; i < tg.tasks.size(); ++i)
    for (TaskId d : tg.tasks[i].deps)
      if (d.index() >= i)
        fail(what, ".tasks[", i, "].deps: task ", d.value,
             " comes later in the list; tasks must be listed in topological order");
  tg.validate();
  return tg;
}

}  // namespace tessel::sim

#include "core/timeline.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <queue>
#include <tuple>
#include <utility>
#include <ostream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/graph.h"

namespace tessel {

std::string_view to_string(Lane l) {
  switch (l) {
    case Lane::compute: return "compute";
    case Lane::comm: return "comm";
    case Lane::copy: return "copy";
  }
  return "?";
}

double Timeline::makespan_s() const {
  double m = 0;
  for (const Span& s : spans) m = std::max(m, s.end_s);
  return m;
}

Lane default_lane(TaskKind kind) {
  switch (kind) {
    case TaskKind::move: return Lane::comm;
    case TaskKind::touch:
    case TaskKind::evict:
    case TaskKind::load: return Lane::copy;
    default: return Lane::compute;
  }
}

std::vector<int> trace_tids(const Timeline& tl) {
  const std::size_t n = tl.spans.size();
  std::vector<int> tids(n, 0);
  // Spans grouped by (device, lane), each group in start order (ties: end, task, index).
  std::vector<std::uint32_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
  auto key = [&](std::uint32_t i) {
    const Span& s = tl.spans[i];
    return std::tuple(s.device.value, static_cast<int>(s.lane), s.start_s, s.end_s, s.task.value, i);
  };
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
  // Per group: tracks in use as a min-heap of (end, track), free tracks as a min-heap.
  using Busy = std::pair<double, int>;
  std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
  std::priority_queue<int, std::vector<int>, std::greater<>> free_tracks;
  int tracks = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const Span& s = tl.spans[order[k]];
    if (k == 0 || s.device != tl.spans[order[k - 1]].device || s.lane != tl.spans[order[k - 1]].lane) {
      busy = {};
      free_tracks = {};
      tracks = 0;
    }
    while (!busy.empty() && busy.top().first <= s.start_s) {
      free_tracks.push(busy.top().second);
      busy.pop();
    }
    int track = tracks;
    if (!free_tracks.empty()) {
      track = free_tracks.top();
      free_tracks.pop();
    } else {
      ++tracks;
    }
    busy.emplace(s.end_s, track);
    tids[order[k]] = trace_tid(s.lane, track);
  }
  return tids;
}

std::string trace_thread_name(int tid) {
  std::string name(to_string(static_cast<Lane>(tid % 3)));
  if (tid >= 3) {
    name += ' ';
    name += std::to_string(tid / 3);
  }
  return name;
}

std::vector<bool> parse_device_list(std::string_view text, int num_devices, std::string_view option) {
  std::vector<bool> on(static_cast<std::size_t>(std::max(0, num_devices)), false);
  auto number = [&](std::string_view digits, std::string_view piece) {
    long long v = -1;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || v < 0)
      fail(option, ": bad piece '", piece, "' in '", text, "': expected a device number N or a range A-B");
    if (v >= num_devices)
      fail(option, ": device ", v, " in '", text, "' is out of range: the machine has ", num_devices,
           " devices (0-", num_devices - 1, ")");
    return static_cast<int>(v);
  };
  if (text.empty()) fail(option, ": empty device list (expected e.g. 0-7,64)");
  std::size_t pos = 0;
  for (;;) {
    const std::size_t comma = text.find(',', pos);
    const std::string_view piece = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    const std::size_t dash = piece.find('-');
    const int a = number(piece.substr(0, dash), piece);
    const int b = dash == std::string_view::npos ? a : number(piece.substr(dash + 1), piece);
    if (b < a) fail(option, ": bad piece '", piece, "' in '", text, "': range end ", b, " is below its start ", a);
    for (int d = a; d <= b; ++d) on[static_cast<std::size_t>(d)] = true;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return on;
}

namespace {

void put_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";  // as nlohmann::json writes it
    return;
  }
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, p);
}

void put_int(std::string& out, long long v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, p);
}

void put_string(std::string& out, std::string_view s) { out += nlohmann::json(s).dump(); }

}  // namespace

void write_chrome_trace(std::ostream& os, const Timeline& tl, const TaskGraph* tg, const Graph* g,
                        const std::vector<bool>* devices) {
  auto shown = [&](DeviceId d) {
    return devices == nullptr || (d.valid() && d.index() < devices->size() && (*devices)[d.index()]);
  };
  Timeline kept;  // the spans written, so that tracks are computed on what is shown
  const Timeline* t = &tl;
  if (devices) {
    kept.source = tl.source;
    for (const Span& s : tl.spans)
      if (shown(s.device)) kept.spans.push_back(s);
    t = &kept;
  }
  const std::vector<int> tids = trace_tids(*t);
  // Per device, the tids its spans use (0-2 always, as before tracks existed).
  std::vector<std::vector<bool>> used;
  for (std::size_t i = 0; i < t->spans.size(); ++i) {
    const std::size_t d = t->spans[i].device.index();
    if (d >= used.size()) used.resize(d + 1);
    auto& u = used[d];
    if (u.empty()) u.assign(3, true);
    if (static_cast<std::size_t>(tids[i]) >= u.size()) u.resize(static_cast<std::size_t>(tids[i]) + 1, false);
    u[static_cast<std::size_t>(tids[i])] = true;
  }
  // Event names per graph node, escaped once.
  std::vector<std::string> node_names;
  if (g) {
    node_names.reserve(g->size());
    for (std::size_t k = 0; k < g->size(); ++k)
      node_names.push_back(nlohmann::json(g->node(NodeId(static_cast<std::int32_t>(k))).name).dump());
  }
  std::string out;
  out.reserve(1 << 20);
  out += "{\"traceEvents\":[";
  bool first = true;
  auto flush = [&] {
    if (out.size() >= (1 << 20)) {
      os.write(out.data(), static_cast<std::streamsize>(out.size()));
      out.clear();
    }
  };
  auto begin_event = [&] {
    if (!first) out += ',';
    first = false;
  };
  for (std::size_t d = 0; d < used.size(); ++d) {
    if (used[d].empty()) continue;
    begin_event();
    out += "{\"args\":{\"name\":\"device ";
    put_int(out, static_cast<long long>(d));
    out += "\"},\"name\":\"process_name\",\"ph\":\"M\",\"pid\":";
    put_int(out, static_cast<long long>(d));
    out += '}';
    for (std::size_t tid = 0; tid < used[d].size(); ++tid) {
      if (!used[d][tid]) continue;
      const int id = static_cast<int>(tid);
      begin_event();
      out += "{\"args\":{\"name\":";
      put_string(out, trace_thread_name(id));
      out += "},\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":";
      put_int(out, static_cast<long long>(d));
      out += ",\"tid\":";
      put_int(out, id);
      out += "},{\"args\":{\"sort_index\":";
      put_int(out, (id % 3) * 100000 + id / 3);
      out += "},\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":";
      put_int(out, static_cast<long long>(d));
      out += ",\"tid\":";
      put_int(out, id);
      out += '}';
    }
  }
  for (std::size_t i = 0; i < t->spans.size(); ++i) {
    const Span& s = t->spans[i];
    begin_event();
    out += "{\"args\":{";
    const Task* task = tg && s.task.valid() && s.task.index() < tg->tasks.size() ? &tg->task(s.task) : nullptr;
    if (task) {
      out += "\"bytes\":";
      put_int(out, task->bytes);
      out += ",\"flops\":";
      put_number(out, static_cast<double>(task->flops));
      out += ',';
    }
    out += "\"task\":";
    put_int(out, s.task.value);
    if (task && task->kind == TaskKind::move) {
      out += ",\"to_device\":";
      put_int(out, task->dst_device.value);
    }
    out += "},\"dur\":";
    put_number(out, (s.end_s - s.start_s) * 1e6);
    out += ",\"name\":";
    if (task) {
      out += '"';
      out += to_string(task->kind);
      if (g && task->node.valid() && task->node.index() < node_names.size()) {
        const std::string& nn = node_names[task->node.index()];
        out += ' ';
        out.append(nn, 1, nn.size() - 1);  // the escaped name without its opening quote
      } else {
        out += '"';
      }
    } else {
      out += "\"task ";
      put_int(out, s.task.value);
      out += '"';
    }
    out += ",\"ph\":\"X\",\"pid\":";
    put_int(out, s.device.value);
    out += ",\"tid\":";
    put_int(out, tids[i]);
    out += ",\"ts\":";
    put_number(out, s.start_s * 1e6);
    out += '}';
    flush();
  }
  out += "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"source\":";
  put_string(out, tl.source);
  out += "}}\n";
  os.write(out.data(), static_cast<std::streamsize>(out.size()));
}

}  // namespace tessel

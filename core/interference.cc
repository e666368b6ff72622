// The interference model's rows (core/machine.h, Interference) and its JSON
// (core/interference.h).
#include "core/interference.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"

namespace tessel {

using nlohmann::json;

std::string_view to_string(CommMechanism m) { return m == CommMechanism::copy_engine ? "copy_engine" : "sm_kernels"; }

CommMechanism parse_comm_mechanism(std::string_view s, std::string_view what) {
  if (s == "sm_kernels" || s == "sm-kernels" || s == "sm") return CommMechanism::sm_kernels;
  if (s == "copy_engine" || s == "copy-engine" || s == "ce") return CommMechanism::copy_engine;
  fail(what, ": expected \"sm_kernels\" (SM copy kernels, as NCCL's) or \"copy_engine\" (cudaMemcpyAsync), got \"", s,
       "\"");
}

CommPriority parse_comm_priority(std::string_view s, std::string_view what) {
  if (s == "normal") return CommPriority::normal;
  if (s == "high") return CommPriority::high;
  fail(what, ": expected \"normal\" or \"high\", got \"", s, "\"");
}

SlowdownFactors published_copy_engine_factors() {
  return {1.28, 1.28,
          "arXiv 2412.14335 (72% of ideal overlap with copy-engine collectives; compute and communication assumed "
          "slowed alike)"};
}

Interference Interference::none() {
  Interference f;
  f.normal = {1, 1, "none"};
  f.high = {1, 1, "none"};
  f.copy_engine_normal = {1, 1, "none"};
  f.copy_engine_high = {1, 1, "none"};
  return f;
}

SlowdownFactors Interference::resolve(int sm_count, std::string_view what) const {
  const bool high_p = comm_priority == CommPriority::high;
  const char* pname = high_p ? "high" : "normal";
  auto copy_engine_row = [&](bool required) {
    const SlowdownFactors& row = high_p ? copy_engine_high : copy_engine_normal;
    if (!row.source.empty()) return row;
    if (required)
      fail(what, ".copy_engine.", pname, ": missing, and the run uses copy-engine communication at ", pname,
           " priority; this machine's interference is measured (\"measured\": true), so no published default applies");
    return published_copy_engine_factors();
  };
  auto floor_sms = [&](double s) {
    if (comm_sms > 0 && sm_count > comm_sms)
      s = std::max(s, static_cast<double>(sm_count) / static_cast<double>(sm_count - comm_sms));
    return s;
  };
  if (comm_mechanism == CommMechanism::copy_engine) {
    SlowdownFactors r = copy_engine_row(measured);
    r.compute_slowdown = floor_sms(r.compute_slowdown);
    return r;
  }
  const SlowdownFactors& row = high_p ? high : normal;
  if (comm_sms <= 0) return row;
  for (const ReservedFactors& p : reserved)
    if (p.comm_priority == comm_priority && p.comm_sms == comm_sms) return p.factors;
  if (measured)
    fail(what, ".reserved: no entry for comm_priority \"", pname, "\" with comm_sms ", comm_sms,
         ", which the run uses; this machine's interference is measured (\"measured\": true), so no published default "
         "applies (measured entries: ", reserved.size(), ")");
  // With SMs of its own, communication no longer takes compute's SMs, so stream priority
  // has nothing left to arbitrate: the normal row's compute factor applies at either
  // priority (the high row's larger one is communication blocks taking SMs first), floored
  // by the share of SMs compute has lost while both run.
  SlowdownFactors r = row;
  r.compute_slowdown = floor_sms(normal.compute_slowdown);
  r.comm_slowdown = std::min(row.comm_slowdown, copy_engine_row(false).comm_slowdown);
  r.source = row.source + "; " + std::to_string(comm_sms) +
             " SMs reserved: compute on the SMs left, communication meets only HBM contention (arXiv 2606.09200)";
  return r;
}

void InterferenceSettings::apply(Machine& m, std::string_view option_sms) const {
  if (set_priority) m.interference.comm_priority = comm_priority;
  if (set_mechanism) m.interference.comm_mechanism = comm_mechanism;
  if (set_sms) {
    if (comm_sms < 0) fail(option_sms, " ", comm_sms, ": must be >= 0");
    for (const DeviceType& t : m.device_types)
      if (comm_sms > 0 && t.sm_count > 0 && comm_sms >= t.sm_count)
        fail(option_sms, " ", comm_sms, ": device type '", t.name, "' of machine '", m.name, "' has ", t.sm_count,
             " SMs; reserving ", comm_sms, " for communication leaves none to compute");
    if (comm_sms > 0 && std::all_of(m.device_types.begin(), m.device_types.end(),
                                    [](const DeviceType& t) { return t.sm_count == 0; }))
      fail(option_sms, " ", comm_sms, ": machine '", m.name,
           "' gives no SM count (sm_count) for its device types, so SMs cannot be reserved");
    m.interference.comm_sms = comm_sms;
  }
  // Resolve now, so that a measured machine without the chosen configuration fails here.
  for (const DeviceType& t : m.device_types) (void)m.interference.resolve(t.sm_count, "machine '" + m.name + "' interference");
}

// ---- JSON -------------------------------------------------------------------------

namespace {

json row_json(const SlowdownFactors& f) {
  json j = {{"compute_slowdown", f.compute_slowdown}, {"comm_slowdown", f.comm_slowdown}};
  if (!f.source.empty()) j["source"] = f.source;
  return j;
}

SlowdownFactors row_from(const json& j, const std::string& what, SlowdownFactors f) {
  if (!j.is_object()) fail(what, ": expected an object, got ", json_read::describe(j));
  f.compute_slowdown = json_read::number_field_or(j, "compute_slowdown", what, f.compute_slowdown);
  f.comm_slowdown = json_read::number_field_or(j, "comm_slowdown", what, f.comm_slowdown);
  if (j.contains("source")) f.source = json_read::string(j.at("source"), what + ".source");
  else if (j.contains("compute_slowdown") || j.contains("comm_slowdown")) f.source = "machine JSON";
  return f;
}

std::string string_at(const json& j, const char* key, const std::string& what) {
  return json_read::string(json_read::field(j, key, what), what + "." + key);
}

void check_row(const SlowdownFactors& f, const std::string& w) {
  if (!(std::isfinite(f.compute_slowdown) && f.compute_slowdown >= 1))
    fail(w, ".compute_slowdown: must be a finite number >= 1 (1 = no slowdown; compute runs 1/x as fast while "
            "communication runs), got ",
         f.compute_slowdown);
  if (!(std::isfinite(f.comm_slowdown) && f.comm_slowdown >= 1))
    fail(w, ".comm_slowdown: must be a finite number >= 1 (1 = no slowdown; communication runs 1/x as fast while "
            "compute runs), got ",
         f.comm_slowdown);
}

}  // namespace

json interference_to_json(const Interference& f) {
  json j = {{"comm_priority", std::string(to_string(f.comm_priority))},
            {"comm_sms", f.comm_sms},
            {"comm_mechanism", std::string(to_string(f.comm_mechanism))},
            {"normal", row_json(f.normal)},
            {"high", row_json(f.high)}};
  if (f.measured) j["measured"] = true;
  json ce = json::object();
  if (!f.copy_engine_normal.source.empty()) ce["normal"] = row_json(f.copy_engine_normal);
  if (!f.copy_engine_high.source.empty()) ce["high"] = row_json(f.copy_engine_high);
  if (!ce.empty()) j["copy_engine"] = ce;
  if (!f.reserved.empty()) {
    json rs = json::array();
    for (const ReservedFactors& r : f.reserved) {
      json e = row_json(r.factors);
      e["comm_priority"] = std::string(to_string(r.comm_priority));
      e["comm_sms"] = r.comm_sms;
      rs.push_back(e);
    }
    j["reserved"] = rs;
  }
  if (f.fused != FusedModel{})
    j["fused"] = {{"tiles", f.fused.tiles}, {"comm_occupancy", f.fused.comm_occupancy}};
  return j;
}

void interference_from_json(const json& fj, const std::string& w, Interference& f) {
  if (!fj.is_object()) fail(w, ": expected an object, got ", json_read::describe(fj));
  if (fj.contains("comm_priority"))
    f.comm_priority = parse_comm_priority(string_at(fj, "comm_priority", w), w + ".comm_priority");
  if (fj.contains("comm_sms")) {
    const std::int64_t v = json_read::integer(fj.at("comm_sms"), w + ".comm_sms");
    if (v < 0 || v > 1'000'000) fail(w, ".comm_sms: must be 0 to 1000000, got ", v);
    f.comm_sms = static_cast<int>(v);
  }
  if (fj.contains("comm_mechanism"))
    f.comm_mechanism = parse_comm_mechanism(string_at(fj, "comm_mechanism", w), w + ".comm_mechanism");
  if (fj.contains("measured")) {
    const json& v = fj.at("measured");
    if (!v.is_boolean()) fail(w, ".measured: expected true or false, got ", json_read::describe(v));
    f.measured = v.get<bool>();
  }
  if (f.measured) {  // a measured machine names every figure it was measured with
    for (const char* row : {"normal", "high"})
      if (!fj.contains(row))
        fail(w, ".", row, ": missing; a measured interference (\"measured\": true) must give the SM-kernel rows "
                          "\"normal\" and \"high\"");
  }
  if (fj.contains("normal")) f.normal = row_from(fj.at("normal"), w + ".normal", f.normal);
  if (fj.contains("high")) f.high = row_from(fj.at("high"), w + ".high", f.high);
  if (fj.contains("copy_engine")) {
    const json& ce = fj.at("copy_engine");
    const std::string wc = w + ".copy_engine";
    if (!ce.is_object()) fail(wc, ": expected an object with \"normal\" and/or \"high\", got ", json_read::describe(ce));
    for (const auto& [key, value] : ce.items()) {
      if (key != "normal" && key != "high") fail(wc, ".", key, ": unknown row (expected \"normal\" or \"high\")");
      SlowdownFactors& row = key == "normal" ? f.copy_engine_normal : f.copy_engine_high;
      SlowdownFactors base = row.source.empty() ? published_copy_engine_factors() : row;
      row = row_from(value, wc + "." + key, base);
      if (!value.contains("source")) row.source = "machine JSON";
    }
  }
  if (fj.contains("reserved")) {
    const json& rs = fj.at("reserved");
    const std::string wr = w + ".reserved";
    if (!rs.is_array()) fail(wr, ": expected an array, got ", json_read::describe(rs));
    f.reserved.clear();
    for (std::size_t i = 0; i < rs.size(); ++i) {
      const std::string we = wr + "[" + std::to_string(i) + "]";
      ReservedFactors r;
      r.factors = row_from(rs[i], we, SlowdownFactors{});
      if (!rs[i].contains("compute_slowdown") || !rs[i].contains("comm_slowdown"))
        fail(we, ": needs compute_slowdown and comm_slowdown");
      r.comm_priority = parse_comm_priority(string_at(rs[i], "comm_priority", we), we + ".comm_priority");
      const std::int64_t sms = json_read::integer(json_read::field(rs[i], "comm_sms", we), we + ".comm_sms");
      if (sms < 1 || sms > 1'000'000) fail(we, ".comm_sms: must be 1 to 1000000, got ", sms);
      r.comm_sms = static_cast<int>(sms);
      if (r.factors.source.empty()) r.factors.source = "machine JSON";
      f.reserved.push_back(std::move(r));
    }
  }
  if (fj.contains("fused")) {
    const json& fu = fj.at("fused");
    const std::string wf = w + ".fused";
    if (!fu.is_object()) fail(wf, ": expected an object, got ", json_read::describe(fu));
    if (fu.contains("tiles")) {
      const std::int64_t t = json_read::integer(fu.at("tiles"), wf + ".tiles");
      if (t < 1 || t > 4096) fail(wf, ".tiles: must be 1 to 4096, got ", t);
      f.fused.tiles = static_cast<int>(t);
    }
    f.fused.comm_occupancy = json_read::number_field_or(fu, "comm_occupancy", wf, f.fused.comm_occupancy);
  }
}

void validate_interference(const Interference& f, const std::string& wi) {
  if (f.comm_sms < 0) fail(wi, ".comm_sms: must be >= 0, got ", f.comm_sms);
  check_row(f.normal, wi + ".normal");
  check_row(f.high, wi + ".high");
  if (!f.copy_engine_normal.source.empty()) check_row(f.copy_engine_normal, wi + ".copy_engine.normal");
  if (!f.copy_engine_high.source.empty()) check_row(f.copy_engine_high, wi + ".copy_engine.high");
  for (std::size_t i = 0; i < f.reserved.size(); ++i) {
    const std::string we = wi + ".reserved[" + std::to_string(i) + "]";
    check_row(f.reserved[i].factors, we);
    if (f.reserved[i].comm_sms < 1) fail(we, ".comm_sms: must be >= 1, got ", f.reserved[i].comm_sms);
    for (std::size_t k = 0; k < i; ++k)
      if (f.reserved[k].comm_sms == f.reserved[i].comm_sms && f.reserved[k].comm_priority == f.reserved[i].comm_priority)
        fail(we, ": the same comm_priority and comm_sms as reserved[", k, "]");
  }
  (void)f.resolve(0, wi);  // a measured machine must hold the configuration it names
  if (f.fused.tiles < 1 || f.fused.tiles > 4096) fail(wi, ".fused.tiles: must be 1 to 4096, got ", f.fused.tiles);
  if (!(std::isfinite(f.fused.comm_occupancy) && f.fused.comm_occupancy >= 0 && f.fused.comm_occupancy < 1))
    fail(wi, ".fused.comm_occupancy: must be a number in [0, 1), got ", f.fused.comm_occupancy);
}

}  // namespace tessel

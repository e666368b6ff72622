#include "core/json_read.h"

#include <cmath>

#include "core/error.h"

namespace tessel::json_read {

using nlohmann::json;

const json& field(const json& j, const char* key, const std::string& what) {
  if (!j.is_object()) fail(what, ": expected an object, got ", j.dump());
  if (!j.contains(key)) fail(what, ": missing field \"", key, "\"");
  return j.at(key);
}

double number(const json& v, const std::string& what) {
  if (!v.is_number()) fail(what, ": expected a number, got ", v.dump());
  return v.get<double>();
}

double number_field(const json& j, const char* key, const std::string& what) {
  return number(field(j, key, what), what + "." + key);
}

double number_field_or(const json& j, const char* key, const std::string& what, double fallback) {
  if (!j.contains(key)) return fallback;
  return number(j.at(key), what + "." + key);
}

std::int64_t integer(const json& v, const std::string& what) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) return static_cast<std::int64_t>(d);
  }
  fail(what, ": expected an integer, got ", v.dump());
}

}  // namespace tessel::json_read

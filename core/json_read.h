#pragma once
// Reading JSON inputs with errors that name the field: "machine.links[2].bytes_per_s:
// expected a number, got null". `what` is the path of the object being read.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tessel::json_read {

// j[key]; Error "<what>: missing field "<key>"" when absent.
[[nodiscard]] const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& what);
[[nodiscard]] double number(const nlohmann::json& v, const std::string& what);
[[nodiscard]] double number_field(const nlohmann::json& j, const char* key, const std::string& what);
[[nodiscard]] double number_field_or(const nlohmann::json& j, const char* key, const std::string& what,
                                     double fallback);
// An integer, or a float with an integral value.
[[nodiscard]] std::int64_t integer(const nlohmann::json& v, const std::string& what);

}  // namespace tessel::json_read

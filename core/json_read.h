#pragma once
// Reading JSON inputs with errors that name the field: "machine.links[2].bytes_per_s:
// expected a number, got null". `what` is the path of the object being read.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tessel::json_read {

// Deepest nesting of arrays and objects a JSON input may have. tessel's own files nest
// at most 6 deep; a limit keeps a hostile file from exhausting the stack.
inline constexpr int kMaxDepth = 256;

// Parses `text` (the contents of `what`, a file name): Error naming `what` and the byte
// on malformed JSON, nesting deeper than kMaxDepth, or a number out of double's range
// (1e400).
[[nodiscard]] nlohmann::json parse(const std::string& text, const std::string& what);

// A short description of a value for an error message: scalars as JSON (strings cut to
// 60 characters), arrays and objects by their size. Never recurses, so a value nested
// 100,000 deep prints as safely as 1.
[[nodiscard]] std::string describe(const nlohmann::json& v);

// j[key]; Error "<what>: missing field "<key>"" when absent.
[[nodiscard]] const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& what);
[[nodiscard]] double number(const nlohmann::json& v, const std::string& what);
[[nodiscard]] double number_field(const nlohmann::json& j, const char* key, const std::string& what);
[[nodiscard]] double number_field_or(const nlohmann::json& j, const char* key, const std::string& what,
                                     double fallback);
// A string; Error "<what>: expected a string, got ..." otherwise.
[[nodiscard]] std::string string(const nlohmann::json& v, const std::string& what);
// An integer, or a float with an integral value.
[[nodiscard]] std::int64_t integer(const nlohmann::json& v, const std::string& what);
// An id: an integer in [0, 2^31 - 1] (never truncated into range).
[[nodiscard]] std::int32_t index(const nlohmann::json& v, const std::string& what);

}  // namespace tessel::json_read

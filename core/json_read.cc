#include "core/json_read.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace tessel::json_read {

using nlohmann::json;

json parse(const std::string& text, const std::string& what) {
  // Nesting depth first, outside strings: nlohmann's parser is iterative, but destroying,
  // printing or walking a value nested 100,000 deep recurses.
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) fail(what, ": JSON nested deeper than ", kMaxDepth, " levels at byte ", i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail(what, ": malformed JSON at byte ", e.byte, " (", (e.byte >= text.size() ? "truncated?" : "syntax error"), ")");
  } catch (const json::exception& e) {
    // out_of_range.406 "number overflow parsing '1e400'" and the like: keep nlohmann's
    // text after its "[json.exception...] " tag.
    std::string msg = e.what();
    if (auto close = msg.find("] "); close != std::string::npos) msg = msg.substr(close + 2);
    // Point at the literal, and the field it is the value of: "number overflow parsing
    // '1e400'" becomes "... at byte 57 (field \"value\")".
    const auto q1 = msg.find('\''), q2 = msg.rfind('\'');
    if (q1 != std::string::npos && q2 > q1) {
      const std::string literal = msg.substr(q1 + 1, q2 - q1 - 1);
      if (const auto at = text.find(literal); !literal.empty() && at != std::string::npos) {
        msg += " at byte " + std::to_string(at);
        std::size_t k = at;
        while (k > 0 && std::isspace(static_cast<unsigned char>(text[k - 1]))) --k;
        if (k > 0 && text[k - 1] == ':') {
          --k;
          while (k > 0 && std::isspace(static_cast<unsigned char>(text[k - 1]))) --k;
          if (k > 0 && text[k - 1] == '"') {
            const auto open = text.rfind('"', k - 2);
            if (open != std::string::npos && k - 1 - open <= 64)
              msg += " (field \"" + text.substr(open + 1, k - 2 - open) + "\")";
          }
        }
      }
    }
    fail(what, ": ", msg);
  }
}

std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::array: {
      // A short flat array prints as JSON; anything else by its size.
      bool flat = v.size() <= 16;
      for (const json& e : v) flat = flat && !e.is_structured() && !(e.is_string() && e.get_ref<const std::string&>().size() > 60);
      if (flat) return v.dump(-1, ' ', false, json::error_handler_t::replace);
      return "an array of " + std::to_string(v.size()) + " element(s)";
    }
    case json::value_t::object: return "an object with " + std::to_string(v.size()) + " field(s)";
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      const auto h = json::error_handler_t::replace;  // invalid UTF-8 must not throw here
      return s.size() <= 60 ? json(s).dump(-1, ' ', false, h) : json(s.substr(0, 60)).dump(-1, ' ', false, h) + "...";
    }
    default: return v.dump(-1, ' ', false, json::error_handler_t::replace);  // null, boolean, number
  }
}

std::string string(const json& v, const std::string& what) {
  if (!v.is_string()) fail(what, ": expected a string, got ", describe(v));
  return v.get<std::string>();
}

const json& field(const json& j, const char* key, const std::string& what) {
  if (!j.is_object()) fail(what, ": expected an object, got ", describe(j));
  if (!j.contains(key)) fail(what, ": missing field \"", key, "\"");
  return j.at(key);
}

double number(const json& v, const std::string& what) {
  if (!v.is_number()) fail(what, ": expected a number, got ", describe(v));
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
  fail(what, ": expected an integer, got ", describe(v));
}

std::int32_t index(const json& v, const std::string& what) {
  const std::int64_t x = integer(v, what);
  if (x < 0 || x > std::numeric_limits<std::int32_t>::max())
    fail(what, ": ", x, " is not an id (an integer from 0 to ", std::numeric_limits<std::int32_t>::max(), ")");
  return static_cast<std::int32_t>(x);
}

}  // namespace tessel::json_read

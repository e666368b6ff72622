#pragma once
// Shared by every libFuzzer target in tests/fuzz/: a tessel::Error is the expected
// answer to a bad input; any other exception escaping the parser is a bug, reported by
// printing it and aborting so that libFuzzer saves the input as a crash.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tessel::fuzz {

// Inputs larger than this are skipped: the parsers' cost grows with the input, and a
// long input hides the short reproducer libFuzzer is looking for.
inline constexpr std::size_t kMaxInputBytes = 1 << 16;

template <class F>
int guarded(const char* target, F&& body) {
  try {
    body();
  } catch (const tessel::Error&) {
    // The promised outcome of a bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz %s: escaped exception (not tessel::Error): %s\n", target, e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz %s: escaped a non-std exception\n", target);
    std::abort();
  }
  return 0;
}

// A property every accepted input must satisfy (a round trip, say); aborts with the
// message when it does not.
inline void require(bool ok, const char* target, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz %s: property violated: %s\n", target, what.c_str());
  std::abort();
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace tessel::fuzz

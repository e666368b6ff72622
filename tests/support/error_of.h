#pragma once
// The message of the tessel::Error that a call throws: what bad-input tests match against.

#include <functional>
#include <string>

#include "core/error.h"

namespace tessel::testing {

// What error_of returns when the call throws nothing.
inline constexpr const char* kNoError = "(no error)";

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return kNoError;
}

}  // namespace tessel::testing

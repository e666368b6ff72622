#pragma once
// One exception type for every error a user can cause (bad einsum, shape mismatch,
// bad JSON, impossible partition, unknown preset, ...). Its message names the input
// and what is wrong. Programmer errors (broken internal invariants) use assert().

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A resource ran out while doing what a user asked (memory, threads): the message says
// what was being built and how large. The CLI prints it as `tessel: error: ...` and
// exits with code 3 (user errors: 1).
class ResourceError : public Error {
 public:
  explicit ResourceError(const std::string& message) : Error(message) {}
};

// fail("partition of node ", name, ": ", parts, " parts > ", size) — builds the
// message from streamable pieces and throws Error.
template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  throw Error(os.str());
}

}  // namespace tessel

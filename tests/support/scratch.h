#pragma once
// Files for tests that write them: a fresh folder per test and a file's bytes read back.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tessel::testing {

// The whole file, as bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An empty folder of its own under the system's temporary folder (named by `name` and
// this process, so that tests running at once do not share one); the test removes it.
inline std::filesystem::path scratch_dir(const std::string& name) {
  std::filesystem::path d = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace tessel::testing

#pragma once
// Runs the built `tessel` binary for CLI tests: $TESSEL_CLI where set, else the build's
// own (TESSEL_CLI_PATH), else `tessel` beside the test binary (a prebuilt bundle moved to
// another machine, as scripts/gpu-bundle.sh makes, has no build tree).

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tessel::testing {

struct CliResult {
  int status = -1;      // exit code; -1 when it did not exit normally
  std::string out;      // stdout
  std::string err;      // stderr
  std::string output() const { return out + err; }
};

inline std::string tessel_cli() {
  if (const char* env = std::getenv("TESSEL_CLI"); env && *env) return env;
  std::error_code ec;
  if (std::filesystem::exists(TESSEL_CLI_PATH, ec)) return TESSEL_CLI_PATH;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(exe.parent_path() / "tessel", ec)) return (exe.parent_path() / "tessel").string();
  return TESSEL_CLI_PATH;
}

inline CliResult run_tessel(const std::string& args) {
  CliResult r;
  auto err_path = std::filesystem::temp_directory_path() /
                  ("tessel_cli_stderr_" + std::to_string(::getpid()) + ".txt");
  std::string cmd = tessel_cli() + " " + args + " 2>" + err_path.string();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_path);
  return r;
}

inline std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
}

}  // namespace tessel::testing

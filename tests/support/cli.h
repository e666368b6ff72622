#pragma once
// Runs the built `tessel` binary (TESSEL_CLI_PATH) for CLI tests.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
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

inline CliResult run_tessel(const std::string& args) {
  CliResult r;
  auto err_path = std::filesystem::temp_directory_path() /
                  ("tessel_cli_stderr_" + std::to_string(::getpid()) + ".txt");
  std::string cmd = std::string(TESSEL_CLI_PATH) + " " + args + " 2>" + err_path.string();
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

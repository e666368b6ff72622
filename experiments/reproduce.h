#pragma once
// `tessel reproduce NAME`: published experiments rerun in the simulator. Each writes
// DIR/NAME.csv (its own label columns, then the sweep columns of sweep.h), one or more
// PNGs through plots/ and prints its headline numbers beside the published ones where
// a paper gives them.

#include <cstdio>
#include <string>
#include <vector>

#include "experiments/sweep.h"

namespace tessel::experiments {

struct ReproductionInfo {
  std::string name;
  std::string summary;
  bool implemented = false;
  std::string why_not;  // for names not implemented yet
};
[[nodiscard]] const std::vector<ReproductionInfo>& reproductions();

struct ReproduceOptions {
  std::string dir = "out";
  bool quick = false;      // reduced sizes (tests, a first look): same shape of experiment, small graphs
  std::string workload;    // offload only: the workload capped instead of its default (empty: the default)
  int jobs = 1;
  bool plot = true;        // draw the PNGs (needs Python 3 with matplotlib: plots/python.sh)
  std::string plots_dir;   // where plots/ lives
  std::FILE* out = stdout;
};

struct ReproduceResult {
  std::string csv;
  std::vector<std::string> pngs;
  std::vector<std::string> headlines;  // the lines printed
  std::size_t points = 0, failed = 0;
};

// Helpers the reproductions share: `f` (a printf format of one double) applied to `v`,
// and `s` quoted for a POSIX shell (the plotting commands).
[[nodiscard]] std::string fmt(const char* f, double v);
[[nodiscard]] std::string shell_quote(const std::string& s);

// An Error naming the reproduction and listing the known ones on an unknown or
// unimplemented name; the CSV is written whole (never half) before plotting.
ReproduceResult reproduce(const std::string& name, const ReproduceOptions& options);

}  // namespace tessel::experiments

// tessel simulate: arrives with the simulator issue (#5).
#include "experiments/cli.h"

namespace tessel::cli {
void add_sim_commands(CLI::App& app) { (void)app; }
}  // namespace tessel::cli

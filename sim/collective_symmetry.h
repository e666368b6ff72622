#pragma once
// Symmetry reduction of a collective that runs alone (collective_engine.h).
//
// Shift the ranks by P: rank r → r + P (mod n). When that shift maps the collective's
// program onto itself (rank r + P runs rank r's tasks on chunks of the same sizes) and
// the machine as the transfers see it (the route of every shifted transfer is the shifted
// route, link for link, with the same bandwidths and latencies, on devices of the same
// type, and no link is crossed by two shifted copies of one transfer), every rank's
// timeline equals that of the rank P before it. The engine then simulates ranks 0..P−1
// only, with periodic boundary: what rank P−1 sends to rank P (over the real links of
// that hop) arrives at rank 0. Chunk sizes and step counts stay those of the full n.
//
// The check is exact rather than a guess from the machine's name: it routes every
// transfer of the full run once (n × peers × channels routes), maps each link the full
// run uses onto the link of the simulated ranks it stands for, and refuses the period
// when a link would stand for two, when a link carries two copies of one transfer (an
// oversubscribed spine link that several node pairs share), or when the flows crossing a
// link in the full run are not exactly those crossing its image in the reduced run.
// It shows equal rates in exact arithmetic; the flow model's ties (broken by link index
// and transfer slot, which the shift need not preserve) could round differently, so the
// bit-for-bit equality is what the tests verify on their presets (sim/README.md).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/machine.h"
#include "sim/simulator.h"

namespace tessel::sim {

// The route a transfer of the engine takes from `src` to `dst` on `channel` (its links,
// duplicates dropped, as the engine fills its route table).
using SymmetryRouteFn = std::function<void(std::int32_t src, std::int32_t dst, std::uint32_t channel,
                                           std::vector<LinkId>& out)>;
// The ranks that rank r sends to (in 0..n−1).
using SymmetryPeersFn = std::function<void(int r, std::vector<int>& out)>;

// Empty when shifting ranks by `period` (a divisor of n below n) maps the transfers of
// the full run onto those of ranks 0..period−1 as described above; otherwise why not.
// On success `link_canon` holds, per machine link, the link of the reduced run whose
// bytes it carries in the full run (-1: none).
[[nodiscard]] std::string check_shift_symmetry(const Machine& m, int n, int period, int channels,
                                               const SymmetryPeersFn& peers, const SymmetryRouteFn& route,
                                               std::vector<std::int32_t>& link_canon);

// A reduced run's result as the full run's: per-device statistics copied from rank
// d mod period, bytes per link through `link_canon`, bytes moved × n / period,
// events_unreduced = events × n / period. Events and sim_wall_s stay those of the reduced
// run (what was simulated).
void expand_symmetric_result(SimResult& r, int n, int period, const std::vector<std::int32_t>& link_canon);

}  // namespace tessel::sim

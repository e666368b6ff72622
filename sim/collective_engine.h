#pragma once
// Collectives as one task graph node (TaskKind::collective): the simulator generates the
// steps of the expanded form (collectives.h) as they become ready instead of storing them.
//
// The generated form runs the same tasks as the expanded form — the same moves (sender,
// receiver, bytes), the same accumulating touches, the same dependencies, pieces and
// windows — on the same lanes: a move holds one of its device's channels (per first link
// of its route with SimOptions::channels_per_link) while its bytes are on the links, and
// completes its route's latency later; touches run one at a time on their device's copy
// lane, timed by the compute model. Only what is in flight is stored: per rank a few ready
// tasks, the dependency counts of tasks half released, and per transfer slot its route,
// so memory grows with the ranks, not with the n² tasks of the expanded form.
//
// What differs from the expanded form:
//   priority  ring and all-to-all: among ready tasks of one lane, the earlier step first,
//             then the earlier piece (the expanded form ranks by longest path to the end,
//             which for these symmetric programs orders them the same way up to
//             tie-breaks between pieces whose sizes differ by one element). Hierarchical:
//             the longest path itself, in closed form from per-piece tables, on rank 0's
//             routes: exact where every rank's intra-node and rail hops are timed as rank
//             0's (cluster: and fat-tree presets; not rail: with group > 1, whose rail hops
//             between groups cross a spine), elsewhere a priority close to it. On the
//             cases of collective_engine_test the finish times, events, bytes per link
//             and busy times are the expanded form's bit for bit.
//   result    no timeline spans, no critical path and no buffer memory (peak_memory_bytes
//             0): SimResult::timeline is empty. Makespan, events, per-device lane busy
//             times and bytes per link are reported as by the expanded form.
//
// Generated: ring reduce-scatter, all-gather and all-reduce, pairwise all-to-all (windowed
// or every send posted, one or two levels), hierarchical all-reduce, under the flow model
// with the async policy and longest-path priority on machines without per-row copy costs
// or single-lane devices. The hierarchical all-reduce's tasks grow as n²/g (N = n/g nodes:
// every rail's 2(N − 1) steps, and the node all-gather's move per rail chunk); it stores
// per rank and piece a few path lengths and the order of its rail B touches, 2 bytes per
// rail step: n·P·(N − 1)·2 bytes, 8.3 MB at 1,024 ranks in 32 pieces, against the n²/g
// tasks of some hundred bytes each that the expanded form holds. Anything else (tree, alpha-beta, bsp, fifo, measured
// task seconds) is simulated in the expanded form; generated_form_unsupported() says why.
//
// Symmetry (SimOptions::symmetry, on by default): a ring collective on ranks and a machine
// that repeat every P ranks is simulated on ranks 0..P−1 only and reported as the full run
// (collective_symmetry.h; SimResult::symmetry_period, symmetry_note).

#include <string>

#include "core/collective.h"
#include "core/machine.h"
#include "core/task_graph.h"
#include "sim/simulator.h"

namespace tessel::sim {

// Empty when the generated form can simulate `spec` on `m` under `o`; otherwise why not.
[[nodiscard]] std::string generated_form_unsupported(const CollectiveSpec& spec, const Machine& m,
                                                     const SimOptions& o);

// Simulates a task graph whose one task is a collective node: generated where
// generated_form_unsupported() is empty, else its expanded form. Error when the graph
// holds other tasks beside it or more than one collective. An expanded run's result (its
// critical path, timeline) names the tasks of collective_task_graph(spec), not of `tg`.
[[nodiscard]] SimResult simulate_collective_node(const TaskGraph& tg, const Machine& m, const SimOptions& o);

}  // namespace tessel::sim

#pragma once
// The machine JSON's "interference" object (core/machine.h, Interference): reading,
// writing and checking it. Used by core/machine.cc; the model itself is in machine.h.
//
//   "interference": {
//     "comm_priority": "normal" | "high",            the run's communication stream priority
//     "comm_sms": 0,                                  SMs reserved for communication
//     "comm_mechanism": "sm_kernels" | "copy_engine", how communication moves bytes
//     "measured": false,                              true: no published default fills a gap
//     "normal": {"compute_slowdown": 1.189, "comm_slowdown": 2.98, "source": "..."},
//     "high":   {...},                                SM copy kernels, no SMs reserved
//     "copy_engine": {"normal": {...}, "high": {...}},
//     "reserved": [{"comm_priority": "high", "comm_sms": 16, "compute_slowdown": 1.2,
//                   "comm_slowdown": 1.1, "source": "..."}],
//     "fused": {"tiles": 16, "comm_occupancy": 0.125}}
// Every factor is a finite number >= 1 (a slowdown; its inverse, the speed while both
// run, lies in (0, 1]); comm_occupancy in [0, 1); tiles 1 to 4096.

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/machine.h"

namespace tessel {

[[nodiscard]] nlohmann::json interference_to_json(const Interference& f);
// Fields left out keep `f`'s values; `what` names the object ("m.json.interference").
void interference_from_json(const nlohmann::json& j, const std::string& what, Interference& f);
// Error naming the field when a figure is out of range.
void validate_interference(const Interference& f, const std::string& what);

}  // namespace tessel

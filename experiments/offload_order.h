#pragma once
// --offload-order free|fixed (simulate, run, compare): in what order a memory-planned
// graph runs. A header of its own, without CLI11, for what keeps the choice
// (CompareOptions); the option itself is in experiments/memory_cap.h.
//   free   as planned: any ready task runs (TURNIP), so a load starts once its range is
//          free and overlaps the kernels before its reader;
//   fixed  fixed_order() of the plan (core/memory_plan.h): each device's kernels and host
//          transfers one after another in the plan's order, transfers synchronous, so a
//          load holds up the kernel behind it. What free gains over fixed is what the
//          freedom of order buys.

#include <cstdint>
#include <string_view>

namespace tessel::cli {

enum class OffloadOrder : std::uint8_t { free, fixed };
[[nodiscard]] std::string_view to_string(OffloadOrder order);  // free, fixed
// An Error naming --offload-order and the accepted values on anything else.
[[nodiscard]] OffloadOrder parse_offload_order(std::string_view text);

}  // namespace tessel::cli

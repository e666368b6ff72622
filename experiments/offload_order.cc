#include "experiments/offload_order.h"

#include "core/error.h"

namespace tessel::cli {

std::string_view to_string(OffloadOrder order) { return order == OffloadOrder::fixed ? "fixed" : "free"; }

OffloadOrder parse_offload_order(std::string_view text) {
  for (OffloadOrder o : {OffloadOrder::free, OffloadOrder::fixed})
    if (text == to_string(o)) return o;
  fail("--offload-order: unknown order '", text, "' (accepted: free, fixed)");
}

}  // namespace tessel::cli

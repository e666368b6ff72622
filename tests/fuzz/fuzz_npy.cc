// .npy bytes as `tessel einsum` reads them (runtime::parse_npy). An accepted file must
// hold exactly as many elements as its shape says, and encode / parse back unchanged.
#include "core/tensor.h"
#include "runtime/npy.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > tessel::fuzz::kMaxInputBytes) return 0;
  return tessel::fuzz::guarded("npy", [&] {
    tessel::Tensor t = tessel::runtime::parse_npy(std::string(tessel::fuzz::as_text(data, size)), "fuzz.npy");
    tessel::fuzz::require(static_cast<std::int64_t>(t.data.size()) == tessel::elements(t.shape), "npy",
                          "element count differs from the shape");
    tessel::Tensor back = tessel::runtime::parse_npy(tessel::runtime::encode_npy(t), "re-encoded");
    tessel::fuzz::require(back.shape == t.shape, "npy", "shape changed through encode/parse");
  });
}

// `simulate --bytes SIZE` strings (cli::parse_bytes): an accepted size is >= 1.
#include "experiments/cli.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 256) return 0;
  return tessel::fuzz::guarded("bytes", [&] {
    std::int64_t b = tessel::cli::parse_bytes(std::string(tessel::fuzz::as_text(data, size)));
    tessel::fuzz::require(b >= 1, "bytes", "accepted a size below one byte");
  });
}

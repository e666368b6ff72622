// Routes over topology graphs (core/topology.h): building a preset of 8,192 devices and
// routing random pairs through a fresh router (searches included), with the distance
// tables' memory as a counter.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "core/machine.h"
#include "core/topology.h"

namespace {

const char* const kPresets[] = {"fat-tree:1024xh100-sxm-8,leaf=8,pod=128,spines=4,oversubscription=2",
                                "torus:16x8x8xh100-sxm-8", "rail:1024xh100-sxm-8,group=32"};

void BM_TopologyRoutes8192(benchmark::State& state) {
  const tessel::Machine base = tessel::machine_preset(kPresets[state.range(0)]);
  std::vector<tessel::LinkId> route;
  std::size_t cache_bytes = 0;
  constexpr int kPairs = 100'000;
  for (auto _ : state) {
    state.PauseTiming();
    tessel::Machine m = base;  // a copy starts with no router: every search is timed
    state.ResumeTiming();
    std::uint64_t x = 1;
    for (int i = 0; i < kPairs; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      m.route(tessel::DeviceId(static_cast<std::int32_t>((x >> 20) % 8192)),
              tessel::DeviceId(static_cast<std::int32_t>((x >> 40) % 8192)), route, static_cast<std::uint32_t>(i & 7));
      benchmark::DoNotOptimize(route.data());
    }
    cache_bytes = m.router.get(m)->cache_bytes();
  }
  state.SetLabel(kPresets[state.range(0)]);
  state.counters["routes_per_s"] =
      benchmark::Counter(static_cast<double>(kPairs) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["route_cache_MiB"] = static_cast<double>(cache_bytes) / (1 << 20);
}
BENCHMARK(BM_TopologyRoutes8192)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

}  // namespace

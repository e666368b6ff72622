// CpuCalibrator: rounds of every probe, medians per point.
#include "runtime/calibrate.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace tessel::runtime {
namespace {

TEST(CpuCalibrator, NoResultBeforeTheFirstRound) {
  CpuCalibrator cal({2, 0.001, 1});
  EXPECT_EQ(cal.rounds(), 0);
  EXPECT_THROW((void)cal.result(), Error);
}

// The retention probe's fraction: where the idle read lies between the cache's time and
// DRAM's, in closed form.
TEST(RetainedFraction, PlacesTheIdleReadBetweenTheCacheAndDram) {
  EXPECT_DOUBLE_EQ(retained_fraction(10e-6, 10e-6, 40e-6), 1.0);   // as fast as at once: all kept
  EXPECT_DOUBLE_EQ(retained_fraction(10e-6, 40e-6, 40e-6), 0.0);   // as slow as from DRAM: none
  EXPECT_DOUBLE_EQ(retained_fraction(10e-6, 25e-6, 40e-6), 0.5);
  EXPECT_DOUBLE_EQ(retained_fraction(10e-6, 31e-6, 40e-6), 0.3);
  EXPECT_DOUBLE_EQ(retained_fraction(10e-6, 50e-6, 40e-6), 0.0);   // noise past either end: clamped
  EXPECT_DOUBLE_EQ(retained_fraction(10e-6, 8e-6, 40e-6), 1.0);
  EXPECT_DOUBLE_EQ(retained_fraction(10e-6, 30e-6, 10e-6), 1.0);   // DRAM no slower: nothing to tell
}

TEST(CpuCalibrator, EveryPointIsMeasuredEachRoundAndTheResultMakesAValidMachine) {
  CpuCalibrator cal({2, 0.001, 1});
  cal.round();
  cal.round();
  cal.round();
  EXPECT_EQ(cal.rounds(), 3);
  Calibration c = cal.result();
  EXPECT_EQ(c.devices, 2);
  ASSERT_EQ(c.gemm.size(), 7u);
  for (const auto& p : c.gemm) {
    EXPECT_GT(p.flops_per_s, 0) << p.size;
    EXPECT_LE(p.flops_per_s, c.peak_flops_per_s) << p.size;
  }
  for (double v : {c.generic_flops_per_s, c.transcendental_flops_per_s, c.memory_bytes_per_s, c.cache_bytes_per_s,
                   c.copy_bytes_per_s_alone, c.copy_bytes_per_s_shared, c.task_overhead_s})
    EXPECT_GT(v, 0);
  EXPECT_GE(c.barrier_latency_s, 0);
  EXPECT_GE(c.copy_row_s, 0);
  EXPECT_LT(c.copy_row_s, 1e-6);  // a row of 8 floats within the cache: nanoseconds, not microseconds
  EXPECT_GE(c.generic_row_s, 0);
  EXPECT_LT(c.generic_row_s, 1e-5);  // a row of 32 floats through the generic loop
  if (c.outer_cache_capacity_bytes > 0) {  // a last-level cache was found
    EXPECT_GT(c.outer_cache_capacity_bytes, c.cache_capacity_bytes);
    EXPECT_GT(c.outer_cache_bytes_per_s, 0);
  } else {
    EXPECT_EQ(c.outer_cache_bytes_per_s, 0);
  }
  EXPECT_EQ(c.outer_cache_retention_idle_s, kRetentionIdleS);
  EXPECT_GE(c.outer_cache_retained_fraction, 0);
  EXPECT_LE(c.outer_cache_retained_fraction, 1);
  ASSERT_EQ(c.copy_by_size.size(), 7u);  // 16 KiB to 64 MiB
  for (std::size_t i = 0; i < c.copy_by_size.size(); ++i) {
    EXPECT_GT(c.copy_by_size[i].bytes_per_s, 0) << c.copy_by_size[i].bytes;
    if (i > 0) {
      EXPECT_GT(c.copy_by_size[i].bytes, c.copy_by_size[i - 1].bytes);
    }
  }
  Machine m = machine_from_calibration(c);
  // Evicts and loads cross a link of their own per worker and direction, carrying the
  // copy rates by size.
  for (int d = 0; d < 2; ++d)
    for (bool to_host : {true, false}) {
      const std::vector<LinkId> r = m.host_route(DeviceId(d), to_host);
      ASSERT_EQ(r.size(), 1u);
      const Link& l = m.link(r[0]);
      ASSERT_EQ(l.bytes_per_s_by_size.size(), c.copy_by_size.size()) << l.name;
      EXPECT_DOUBLE_EQ(l.bytes_per_s_at(1 << 20), c.copy_by_size[3].bytes_per_s) << l.name;
    }
  EXPECT_EQ(m.device_types[0].outer_cache_capacity_bytes, c.outer_cache_capacity_bytes);
  EXPECT_EQ(m.num_devices(), 2);
  EXPECT_EQ(m.barrier_latency_s, c.barrier_latency_s);
  EXPECT_EQ(m.device_types[0].copy_row_s, c.copy_row_s);
  EXPECT_EQ(m.device_types[0].generic_row_s, c.generic_row_s);
  // Each round alone gives figures too (compare pairs them with its runs), and only
  // measured rounds exist.
  for (int r = 0; r < 3; ++r) EXPECT_GT(cal.round_result(r).peak_flops_per_s, 0) << r;
  EXPECT_THROW((void)cal.round_result(3), Error);
  EXPECT_THROW((void)cal.round_result(-1), Error);
}

TEST(CpuCalibrator, BadOptionsAreErrors) {
  EXPECT_THROW(CpuCalibrator({0, 0.001, 1}), Error);
  EXPECT_THROW((void)calibrate_cpu({2, 0.001, 0}), Error);
}

}  // namespace
}  // namespace tessel::runtime

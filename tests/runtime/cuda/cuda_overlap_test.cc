// The overlap micro-benchmark on a real GPU (ctest label gpu): skips, naming what
// cudaGetDeviceCount found, where there is none.
#include "runtime/cuda/cuda_overlap.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/cuda/cuda_executor.h"

namespace tessel::runtime {
namespace {

TEST(CudaOverlap, MeasuresEveryConfigurationAndWritesAMeasuredMachine) {
  try {
    (void)cuda_devices();
  } catch (const Error& e) {
    GTEST_SKIP() << "looked for a CUDA GPU: " << e.what();
  }
  OverlapCalibrationOptions o;
  o.seconds_per_point = 0.02;
  o.gemm_n = 4096;
  const OverlapCalibration c = calibrate_cuda_overlap(o);
  ASSERT_EQ(c.points.size(), 6u);  // 2 mechanisms x 2 priorities, 2 priorities with SMs reserved
  for (const OverlapPoint& p : c.points) {
    EXPECT_GT(p.compute_alone_s, 0);
    EXPECT_GT(p.comm_alone_s, 0);
    // Together is never faster than perfect overlap (5% for timer noise), never slower
    // than running both one after the other by much.
    EXPECT_GE(p.total_s, 0.95 * p.perfect_s) << p.mechanism << " " << p.priority << " " << p.comm_sms;
    EXPECT_LE(p.total_s, 1.5 * p.serial_s) << p.mechanism << " " << p.priority << " " << p.comm_sms;
  }
  Machine m = machine_preset("h100-sxm-8");
  m.interference = interference_from_overlap(c, "test");
  m.validate("measured");
}

}  // namespace
}  // namespace tessel::runtime

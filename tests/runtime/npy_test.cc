#include "runtime/npy.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace tessel::runtime {
namespace {

std::string error_of(const std::string& bytes) {
  try {
    (void)parse_npy(bytes, "x.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Npy, RoundTripsFloat32AndFloat64OfEveryRankUpToThree) {
  for (DType t : {DType::f32, DType::f64})
    for (Shape s : {Shape{}, Shape{5}, Shape{2, 3}, Shape{2, 1, 4}}) {
      Tensor a = random_tensor(s, t, 3);
      Tensor b = parse_npy(encode_npy(a), "x.npy");
      EXPECT_EQ(b.shape, a.shape);
      EXPECT_EQ(b.dtype, t);
      EXPECT_EQ(b.data, a.data);
    }
}

TEST(Npy, HeaderIsWhatNumpyWrites) {
  std::string bytes = encode_npy(Tensor({4}, DType::f32));
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ((bytes.size() - 4 * 4) % 64, 0u);  // header padded to a multiple of 64
  EXPECT_NE(bytes.find("'shape': (4,)"), std::string::npos);
  EXPECT_NE(encode_npy(Tensor({2, 3}, DType::f64)).find("'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)"),
            std::string::npos);
  EXPECT_NE(encode_npy(Tensor({}, DType::f32)).find("'shape': ()"), std::string::npos);
}

TEST(Npy, BadFilesAreErrorsNamingTheFileAndTheProblem) {
  std::string good = encode_npy(random_tensor({3, 3}, DType::f32, 1));
  EXPECT_NE(error_of("hello").find("x.npy: not a .npy file"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, 20)).find("truncated .npy header"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, good.size() - 1)).find("truncated data"), std::string::npos);
  std::string ints = good;
  ints.replace(ints.find("<f4"), 3, "<i4");
  EXPECT_NE(error_of(ints).find("unsupported dtype '<i4'"), std::string::npos);
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_NE(error_of(fortran).find("Fortran-order"), std::string::npos);
  EXPECT_THROW((void)read_npy("/nonexistent/x.npy"), Error);
}

}  // namespace
}  // namespace tessel::runtime

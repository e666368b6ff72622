#include "runtime/npy.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/support/error_of.h"

namespace tessel::runtime {
namespace {

std::string error_of(const std::string& bytes) {
  return testing::error_of([&] { (void)parse_npy(bytes, "x.npy"); });
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

// A header may declare any shape: the bytes it implies are checked (for overflow, then
// against the data present) before anything is allocated. 2^30 elements in a 128-byte
// file would otherwise allocate 8 GiB first.
TEST(Npy, ADeclaredShapeBeyondTheDataIsAnErrorBeforeAllocating) {
  auto with_shape = [](const std::string& shape) {
    std::string bytes = encode_npy(random_tensor({3}, DType::f32, 1));
    const auto at = bytes.find("(3,)");
    bytes.replace(at, 4, shape);
    bytes.erase(bytes.find("\n") - (shape.size() - 4), shape.size() - 4);  // padding: same header length
    return bytes;
  };
  EXPECT_NE(error_of(with_shape("(1073741824,)")).find("x.npy: truncated data: 12 bytes for shape [1073741824] (need 4294967296)"),
            std::string::npos);
  EXPECT_NE(error_of(with_shape("(4294967296, 4294967296)")).find("x.npy: .npy header: shape [4294967296,4294967296]: its element count overflows"),
            std::string::npos);
  EXPECT_NE(error_of(with_shape("(2305843009213693952,)")).find("bytes of data: 2305843009213693952 x 4 overflows"),
            std::string::npos);
  EXPECT_NE(error_of(with_shape("(99999999999999999999,)")).find("does not fit 64 bits"), std::string::npos);
}

// The shape tuple is read strictly: (-1, 3) was read as (1, 3), (2.0, 3) as (2, 0, 3).
TEST(Npy, AShapeThatIsNotATupleOfNonNegativeIntegersIsAnError) {
  auto with_shape = [](const std::string& shape) {
    std::string bytes = encode_npy(random_tensor({3}, DType::f32, 1));
    bytes.replace(bytes.find("(3,)"), 4, shape);
    bytes.erase(bytes.find("\n") - (shape.size() - 4), shape.size() - 4);
    return bytes;
  };
  for (const char* bad : {"(-1, 3)", "(2.0, 3)", "(0x2, 3)", "('a', 3)", "(3,,)", "(, 3)", "(3 4)", "(3 )"})
    EXPECT_NE(error_of(with_shape(bad)).find("x.npy: .npy header: shape"), std::string::npos) << bad;
  EXPECT_EQ(error_of(with_shape("(3, )")), testing::kNoError);
  EXPECT_EQ(error_of(with_shape("( 3,)")), testing::kNoError);
}

}  // namespace
}  // namespace tessel::runtime

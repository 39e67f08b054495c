// Element types, shape parsing and the host-side decoding of stored elements.
#include <gtest/gtest.h>

#include <cstring>

#include "kc/common/dtype.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/problem.hpp"

namespace kc {
namespace {

TEST(DType, NamesRoundTripAndUnknownNamesAreExplained) {
  for (DType t : {DType::f64, DType::f32, DType::tf32, DType::f16, DType::bf16, DType::f8e4m3,
                  DType::f8e5m2, DType::i32, DType::i8, DType::i4})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  try {
    parse_dtype("float32");
    FAIL() << "expected kc::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << "lists the valid names";
  }
}

TEST(DType, SizesIncludingPackedInt4) {
  EXPECT_EQ(dtype_bytes(DType::f32, 10), 40u);
  EXPECT_EQ(dtype_bytes(DType::bf16, 3), 6u);
  EXPECT_EQ(dtype_bytes(DType::f8e4m3, 5), 5u);
  EXPECT_EQ(dtype_bytes(DType::i4, 5), 3u);  // rounds up to whole bytes
  EXPECT_EQ(dtype_bits(DType::tf32), 32);
  EXPECT_FALSE(dtype_is_float(DType::i8));
  EXPECT_TRUE(dtype_is_float(DType::f8e5m2));
}

TEST(DType, DecodesKnownBitPatterns) {
  const std::uint16_t bf16_one = 0x3F80, f16_minus_two = 0xC000;
  const std::uint8_t e4m3_one = 0x38, int4_pair = 0x9F;  // low nibble -1, high nibble -7
  const float f32_value = 2.5f;
  std::byte buffer[4];
  std::memcpy(buffer, &bf16_one, 2);
  EXPECT_EQ(decode_element(buffer, DType::bf16, 0), 1.0);
  std::memcpy(buffer, &f16_minus_two, 2);
  EXPECT_EQ(decode_element(buffer, DType::f16, 0), -2.0);
  std::memcpy(buffer, &e4m3_one, 1);
  EXPECT_EQ(decode_element(buffer, DType::f8e4m3, 0), 1.0);
  std::memcpy(buffer, &int4_pair, 1);
  EXPECT_EQ(decode_element(buffer, DType::i4, 0), -1.0);
  EXPECT_EQ(decode_element(buffer, DType::i4, 1), -7.0);
  std::memcpy(buffer, &f32_value, 4);
  EXPECT_EQ(decode_element(buffer, DType::f32, 0), 2.5);
}

TEST(Problem, ParsesShapesAndRejectsMalformedOnes) {
  EXPECT_EQ(parse_shape("4096x4096x4096"), (std::vector<std::int64_t>{4096, 4096, 4096}));
  EXPECT_EQ(parse_shape("17"), (std::vector<std::int64_t>{17}));
  for (const char* bad : {"", "x", "4096x", "4096xx2", "0x4x4", "-1x2x3", "4k", "12 x 3"})
    EXPECT_THROW(parse_shape(bad), Error) << bad;
}

TEST(Problem, LabelShowsTheDtypeAndTheParametersOffTheirDefaults) {
  const std::vector<ParamSpec> specs = {{"alpha", 1.0, ""}, {"beta", 0.0, ""}, {"causal", 0.0, ""}};
  Problem p = make_problem("op", specs, {3, 4, 5}, DType::bf16);
  EXPECT_EQ(p.shape(), "3x4x5");
  EXPECT_EQ(p.label(), "3x4x5 bf16");
  EXPECT_EQ(p.params_text(), "");
  p.set("beta", -1).set("alpha", 1.5);
  EXPECT_EQ(p.label(), "3x4x5 bf16 alpha=1.5 beta=-1");  // in the op's order
  EXPECT_EQ(p.param("alpha"), 1.5);
  EXPECT_EQ(p.param("causal"), 0.0);
  p.set("alpha", 1.0);
  EXPECT_EQ(p.label(), "3x4x5 bf16 beta=-1");
}

TEST(Problem, UnknownParametersAreRefusedNamingTheKnownOnes) {
  const std::vector<ParamSpec> specs = {{"alpha", 1.0, ""}, {"beta", 0.0, ""}};
  Problem p = make_problem("sgemm", specs, {3, 4, 5}, DType::f32);
  try {
    p.set("causal", 1.0);
    FAIL() << "an unknown parameter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no parameter 'causal' (its parameters: alpha, beta)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(p.param("window"), Error);
  EXPECT_THROW(make_problem("sgemm", specs, {3}, DType::f32, {{"gamma", 2.0}}), Error);
}

TEST(Problem, ParsesParameters) {
  EXPECT_EQ(parse_param("causal=1"), (std::pair<std::string, double>{"causal", 1.0}));
  EXPECT_EQ(parse_param("alpha=-0.5"), (std::pair<std::string, double>{"alpha", -0.5}));
  for (const char* bad : {"", "causal", "=1", "causal=", "causal=yes", "a=1x"})
    EXPECT_THROW(parse_param(bad), Error) << bad;
}

}  // namespace
}  // namespace kc

// The stage-2 entry points (kc/stage2/ops.hpp) refuse bad arguments with a kc::Error that names the
// op, the dtype, the argument and the rule — before any CUDA call, so these tests need no GPU.
// Pointers here are made-up addresses that are never dereferenced: a call that got past its checks
// would reach the CUDA runtime and fail with a kc::CudaError, which expect_refused reports as a
// missing check.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "kc/common/dtype.hpp"
#include "kc/common/error.hpp"
#include "kc/stage2/ops.hpp"
#include "support/refusals.hpp"

namespace kc::stage2 {
namespace {

using ::kc::testing::expect_refused;

// A made-up device address, 256-byte aligned plus `offset_bytes`.
template <typename T>
T* fake(std::uintptr_t slot, std::uintptr_t offset_bytes = 0) {
  return reinterpret_cast<T*>(std::uintptr_t{0x7f0000000000} + slot * 0x100000 + offset_bytes);
}

constexpr cudaStream_t kStream = nullptr;

template <typename T>
class Stage2Entry : public ::testing::Test {
 protected:
  static RmsNormArgs<T> rmsnorm_args() {
    RmsNormArgs<T> a;
    a.rows = 4;
    a.cols = 4096;
    a.x = fake<const T>(1);
    a.weight = fake<const T>(2);
    a.y = fake<T>(3);
    return a;
  }
  static ResidualRmsNormArgs<T> residual_args() {
    ResidualRmsNormArgs<T> a;
    a.rows = 4;
    a.cols = 4096;
    a.x = fake<const T>(1);
    a.residual = fake<const T>(2);
    a.weight = fake<const T>(3);
    a.sum = fake<T>(4);
    a.y = fake<T>(5);
    return a;
  }
  static LayerNormArgs<T> layernorm_args() {
    LayerNormArgs<T> a;
    a.rows = 4;
    a.cols = 4096;
    a.x = fake<const T>(1);
    a.weight = fake<const T>(2);
    a.bias = fake<const T>(3);
    a.y = fake<T>(4);
    return a;
  }
  static SoftmaxArgs<T> softmax_args() {
    SoftmaxArgs<T> a;
    a.rows = 4;
    a.cols = 4096;
    a.x = fake<const T>(1);
    a.y = fake<T>(2);
    return a;
  }
  static RowReduceArgs<T> row_reduce_args() {
    RowReduceArgs<T> a;
    a.rows = 4;
    a.cols = 4096;
    a.x = fake<const T>(1);
    a.out = fake<T>(2);
    return a;
  }
  static ElementwiseArgs<T> elementwise_args(ElementwiseKind kind) {
    ElementwiseArgs<T> a;
    a.kind = kind;
    a.count = 1 << 20;
    a.a = fake<const T>(1);
    a.b = fake<const T>(2);
    a.out = fake<T>(3);
    return a;
  }
  static BiasActivationArgs<T> bias_activation_args() {
    BiasActivationArgs<T> a;
    a.rows = 4;
    a.cols = 4096;
    a.x = fake<const T>(1);
    a.bias = fake<const T>(2);
    a.out = fake<T>(3);
    return a;
  }
  static SwigluArgs<T> swiglu_args() {
    SwigluArgs<T> a;
    a.rows = 4;
    a.hidden = 4096;
    a.gate_up = fake<const T>(1);
    a.out = fake<T>(2);
    return a;
  }
  static RopeArgs<T> rope_args() {
    RopeArgs<T> a;
    a.tokens = 16;
    a.q_heads = 32;
    a.kv_heads = 8;
    a.head_dim = 128;
    a.q = fake<T>(1);
    a.k = fake<T>(2);
    a.positions = fake<const int>(3);
    a.cos_sin = fake<const float>(4);
    return a;
  }
  static EmbeddingArgs<T> embedding_args() {
    EmbeddingArgs<T> a;
    a.tokens = 16;
    a.vocab = 32000;
    a.hidden = 4096;
    a.ids = fake<const int>(1);
    a.table = fake<const T>(2);
    a.out = fake<T>(3);
    a.error_record = fake<int>(4);
    return a;
  }
  static std::string dtype() { return std::string(dtype_name(dtype_of<T>::value)); }
};

using Stage2Types = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(Stage2Entry, Stage2Types);

TYPED_TEST(Stage2Entry, RmsNormRefusesNullPointersSizesEpsilonAndMisalignment) {
  using T = TypeParam;
  const std::string op = "kc::stage2::rmsnorm (" + TestFixture::dtype() + ")";
  auto args = TestFixture::rmsnorm_args();
  args.x = nullptr;
  expect_refused([&] { rmsnorm(args, kStream); }, {op, "x is a null pointer", "rows x cols input"});
  args = TestFixture::rmsnorm_args();
  args.weight = nullptr;
  expect_refused([&] { rmsnorm(args, kStream); }, {op, "weight is a null pointer"});
  args = TestFixture::rmsnorm_args();
  args.y = nullptr;
  expect_refused([&] { rmsnorm(args, kStream); }, {op, "y is a null pointer"});
  args = TestFixture::rmsnorm_args();
  args.rows = 0;
  expect_refused([&] { rmsnorm(args, kStream); }, {op, "rows = 0", "at least 1", "skip the call"});
  args = TestFixture::rmsnorm_args();
  args.rows = -3;
  expect_refused([&] { rmsnorm(args, kStream); }, {op, "rows = -3"});
  args = TestFixture::rmsnorm_args();
  args.cols = 0;
  expect_refused([&] { rmsnorm(args, kStream); }, {op, "cols = 0"});
  args = TestFixture::rmsnorm_args();
  args.cols = static_cast<int>(kMaxRowLength) + 1;
  expect_refused([&] { rmsnorm(args, kStream); },
                 {op, "cols = 1073741825 exceeds 1073741824", "32-bit", "split"});
  for (const float eps : {0.f, -1e-6f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    args = TestFixture::rmsnorm_args();
    args.eps = eps;
    expect_refused([&] { rmsnorm(args, kStream); },
                   {op, "eps = ", "finite number > 0", "kRmsNormEps"});
  }
  // One byte off an element: no rung can read that (16-byte misalignment alone is fine: scalar
  // path).
  args = TestFixture::rmsnorm_args();
  args.x = fake<const T>(1, 1);
  expect_refused([&] { rmsnorm(args, kStream); },
                 {op, "x = ", "is not aligned to " + std::to_string(sizeof(T)) + " bytes",
                  "the size of one " + TestFixture::dtype()});
}

TYPED_TEST(Stage2Entry, ResidualRmsNormRefusesEachMissingTensorAndBadEpsilon) {
  const std::string op = "kc::stage2::residual_rmsnorm (" + TestFixture::dtype() + ")";
  auto args = TestFixture::residual_args();
  args.residual = nullptr;
  expect_refused([&] { residual_rmsnorm(args, kStream); }, {op, "residual is a null pointer"});
  args = TestFixture::residual_args();
  args.sum = nullptr;
  expect_refused([&] { residual_rmsnorm(args, kStream); }, {op, "sum is a null pointer"});
  args = TestFixture::residual_args();
  args.x = nullptr;
  expect_refused([&] { residual_rmsnorm(args, kStream); }, {op, "x is a null pointer"});
  args = TestFixture::residual_args();
  args.cols = -1;
  expect_refused([&] { residual_rmsnorm(args, kStream); }, {op, "cols = -1"});
  args = TestFixture::residual_args();
  args.eps = 0.f;
  expect_refused([&] { residual_rmsnorm(args, kStream); }, {op, "eps = 0"});
}

TYPED_TEST(Stage2Entry, LayerNormRefusesMissingBiasAndBadEpsilon) {
  const std::string op = "kc::stage2::layernorm (" + TestFixture::dtype() + ")";
  auto args = TestFixture::layernorm_args();
  args.bias = nullptr;
  expect_refused([&] { layernorm(args, kStream); },
                 {op, "bias is a null pointer", "the cols biases"});
  args = TestFixture::layernorm_args();
  args.eps = -1.f;
  expect_refused([&] { layernorm(args, kStream); }, {op, "eps = -1", "kLayerNormEps"});
  args = TestFixture::layernorm_args();
  args.rows = 0;
  expect_refused([&] { layernorm(args, kStream); }, {op, "rows = 0"});
}

TYPED_TEST(Stage2Entry, SoftmaxAndRowReduceRefuseBadSizesPointersAndKinds) {
  using T = TypeParam;
  const std::string softmax_op = "kc::stage2::softmax (" + TestFixture::dtype() + ")";
  auto s = TestFixture::softmax_args();
  s.y = nullptr;
  expect_refused([&] { softmax(s, kStream); }, {softmax_op, "y is a null pointer"});
  s = TestFixture::softmax_args();
  s.cols = 0;
  expect_refused([&] { softmax(s, kStream); }, {softmax_op, "cols = 0"});
  s = TestFixture::softmax_args();
  s.y = fake<T>(2, 1);
  expect_refused([&] { softmax(s, kStream); }, {softmax_op, "y = ", "not aligned"});

  const std::string reduce_op = "kc::stage2::row_reduce (" + TestFixture::dtype() + ")";
  auto r = TestFixture::row_reduce_args();
  r.kind = static_cast<RowReduction>(9);
  expect_refused([&] { row_reduce(r, kStream); },
                 {reduce_op, "kind (RowReduction) has the value 9"});
  r = TestFixture::row_reduce_args();
  r.out = nullptr;
  expect_refused([&] { row_reduce(r, kStream); }, {reduce_op, "out is a null pointer"});
  r = TestFixture::row_reduce_args();
  r.rows = 0;
  expect_refused([&] { row_reduce(r, kStream); }, {reduce_op, "rows = 0"});
}

TYPED_TEST(Stage2Entry, ElementwiseRefusesBadCountsKindsActivationsAndScales) {
  const std::string op = "kc::stage2::elementwise (" + TestFixture::dtype() + ")";
  auto args = TestFixture::elementwise_args(ElementwiseKind::add);
  args.count = 0;
  expect_refused([&] { elementwise(args, kStream); }, {op, "count = 0"});
  args = TestFixture::elementwise_args(ElementwiseKind::add);
  args.count = kMaxElementCount + 1;
  expect_refused([&] { elementwise(args, kStream); },
                 {op, "count = 274877906945", "kMaxElementCount"});
  args = TestFixture::elementwise_args(ElementwiseKind::add);
  args.b = nullptr;
  expect_refused([&] { elementwise(args, kStream); }, {op, "b is a null pointer", "second"});
  args = TestFixture::elementwise_args(ElementwiseKind::activation);
  args.out = nullptr;
  expect_refused([&] { elementwise(args, kStream); }, {op, "out is a null pointer"});
  args = TestFixture::elementwise_args(ElementwiseKind::activation);
  args.activation = static_cast<Activation>(17);
  expect_refused([&] { elementwise(args, kStream); }, {op, "activation has the value 17"});
  args = TestFixture::elementwise_args(static_cast<ElementwiseKind>(5));
  expect_refused([&] { elementwise(args, kStream); },
                 {op, "kind (ElementwiseKind) has the value 5"});
  args = TestFixture::elementwise_args(ElementwiseKind::scale);
  args.alpha = std::numeric_limits<float>::infinity();
  expect_refused([&] { elementwise(args, kStream); }, {op, "alpha = inf is not finite"});
}

TYPED_TEST(Stage2Entry, BiasActivationAndSwigluRefuseBadArguments) {
  const std::string bias_op = "kc::stage2::bias_activation (" + TestFixture::dtype() + ")";
  auto b = TestFixture::bias_activation_args();
  b.bias = nullptr;
  expect_refused([&] { bias_activation(b, kStream); }, {bias_op, "bias is a null pointer"});
  b = TestFixture::bias_activation_args();
  b.activation = static_cast<Activation>(-1);
  expect_refused([&] { bias_activation(b, kStream); }, {bias_op, "activation has the value -1"});
  b = TestFixture::bias_activation_args();
  b.cols = 0;
  expect_refused([&] { bias_activation(b, kStream); }, {bias_op, "cols = 0"});

  const std::string swiglu_op = "kc::stage2::swiglu (" + TestFixture::dtype() + ")";
  auto s = TestFixture::swiglu_args();
  s.gate_up = nullptr;
  expect_refused([&] { swiglu(s, kStream); },
                 {swiglu_op, "gate_up is a null pointer", "[gate | up]"});
  s = TestFixture::swiglu_args();
  s.hidden = static_cast<int>(kMaxRowLength / 2) + 1;
  expect_refused([&] { swiglu(s, kStream); },
                 {swiglu_op, "hidden = 536870913 exceeds 536870912", "2 * hidden"});
  s = TestFixture::swiglu_args();
  s.rows = 0;
  expect_refused([&] { swiglu(s, kStream); }, {swiglu_op, "rows = 0"});
}

TYPED_TEST(Stage2Entry, RopeRefusesOddHeadDimBadTablesAndSizes) {
  const std::string op = "kc::stage2::rope (" + TestFixture::dtype() + ")";
  auto args = TestFixture::rope_args();
  for (const int head_dim : {127, 1, 0, -2}) {
    args = TestFixture::rope_args();
    args.head_dim = head_dim;
    expect_refused([&] { rope(args, 4096, kStream); },
                   {op, "head_dim = " + std::to_string(head_dim), "even and at least 2"});
  }
  args = TestFixture::rope_args();
  expect_refused([&] { rope(args, 0, kStream); }, {op, "table_positions = 0", "rows of cos_sin"});
  args = TestFixture::rope_args();
  args.positions = nullptr;
  expect_refused([&] { rope(args, 4096, kStream); }, {op, "positions is a null pointer"});
  args = TestFixture::rope_args();
  args.cos_sin = nullptr;
  expect_refused([&] { rope(args, 4096, kStream); }, {op, "cos_sin is a null pointer"});
  args = TestFixture::rope_args();
  args.cos_sin = fake<const float>(4, 2);
  expect_refused([&] { rope(args, 4096, kStream); },
                 {op, "cos_sin = ", "not aligned to 4 bytes", "one float"});
  args = TestFixture::rope_args();
  args.positions = fake<const int>(3, 2);
  expect_refused([&] { rope(args, 4096, kStream); }, {op, "positions = ", "one int"});
  args = TestFixture::rope_args();
  args.k = nullptr;
  expect_refused([&] { rope(args, 4096, kStream); }, {op, "k is a null pointer"});
  args = TestFixture::rope_args();
  args.kv_heads = 0;
  expect_refused([&] { rope(args, 4096, kStream); }, {op, "kv_heads = 0"});
  args = TestFixture::rope_args();
  args.tokens = 0;
  expect_refused([&] { rope(args, 4096, kStream); }, {op, "tokens = 0"});
  args = TestFixture::rope_args();
  args.q_heads = INT_MAX / 64;  // (q_heads + kv_heads) * 64 pairs per token: past 32-bit indexing
  expect_refused([&] { rope(args, 4096, kStream); },
                 {op, "(q_heads + kv_heads) * head_dim / 2", "32-bit"});
  args = TestFixture::rope_args();
  args.tokens = INT_MAX;  // 2^31 tokens x 2560 pairs
  expect_refused([&] { rope(args, 4096, kStream); },
                 {op, "tokens * (q_heads + kv_heads)", "kMaxElementCount"});
  args = TestFixture::rope_args();
  args.layout = static_cast<RopeLayout>(3);
  expect_refused([&] { rope(args, 4096, kStream); }, {op, "layout (RopeLayout) has the value 3"});
}

TYPED_TEST(Stage2Entry, EmbeddingRefusesMissingRecordAndBadSizes) {
  for (const bool checked : {false, true}) {
    const std::string op =
        std::string(checked ? "kc::stage2::embedding_checked (" : "kc::stage2::embedding (") +
        TestFixture::dtype() + ")";
    const auto call = [checked](const auto& a) {
      if (checked)
        embedding_checked(a, kStream);
      else
        embedding(a, kStream);
    };
    auto args = TestFixture::embedding_args();
    args.error_record = nullptr;
    expect_refused([&] { call(args); },
                   {op, "error_record is a null pointer", "first bad token position"});
    args = TestFixture::embedding_args();
    args.ids = nullptr;
    expect_refused([&] { call(args); }, {op, "ids is a null pointer"});
    args = TestFixture::embedding_args();
    args.ids = fake<const int>(1, 1);
    expect_refused([&] { call(args); }, {op, "ids = ", "not aligned to 4 bytes"});
    args = TestFixture::embedding_args();
    args.vocab = 0;
    expect_refused([&] { call(args); }, {op, "vocab = 0"});
    args = TestFixture::embedding_args();
    args.hidden = INT_MAX;
    expect_refused([&] { call(args); }, {op, "hidden = 2147483647 exceeds 1073741824"});
    args = TestFixture::embedding_args();
    args.table = nullptr;
    expect_refused([&] { call(args); }, {op, "table is a null pointer", "vocab x hidden"});
  }
}

}  // namespace
}  // namespace kc::stage2

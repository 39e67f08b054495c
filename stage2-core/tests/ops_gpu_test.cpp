// The stage-2 entry points (kc/stage2/ops.hpp) on a GPU:
//   - bad arguments are refused with kc::Error before anything is launched: afterwards the CUDA
//     context is clean (no pending error), the output still holds the sentinel written before
//     the call, and a correct call right after it works;
//   - every entry, in every dtype, matches the CPU reference (kc/stage2/references.hpp) on row
//     lengths that take each code path of its rung (16-byte vectors with every slot of the row
//     team full, vectors with a partial team, scalar accesses, a row streamed because it is too
//     long to hold in registers), and reports the rung it ran.
// Skips without a GPU. The references are called directly; the harness is not involved.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/compare.hpp"
#include "kc/common/error.hpp"
#include "kc/common/op_builder.hpp"
#include "kc/core/dtype_traits.hpp"
#include "kc/stage2/ops.hpp"
#include "kc/stage2/references.hpp"
#include "support/gpu_test.hpp"
#include "support/refusals.hpp"

namespace kc::stage2 {
namespace {

using ::kc::testing::expect_refused;
using ::kc::testing::expect_clean_context;

constexpr cudaStream_t kStream = nullptr;  // the legacy stream: copies and launches in order

// Deterministic values in [lo, hi).
std::vector<double> values(std::size_t count, std::uint64_t seed, double lo, double hi) {
  std::vector<double> v(count);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (double& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * (static_cast<double>(state >> 11) / 9007199254740992.0);
  }
  return v;
}

// Device memory holding `count` elements of T, plus the values as the device holds them (rounded
// to T), so that references see exactly the kernel's inputs.
template <typename T>
class DeviceTensor {
 public:
  explicit DeviceTensor(const std::vector<double>& v, std::size_t padding = 0)
      : buffer_(v.size() + padding), host_(v.size()), padding_(padding) {
    std::vector<T> encoded(v.size() + padding, core::from_float<T>(0.f));
    for (std::size_t i = 0; i < v.size(); ++i) {
      encoded[padding + i] = core::from_float<T>(static_cast<float>(v[i]));
      host_[i] = core::to_float(encoded[padding + i]);
    }
    buffer_.copy_from_host(encoded);
  }
  // The first element: `padding` elements after the start of the allocation.
  T* data() { return buffer_.data() + padding_; }
  const std::vector<double>& host() const { return host_; }
  std::vector<double> read() const {
    const std::vector<T> raw = buffer_.to_host();
    std::vector<double> out(host_.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = core::to_float(raw[padding_ + i]);
    return out;
  }

 private:
  DeviceBuffer<T> buffer_;
  std::vector<double> host_;
  std::size_t padding_ = 0;
};

// The harness's accuracy model (kc/common/compare.hpp): outputs rounded to T once (twice where
// the op's unfused form stores an intermediate), `terms` values summed in FP32 per output.
template <typename T>
Accuracy accuracy(double terms = 1.0, int roundings = 1) {
  Accuracy a;
  a.output = dtype_of_v<T>;
  a.terms = terms;
  a.roundings = roundings;
  return a;
}

void expect_close(const std::vector<double>& out, const std::vector<double>& ref, const Accuracy& accuracy,
                  const std::string& what) {
  ASSERT_EQ(out.size(), ref.size()) << what;
  const CompareResult result = compare(out.data(), ref.data(), out.size(), accuracy);
  EXPECT_TRUE(result.passed) << what << ": " << result.summary();
}

// ---- refusals on the device
// ----------------------------------------------------------------------

TEST(Stage2EntryRefusals, BadArgumentsWriteNothingAndLeaveTheContextUsable) {
  KC_SKIP_WITHOUT_GPU();
  using T = __nv_bfloat16;
  constexpr int kRows = 6, kCols = 1024;
  const std::vector<double> sentinel(kRows * kCols, 7.0);
  DeviceTensor<T> x(values(kRows * kCols, 1, -2, 2)), weight(values(kCols, 2, 0.5, 1.5));
  DeviceTensor<T> y(sentinel), bias(values(kCols, 3, -0.5, 0.5));

  RmsNormArgs<T> rms;
  rms.rows = kRows;
  rms.cols = kCols;
  rms.x = x.data();
  rms.weight = weight.data();
  rms.y = y.data();
  rms.eps = 0.f;
  expect_refused([&] { rmsnorm(rms, kStream); }, "eps = 0");
  rms.eps = kRmsNormEps;
  rms.weight = nullptr;
  expect_refused([&] { rmsnorm(rms, kStream); }, "weight is a null pointer");
  rms.weight = weight.data();
  rms.cols = 0;
  expect_refused([&] { rmsnorm(rms, kStream); }, "cols = 0");
  rms.cols = kCols;
  expect_clean_context();
  EXPECT_EQ(y.read(), sentinel) << "a refused rmsnorm wrote y";

  SoftmaxArgs<T> soft;
  soft.rows = kRows;
  soft.cols = kCols;
  soft.x = x.data();
  soft.y = reinterpret_cast<T*>(reinterpret_cast<char*>(y.data()) + 1);  // not an element address
  expect_refused([&] { softmax(soft, kStream); }, "not aligned to 2 bytes");
  LayerNormArgs<T> norm;
  norm.rows = kRows;
  norm.cols = kCols;
  norm.x = x.data();
  norm.weight = weight.data();
  norm.bias = nullptr;
  norm.y = y.data();
  expect_refused([&] { layernorm(norm, kStream); }, "bias is a null pointer");
  BiasActivationArgs<T> act;
  act.activation = static_cast<Activation>(42);
  act.rows = kRows;
  act.cols = kCols;
  act.x = x.data();
  act.bias = bias.data();
  act.out = y.data();
  expect_refused([&] { bias_activation(act, kStream); }, "activation has the value 42");
  expect_clean_context();
  EXPECT_EQ(y.read(), sentinel) << "a refused softmax, layernorm or bias_activation wrote y";

  // RoPE works in place: a refused call leaves Q and K as they were.
  DeviceTensor<T> q(values(2 * 2 * 6, 4, -1, 1)), k(values(2 * 1 * 6, 5, -1, 1));
  DeviceBuffer<int> positions(2);
  positions.copy_from_host(std::vector<int>{0, 1});
  DeviceTensor<float> table(values(2 * 6, 6, -1, 1));
  RopeArgs<T> rot;
  rot.tokens = 2;
  rot.q_heads = 2;
  rot.kv_heads = 1;
  rot.head_dim = 5;  // odd
  rot.q = q.data();
  rot.k = k.data();
  rot.positions = positions.data();
  rot.cos_sin = table.data();
  expect_refused([&] { rope(rot, 2, kStream); }, "head_dim = 5");
  rot.head_dim = 6;
  expect_refused([&] { rope(rot, 0, kStream); }, "table_positions = 0");
  expect_clean_context();
  EXPECT_EQ(q.read(), q.host()) << "a refused rope rotated q";
  EXPECT_EQ(k.read(), k.host()) << "a refused rope rotated k";

  // The embedding without an error record: the gather must not start.
  DeviceBuffer<int> ids(kRows);
  ids.copy_from_host(std::vector<int>{0, 1, 2, 3, 4, 5});
  DeviceTensor<T> embeddings(values(8 * kCols, 7, -1, 1));
  EmbeddingArgs<T> gather;
  gather.tokens = kRows;
  gather.vocab = 8;
  gather.hidden = kCols;
  gather.ids = ids.data();
  gather.table = embeddings.data();
  gather.out = y.data();
  gather.error_record = nullptr;
  expect_refused([&] { embedding(gather, kStream); }, "error_record is a null pointer");
  expect_clean_context();
  EXPECT_EQ(y.read(), sentinel) << "a refused embedding wrote out";

  // The context still runs a correct call.
  EXPECT_EQ(rmsnorm(rms, kStream), "rmsnorm/05_row_in_registers");
  std::vector<double> want(kRows * kCols);
  rmsnorm_reference(x.host().data(), weight.host().data(), kRows, kCols, kRmsNormEps, want.data());
  expect_close(y.read(), want, accuracy<T>(kCols), "rmsnorm after the refusals");
  expect_clean_context();
}

// ---- every entry against its reference -------------------------------------------------------

template <typename T>
class Stage2EntryMatchesReference : public ::testing::Test {};
using Stage2Types = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(Stage2EntryMatchesReference, Stage2Types);

struct RowShape {
  int rows, cols;
};
// 16-byte vectors with every slot full; vectors with a partial team; scalar accesses (4097 is
// odd); a row too long to hold in registers, streamed.
const std::vector<RowShape> kRowShapes = {{3, 4096}, {5, 1000}, {2, 4097}, {1, 40000}};

std::string label(const char* op, RowShape s) {
  return std::string(op) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols);
}

TYPED_TEST(Stage2EntryMatchesReference, Norms) {
  KC_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (const RowShape s : kRowShapes) {
    const std::size_t count = static_cast<std::size_t>(s.rows) * s.cols;
    DeviceTensor<T> x(values(count, 11, -2, 2)), residual(values(count, 12, -2, 2));
    DeviceTensor<T> weight(values(s.cols, 13, 0.5, 1.5)), bias(values(s.cols, 14, -0.5, 0.5));
    DeviceTensor<T> y(std::vector<double>(count, 0.0)), sum(std::vector<double>(count, 0.0));
    std::vector<double> want(count), want_sum(count);

    RmsNormArgs<T> rms;
    rms.rows = s.rows;
    rms.cols = s.cols;
    rms.x = x.data();
    rms.weight = weight.data();
    rms.y = y.data();
    EXPECT_EQ(rmsnorm(rms, kStream), "rmsnorm/05_row_in_registers");
    rmsnorm_reference(x.host().data(), weight.host().data(), s.rows, s.cols, kRmsNormEps,
                      want.data());
    expect_close(y.read(), want, accuracy<T>(s.cols), label("rmsnorm", s));

    ResidualRmsNormArgs<T> res;
    res.rows = s.rows;
    res.cols = s.cols;
    res.x = x.data();
    res.residual = residual.data();
    res.weight = weight.data();
    res.sum = sum.data();
    res.y = y.data();
    EXPECT_EQ(residual_rmsnorm(res, kStream), "residual_rmsnorm/03_fused_in_registers");
    residual_rmsnorm_reference(x.host().data(), residual.host().data(), weight.host().data(),
                               s.rows, s.cols, kRmsNormEps,
                               [](double v) { return round_to(dtype_of_v<T>, v); }, want_sum.data(),
                               want.data());
    expect_close(sum.read(), want_sum, accuracy<T>(), label("residual_rmsnorm sum", s));
    expect_close(y.read(), want, accuracy<T>(s.cols), label("residual_rmsnorm y", s));

    LayerNormArgs<T> ln;
    ln.rows = s.rows;
    ln.cols = s.cols;
    ln.x = x.data();
    ln.weight = weight.data();
    ln.bias = bias.data();
    ln.y = y.data();
    // Only 4096 fills every slot of its row team (ops.cpp: layernorm()).
    EXPECT_EQ(layernorm(ln, kStream),
              s.cols == 4096 ? "layernorm/04_row_in_registers" : "layernorm/05_lean_two_pass")
        << label("layernorm", s);
    layernorm_reference(x.host().data(), weight.host().data(), bias.host().data(), s.rows, s.cols,
                        kLayerNormEps, want.data());
    expect_close(y.read(), want, accuracy<T>(s.cols), label("layernorm", s));
  }
  expect_clean_context();
}

TYPED_TEST(Stage2EntryMatchesReference, SoftmaxAndRowReductions) {
  KC_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (const RowShape s : kRowShapes) {
    const std::size_t count = static_cast<std::size_t>(s.rows) * s.cols;
    DeviceTensor<T> x(values(count, 21, -4, 4)), y(std::vector<double>(count, 0.0));
    std::vector<double> want(count);
    SoftmaxArgs<T> soft;
    soft.rows = s.rows;
    soft.cols = s.cols;
    soft.x = x.data();
    soft.y = y.data();
    EXPECT_EQ(softmax(soft, kStream), "softmax/06_lean_exp");
    softmax_reference(x.host().data(), s.rows, s.cols, want.data());
    // Outputs average 1 / cols: an absolute bound of that scale (a kernel writing zeros fails).
    expect_close(y.read(), want, accuracy<T>(s.cols), label("softmax", s));

    // Reductions of values in [-1, 1]: sums of squares of long rows stay inside fp16's range.
    DeviceTensor<T> xr(values(count, 22, -1, 1)), out(std::vector<double>(s.rows, 0.0));
    std::vector<double> want_rows(s.rows);
    for (const RowReduction kind :
         {RowReduction::sum, RowReduction::max, RowReduction::mean, RowReduction::sum_squares}) {
      RowReduceArgs<T> reduce;
      reduce.kind = kind;
      reduce.rows = s.rows;
      reduce.cols = s.cols;
      reduce.x = xr.data();
      reduce.out = out.data();
      EXPECT_EQ(row_reduce(reduce, kStream), "row_reduce/03_vectorized");
      row_reduce_reference(kind, xr.host().data(), s.rows, s.cols, want_rows.data());
      // A max is exact; the sums carry the rounding error of cols FP32 additions.
      const double terms = kind == RowReduction::max ? 1.0 : static_cast<double>(s.cols);
      expect_close(out.read(), want_rows, accuracy<T>(terms),
                   label("row_reduce", s) + " kind " + std::to_string(static_cast<int>(kind)));
    }
  }
  expect_clean_context();
}

TYPED_TEST(Stage2EntryMatchesReference, ElementwiseBiasActivationAndSwiglu) {
  KC_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const Activation activations[] = {Activation::relu, Activation::silu, Activation::gelu_tanh,
                                    Activation::gelu_erf};
  for (const RowShape s : {RowShape{7, 4096}, RowShape{3, 1001}}) {  // vectors; scalar accesses
    const std::size_t count = static_cast<std::size_t>(s.rows) * s.cols;
    DeviceTensor<T> a(values(count, 31, -3, 3)), b(values(count, 32, -3, 3));
    DeviceTensor<T> out(std::vector<double>(count, 0.0));
    DeviceTensor<T> bias(values(s.cols, 33, -0.5, 0.5));
    std::vector<double> want(count);

    ElementwiseArgs<T> ew;
    ew.count = static_cast<std::int64_t>(count);
    ew.a = a.data();
    ew.b = b.data();
    ew.out = out.data();
    ew.kind = ElementwiseKind::add;
    EXPECT_EQ(elementwise(ew, kStream), "elementwise/02_vectorized");
    for (std::size_t i = 0; i < count; ++i) want[i] = a.host()[i] + b.host()[i];
    expect_close(out.read(), want, accuracy<T>(), label("add", s));
    ew.kind = ElementwiseKind::scale;
    ew.alpha = -1.75f;
    ew.b = nullptr;  // not used by scale
    elementwise(ew, kStream);
    for (std::size_t i = 0; i < count; ++i) want[i] = -1.75 * a.host()[i];
    expect_close(out.read(), want, accuracy<T>(), label("scale", s));
    for (const Activation activation : activations) {
      const std::string name =
          label("activation", s) + " " + std::to_string(static_cast<int>(activation));
      ew.kind = ElementwiseKind::activation;
      ew.activation = activation;
      elementwise(ew, kStream);
      for (std::size_t i = 0; i < count; ++i)
        want[i] = activation_reference(activation, a.host()[i]);
      expect_close(out.read(), want, accuracy<T>(), name);

      BiasActivationArgs<T> ba;
      ba.activation = activation;
      ba.rows = s.rows;
      ba.cols = s.cols;
      ba.x = a.data();
      ba.bias = bias.data();
      ba.out = out.data();
      EXPECT_EQ(bias_activation(ba, kStream), "bias_activation/02_fused");
      for (std::size_t i = 0; i < count; ++i)
        want[i] = activation_reference(activation, a.host()[i] + bias.host()[i % s.cols]);
      expect_close(out.read(), want, accuracy<T>(1.0, 2), "bias " + name);
    }

    // SwiGLU: rows x (2 * hidden) in, rows x hidden out; hidden = cols / 2 rounded down.
    const int hidden = s.cols / 2;
    DeviceTensor<T> swiglu_out(std::vector<double>(static_cast<std::size_t>(s.rows) * hidden, 0.0));
    SwigluArgs<T> sw;
    sw.rows = s.rows;
    sw.hidden = hidden;
    sw.gate_up = a.data();
    sw.out = swiglu_out.data();
    EXPECT_EQ(swiglu(sw, kStream), "swiglu/02_vectorized");
    std::vector<double> want_swiglu(static_cast<std::size_t>(s.rows) * hidden);
    swiglu_reference(a.host().data(), s.rows, hidden, want_swiglu.data());
    expect_close(swiglu_out.read(), want_swiglu, accuracy<T>(), label("swiglu", s));
  }
  expect_clean_context();
}

TYPED_TEST(Stage2EntryMatchesReference, RopeBothLayoutsIncludingUnalignedPairs) {
  KC_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  constexpr int kTokens = 5, kQHeads = 4, kKvHeads = 2, kTablePositions = 16;
  const std::vector<int> host_positions = {7, 0, 3, 15, 2};
  DeviceBuffer<int> positions(kTokens);
  positions.copy_from_host(host_positions);
  const std::vector<double> position_values(host_positions.begin(), host_positions.end());
  for (const int head_dim : {64, 6}) {  // 16-byte vectors; one pair per thread
    // cos of pair i at [p][i], sin at [p][head_dim / 2 + i], as the engine's table.
    const int half = head_dim / 2;
    std::vector<double> table(static_cast<std::size_t>(kTablePositions) * head_dim);
    for (int p = 0; p < kTablePositions; ++p)
      for (int i = 0; i < half; ++i) {
        const double angle = rope_angle(p, i, head_dim, kRopeBase);
        table[static_cast<std::size_t>(p) * head_dim + i] = std::cos(angle);
        table[static_cast<std::size_t>(p) * head_dim + half + i] = std::sin(angle);
      }
    DeviceTensor<float> cos_sin(table);
    for (const RopeLayout layout : {RopeLayout::rotate_half, RopeLayout::interleaved}) {
      // padding 1: Q and K one element past an aligned address — aligned to an element, not to
      // an interleaved (a, b) pair: interleaved goes to rung 01.
      for (const std::size_t padding : {std::size_t{0}, std::size_t{1}}) {
        const std::string name = "rope head_dim " + std::to_string(head_dim) + " layout " +
                                 std::to_string(static_cast<int>(layout)) + " padding " +
                                 std::to_string(padding);
        DeviceTensor<T> q(values(static_cast<std::size_t>(kTokens) * kQHeads * head_dim, 41, -1, 1),
                          padding);
        DeviceTensor<T> k(
            values(static_cast<std::size_t>(kTokens) * kKvHeads * head_dim, 42, -1, 1), padding);
        RopeArgs<T> args;
        args.layout = layout;
        args.tokens = kTokens;
        args.q_heads = kQHeads;
        args.kv_heads = kKvHeads;
        args.head_dim = head_dim;
        args.q = q.data();
        args.k = k.data();
        args.positions = positions.data();
        args.cos_sin = cos_sin.data();
        const bool rung01 = layout == RopeLayout::interleaved && padding == 1;
        EXPECT_EQ(rope(args, kTablePositions, kStream),
                  rung01 ? "rope/01_naive" : "rope/02_vectorized")
            << name;
        std::vector<double> want_q = q.host(), want_k = k.host();
        rope_reference(layout, want_q.data(), kTokens, kQHeads, head_dim, position_values.data(),
                       kRopeBase);
        rope_reference(layout, want_k.data(), kTokens, kKvHeads, head_dim, position_values.data(),
                       kRopeBase);
        expect_close(q.read(), want_q, accuracy<T>(), name + " q");
        expect_close(k.read(), want_k, accuracy<T>(), name + " k");
      }
    }
  }
  expect_clean_context();
}

TYPED_TEST(Stage2EntryMatchesReference, EmbeddingGathersAndTheCheckedEntryNamesABadId) {
  KC_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  constexpr int kVocab = 50;
  for (const int hidden : {72, 13}) {  // 16-byte rows; scalar copies
    const std::vector<int> host_ids = {3, 49, 0, 17, 3, 28};
    const int tokens = static_cast<int>(host_ids.size());
    DeviceBuffer<int> ids(host_ids.size());
    ids.copy_from_host(host_ids);
    DeviceTensor<T> table(values(static_cast<std::size_t>(kVocab) * hidden, 51, -1, 1));
    DeviceTensor<T> out(std::vector<double>(static_cast<std::size_t>(tokens) * hidden, 9.0));
    DeviceBuffer<int> record(1);
    record.copy_from_host(std::vector<int>{kNoBadToken});
    EmbeddingArgs<T> args;
    args.tokens = tokens;
    args.vocab = kVocab;
    args.hidden = hidden;
    args.ids = ids.data();
    args.table = table.data();
    args.out = out.data();
    args.error_record = record.data();
    EXPECT_EQ(embedding(args, kStream), "embedding/02_vectorized");
    const std::vector<double> id_values(host_ids.begin(), host_ids.end());
    std::vector<double> want(static_cast<std::size_t>(tokens) * hidden);
    embedding_reference(id_values.data(), table.host().data(), tokens, kVocab, hidden, want.data());
    EXPECT_EQ(out.read(), want) << "hidden " << hidden;  // a copy: exact
    EXPECT_EQ(record.to_host()[0], kNoBadToken);

    EXPECT_EQ(embedding_checked(args, kStream), "embedding/02_vectorized");
    ids.copy_from_host(std::vector<int>{3, 49, kVocab, 17, -1, 28});
    expect_refused([&] { embedding_checked(args, kStream); }, "token id 50 at position 2");
    const std::vector<double> rows = out.read();
    for (int h = 0; h < hidden; ++h) EXPECT_EQ(rows[static_cast<std::size_t>(2) * hidden + h], 0.0);
  }
  expect_clean_context();
}

}  // namespace
}  // namespace kc::stage2

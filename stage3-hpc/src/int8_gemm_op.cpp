// The int8_gemm and int8_gemm_dequant ops (kc/stage3/int8_gemm.hpp): their operands, references,
// problems and the cuBLASLt baselines.
#include "kc/stage3/int8_gemm.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <utility>

#include "kc/common/blas.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/gemm.hpp"
#include "kc/common/op_builder.hpp"
#include "kc/stage3/fp8_gemm_args.hpp"
#include "src/int8_gemm_edges.hpp"

namespace kc::stage3 {

// The device half of the references (src/gemm_references.cu): values[r][c] *= scales[map(r, c)].
void fp8_dequantize_reference(double* values, std::int64_t rows, std::int64_t cols, const float* scales,
                              Fp8ScaleMap map, cudaStream_t stream);
// The dequantizing baseline's second kernel (src/int8_gemm_baseline.cu): c = c32 x s_a[row] x s_b[col].
void int8_dequantize_baseline(const std::int32_t* c32, const float* scale_a, const float* scale_b, bf16* c, int m,
                              int n, cudaStream_t stream);

namespace {

std::int64_t m_of(const Problem& p) { return p.dims[0]; }
std::int64_t n_of(const Problem& p) { return p.dims[1]; }
std::int64_t k_of(const Problem& p) { return p.dims[2]; }
bool dequantizes(const Problem& p) { return p.op == kInt8GemmDequantOp; }

// One scale per row of the operand: scale[row], whatever the column.
constexpr Fp8ScaleMap kPerRow{1, 1, 0};

Shape rows_of_a(const Problem& p) { return {m_of(p)}; }
Shape rows_of_b(const Problem& p) { return {n_of(p)}; }

// The integer product in double on the GPU (cuBLAS DGEMM: sums below 2^53 are exact), then for the
// dequantized op each sum times s_A[row] (per-row kernel) and that times s_B[col] (cuBLAS dgmm):
// the host reference's arithmetic, value for value, Inf and NaN included (src/int8_gemm_edges.hpp).
References device_reference(const Problem& p, const Operands& o, Context& context) {
  const std::int64_t m = m_of(p), n = n_of(p), k = k_of(p);
  const cudaStream_t stream = context.stream();
  const char* output = dequantizes(p) ? "C" : "C32";
  DeviceBuffer<double> c64(o[output].count());
  {
    const Tensor& a = o["A"];
    const Tensor& b = o["B"];
    DeviceBuffer<double> a64(a.count()), b64(b.count());
    convert_to_double(a.raw(), a.dtype, a.count(), a64.data(), stream);
    convert_to_double(b.raw(), b.dtype, b.count(), b64.data(), stream);
    cublas_dgemm(context.cublas(), stream, {m, n, k}, 1.0, a64.data(), b64.data(), BLayout::n_by_k, 0.0,
                 c64.data());
    // a64 and b64 are freed here (cudaFree waits for the GEMM), before the dequantized copy is allocated.
  }
  References references;
  if (!dequantizes(p)) {
    references.emplace(output, std::move(c64));
    return references;
  }
  fp8_dequantize_reference(c64.data(), m, n, o["scale_a"].data<float>(), kPerRow, stream);
  const Tensor& scale_b = o["scale_b"];
  DeviceBuffer<double> sb64(scale_b.count()), c(c64.size());
  convert_to_double(scale_b.raw(), scale_b.dtype, scale_b.count(), sb64.data(), stream);
  // Row-major C [M, N] is column-major N x M: diag(s_B) from the left scales its column col by s_B[col].
  cublasHandle_t handle = context.cublas();
  KC_CUBLAS_CHECK(cublasSetStream(handle, stream));
  KC_CUBLAS_CHECK(cublasDdgmm(handle, CUBLAS_SIDE_LEFT, static_cast<int>(n), static_cast<int>(m), c64.data(),
                              static_cast<int>(n), sb64.data(), 1, c.data(), static_cast<int>(n)));
  references.emplace(output, std::move(c));
  return references;
}

// s_A or s_B: uniform in [0.25, 4), with the edge cases of src/int8_gemm_edges.hpp in the
// conformance problems.
OperandSpec scale_operand(const char* name, Shape (*shape)(const Problem&), bool of_a) {
  OperandSpec scales = input(name, shape, FillSpec{}, DType::f32);
  scales.initialize = [of_a](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    const std::vector<float> values = int8_gemm_scales(p, of_a, seed);
    tensor.upload(values.data(), values.size() * sizeof(float), stream);
  };
  return scales;
}

// cuBLASLt INT8 plans, one per shape, made on first use (in the untimed warm-up launches, or when
// baseline_supports asks whether cuBLASLt runs the problem), and for the dequantized op the s32
// scratch matrix its result goes to before the dequantizing kernel.
class Int8LtPlans {
 public:
  const CublasLtGemm& get(cublasLtHandle_t handle, const Problem& p) {
    const auto key = std::make_tuple(m_of(p), n_of(p), k_of(p));
    auto found = plans_.find(key);
    if (found == plans_.end())
      found = plans_
                  .emplace(key, std::make_unique<CublasLtGemm>(handle, GemmShape{m_of(p), n_of(p), k_of(p)},
                                                               DType::i8, DType::i32, BLayout::n_by_k))
                  .first;
    return *found->second;
  }

  void run(Context& context, const Problem& p, Operands& o) {
    const Int8GemmArgs args = int8_gemm_args(p, o);
    std::int32_t* c32 = args.c32;
    if (!dequantizes(p)) {
      get(context.cublaslt(), p).run(1.f, args.a, args.b, 0.f, c32, context.stream());
      return;
    }
    const std::size_t count = static_cast<std::size_t>(args.m) * args.n;
    if (scratch_.size() < count) {
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      scratch_ = DeviceBuffer<std::int32_t>(count);
    }
    get(context.cublaslt(), p).run(1.f, args.a, args.b, 0.f, scratch_.data(), context.stream());
    int8_dequantize_baseline(scratch_.data(), args.scale_a, args.scale_b, args.c, args.m, args.n, context.stream());
  }

 private:
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::unique_ptr<CublasLtGemm>> plans_;
  DeviceBuffer<std::int32_t> scratch_;
};

std::string cublaslt_refusal(Int8LtPlans& plans, const Problem& p, Context& context) {
  try {
    plans.get(context.cublaslt(), p);
  } catch (const Error& e) {
    return fmt::format("cuBLASLt does not run it: {}", e.what());
  }
  return {};
}

OpSpec make_op(bool dequantize) {
  OpConfig op;
  op.name = dequantize ? kInt8GemmDequantOp : kInt8GemmOp;
  op.description = dequantize ? "C = ((A.B^T)[m,n] s_A[m]) s_B[n]: A [M,K] and B [N,K] s8, exact s32 sums, "
                                "per-row (token) and per-column (channel) FP32 scales, C [M,N] bf16; IEEE products: "
                                "a NaN scale gives NaN, a +Inf one +-Inf where the sum and the other scale are "
                                "nonzero and NaN where either is 0 (src/int8_gemm_edges.hpp)"
                              : "C32 = A.B^T: A [M,K] and B [N,K] s8, C32 [M,N] s32, exact";
  op.dim_names = {"M", "N", "K"};
  op.dtypes = {DType::i8};
  op.bound = Bound::compute;
  op.math = MathUnit::int8_tensor;
  const FillSpec values = FillSpec::uniform(-127.0, 127.0);
  op.operands = {input("A", dims_at({0, 2}), values), input("B", dims_at({1, 2}), values)};
  if (dequantize) {
    op.operands.push_back(scale_operand("scale_a", &rows_of_a, true));
    op.operands.push_back(scale_operand("scale_b", &rows_of_b, false));
    op.operands.push_back(output("C", dims_at({0, 1}), DType::bf16));
  } else {
    op.operands.push_back(output("C32", dims_at({0, 1}), DType::i32));
  }
  op.host_reference = &int8_gemm_host_reference;
  op.device_reference = &device_reference;
  // Integer outputs are held to exact equality (compare.hpp); the bf16 one to one rounding.
  set_gemm_accounting(op, [](const Problem& p) { return GemmShape{m_of(p), n_of(p), k_of(p)}; });
  op.supports = &int8_gemm_problem_error;

  // The squares the targets name and Llama-3-8B's MLP at 8192 tokens (up/gate, then down).
  for (const Shape& dims :
       std::vector<Shape>{{4096, 4096, 4096}, {8192, 8192, 8192}, {8192, 14336, 4096}, {8192, 4096, 14336}})
    op.bench.push_back({dims});
  // Smaller than a tile, edges in M and N, N odd (scalar stores), K tails of 16 inside a
  // 128-deep step, whole tiles, several persistent waves, and a long K (large exact sums); one
  // refused (K not a multiple of 16). The dequantizing op's scales hold their edge cases in all of
  // them (M N <= 2^23) and in none of the bench shapes (src/int8_gemm_edges.hpp).
  for (const Shape& dims : std::vector<Shape>{{1, 1, 16}, {17, 1, 32}, {1, 257, 144}, {65, 129, 272},
                                              {127, 255, 1040}, {200, 300, 400}, {128, 256, 128}, {256, 512, 512},
                                              {1000, 17, 656}, {4093, 1000, 1024}, {300, 2049, 2064},
                                              {256, 256, 8192}})
    op.conformance.push_back({dims});
  op.conformance.push_back({{64, 64, 100}});

  auto plans = std::make_shared<Int8LtPlans>();
  op.baseline_name = dequantize ? "cuBLASLt INT8 matmul (s8 -> s32) + a dequantizing kernel (s32 x s_A x s_B -> bf16)"
                                : "cuBLASLt INT8 matmul (s8 x s8 -> s32, CUBLAS_COMPUTE_32I)";
  op.baseline = [plans](const Problem& p, Operands& o, Context& context) { plans->run(context, p, o); };
  op.baseline_supports = [plans](const Problem& p, Context& context) { return cublaslt_refusal(*plans, p, context); };
  return build_op(std::move(op));
}

}  // namespace

bool int8_scales_have_edges(const Problem& p) { return m_of(p) * n_of(p) <= (std::int64_t{1} << 23); }

Int8ScaleKind int8_scale_kind(const Problem& p, bool of_a, std::int64_t index) {
  if (!int8_scales_have_edges(p)) return Int8ScaleKind::plain;
  const std::int64_t count = of_a ? m_of(p) : n_of(p);
  if (count >= 4 && index == count / 2) return Int8ScaleKind::infinite;
  if (count >= 4 && index == count - 1) return Int8ScaleKind::nan;
  if (index % 8 == (of_a ? 1 : 2)) return Int8ScaleKind::zero;
  if (index % 8 == (of_a ? 3 : 5)) return Int8ScaleKind::subnormal;
  return Int8ScaleKind::plain;
}

std::vector<float> int8_gemm_scales(const Problem& p, bool of_a, std::uint64_t seed) {
  const std::int64_t count = of_a ? m_of(p) : n_of(p);
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> plain(0.25f, 4.0f), mantissa(1.0f, 7.5f);  // 7.5: stays below 2^-127
  std::vector<float> scales(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    float& s = scales[static_cast<std::size_t>(i)];
    s = plain(random);
    switch (int8_scale_kind(p, of_a, i)) {
      case Int8ScaleKind::plain: break;
      case Int8ScaleKind::zero: s = 0.0f; break;
      case Int8ScaleKind::subnormal: s = std::ldexp(mantissa(random), -130); break;
      case Int8ScaleKind::infinite: s = std::numeric_limits<float>::infinity(); break;
      case Int8ScaleKind::nan: s = std::numeric_limits<float>::quiet_NaN(); break;
    }
  }
  return scales;
}

// The exact integer sums first (double: exact below 2^53), then for the dequantized op each sum
// times s_A[row], that times s_B[col], in double: the order of the kernels' epilogue (in FP32
// there), and one whose Inf/NaN classes every order shares (src/int8_gemm_edges.hpp). Scaling A
// and B before the product instead would turn an infinite scale into Inf - Inf = NaN sums.
HostTensors int8_gemm_host_reference(const Problem& p, const HostTensors& in) {
  const std::int64_t m = m_of(p), n = n_of(p), k = k_of(p);
  std::vector<double> c(static_cast<std::size_t>(m * n));
  gemm_reference({m, n, k}, 1.0, in.at("A").data(), in.at("B").data(), BLayout::n_by_k, 0.0, nullptr, c.data());
  if (!dequantizes(p)) return HostTensors{{"C32", std::move(c)}};
  const std::vector<double>& sa = in.at("scale_a");
  const std::vector<double>& sb = in.at("scale_b");
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t col = 0; col < n; ++col) {
      double& value = c[static_cast<std::size_t>(r * n + col)];
      value = value * sa[static_cast<std::size_t>(r)] * sb[static_cast<std::size_t>(col)];
    }
  return HostTensors{{"C", std::move(c)}};
}

std::string int8_gemm_problem_error(const Problem& p) {
  if (k_of(p) > kInt8MaxK)
    return fmt::format("K = {} could overflow the exact 32-bit sums: at most {} products of two 8-bit values",
                       k_of(p), kInt8MaxK);
  return gemm_index_limit_error({m_of(p), n_of(p), k_of(p)}, p.shape());
}

std::string int8_gemm_rung_shape_error(const Problem& p) {
  if (std::string error = int8_gemm_problem_error(p); !error.empty()) return error;
  if (k_of(p) % kInt8KMultiple != 0)
    return fmt::format(
        "K must be a multiple of {} (got {}): TMA moves rows of A and B in 16-byte pieces, which must start "
        "16-byte aligned",
        kInt8KMultiple, k_of(p));
  return {};
}

const std::vector<std::string>& int8_gemm_rung_refusals() {
  static const std::vector<std::string> refusals = {"64x64x100 i8"};
  return refusals;
}

Int8GemmArgs int8_gemm_args(const Problem& p, Operands& o) {
  Int8GemmArgs args;
  args.m = static_cast<int>(m_of(p));
  args.n = static_cast<int>(n_of(p));
  args.k = static_cast<int>(k_of(p));
  args.a = o["A"].data<std::int8_t>();
  args.b = o["B"].data<std::int8_t>();
  if (dequantizes(p)) {
    args.c = o["C"].data<bf16>();
    args.scale_a = o["scale_a"].data<float>();
    args.scale_b = o["scale_b"].data<float>();
  } else {
    args.c32 = o["C32"].data<std::int32_t>();
  }
  return args;
}

void check_int8_gemm_args(const Int8GemmArgs& args) {
  require(args.m >= 1 && args.n >= 1 && args.k >= 1, "INT8 GEMM: empty problem {}x{}x{}", args.m, args.n, args.k);
  require(args.k % kInt8KMultiple == 0,
          "INT8 GEMM: K must be a multiple of {} (got {}): the rows of A and B are moved in 16-byte pieces",
          kInt8KMultiple, args.k);
  require(args.k <= kInt8MaxK, "INT8 GEMM: K = {} could overflow the 32-bit sums (at most {})", args.k, kInt8MaxK);
  require(args.a != nullptr && args.b != nullptr, "INT8 GEMM: A or B is null");
  require(reinterpret_cast<std::uintptr_t>(args.a) % 16 == 0 && reinterpret_cast<std::uintptr_t>(args.b) % 16 == 0,
          "INT8 GEMM: A and B must start 16-byte aligned (their rows are moved in 16-byte pieces)");
  require((args.c32 != nullptr) != (args.c != nullptr), "INT8 GEMM: give exactly one output, c32 (s32) or c (bf16)");
  if (args.c != nullptr)
    require(args.scale_a != nullptr && args.scale_b != nullptr, "INT8 GEMM: the bf16 output needs both scales");
}

OpSpec make_int8_gemm_op() { return make_op(false); }
OpSpec make_int8_gemm_dequant_op() { return make_op(true); }

}  // namespace kc::stage3

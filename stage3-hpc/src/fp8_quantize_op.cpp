// The fp8_quantize op (kc/stage3/fp8_gemm.hpp): bf16 activations to e4m3 with a scale per 1 x 128
// piece of a row, the A operand and s_A of fp8_gemm with scaling=1; references and problems.
#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>
#include <utility>

#include "kc/common/op_builder.hpp"
#include "kc/stage3/fp8_gemm.hpp"
#include "src/fp8_quantize_edges.hpp"

namespace kc::stage3 {
namespace {

std::int64_t m_of(const Problem& p) { return p.dims[0]; }
std::int64_t k_of(const Problem& p) { return p.dims[1]; }
std::int64_t k_blocks_of(const Problem& p) { return fp8_k_blocks(static_cast<int>(k_of(p))); }

// x, with the edge-case pieces of src/fp8_quantize_edges.hpp in the conformance problems.
OperandSpec edge_case_x() {
  OperandSpec x = input("x", dims_at({0, 1}));
  x.initialize = [](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    const std::vector<__nv_bfloat16> values = fp8_quantize_x(p, seed);
    tensor.upload(values.data(), values.size() * sizeof(__nv_bfloat16), stream);
  };
  return x;
}

}  // namespace

bool fp8_quantize_has_edges(const Problem& p) { return m_of(p) * k_of(p) <= (std::int64_t{1} << 22); }

Fp8QuantizePiece fp8_quantize_piece(const Problem& p, std::int64_t row, std::int64_t kb) {
  if (!fp8_quantize_has_edges(p)) return Fp8QuantizePiece::plain;
  const std::int64_t index = row * k_blocks_of(p) + kb;
  if (index % 32 == 2) return Fp8QuantizePiece::nan;
  if (index % 32 == 4) return Fp8QuantizePiece::infinite;
  switch (index % 8) {
    case 1: return Fp8QuantizePiece::zeros;
    case 3: return Fp8QuantizePiece::subnormal_scale;
    case 5: return Fp8QuantizePiece::bf16_subnormals;
    case 6: return Fp8QuantizePiece::near_max;
    case 7: return Fp8QuantizePiece::lone;
    default: return Fp8QuantizePiece::plain;
  }
}

std::vector<__nv_bfloat16> fp8_quantize_x(const Problem& p, std::uint64_t seed) {
  using Piece = Fp8QuantizePiece;
  const std::int64_t m = m_of(p), k = k_of(p), k_blocks = k_blocks_of(p);
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(-8.f, 8.f), unit(-1.f, 1.f);
  std::vector<__nv_bfloat16> values(static_cast<std::size_t>(m * k));
  for (std::int64_t row = 0; row < m; ++row)
    for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
      const std::int64_t begin = kb * kFp8ScaleBlock, end = std::min(k, begin + kFp8ScaleBlock);
      const Piece kind = fp8_quantize_piece(p, row, kb);
      const std::int64_t lone = begin + static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(end - begin));
      for (std::int64_t c = begin; c < end; ++c) {
        float value = uniform(random);
        if (kind == Piece::zeros) value = 0.f;
        if (kind == Piece::subnormal_scale) value = std::ldexp(unit(random), -119);
        if (kind == Piece::bf16_subnormals) value = std::ldexp(unit(random), -127);
        if (kind == Piece::near_max) value = std::ldexp(unit(random), 126);
        if (kind == Piece::lone && c != lone) value = 0.f;
        if (kind == Piece::nan && c == lone) value = std::numeric_limits<float>::quiet_NaN();
        if (kind == Piece::infinite && c == lone) value = std::copysign(std::numeric_limits<float>::infinity(), value);
        values[static_cast<std::size_t>(row * k + c)] = __float2bfloat16(value);
      }
    }
  return values;
}

// std::fmax returns the other operand where one is NaN: a NaN does not enter max |x|. An infinite
// value makes it Inf, the scale Inf and q = x / Inf (+-0, and NaN for the infinite value).
HostTensors fp8_quantize_host_reference(const Problem& p, const HostTensors& in) {
  const std::int64_t m = m_of(p), k = k_of(p), k_blocks = k_blocks_of(p);
  const std::vector<double>& x = in.at("x");
  std::vector<double> q(x.size()), scales(static_cast<std::size_t>(k_blocks * m));
  for (std::int64_t row = 0; row < m; ++row)
    for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
      const std::int64_t begin = kb * kFp8ScaleBlock, end = std::min(k, begin + kFp8ScaleBlock);
      double amax = 0.0;
      for (std::int64_t c = begin; c < end; ++c) amax = std::fmax(amax, std::fabs(x[static_cast<std::size_t>(row * k + c)]));
      const double scale = amax > 0.0 ? amax / kE4m3Max : 1.0;
      scales[static_cast<std::size_t>(kb * m + row)] = scale;
      for (std::int64_t c = begin; c < end; ++c) {
        const auto i = static_cast<std::size_t>(row * k + c);
        q[i] = x[i] / scale;
      }
    }
  return HostTensors{{"q", std::move(q)}, {"scales", std::move(scales)}};
}


std::string fp8_quantize_shape_error(const Problem& p) {
  if (k_of(p) % kFp8KMultiple != 0)
    return fmt::format("K must be a multiple of {} (got {}): rows of x are read in 16-byte pieces", kFp8KMultiple,
                       k_of(p));
  if (m_of(p) * k_of(p) > INT32_MAX)
    return fmt::format("{}: more than 2^31 - 1 values do not fit the 32-bit indexing kc kernels use", p.shape());
  return {};
}

Fp8QuantizeArgs fp8_quantize_args(const Problem& p, Operands& o) {
  Fp8QuantizeArgs args;
  args.m = static_cast<int>(m_of(p));
  args.k = static_cast<int>(k_of(p));
  args.x = o["x"].data<bf16>();
  args.q = o["q"].data<fp8e4m3>();
  args.scales = o["scales"].data<float>();
  return args;
}

OpSpec make_fp8_quantize_op() {
  OpConfig op;
  op.name = kFp8QuantizeOp;
  op.description =
      "x [M,K] bf16 -> q [M,K] e4m3 and scales [ceil(K/128),M] f32, per 1x128 piece of a row: s = max|x| / 448 "
      "(1 for a piece of zeros), q = x / s rounded to e4m3 (fp8_gemm's A and s_A with scaling=1); the max ignores "
      "NaN (it stays NaN in q), an Inf makes s = Inf and q +-0, NaN for the Inf (src/fp8_quantize_edges.hpp)";
  op.dim_names = {"M", "K"};
  op.dtypes = {DType::bf16};
  op.bound = Bound::memory;
  op.operands = {edge_case_x(), output("q", dims_at({0, 1}), DType::f8e4m3),
                 output("scales", [](const Problem& p) { return Shape{k_blocks_of(p), m_of(p)}; }, DType::f32)};
  op.host_reference = &fp8_quantize_host_reference;
  // One division and one rounding to e4m3 (q), one division (the scale, FP32).
  op.accuracy = [](const Problem&, const std::string&, DType output) {
    Accuracy accuracy;
    accuracy.output = output;
    return accuracy;
  };
  op.supports = &fp8_quantize_shape_error;
  // The activations of Llama-3-8B's attention and MLP inputs (4096) and of its down projection
  // (14336) at 8192 and 32768 tokens.
  for (const Shape& dims : std::vector<Shape>{{8192, 4096}, {8192, 14336}, {32768, 4096}}) op.bench.push_back({dims});
  // One row, a piece shorter than 128, rows across many pieces, K tails, and one refused (K % 16).
  for (const Shape& dims : std::vector<Shape>{{1, 16}, {3, 144}, {17, 1040}, {64, 4096}, {129, 2064}, {1000, 272}, {5, 100}})
    op.conformance.push_back({dims});
  op.copy_scratch = std::make_shared<CopyScratch>();
  return build_op(std::move(op));
}

}  // namespace kc::stage3

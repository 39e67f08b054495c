// The gemv_gguf op (kc/stage3/gemv_gguf.hpp): operands, the host reference and the problems.
#include "kc/stage3/gemv_gguf.hpp"

#include <cuda_fp16.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/op_builder.hpp"

namespace kc::stage3 {
namespace {

// Block field i of two bytes (d, or m of q4_1): an IEEE half.
double half_at(const std::uint8_t* block, int field) {
  return decode_element(reinterpret_cast<const std::byte*>(block), DType::f16, static_cast<std::size_t>(field));
}

// Writes `value` rounded to a half into block field i.
void put_half(std::uint8_t* block, int field, double value) {
  const __half h = __float2half(static_cast<float>(value));
  std::memcpy(block + 2 * field, &h, sizeof h);
}

std::int64_t blocks_per_row(const Problem& p) { return p.dims[2] / kGgufBlockWeights; }

Shape w_shape(const Problem& p) {
  return Shape{p.dims[1], blocks_per_row(p) * gguf_block_bytes(gguf_block_type(p))};
}

// Random valid blocks, one row of w after another, from the seed.
void fill_blocks(const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
  const GgufBlockType type = gguf_block_type(p);
  const int bytes = gguf_block_bytes(type);
  const std::size_t blocks = static_cast<std::size_t>(p.dims[1] * blocks_per_row(p));
  std::vector<std::uint8_t> out(blocks * static_cast<std::size_t>(bytes));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_scale(-10.0, -4.0), log_offset(-10.0, -2.0);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::size_t b = 0; b < blocks; ++b) {
    std::uint8_t* block = out.data() + b * static_cast<std::size_t>(bytes);
    put_half(block, 0, std::exp2(log_scale(rng)));
    int first = 2;
    if (type == GgufBlockType::q4_1) {
      const double magnitude = std::exp2(log_offset(rng));  // a normal half, either sign
      put_half(block, 1, byte(rng) < 128 ? -magnitude : magnitude);
      first = 4;
    }
    for (int i = first; i < bytes; ++i) block[i] = static_cast<std::uint8_t>(byte(rng));
  }
  tensor.upload(out.data(), out.size(), stream);
}

}  // namespace

GgufBlockType gguf_block_type(const Problem& problem) {
  const double type = problem.param("ggml_type");
  if (type == 2.0) return GgufBlockType::q4_0;
  if (type == 3.0) return GgufBlockType::q4_1;
  if (type == 8.0) return GgufBlockType::q8_0;
  throw Error(fmt::format("gemv_gguf: ggml_type {} is not q4_0 (2), q4_1 (3) or q8_0 (8)", type));
}

std::vector<double> decode_gguf_blocks(GgufBlockType type, const std::uint8_t* bytes, std::size_t blocks) {
  const int size = gguf_block_bytes(type);
  std::vector<double> out(blocks * kGgufBlockWeights);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* block = bytes + b * static_cast<std::size_t>(size);
    const double d = half_at(block, 0);
    double* w = out.data() + b * kGgufBlockWeights;
    if (type == GgufBlockType::q8_0) {
      for (int i = 0; i < kGgufBlockWeights; ++i) w[i] = d * static_cast<double>(static_cast<std::int8_t>(block[2 + i]));
      continue;
    }
    const bool with_min = type == GgufBlockType::q4_1;
    const double m = with_min ? half_at(block, 1) : 0.0;
    const std::uint8_t* qs = block + (with_min ? 4 : 2);
    for (int j = 0; j < 16; ++j) {
      const int low = qs[j] & 0x0f, high = qs[j] >> 4;
      w[j] = with_min ? d * low + m : d * (low - 8);
      w[j + 16] = with_min ? d * high + m : d * (high - 8);
    }
  }
  return out;
}

std::string gemv_gguf_shape_error(const Problem& p) {
  const double type = p.param("ggml_type");
  if (type != 2.0 && type != 3.0 && type != 8.0) return "ggml_type must be 2 (q4_0), 3 (q4_1) or 8 (q8_0)";
  if (p.dims[0] > kGgufGemvMaxRows) return fmt::format("M must be at most {} (a decode step)", kGgufGemvMaxRows);
  if (p.dims[2] % kGgufBlockWeights != 0) return "K must be a multiple of 32, the GGUF block";
  return "";
}

GgufGemvArgs gemv_gguf_args(const Problem& p, Operands& o) {
  GgufGemvArgs args;
  args.m = static_cast<int>(p.dims[0]);
  args.n = static_cast<int>(p.dims[1]);
  args.k = static_cast<int>(p.dims[2]);
  args.type = gguf_block_type(p);
  args.x = o["x"].data<__nv_bfloat16>();
  args.w = reinterpret_cast<const std::uint8_t*>(o["w"].raw());
  args.y = o["y"].data<__nv_bfloat16>();
  return args;
}

OpSpec make_gemv_gguf_op() {
  OpConfig op;
  op.name = kGemvGgufOp;
  op.description =
      "y = x.w^T, x [M,K] and y [M,N] bf16, w [N,K] in llama.cpp's GGUF blocks of 32 (q4_0, q4_1 or q8_0) "
      "read as stored, FP32 accumulation";
  op.dim_names = {"M", "N", "K"};
  op.dtypes = {DType::bf16};
  op.params = {{"ggml_type", 2.0, "the block format: 2 q4_0, 3 q4_1, 8 q8_0"}};
  op.bound = Bound::memory;
  OperandSpec w = input("w", &w_shape, FillSpec{}, DType::i8);
  w.initialize = &fill_blocks;
  op.operands = {input("x", dims_at({0, 2})), w, output("y", dims_at({0, 1}))};
  op.host_reference = [](const Problem& p, const HostTensors& in) {
    const std::int64_t m_rows = p.dims[0], n_cols = p.dims[1], k_len = p.dims[2];
    const std::vector<double>& raw = in.at("w");
    std::vector<std::uint8_t> bytes(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i)
      bytes[i] = static_cast<std::uint8_t>(static_cast<int>(raw[i]) & 0xff);
    const std::vector<double> weights =
        decode_gguf_blocks(gguf_block_type(p), bytes.data(), static_cast<std::size_t>(n_cols * blocks_per_row(p)));
    const std::vector<double>& x = in.at("x");
    std::vector<double> y(static_cast<std::size_t>(m_rows * n_cols));
    for (std::int64_t m = 0; m < m_rows; ++m)
      for (std::int64_t n = 0; n < n_cols; ++n) {
        double sum = 0.0;
        for (std::int64_t k = 0; k < k_len; ++k)
          sum += x[static_cast<std::size_t>(m * k_len + k)] * weights[static_cast<std::size_t>(n * k_len + k)];
        y[static_cast<std::size_t>(m * n_cols + n)] = sum;
      }
    return HostTensors{{"y", std::move(y)}};
  };
  op.accuracy = [](const Problem& p, const std::string&, DType output_dtype) {
    Accuracy accuracy;
    accuracy.output = output_dtype;
    accuracy.terms = static_cast<double>(p.dims[2]);
    return accuracy;
  };
  op.flops = [](const Problem& p) { return 2.0 * static_cast<double>(p.dims[0] * p.dims[1] * p.dims[2]); };
  op.bytes = [](const Problem& p) {
    return static_cast<double>(p.dims[0] * p.dims[2] * 2 + p.dims[0] * p.dims[1] * 2) +
           static_cast<double>(p.dims[1] * blocks_per_row(p) * gguf_block_bytes(gguf_block_type(p)));
  };
  op.supports = &gemv_gguf_shape_error;
  // Decode steps of Llama-3-8B's projections (4096 -> 4096, 4096 -> 14336, 14336 -> 4096) at M = 1
  // and 16, in q4_0; q4_1 and q8_0 at the first.
  using P = ParamValues;
  for (const std::int64_t m : {1, 16})
    for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{{4096, 4096}, {14336, 4096}, {4096, 14336}})
      op.bench.push_back({{m, n, k}});
  op.bench.push_back({{1, 4096, 4096}, std::nullopt, P{{"ggml_type", 3.0}}});
  op.bench.push_back({{1, 4096, 4096}, std::nullopt, P{{"ggml_type", 8.0}}});
  // Odd N, K of one block and of many, M from 1 to 16, every type.
  for (const double type : {2.0, 3.0, 8.0})
    for (const Shape& dims : std::vector<Shape>{{1, 1, 32}, {3, 37, 96}, {16, 257, 576}, {7, 100, 1024}})
      op.conformance.push_back({dims, std::nullopt, P{{"ggml_type", type}}});
  op.copy_scratch = std::make_shared<CopyScratch>();
  return build_op(std::move(op));
}

}  // namespace kc::stage3

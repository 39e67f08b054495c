// The attention_fwd op (kc/stage3/attention.hpp): its parameters, operands, references, tolerance,
// FLOP count, shapes, and the unfused cuBLAS path that serves as its baseline.
#include "kc/stage3/attention.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "attention/attention_softmax.hpp"
#include "kc/stage3/attention_cudnn.hpp"
#include "kc/common/blas.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/parallel.hpp"

namespace kc::stage3 {
namespace {

// The FP64 reference holds S of at most this many bytes at once.
constexpr std::size_t kReferenceScratchLimit = std::size_t{2} << 30;

std::vector<ParamSpec> attention_params() {
  return {{"causal", 0.0, "1: query i sees keys j <= i + Sk - Sq (bottom-right aligned)"},
          {"scale", 0.0, "softmax scale; 0 means 1/sqrt(D)"}};
}

Shape q_shape(const Problem& p) {
  const AttentionShape s = attention_shape(p);
  return {s.batch, s.q_heads, s.q_len, s.head_dim};
}
Shape kv_shape(const Problem& p) {
  const AttentionShape s = attention_shape(p);
  return {s.batch, s.kv_heads, s.kv_len, s.head_dim};
}
Shape lse_shape(const Problem& p) {
  const AttentionShape s = attention_shape(p);
  return {s.batch, s.q_heads, s.q_len};
}

// Max that propagates NaN (std::max drops it depending on argument order).
double max_with_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a > b ? a : b;
}

// Offsets (in elements) of one chunk's operands.
struct ChunkOffsets {
  std::int64_t q_rows;  // first row of Q, O and LSE: (first group) x (rows per group) + first row
  std::int64_t kv;      // first element of K and V
};

ChunkOffsets offsets_of(const AttentionShape& shape, const AttentionChunk& chunk) {
  const std::int64_t rows_per_group = shape.group() * shape.q_len;
  return {chunk.first_group * rows_per_group + chunk.first_row,
          chunk.first_group * shape.kv_len * shape.head_dim};
}

// S of a chunk: per group g of the chunk, S_g = scale . Q_g . K_g^T, (rows x Sk) after one another.
GemmShape scores_shape(const AttentionShape& shape, const AttentionChunk& chunk) {
  return {chunk.rows, shape.kv_len, shape.head_dim};
}
GemmBatch scores_batch(const AttentionShape& shape, const AttentionChunk& chunk) {
  return {chunk.groups, shape.group() * shape.q_len * shape.head_dim, shape.kv_len * shape.head_dim,
          chunk.rows * shape.kv_len};
}
// O of a chunk: O_g = P_g . V_g.
GemmShape output_shape(const AttentionShape& shape, const AttentionChunk& chunk) {
  return {chunk.rows, shape.head_dim, shape.kv_len};
}
GemmBatch output_batch(const AttentionShape& shape, const AttentionChunk& chunk) {
  return {chunk.groups, chunk.rows * shape.kv_len, shape.kv_len * shape.head_dim,
          shape.group() * shape.q_len * shape.head_dim};
}
MaskedSoftmaxRows softmax_rows(const AttentionShape& shape, bool causal, const AttentionChunk& chunk) {
  MaskedSoftmaxRows rows;
  rows.rows = chunk.groups * chunk.rows;
  rows.kv_len = shape.kv_len;
  rows.q_len = shape.q_len;
  rows.first_row = chunk.first_row;
  rows.causal = causal;
  return rows;
}

// The reference of problems too large for the CPU: attention_reference_on_device on the operands
// converted to FP64.
References attention_device_reference(const Problem& problem, const Operands& operands, Context& context) {
  const AttentionShape shape = attention_shape(problem);
  const cudaStream_t stream = context.stream();
  const Tensor& q = operands["Q"];
  const Tensor& k = operands["K"];
  const Tensor& v = operands["V"];
  DeviceBuffer<double> q64(q.count()), k64(k.count()), v64(v.count());
  convert_to_double(q.raw(), q.dtype, q.count(), q64.data(), stream);
  convert_to_double(k.raw(), k.dtype, k.count(), k64.data(), stream);
  convert_to_double(v.raw(), v.dtype, v.count(), v64.data(), stream);
  DeviceBuffer<double> o64(q.count());
  DeviceBuffer<double> lse64(static_cast<std::size_t>(shape.batch * shape.q_heads * shape.q_len));
  attention_reference_on_device(shape, attention_scale(problem), attention_causal(problem), q64.data(),
                                k64.data(), v64.data(), o64.data(), lse64.data(), context.cublas(), stream);
  References references;
  references.emplace("O", std::move(o64));
  references.emplace("LSE", std::move(lse64));
  return references;
}

std::vector<ProblemSpec> attention_bench_problems() {
  // FlashAttention's setting: batch x sequence = 16k tokens, hidden 2048 (16 heads of 128 or 32 of
  // 64), sequences of 1k to 16k, causal and not; and Llama-3-8B's grouped heads (32 query heads over
  // 8 kv heads, D = 128).
  std::vector<ProblemSpec> problems;
  for (const std::int64_t d : {128, 64})
    for (const std::int64_t s : {1024, 2048, 4096, 8192, 16384})
      for (const double causal : {0.0, 1.0})
        problems.push_back({{16384 / s, 2048 / d, 2048 / d, s, s, d}, DType::bf16, {{"causal", causal}}});
  for (const double causal : {0.0, 1.0})
    problems.push_back({{4, 32, 8, 4096, 4096, 128}, DType::bf16, {{"causal", causal}}});
  return problems;
}

std::vector<ProblemSpec> attention_conformance_problems() {
  // Odd lengths (1, 17, 77, 1000, 4097), Sq != Sk both ways with the causal mask (rows that see
  // nothing when Sq > Sk), grouped heads 1/4/8, D = 64 and 128, an explicit scale; bf16 and f16.
  // The small ones are checked against the host reference, the larger against the GPU's FP64 one.
  using P = ParamValues;
  const P causal = {{"causal", 1.0}};
  return {
      {{1, 1, 1, 1, 1, 64}},
      {{1, 2, 1, 17, 17, 64}},
      {{1, 2, 1, 17, 17, 64}, std::nullopt, causal},
      {{2, 4, 1, 77, 1000, 64}, std::nullopt, causal},
      {{1, 8, 1, 1000, 77, 64}, std::nullopt, causal},
      {{1, 2, 2, 4097, 1, 128}},
      {{1, 4, 1, 1, 4097, 128}, std::nullopt, causal},
      {{2, 4, 4, 127, 127, 128}, std::nullopt, {{"causal", 1.0}, {"scale", 0.5}}},
      {{3, 8, 2, 77, 77, 128}},
      {{1, 8, 2, 1000, 1000, 128}, std::nullopt, causal},
      {{1, 2, 2, 4097, 4097, 64}},
      {{1, 2, 2, 4097, 4097, 64}, std::nullopt, causal},
      // D = 80: the fused rungs refuse it (compiled for D = 64 and 128); the unfused path runs it.
      {{1, 2, 1, 33, 45, 80}, std::nullopt, causal},
  };
}

}  // namespace

AttentionShape attention_shape(const Problem& problem) {
  require(problem.dims.size() == 6, "attention takes 6 dimensions B x Hq x Hkv x Sq x Sk x D, got {}",
          problem.shape());
  AttentionShape s;
  s.batch = problem.dims[0];
  s.q_heads = problem.dims[1];
  s.kv_heads = problem.dims[2];
  s.q_len = problem.dims[3];
  s.kv_len = problem.dims[4];
  s.head_dim = problem.dims[5];
  return s;
}

double attention_scale(const Problem& problem) {
  const double scale = problem.param("scale");
  return scale != 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(attention_shape(problem).head_dim));
}

bool attention_causal(const Problem& problem) { return problem.param("causal") != 0.0; }

std::int64_t visible_keys(const AttentionShape& shape, bool causal, std::int64_t query) {
  if (!causal) return shape.kv_len;
  return std::clamp<std::int64_t>(query + shape.kv_len - shape.q_len + 1, 0, shape.kv_len);
}

double visible_pairs(const AttentionShape& shape, bool causal) {
  double per_head = 0.0;
  for (std::int64_t i = 0; i < shape.q_len; ++i) per_head += static_cast<double>(visible_keys(shape, causal, i));
  return per_head * static_cast<double>(shape.batch * shape.q_heads);
}

Accuracy attention_output_accuracy(DType input, const std::string& output, DType output_dtype,
                                   std::int64_t kv_terms) {
  Accuracy accuracy;
  accuracy.output = output_dtype;
  accuracy.terms = static_cast<double>(kv_terms);
  if (output == "O") accuracy.intermediate_error = unit_roundoff(input) * kAttentionVMax;
  return accuracy;
}

std::vector<AttentionChunk> attention_chunks(const AttentionShape& shape, std::int64_t bytes_per_score,
                                             std::size_t limit) {
  require(bytes_per_score >= 1, "attention_chunks: bytes per score must be >= 1");
  const std::int64_t groups = shape.batch * shape.kv_heads;
  const std::int64_t rows_per_group = shape.group() * shape.q_len;
  const std::int64_t row_bytes = shape.kv_len * bytes_per_score;
  const auto budget = static_cast<std::int64_t>(limit);
  require(row_bytes <= budget, "attention: one row of S ({} keys, {} bytes) exceeds the {}-byte scratch",
          shape.kv_len, row_bytes, budget);
  std::vector<AttentionChunk> chunks;
  if (rows_per_group * row_bytes <= budget) {
    const std::int64_t per_chunk = std::min<std::int64_t>({groups, budget / (rows_per_group * row_bytes),
                                                           std::int64_t{INT32_MAX}});
    for (std::int64_t first = 0; first < groups; first += per_chunk)
      chunks.push_back({first, std::min(per_chunk, groups - first), 0, rows_per_group});
    return chunks;
  }
  const std::int64_t rows = budget / row_bytes;
  for (std::int64_t group = 0; group < groups; ++group)
    for (std::int64_t first = 0; first < rows_per_group; first += rows)
      chunks.push_back({group, 1, first, std::min(rows, rows_per_group - first)});
  return chunks;
}

void attention_reference(const AttentionShape& shape, double scale, bool causal, const double* q,
                         const double* k, const double* v, double* o, double* lse) {
  const std::int64_t d = shape.head_dim;
  const std::int64_t heads = shape.batch * shape.q_heads;
  parallel_for(heads * shape.q_len, shape.kv_len * d * 2, [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> scores(static_cast<std::size_t>(shape.kv_len));
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t head = row / shape.q_len;  // b * Hq + h
      const std::int64_t i = row % shape.q_len;
      const std::int64_t b = head / shape.q_heads;
      const std::int64_t kv_head = b * shape.kv_heads + (head % shape.q_heads) / shape.group();
      const double* q_row = q + row * d;
      const double* k_head = k + kv_head * shape.kv_len * d;
      const double* v_head = v + kv_head * shape.kv_len * d;
      double* o_row = o + row * d;
      const std::int64_t visible = visible_keys(shape, causal, i);
      std::fill(o_row, o_row + d, 0.0);
      if (visible == 0) {
        lse[row] = -std::numeric_limits<double>::infinity();
        continue;
      }
      double max = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < visible; ++j) {
        double dot = 0.0;
        for (std::int64_t c = 0; c < d; ++c) dot += q_row[c] * k_head[j * d + c];
        scores[static_cast<std::size_t>(j)] = scale * dot;
        max = max_with_nan(max, scale * dot);
      }
      double sum = 0.0;
      for (std::int64_t j = 0; j < visible; ++j) {
        const double weight = std::exp(scores[static_cast<std::size_t>(j)] - max);
        sum += weight;
        for (std::int64_t c = 0; c < d; ++c) o_row[c] += weight * v_head[j * d + c];
      }
      for (std::int64_t c = 0; c < d; ++c) o_row[c] /= sum;
      lse[row] = max + std::log(sum);
    }
  });
}

// cuBLAS DGEMM for the products and the FP64 masked softmax between them. (P is 0 at masked keys
// and P.V multiplies it with V there: this reference assumes finite V, which random fills give; the
// host reference, which never reads masked keys, serves the small non-finite cases.)
void attention_reference_on_device(const AttentionShape& shape, double scale, bool causal, const double* q,
                                   const double* k, const double* v, double* o, double* lse,
                                   cublasHandle_t cublas, cudaStream_t stream) {
  const std::vector<AttentionChunk> chunks =
      attention_chunks(shape, static_cast<std::int64_t>(sizeof(double)), kReferenceScratchLimit);
  std::int64_t largest = 0;
  for (const AttentionChunk& c : chunks) largest = std::max(largest, c.groups * c.rows);
  DeviceBuffer<double> s64(static_cast<std::size_t>(largest * shape.kv_len));
  for (const AttentionChunk& chunk : chunks) {
    const ChunkOffsets at = offsets_of(shape, chunk);
    cublas_dgemm_batched(cublas, stream, scores_shape(shape, chunk), scale, q + at.q_rows * shape.head_dim,
                         k + at.kv, BLayout::n_by_k, 0.0, s64.data(), scores_batch(shape, chunk));
    attention_masked_softmax_f64(s64.data(), lse + at.q_rows, softmax_rows(shape, causal, chunk), stream);
    cublas_dgemm_batched(cublas, stream, output_shape(shape, chunk), 1.0, s64.data(), v + at.kv,
                         BLayout::k_by_n, 0.0, o + at.q_rows * shape.head_dim, output_batch(shape, chunk));
  }
}

std::string attention_shape_error(const Problem& problem) {
  const AttentionShape s = attention_shape(problem);
  if (s.q_heads % s.kv_heads != 0)
    return fmt::format("{}: Hq = {} is not a multiple of Hkv = {}: each kv head serves the same "
                       "number of query heads (grouped-query attention)",
                       problem.shape(), s.q_heads, s.kv_heads);
  return {};
}

void attention_unfused(const Problem& problem, Operands& operands, Context& context, DeviceScratch& scratch) {
  attention_unfused(problem, operands, context.cublas(), context.stream(), scratch);
}

void attention_unfused(const Problem& problem, Operands& operands, cublasHandle_t cublas, cudaStream_t stream,
                       DeviceScratch& scratch) {
  const AttentionShape shape = attention_shape(problem);
  const bool causal = attention_causal(problem);
  const auto scale = static_cast<float>(attention_scale(problem));
  const DType dtype = problem.dtype;
  require(dtype == DType::bf16 || dtype == DType::f16, "the unfused attention path runs bf16 or f16, not {}",
          dtype_name(dtype));
  const std::int64_t p_bytes = static_cast<std::int64_t>(dtype_bytes(dtype, 1));
  const std::vector<AttentionChunk> chunks =
      attention_chunks(shape, static_cast<std::int64_t>(sizeof(float)) + p_bytes, kAttentionScratchLimit);
  std::int64_t largest = 0;
  for (const AttentionChunk& c : chunks) largest = std::max(largest, c.groups * c.rows);
  const std::size_t s_bytes = static_cast<std::size_t>(largest * shape.kv_len) * sizeof(float);
  std::byte* base = scratch.reserve(s_bytes + static_cast<std::size_t>(largest * shape.kv_len * p_bytes));
  auto* s = reinterpret_cast<float*>(base);
  void* p = base + s_bytes;

  const auto* q = static_cast<const std::byte*>(operands["Q"].raw());
  const auto* k = static_cast<const std::byte*>(operands["K"].raw());
  const auto* v = static_cast<const std::byte*>(operands["V"].raw());
  auto* o = static_cast<std::byte*>(operands["O"].raw());
  float* lse = operands["LSE"].data<float>();
  const auto element = [&](std::int64_t index) { return static_cast<std::size_t>(index * p_bytes); };
  for (const AttentionChunk& chunk : chunks) {
    const ChunkOffsets at = offsets_of(shape, chunk);
    cublas_gemm_ex_batched(cublas, stream, scores_shape(shape, chunk), dtype, DType::f32, scale,
                           q + element(at.q_rows * shape.head_dim), k + element(at.kv), BLayout::n_by_k,
                           0.f, s, scores_batch(shape, chunk));
    const MaskedSoftmaxRows rows = softmax_rows(shape, causal, chunk);
    if (dtype == DType::bf16)
      attention_masked_softmax(s, static_cast<__nv_bfloat16*>(p), lse + at.q_rows, rows, stream);
    else
      attention_masked_softmax(s, static_cast<__half*>(p), lse + at.q_rows, rows, stream);
    cublas_gemm_ex_batched(cublas, stream, output_shape(shape, chunk), dtype, dtype, 1.f, p,
                           v + element(at.kv), BLayout::k_by_n, 0.f, o + element(at.q_rows * shape.head_dim),
                           output_batch(shape, chunk));
  }
}

OpSpec make_attention_fwd_op() {
  OpConfig op;
  op.name = kAttentionFwdOp;
  op.description =
      "O = softmax(scale.Q.K^T [causal mask]).V and its log-sum-exp; Q [B,Hq,Sq,D], K and V "
      "[B,Hkv,Sk,D], O [B,Hq,Sq,D] of the problem's dtype, LSE [B,Hq,Sq] f32";
  op.dim_names = {"B", "Hq", "Hkv", "Sq", "Sk", "D"};
  op.dtypes = {DType::bf16, DType::f16};
  op.params = attention_params();
  op.bound = Bound::compute;
  op.math = MathUnit::fp16_tensor;
  op.operands = {input("Q", &q_shape, FillSpec::normal(0.0, 1.5)),
                 input("K", &kv_shape, FillSpec::normal(0.0, 1.5)),
                 input("V", &kv_shape, FillSpec::uniform(-kAttentionVMax, kAttentionVMax)),
                 output("O", &q_shape),
                 output("LSE", &lse_shape, DType::f32)};
  op.host_reference = [](const Problem& p, const HostTensors& in) {
    const AttentionShape shape = attention_shape(p);
    std::vector<double> o(in.at("Q").size());
    std::vector<double> lse(static_cast<std::size_t>(shape.batch * shape.q_heads * shape.q_len));
    attention_reference(shape, attention_scale(p), attention_causal(p), in.at("Q").data(),
                        in.at("K").data(), in.at("V").data(), o.data(), lse.data());
    return HostTensors{{"O", std::move(o)}, {"LSE", std::move(lse)}};
  };
  op.device_reference = &attention_device_reference;
  op.reference_work = [](const Problem& p) {
    return visible_pairs(attention_shape(p), attention_causal(p)) *
           static_cast<double>(attention_shape(p).head_dim);
  };
  op.accuracy = [](const Problem& p, const std::string& output, DType output_dtype) {
    return attention_output_accuracy(p.dtype, output, output_dtype, attention_shape(p).kv_len);
  };
  op.flops = [](const Problem& p) {
    // Two products of 2.D FLOPs per visible (query, key) pair: exact for the causal mask, not the
    // S^2/2 approximation.
    return 4.0 * static_cast<double>(attention_shape(p).head_dim) *
           visible_pairs(attention_shape(p), attention_causal(p));
  };
  op.supports = &attention_shape_error;
  op.bench = attention_bench_problems();
  op.conformance = attention_conformance_problems();
  op.baseline_name = "cuBLAS unfused (S = scale.Q.K^T in FP32, masked softmax, O = P.V; S materialized)";
  auto scratch = std::make_shared<DeviceScratch>();
  op.baseline = [scratch](const Problem& p, Operands& o, Context& context) {
    attention_unfused(p, o, context, *scratch);
  };
  use_cudnn_attention_baseline(op);  // cuDNN SDPA where the build has it; else the unfused path stays
  return build_op(std::move(op));
}

}  // namespace kc::stage3

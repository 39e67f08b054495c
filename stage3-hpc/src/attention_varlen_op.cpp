// The attention_fwd_varlen op (kc/stage3/attention_varlen.hpp): the sequences' lengths, the packed
// operands and their offsets, the references (attention_fwd's, run per sequence), tolerance, FLOP
// count, shapes, and the baseline (the dense public entry once per sequence).
#include "kc/stage3/attention_varlen.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "kc/common/fill.hpp"
#include "kc/common/splitmix.hpp"
#include "kc/stage3/attention_ops.hpp"

namespace kc::stage3 {
namespace {

// The FP64 values of a tensor row's elements are 8 bytes.
constexpr std::size_t kDoubleBytes = sizeof(double);

std::vector<ParamSpec> varlen_params() {
  return {{"causal", 0.0, "1: query i of a sequence sees its keys j <= i + Sk_b - Sq_b (bottom-right aligned)"},
          {"scale", 0.0, "softmax scale; 0 means 1/sqrt(D)"},
          {"lengths", 0.0, "0: every sequence Sq queries and Sk keys; 1: ragged ((Sq,Sk), (1,1), (0,0), (1,Sk), "
                           "(Sq,0), (0,Sk), hashed)"}};
}

// Sequence b's (Sq_b, Sk_b) (the header's `lengths`), without building the whole list.
std::pair<std::int64_t, std::int64_t> lengths_of(const VarlenShape& s, std::int64_t b) {
  if (s.lengths == VarlenLengths::full) return {s.max_q_len, s.max_kv_len};
  const std::int64_t edges[][2] = {{s.max_q_len, s.max_kv_len}, {1, 1}, {0, 0}, {1, s.max_kv_len},
                                   {s.max_q_len, 0},            {0, s.max_kv_len}};
  constexpr std::int64_t kEdges = sizeof(edges) / sizeof(edges[0]);
  // In [1, max], from (b, max) and a stream number that keeps the query and key draws apart.
  const auto hashed = [b](std::int64_t max, std::uint64_t stream) {
    const std::uint64_t key = static_cast<std::uint64_t>(b) * 0x100000001b3ull ^
                              (static_cast<std::uint64_t>(max) << 8) ^ (stream << 56);
    return 1 + static_cast<std::int64_t>(splitmix64(key) % static_cast<std::uint64_t>(max));
  };
  const std::int64_t q = b < kEdges ? edges[b][0] : hashed(s.max_q_len, 1);
  const std::int64_t kv = b < kEdges ? edges[b][1] : hashed(s.max_kv_len, 2);
  return {std::clamp<std::int64_t>(q, 0, s.max_q_len), std::clamp<std::int64_t>(kv, 0, s.max_kv_len)};
}

// total_q and total_k: the rows of the packed Q (and O) and of K and V.
std::pair<std::int64_t, std::int64_t> totals_of(const VarlenShape& s) {
  std::int64_t q = 0, kv = 0;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const auto [q_b, kv_b] = lengths_of(s, b);
    q += q_b;
    kv += kv_b;
  }
  return {q, kv};
}

Shape q_shape(const Problem& p) {
  const VarlenShape s = varlen_shape(p);
  return {totals_of(s).first, s.q_heads, s.head_dim};
}
Shape kv_shape(const Problem& p) {
  const VarlenShape s = varlen_shape(p);
  return {totals_of(s).second, s.kv_heads, s.head_dim};
}
Shape offsets_shape(const Problem& p) { return {varlen_shape(p).batch + 1}; }
// One [Hq, Sq_b] block per sequence, one after the other: Hq x total_q floats.
Shape lse_shape(const Problem& p) {
  const VarlenShape s = varlen_shape(p);
  return {s.q_heads * totals_of(s).first};
}

// cu_seqlens_q (of_keys false) or cu_seqlens_k (true) of a problem.
std::vector<std::int32_t> offsets_of(const Problem& p, bool of_keys) {
  const VarlenLengthsOf lengths = varlen_lengths(varlen_shape(p));
  return cu_seqlens_from_lengths(of_keys ? lengths.kv : lengths.q);
}

OperandSpec offsets_operand(const char* name, bool of_keys) {
  OperandSpec operand = input(name, &offsets_shape, FillSpec{}, DType::i32);
  operand.initialize = [of_keys](const Problem& p, Tensor& tensor, std::uint64_t, cudaStream_t stream) {
    const std::vector<std::int32_t> offsets = offsets_of(p, of_keys);
    tensor.upload(offsets.data(), offsets.size() * sizeof(std::int32_t), stream);
  };
  return operand;
}

std::vector<std::int32_t> to_offsets(const std::vector<double>& values) {
  std::vector<std::int32_t> offsets(values.size());
  std::transform(values.begin(), values.end(), offsets.begin(),
                 [](double x) { return static_cast<std::int32_t>(x); });
  return offsets;
}

// Rows of a packed [rows x heads x D] FP64 tensor (device) into the dense [heads, rows, D] layout,
// one strided copy per head; and back.
void packed_to_heads(const double* packed, std::int64_t heads, std::int64_t rows, std::int64_t d, double* dense,
                     cudaStream_t stream) {
  for (std::int64_t h = 0; h < heads; ++h)
    KC_CUDA_CHECK(cudaMemcpy2DAsync(dense + h * rows * d, d * kDoubleBytes, packed + h * d, heads * d * kDoubleBytes,
                                    d * kDoubleBytes, static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice,
                                    stream));
}
void heads_to_packed(const double* dense, std::int64_t heads, std::int64_t rows, std::int64_t d, double* packed,
                     cudaStream_t stream) {
  for (std::int64_t h = 0; h < heads; ++h)
    KC_CUDA_CHECK(cudaMemcpy2DAsync(packed + h * d, heads * d * kDoubleBytes, dense + h * rows * d, d * kDoubleBytes,
                                    d * kDoubleBytes, static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice,
                                    stream));
}

// The reference of problems too large for the CPU: per sequence, its rows of Q, K and V in FP64
// gathered into the dense layout on the GPU, attention_fwd's FP64 device reference, O and the LSE
// scattered back. Sequences with no rows, or rows that see no key (Sk_b = 0), keep O = 0 and
// LSE = -inf.
References attention_varlen_device_reference(const Problem& problem, const Operands& operands, Context& context) {
  const VarlenShape s = varlen_shape(problem);
  const cudaStream_t stream = context.stream();
  const Tensor& offsets_q = operands["cu_seqlens_q"];
  const Tensor& offsets_k = operands["cu_seqlens_k"];
  const std::vector<std::int32_t> cu_q =
      to_offsets(to_host_double(offsets_q.raw(), offsets_q.dtype, offsets_q.count(), stream));
  const std::vector<std::int32_t> cu_k =
      to_offsets(to_host_double(offsets_k.raw(), offsets_k.dtype, offsets_k.count(), stream));
  validate_cu_seqlens(cu_q.data(), s.batch, s.max_q_len, "attention_fwd_varlen: cu_seqlens_q");
  validate_cu_seqlens(cu_k.data(), s.batch, s.max_kv_len, "attention_fwd_varlen: cu_seqlens_k");

  const Tensor& q = operands["Q"];
  const Tensor& k = operands["K"];
  const Tensor& v = operands["V"];
  DeviceBuffer<double> q64(q.count()), k64(k.count()), v64(v.count());
  convert_to_double(q.raw(), q.dtype, q.count(), q64.data(), stream);
  convert_to_double(k.raw(), k.dtype, k.count(), k64.data(), stream);
  convert_to_double(v.raw(), v.dtype, v.count(), v64.data(), stream);
  DeviceBuffer<double> o64(q.count());
  KC_CUDA_CHECK(cudaMemsetAsync(o64.data(), 0, o64.bytes(), stream));
  DeviceBuffer<double> lse64(operands["LSE"].count());
  lse64.copy_from_host(std::vector<double>(lse64.size(), -std::numeric_limits<double>::infinity()), stream);

  const std::int64_t d = s.head_dim;
  DeviceBuffer<double> q_seq(static_cast<std::size_t>(s.q_heads * s.max_q_len * d));
  DeviceBuffer<double> o_seq(q_seq.size());
  DeviceBuffer<double> k_seq(static_cast<std::size_t>(s.kv_heads * s.max_kv_len * d));
  DeviceBuffer<double> v_seq(k_seq.size());
  DeviceBuffer<double> lse_seq(static_cast<std::size_t>(s.q_heads * s.max_q_len));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t q0 = cu_q[static_cast<std::size_t>(b)], k0 = cu_k[static_cast<std::size_t>(b)];
    const std::int64_t q_len = cu_q[static_cast<std::size_t>(b + 1)] - q0;
    const std::int64_t kv_len = cu_k[static_cast<std::size_t>(b + 1)] - k0;
    if (q_len == 0 || kv_len == 0) continue;
    packed_to_heads(q64.data() + q0 * s.q_heads * d, s.q_heads, q_len, d, q_seq.data(), stream);
    packed_to_heads(k64.data() + k0 * s.kv_heads * d, s.kv_heads, kv_len, d, k_seq.data(), stream);
    packed_to_heads(v64.data() + k0 * s.kv_heads * d, s.kv_heads, kv_len, d, v_seq.data(), stream);
    attention_reference_on_device(varlen_sequence_shape(s, q_len, kv_len), attention_scale(problem),
                                  attention_causal(problem), q_seq.data(), k_seq.data(), v_seq.data(), o_seq.data(),
                                  lse_seq.data(), context.cublas(), stream);
    heads_to_packed(o_seq.data(), s.q_heads, q_len, d, o64.data() + q0 * s.q_heads * d, stream);
    KC_CUDA_CHECK(cudaMemcpyAsync(lse64.data() + q0 * s.q_heads, lse_seq.data(),
                                  static_cast<std::size_t>(s.q_heads * q_len) * kDoubleBytes, cudaMemcpyDeviceToDevice,
                                  stream));
  }
  // The per-sequence buffers are freed when this returns: the copies out of them must be done.
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  References references;
  references.emplace("O", std::move(o64));
  references.emplace("LSE", std::move(lse64));
  return references;
}

// The baseline: the dense public entry attention_forward once per sequence, on that sequence's
// rows of the packed tensors (a dense [1, H, S, D] view with the packed row strides: LSE of a
// batch of one is the sequence's [Hq, Sq_b] block, exactly the packed form's). A sequence with
// queries and no keys gets O = 0 (a memset) and LSE = -inf (a copy from a buffer of -inf), which
// the dense entry, needing Sk >= 1, does not take.
class PerSequenceBaseline {
 public:
  void run(const Problem& problem, Operands& operands, Context& context) {
    if (problem.dtype == DType::bf16)
      run_typed<__nv_bfloat16>(problem, operands, context.stream());
    else
      run_typed<__half>(problem, operands, context.stream());
  }

 private:
  template <typename T>
  void run_typed(const Problem& problem, Operands& operands, cudaStream_t stream) {
    const VarlenShape s = varlen_shape(problem);
    const VarlenLengthsOf lengths = varlen_lengths(s);
    const std::int64_t q_row = s.q_heads * s.head_dim;
    const std::int64_t kv_row = s.kv_heads * s.head_dim;
    const T* q = operands["Q"].data<T>();
    const T* k = operands["K"].data<T>();
    const T* v = operands["V"].data<T>();
    T* o = operands["O"].data<T>();
    float* lse = operands["LSE"].data<float>();
    std::int64_t q0 = 0, k0 = 0;  // the sequence's first rows
    for (std::int64_t b = 0; b < s.batch; ++b) {
      const std::int64_t q_len = lengths.q[static_cast<std::size_t>(b)];
      const std::int64_t kv_len = lengths.kv[static_cast<std::size_t>(b)];
      if (q_len > 0 && kv_len == 0) {
        KC_CUDA_CHECK(cudaMemsetAsync(o + q0 * q_row, 0, static_cast<std::size_t>(q_len * q_row) * sizeof(T), stream));
        KC_CUDA_CHECK(cudaMemcpyAsync(lse + q0 * s.q_heads, minus_infinity(s.q_heads * s.max_q_len, stream),
                                      static_cast<std::size_t>(q_len * s.q_heads) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream));
      } else if (q_len > 0) {
        AttentionArgs<T> a;
        a.q = q + q0 * q_row;
        a.k = k + k0 * kv_row;
        a.v = v + k0 * kv_row;
        a.o = o + q0 * q_row;
        a.lse = lse + q0 * s.q_heads;
        a.batch = 1;
        a.q_heads = static_cast<int>(s.q_heads);
        a.kv_heads = static_cast<int>(s.kv_heads);
        a.q_len = static_cast<int>(q_len);
        a.kv_len = static_cast<int>(kv_len);
        a.head_dim = static_cast<int>(s.head_dim);
        a.q_row_stride = q_row;
        a.q_head_stride = s.head_dim;
        a.q_batch_stride = q_len * q_row;
        a.kv_row_stride = kv_row;
        a.kv_head_stride = s.head_dim;
        a.kv_batch_stride = kv_len * kv_row;
        a.scale = static_cast<float>(attention_scale(problem));
        a.causal = attention_causal(problem);
        attention_forward(a, stream);
      }
      q0 += q_len;
      k0 += kv_len;
    }
  }

  // At least `count` floats of -inf on the device (grown in the untimed first run of a problem).
  const float* minus_infinity(std::int64_t count, cudaStream_t stream) {
    if (minus_infinity_.size() < static_cast<std::size_t>(count)) {
      minus_infinity_ = DeviceBuffer<float>(static_cast<std::size_t>(count));
      minus_infinity_.copy_from_host(
          std::vector<float>(minus_infinity_.size(), -std::numeric_limits<float>::infinity()), stream);
    }
    return minus_infinity_.data();
  }

  DeviceBuffer<float> minus_infinity_;
};

std::vector<ProblemSpec> varlen_bench_problems() {
  // FlashAttention's varlen setting: 16k tokens of sequences of one length (attention_fwd's bench
  // shapes at S = 1k and 4k, packed), causal and not, D = 128 and 64; then a ragged batch of 32
  // sequences with Llama-3-8B's heads (32 query heads over 8 kv heads, D = 128) and up to 4k
  // queries and keys each.
  std::vector<ProblemSpec> problems;
  for (const std::int64_t d : {128, 64})
    for (const std::int64_t s : {1024, 4096})
      for (const double causal : {0.0, 1.0})
        problems.push_back({{16384 / s, 2048 / d, 2048 / d, s, s, d}, DType::bf16, {{"causal", causal}}});
  for (const double causal : {0.0, 1.0})
    problems.push_back({{32, 32, 8, 4096, 4096, 128}, DType::bf16, {{"causal", causal}, {"lengths", 1.0}}});
  return problems;
}

std::vector<ProblemSpec> varlen_conformance_problems() {
  // Ragged batches (empty sequences, length 1, Sq_b != Sk_b both ways, rows that see no key, odd
  // lengths such as 17, 77, 1000 and 4097 and the hashed ones), causal and not, grouped heads
  // 1/4/8, D = 64 and 128, an explicit scale, equal lengths (the dense problem packed), bf16 and
  // f16. The small ones are checked against the host reference, the others against the FP64 one on
  // the GPU.
  using P = ParamValues;
  const P ragged = {{"lengths", 1.0}};
  const P ragged_causal = {{"causal", 1.0}, {"lengths", 1.0}};
  return {
      {{1, 1, 1, 1, 1, 64}},
      {{3, 2, 1, 17, 17, 64}, std::nullopt, ragged},
      {{3, 2, 1, 17, 17, 64}, std::nullopt, ragged_causal},
      {{4, 4, 4, 127, 127, 128}, std::nullopt, {{"causal", 1.0}, {"scale", 0.5}}},
      {{7, 4, 1, 77, 1000, 64}, std::nullopt, ragged_causal},
      {{7, 8, 1, 1000, 77, 64}, std::nullopt, ragged_causal},
      {{9, 8, 2, 300, 500, 128}, std::nullopt, ragged},
      {{9, 8, 2, 300, 500, 128}, std::nullopt, ragged_causal},
      {{12, 4, 2, 200, 200, 64}, std::nullopt, ragged_causal},
      {{6, 32, 4, 129, 257, 128}, std::nullopt, ragged_causal},
      {{3, 8, 8, 1000, 1000, 128}, std::nullopt, {{"lengths", 1.0}, {"scale", 0.5}}},
      {{2, 2, 2, 4097, 4097, 64}, std::nullopt, ragged_causal},
      // D = 80: the fused rungs refuse it (compiled for D = 64 and 128).
      {{6, 2, 1, 33, 45, 80}, std::nullopt, ragged_causal},
  };
}

}  // namespace

VarlenShape varlen_shape(const Problem& problem) {
  require(problem.dims.size() == 6,
          "attention_fwd_varlen takes 6 dimensions B x Hq x Hkv x Sq x Sk x D (Sq, Sk: the longest sequence's), "
          "got {}",
          problem.shape());
  VarlenShape s;
  s.batch = problem.dims[0];
  s.q_heads = problem.dims[1];
  s.kv_heads = problem.dims[2];
  s.max_q_len = problem.dims[3];
  s.max_kv_len = problem.dims[4];
  s.head_dim = problem.dims[5];
  s.lengths = problem.param("lengths") == 1.0 ? VarlenLengths::ragged : VarlenLengths::full;
  return s;
}

VarlenLengthsOf varlen_lengths(const VarlenShape& shape) {
  VarlenLengthsOf lengths;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const auto [q, kv] = lengths_of(shape, b);
    lengths.q.push_back(static_cast<std::int32_t>(q));
    lengths.kv.push_back(static_cast<std::int32_t>(kv));
  }
  return lengths;
}

AttentionShape varlen_sequence_shape(const VarlenShape& shape, std::int64_t q_len, std::int64_t kv_len) {
  AttentionShape one;
  one.batch = 1;
  one.q_heads = shape.q_heads;
  one.kv_heads = shape.kv_heads;
  one.q_len = q_len;
  one.kv_len = kv_len;
  one.head_dim = shape.head_dim;
  return one;
}

double varlen_visible_pairs(const VarlenShape& shape, bool causal) {
  double pairs = 0.0;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const auto [q, kv] = lengths_of(shape, b);
    pairs += visible_pairs(varlen_sequence_shape(shape, q, kv), causal);
  }
  return pairs;
}

std::string attention_varlen_shape_error(const Problem& problem) {
  const VarlenShape s = varlen_shape(problem);
  if (s.q_heads % s.kv_heads != 0)
    return fmt::format("{}: Hq = {} is not a multiple of Hkv = {}: each kv head serves the same number of query "
                       "heads (grouped-query attention)",
                       problem.shape(), s.q_heads, s.kv_heads);
  const double lengths = problem.param("lengths");
  if (lengths != 0.0 && lengths != 1.0)
    return fmt::format("lengths = {}: 0 gives every sequence Sq queries and Sk keys, 1 ragged lengths", lengths);
  const auto [total_q, total_k] = totals_of(s);
  if (total_q > INT32_MAX || total_k > INT32_MAX)
    return fmt::format("{}: {} query rows and {} key rows in all; the offsets cu_seqlens_q/k are int32, at most "
                       "2^31 - 1",
                       problem.shape(), total_q, total_k);
  return {};
}

void attention_varlen_reference(const VarlenShape& shape, double scale, bool causal, const std::int32_t* cu_seqlens_q,
                                const std::int32_t* cu_seqlens_k, const double* q, const double* k, const double* v,
                                double* o, double* lse) {
  validate_cu_seqlens(cu_seqlens_q, shape.batch, shape.max_q_len, "attention_fwd_varlen: cu_seqlens_q");
  validate_cu_seqlens(cu_seqlens_k, shape.batch, shape.max_kv_len, "attention_fwd_varlen: cu_seqlens_k");
  const std::int64_t d = shape.head_dim, hq = shape.q_heads, hkv = shape.kv_heads;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const std::int64_t q0 = cu_seqlens_q[b], k0 = cu_seqlens_k[b];
    const std::int64_t q_len = cu_seqlens_q[b + 1] - q0, kv_len = cu_seqlens_k[b + 1] - k0;
    if (q_len == 0) continue;
    // The sequence alone in attention_fwd's [1, H, S, D] layout: packed row t, head h -> [h][t].
    std::vector<double> q_seq(static_cast<std::size_t>(hq * q_len * d));
    std::vector<double> k_seq(static_cast<std::size_t>(hkv * kv_len * d)), v_seq(k_seq.size());
    std::vector<double> o_seq(q_seq.size()), lse_seq(static_cast<std::size_t>(hq * q_len));
    for (std::int64_t h = 0; h < hq; ++h)
      for (std::int64_t i = 0; i < q_len; ++i)
        std::copy_n(q + ((q0 + i) * hq + h) * d, d, q_seq.begin() + (h * q_len + i) * d);
    for (std::int64_t h = 0; h < hkv; ++h)
      for (std::int64_t j = 0; j < kv_len; ++j) {
        std::copy_n(k + ((k0 + j) * hkv + h) * d, d, k_seq.begin() + (h * kv_len + j) * d);
        std::copy_n(v + ((k0 + j) * hkv + h) * d, d, v_seq.begin() + (h * kv_len + j) * d);
      }
    attention_reference(varlen_sequence_shape(shape, q_len, kv_len), scale, causal, q_seq.data(), k_seq.data(),
                        v_seq.data(), o_seq.data(), lse_seq.data());
    for (std::int64_t h = 0; h < hq; ++h)
      for (std::int64_t i = 0; i < q_len; ++i)
        std::copy_n(o_seq.begin() + (h * q_len + i) * d, d, o + ((q0 + i) * hq + h) * d);
    std::copy(lse_seq.begin(), lse_seq.end(), lse + q0 * hq);  // the sequence's [Hq, Sq_b] block
  }
}

OpSpec make_attention_varlen_op() {
  OpConfig op;
  op.name = kAttentionVarlenOp;
  op.description =
      "attention_fwd on the packed variable-length form: per sequence b, O = softmax(scale.Q.K^T [causal mask]).V "
      "and its log-sum-exp over its own Sq_b queries and Sk_b keys; Q and O [total_q,Hq,D], K and V "
      "[total_k,Hkv,D] of the problem's dtype, cu_seqlens_q and cu_seqlens_k [B+1] int32, LSE [Hq,Sq_b] per "
      "sequence at cu_seqlens_q[b].Hq, f32";
  op.dim_names = {"B", "Hq", "Hkv", "Sq", "Sk", "D"};
  op.dtypes = {DType::bf16, DType::f16};
  op.params = varlen_params();
  op.bound = Bound::compute;
  op.math = MathUnit::fp16_tensor;
  op.operands = {input("Q", &q_shape, FillSpec::normal(0.0, 1.5)),
                 input("K", &kv_shape, FillSpec::normal(0.0, 1.5)),
                 input("V", &kv_shape, FillSpec::uniform(-kAttentionVMax, kAttentionVMax)),
                 offsets_operand("cu_seqlens_q", false),
                 offsets_operand("cu_seqlens_k", true),
                 output("O", &q_shape),
                 output("LSE", &lse_shape, DType::f32)};
  op.host_reference = [](const Problem& p, const HostTensors& in) {
    const VarlenShape shape = varlen_shape(p);
    const std::vector<std::int32_t> cu_q = to_offsets(in.at("cu_seqlens_q"));
    const std::vector<std::int32_t> cu_k = to_offsets(in.at("cu_seqlens_k"));
    const std::vector<double>& q = in.at("Q");
    require(static_cast<std::size_t>(cu_q.back() * shape.q_heads * shape.head_dim) == q.size() &&
                static_cast<std::size_t>(cu_k.back() * shape.kv_heads * shape.head_dim) == in.at("K").size(),
            "attention_fwd_varlen: the offsets end at rows {} and {}, not at the packed tensors' ends (a bug of the "
            "op's operands)",
            cu_q.back(), cu_k.back());
    std::vector<double> o(q.size(), 0.0);
    std::vector<double> lse(static_cast<std::size_t>(shape.q_heads * cu_q.back()),
                            -std::numeric_limits<double>::infinity());
    attention_varlen_reference(shape, attention_scale(p), attention_causal(p), cu_q.data(), cu_k.data(), q.data(),
                               in.at("K").data(), in.at("V").data(), o.data(), lse.data());
    return HostTensors{{"O", std::move(o)}, {"LSE", std::move(lse)}};
  };
  op.device_reference = &attention_varlen_device_reference;
  op.reference_work = [](const Problem& p) {
    return varlen_visible_pairs(varlen_shape(p), attention_causal(p)) * static_cast<double>(varlen_shape(p).head_dim);
  };
  // attention_fwd's tolerance, per sequence: the longest sequence's keys bound the terms of a row.
  op.accuracy = [](const Problem& p, const std::string& output, DType output_dtype) {
    return attention_output_accuracy(p.dtype, output, output_dtype, varlen_shape(p).max_kv_len);
  };
  op.flops = [](const Problem& p) {
    // As attention_fwd: two products of 2.D FLOPs per visible (query, key) pair, summed over the
    // sequences (exact under the causal mask).
    return 4.0 * static_cast<double>(varlen_shape(p).head_dim) *
           varlen_visible_pairs(varlen_shape(p), attention_causal(p));
  };
  op.supports = &attention_varlen_shape_error;
  op.bench = varlen_bench_problems();
  op.conformance = varlen_conformance_problems();
  op.baseline_name =
      "the dense entry attention_forward once per sequence (B launches: rungs 19, 25 or 15 on an H100/H200, 05 "
      "elsewhere)";
  auto baseline = std::make_shared<PerSequenceBaseline>();
  op.baseline = [baseline](const Problem& p, Operands& o, Context& context) { baseline->run(p, o, context); };
  op.baseline_supports = [](const Problem& p, Context&) -> std::string {
    const std::int64_t d = varlen_shape(p).head_dim;
    if (d != 64 && d != 128)
      return fmt::format("head dimension D = {}: the dense entry attention_forward runs D = 64 and 128", d);
    return {};
  };
  return build_op(std::move(op));
}

}  // namespace kc::stage3

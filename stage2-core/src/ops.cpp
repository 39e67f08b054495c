// The public entry points of stage 2 (kc/stage2/ops.hpp): validate, pick the rung, launch.
//
// Which rung, and why: docs/benchmarks/h200/stage2.md times every rung of every ladder in bf16,
// f16 and f32. The top rung of each ladder does the same work in fewer, wider accesses than the
// rungs below it and is the fastest or within noise of it on every documented shape; LayerNorm's
// rungs 04 and 05 measure the same within noise, and layernorm() says how the entry splits them.
#include "kc/stage2/ops.hpp"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "kc/common/dtype.hpp"
#include "kc/common/error.hpp"
#include "kc/core/launch.hpp"
#include "kc/core/vector_io.hpp"

namespace kc::stage2 {
namespace {

// Checks arguments of one entry; every message starts with "kc::stage2::<op> (<dtype>): ".
class ArgumentCheck {
 public:
  ArgumentCheck(const char* op, DType dtype) : op_(op), dtype_(dtype) {}

  // `what` says what the pointer should point at, e.g. "the rows x cols input".
  void pointer(const void* p, const char* name, std::size_t element_bytes, std::string_view element,
               const char* what) const {
    require(p != nullptr, "{}: {} is a null pointer; pass the device address of {}", prefix(), name,
            what);
    require(core::is_aligned(p, element_bytes),
            "{}: {} = {} is not aligned to {} bytes, the size of one {}; pass the address of an "
            "element (the tensor's first, or the first of a row)",
            prefix(), name, p, element_bytes, element);
  }

  template <typename T>
  void tensor(const T* p, const char* name, const char* what) const {
    pointer(p, name, sizeof(T), dtype_name(dtype_), what);
  }

  // 1 <= value <= max; `why` says where the upper limit comes from.
  void size(std::int64_t value, const char* name, std::int64_t max, const char* why) const {
    require(value >= 1,
            "{}: {} = {}; it must be at least 1 (an empty tensor has nothing to compute: skip "
            "the call)",
            prefix(), name, value);
    require(value <= max, "{}: {} = {} exceeds {}, {}; split the work into smaller calls", prefix(),
            name, value, max, why);
  }

  void row_length(std::int64_t value, const char* name) const {
    size(value, name, kMaxRowLength, "the longest row this entry indexes with 32-bit integers");
  }

  void rows(std::int64_t value, const char* name = "rows") const {
    size(value, name, INT_MAX, "the largest int");
  }

  void epsilon(float eps, const char* typical) const {
    require(std::isfinite(eps) && eps > 0.f,
            "{}: eps = {} must be a finite number > 0 (it keeps the division away from zero); "
            "pass the model's epsilon, e.g. {}",
            prefix(), eps, typical);
  }

  [[noreturn]] void unknown(const char* what, int value) const {
    throw Error(
        fmt::format("{}: {} has the value {}, which is none of the enumerators; set it to "
                    "one of them",
                    prefix(), what, value));
  }

 private:
  std::string prefix() const { return fmt::format("kc::stage2::{} ({})", op_, dtype_name(dtype_)); }

  const char* op_;
  DType dtype_;
};

template <typename T>
ArgumentCheck check_for(const char* op) {
  return ArgumentCheck(op, dtype_of<T>::value);
}

void check_activation(const ArgumentCheck& check, Activation activation) {
  switch (activation) {
    case Activation::relu:
    case Activation::silu:
    case Activation::gelu_tanh:
    case Activation::gelu_erf: return;
  }
  check.unknown("activation", static_cast<int>(activation));
}

// The rung reports a bad launch configuration here, at the entry, not at some later call.
std::string_view launched(std::string_view rung) {
  KC_CHECK_LAUNCH();
  return rung;
}

// The most (token, head, pair) items RoPE's rungs index: rung 02 walks a token's heads x pairs
// with an int that steps past the end by one block (128 threads).
constexpr std::int64_t kMaxRopeItemsPerToken = std::int64_t{INT_MAX} - 128;

}  // namespace

template <typename T>
std::string_view rmsnorm(const RmsNormArgs<T>& args, cudaStream_t stream) {
  const ArgumentCheck check = check_for<T>("rmsnorm");
  check.rows(args.rows);
  check.row_length(args.cols, "cols");
  check.tensor(args.x, "x", "the rows x cols input");
  check.tensor(args.weight, "weight", "the cols weights");
  check.tensor(args.y, "y", "the rows x cols output");
  check.epsilon(args.eps, "kc::stage2::kRmsNormEps = 1e-6 (Llama)");
  rmsnorm_05_row_in_registers(args, stream);
  return launched("rmsnorm/05_row_in_registers");
}

template <typename T>
std::string_view residual_rmsnorm(const ResidualRmsNormArgs<T>& args, cudaStream_t stream) {
  const ArgumentCheck check = check_for<T>("residual_rmsnorm");
  check.rows(args.rows);
  check.row_length(args.cols, "cols");
  check.tensor(args.x, "x", "the rows x cols sublayer output");
  check.tensor(args.residual, "residual", "the rows x cols residual stream");
  check.tensor(args.weight, "weight", "the cols weights");
  check.tensor(args.sum, "sum", "the rows x cols output x + residual");
  check.tensor(args.y, "y", "the rows x cols normalized output");
  check.epsilon(args.eps, "kc::stage2::kRmsNormEps = 1e-6 (Llama)");
  residual_rmsnorm_03_fused_in_registers(args, stream);
  return launched("residual_rmsnorm/03_fused_in_registers");
}

// Rungs 04 and 05 read x once and differ only in instructions: rung 05 waits at two barriers per
// row instead of four and subtracts the mean once. For rows that fill every slot of their team
// (the measured shapes: hidden sizes that are multiples of 1024 bf16 elements) nvcc already gives
// both the same instruction count, and the two measure the same within noise (stage 2's table),
// rung 04 marginally ahead: those rows go to rung 04. For all other rows rung 05's SASS is
// shorter (rung 05's header), and at one row per block these kernels are close to issue-bound:
// they go to rung 05. Rows too long to hold in registers take the same streaming kernel in both.
template <typename T>
std::string_view layernorm(const LayerNormArgs<T>& args, cudaStream_t stream) {
  const ArgumentCheck check = check_for<T>("layernorm");
  check.rows(args.rows);
  check.row_length(args.cols, "cols");
  check.tensor(args.x, "x", "the rows x cols input");
  check.tensor(args.weight, "weight", "the cols weights");
  check.tensor(args.bias, "bias", "the cols biases");
  check.tensor(args.y, "y", "the rows x cols output");
  check.epsilon(args.eps, "kc::stage2::kLayerNormEps = 1e-5 (torch.nn.LayerNorm)");
  // The decision run_row_kernel makes inside both rungs (kc/core/row_team.cuh).
  constexpr int kFullWidth = core::kVectorWidth<T>;
  const bool vectorized = core::vector_width(args.cols, sizeof(T), args.x, args.weight, args.bias,
                                             args.y) == kFullWidth;
  const core::RowPlan plan = core::plan_row(args.cols, vectorized ? kFullWidth : 1);
  if (vectorized && plan.fits_in_registers && plan.every_slot_full) {
    layernorm_04_row_in_registers(args, stream);
    return launched("layernorm/04_row_in_registers");
  }
  layernorm_05_lean_two_pass(args, stream);
  return launched("layernorm/05_lean_two_pass");
}

template <typename T>
std::string_view softmax(const SoftmaxArgs<T>& args, cudaStream_t stream) {
  const ArgumentCheck check = check_for<T>("softmax");
  check.rows(args.rows);
  check.row_length(args.cols, "cols");
  check.tensor(args.x, "x", "the rows x cols input");
  check.tensor(args.y, "y", "the rows x cols output");
  softmax_06_lean_exp(args, stream);
  return launched("softmax/06_lean_exp");
}

template <typename T>
std::string_view row_reduce(const RowReduceArgs<T>& args, cudaStream_t stream) {
  const ArgumentCheck check = check_for<T>("row_reduce");
  switch (args.kind) {
    case RowReduction::sum:
    case RowReduction::max:
    case RowReduction::mean:
    case RowReduction::sum_squares: break;
    default: check.unknown("kind (RowReduction)", static_cast<int>(args.kind));
  }
  check.rows(args.rows);
  check.row_length(args.cols, "cols");
  check.tensor(args.x, "x", "the rows x cols input");
  check.tensor(args.out, "out", "the output, one value per row");
  row_reduce_03_vectorized(args, stream);
  return launched("row_reduce/03_vectorized");
}

template <typename T>
std::string_view elementwise(const ElementwiseArgs<T>& args, cudaStream_t stream) {
  const ArgumentCheck check = check_for<T>("elementwise");
  switch (args.kind) {
    case ElementwiseKind::add:
    case ElementwiseKind::scale: break;
    case ElementwiseKind::activation: check_activation(check, args.activation); break;
    default: check.unknown("kind (ElementwiseKind)", static_cast<int>(args.kind));
  }
  check.size(args.count, "count", kMaxElementCount,
             "the most elements the map kernel's grid covers (kMaxElementCount)");
  check.tensor(args.a, "a", "the count input elements");
  if (args.kind == ElementwiseKind::add)
    check.tensor(args.b, "b", "the second count-element input of add");
  check.tensor(args.out, "out", "the count output elements");
  require(args.kind != ElementwiseKind::scale || std::isfinite(args.alpha),
          "kc::stage2::elementwise ({}): alpha = {} is not finite; scale multiplies by a finite "
          "factor",
          dtype_name(dtype_of<T>::value), args.alpha);
  elementwise_02_vectorized(args, stream);
  return launched("elementwise/02_vectorized");
}

template <typename T>
std::string_view bias_activation(const BiasActivationArgs<T>& args, cudaStream_t stream) {
  const ArgumentCheck check = check_for<T>("bias_activation");
  check_activation(check, args.activation);
  check.rows(args.rows);
  check.row_length(args.cols, "cols");
  check.tensor(args.x, "x", "the rows x cols input");
  check.tensor(args.bias, "bias", "the cols biases");
  check.tensor(args.out, "out", "the rows x cols output");
  bias_activation_02_fused(args, stream);
  return launched("bias_activation/02_fused");
}

template <typename T>
std::string_view swiglu(const SwigluArgs<T>& args, cudaStream_t stream) {
  const ArgumentCheck check = check_for<T>("swiglu");
  check.rows(args.rows);
  // A row of gate_up is 2 * hidden long, and the rung computes that length as an int.
  check.size(args.hidden, "hidden", kMaxRowLength / 2,
             "half the longest row (a row of gate_up holds 2 * hidden elements)");
  check.tensor(args.gate_up, "gate_up", "the rows x (2 * hidden) projection [gate | up]");
  check.tensor(args.out, "out", "the rows x hidden output");
  swiglu_02_vectorized(args, stream);
  return launched("swiglu/02_vectorized");
}

template <typename T>
std::string_view rope(const RopeArgs<T>& args, int table_positions, cudaStream_t stream) {
  const ArgumentCheck check = check_for<T>("rope");
  if (args.layout != RopeLayout::rotate_half && args.layout != RopeLayout::interleaved)
    check.unknown("layout (RopeLayout)", static_cast<int>(args.layout));
  check.rows(args.tokens, "tokens");
  check.rows(args.q_heads, "q_heads");
  check.rows(args.kv_heads, "kv_heads");
  require(args.head_dim >= 2 && args.head_dim % 2 == 0,
          "kc::stage2::rope ({}): head_dim = {} must be even and at least 2: RoPE rotates the "
          "elements of a head in pairs",
          dtype_name(dtype_of<T>::value), args.head_dim);
  const std::int64_t items_per_token =
      (std::int64_t{args.q_heads} + args.kv_heads) * (args.head_dim / 2);
  check.size(items_per_token, "(q_heads + kv_heads) * head_dim / 2", kMaxRopeItemsPerToken,
             "the most pairs per token the rungs index with 32-bit integers");
  check.size(items_per_token * args.tokens, "tokens * (q_heads + kv_heads) * head_dim / 2",
             kMaxElementCount, "the most pairs one call rotates (kMaxElementCount)");
  require(table_positions >= 1,
          "kc::stage2::rope ({}): table_positions = {}; pass the number of rows of cos_sin (the "
          "largest position + 1), at least 1",
          dtype_name(dtype_of<T>::value), table_positions);
  check.tensor(args.q, "q", "Q, tokens x q_heads x head_dim");
  check.tensor(args.k, "k", "K, tokens x kv_heads x head_dim");
  check.pointer(args.positions, "positions", sizeof(int), "int", "the tokens positions");
  check.pointer(args.cos_sin, "cos_sin", sizeof(float), "float",
                "the table_positions x head_dim cos/sin table");
  // Rung 02 moves an interleaved (a, b) pair as one access of 2 * sizeof(T) bytes even on its
  // scalar path; rung 01 moves single elements. Every head starts a whole number of pairs after
  // q (or k), so the base pointers decide.
  constexpr std::size_t kPairBytes = 2 * sizeof(T);
  if (args.layout == RopeLayout::interleaved &&
      !(core::is_aligned(args.q, kPairBytes) && core::is_aligned(args.k, kPairBytes))) {
    rope_01_naive(args, stream);
    return launched("rope/01_naive");
  }
  rope_02_vectorized(args, stream);
  return launched("rope/02_vectorized");
}

namespace {

template <typename T>
void check_embedding(const char* op, const EmbeddingArgs<T>& args) {
  const ArgumentCheck check = check_for<T>(op);
  check.rows(args.tokens, "tokens");
  check.rows(args.vocab, "vocab");
  check.row_length(args.hidden, "hidden");
  check.pointer(args.ids, "ids", sizeof(int), "int", "the tokens token ids");
  check.tensor(args.table, "table", "the vocab x hidden embedding table");
  check.tensor(args.out, "out", "the tokens x hidden output");
  check.pointer(args.error_record, "error_record", sizeof(int), "int",
                "one int of device memory that receives the first bad token position");
}

}  // namespace

template <typename T>
std::string_view embedding(const EmbeddingArgs<T>& args, cudaStream_t stream) {
  check_embedding("embedding", args);
  embedding_02_vectorized(args, stream);
  return launched("embedding/02_vectorized");
}

template <typename T>
std::string_view embedding_checked(const EmbeddingArgs<T>& args, cudaStream_t stream) {
  check_embedding("embedding_checked", args);
  embedding_lookup_checked(args, stream);  // rung 02, then the wait and the check
  return "embedding/02_vectorized";
}

template std::string_view rmsnorm<float>(const RmsNormArgs<float>&, cudaStream_t);
template std::string_view rmsnorm<__half>(const RmsNormArgs<__half>&, cudaStream_t);
template std::string_view rmsnorm<__nv_bfloat16>(const RmsNormArgs<__nv_bfloat16>&, cudaStream_t);

template std::string_view residual_rmsnorm<float>(const ResidualRmsNormArgs<float>&, cudaStream_t);
template std::string_view residual_rmsnorm<__half>(const ResidualRmsNormArgs<__half>&,
                                                   cudaStream_t);
template std::string_view residual_rmsnorm<__nv_bfloat16>(const ResidualRmsNormArgs<__nv_bfloat16>&,
                                                          cudaStream_t);

template std::string_view layernorm<float>(const LayerNormArgs<float>&, cudaStream_t);
template std::string_view layernorm<__half>(const LayerNormArgs<__half>&, cudaStream_t);
template std::string_view layernorm<__nv_bfloat16>(const LayerNormArgs<__nv_bfloat16>&,
                                                   cudaStream_t);

template std::string_view softmax<float>(const SoftmaxArgs<float>&, cudaStream_t);
template std::string_view softmax<__half>(const SoftmaxArgs<__half>&, cudaStream_t);
template std::string_view softmax<__nv_bfloat16>(const SoftmaxArgs<__nv_bfloat16>&, cudaStream_t);

template std::string_view row_reduce<float>(const RowReduceArgs<float>&, cudaStream_t);
template std::string_view row_reduce<__half>(const RowReduceArgs<__half>&, cudaStream_t);
template std::string_view row_reduce<__nv_bfloat16>(const RowReduceArgs<__nv_bfloat16>&,
                                                    cudaStream_t);

template std::string_view elementwise<float>(const ElementwiseArgs<float>&, cudaStream_t);
template std::string_view elementwise<__half>(const ElementwiseArgs<__half>&, cudaStream_t);
template std::string_view elementwise<__nv_bfloat16>(const ElementwiseArgs<__nv_bfloat16>&,
                                                     cudaStream_t);

template std::string_view bias_activation<float>(const BiasActivationArgs<float>&, cudaStream_t);
template std::string_view bias_activation<__half>(const BiasActivationArgs<__half>&, cudaStream_t);
template std::string_view bias_activation<__nv_bfloat16>(const BiasActivationArgs<__nv_bfloat16>&,
                                                         cudaStream_t);

template std::string_view swiglu<float>(const SwigluArgs<float>&, cudaStream_t);
template std::string_view swiglu<__half>(const SwigluArgs<__half>&, cudaStream_t);
template std::string_view swiglu<__nv_bfloat16>(const SwigluArgs<__nv_bfloat16>&, cudaStream_t);

template std::string_view rope<float>(const RopeArgs<float>&, int, cudaStream_t);
template std::string_view rope<__half>(const RopeArgs<__half>&, int, cudaStream_t);
template std::string_view rope<__nv_bfloat16>(const RopeArgs<__nv_bfloat16>&, int, cudaStream_t);

template std::string_view embedding<float>(const EmbeddingArgs<float>&, cudaStream_t);
template std::string_view embedding<__half>(const EmbeddingArgs<__half>&, cudaStream_t);
template std::string_view embedding<__nv_bfloat16>(const EmbeddingArgs<__nv_bfloat16>&,
                                                   cudaStream_t);

template std::string_view embedding_checked<float>(const EmbeddingArgs<float>&, cudaStream_t);
template std::string_view embedding_checked<__half>(const EmbeddingArgs<__half>&, cudaStream_t);
template std::string_view embedding_checked<__nv_bfloat16>(const EmbeddingArgs<__nv_bfloat16>&,
                                                           cudaStream_t);

}  // namespace kc::stage2

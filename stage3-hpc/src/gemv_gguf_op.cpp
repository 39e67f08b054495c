// The gemv_gguf op (kc/stage3/gemv_gguf.hpp): operands, the host reference and the problems.
#include "kc/stage3/gemv_gguf.hpp"

#include <cuda_fp16.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>

#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/gemm.hpp"
#include "kc/common/op_builder.hpp"
#include "src/gemv_gguf_edges.hpp"
#include "src/weight_only_gemv_edges.hpp"

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

// Writes the half whose bits are `bits` into block field i.
void put_half_bits(std::uint8_t* block, int field, std::uint16_t bits) {
  std::memcpy(block + 2 * field, &bits, sizeof bits);
}

constexpr std::uint16_t kHalfPlusZero = 0x0000, kHalfMinusZero = 0x8000;

// A subnormal half of either sign: +-j 2^-24 with j in [1, 1023] (exact in a float and a half).
double subnormal_half(std::mt19937_64& rng) {
  const double j = static_cast<double>(rng() % 1023 + 1);
  return std::ldexp(rng() % 2 == 0 ? j : -j, -24);
}

// build_op seeds operand i of a run with `run * 16 + i` (op_builder.cpp). w is operand 1; the
// repacked operands recover w's seed from their own and draw the same blocks again.
constexpr std::uint64_t kOperandSeedsPerRun = 16;
constexpr std::uint64_t kBlocksOperand = 1;  // w's place in the op's operands

std::uint64_t blocks_seed(std::uint64_t operand_seed) {
  return operand_seed / kOperandSeedsPerRun * kOperandSeedsPerRun + kBlocksOperand;
}

std::int64_t blocks_per_row(const Problem& p) { return p.dims[2] / kGgufBlockWeights; }

Shape w_shape(const Problem& p) {
  return Shape{p.dims[1], blocks_per_row(p) * gguf_block_bytes(gguf_block_type(p))};
}

// The fragment layout behind a `layout` value, or null for the layouts that are not one (0, 1).
const GgufFragmentLayout* fragment_layout(GgufLayout layout) {
  if (layout == GgufLayout::mma) return &kGgufLayoutMma;
  if (layout == GgufLayout::mma_weights_a) return &kGgufLayoutMmaWeightsA;
  return nullptr;
}

// The repacked operands: bytes of quants (i8) and halves of scales (f16, two a block for q4_1);
// at layouts 2 and 3 one row per tile-chunk (padding included).
Shape quants_shape(const Problem& p) {
  const GgufBlockType type = gguf_block_type(p);
  if (const GgufFragmentLayout* layout = fragment_layout(gguf_layout(p))) {
    const int n = static_cast<int>(p.dims[1]), k = static_cast<int>(p.dims[2]);
    const std::size_t tiles = gguf_fragment_tiles(*layout, n, k);
    return Shape{static_cast<std::int64_t>(tiles),
                 static_cast<std::int64_t>(gguf_fragment_quant_bytes(type, *layout, n, k) / tiles)};
  }
  return Shape{p.dims[1], blocks_per_row(p) * gguf_quant_bytes(type)};
}

Shape scales_shape(const Problem& p) {
  const GgufBlockType type = gguf_block_type(p);
  if (const GgufFragmentLayout* layout = fragment_layout(gguf_layout(p))) {
    const int n = static_cast<int>(p.dims[1]), k = static_cast<int>(p.dims[2]);
    const std::size_t tiles = gguf_fragment_tiles(*layout, n, k);
    return Shape{static_cast<std::int64_t>(tiles),
                 static_cast<std::int64_t>(gguf_fragment_scale_bytes(type, *layout, n, k) / tiles / 2)};
  }
  return Shape{p.dims[1], blocks_per_row(p) * gguf_scale_bytes(type) / 2};
}

// The edge cases of src/gemv_gguf_edges.hpp written over `blocks` (the problem's plain draw from
// `seed`): zero and subnormal scales by block index modulo 8, then NaN d in a few rows
// (weight_only_gemv_nan_scales), all from the edge cases' generator.
void add_edge_cases(const Problem& p, std::vector<std::uint8_t>& blocks, std::uint64_t seed) {
  const GgufBlockType type = gguf_block_type(p);
  const bool with_min = type == GgufBlockType::q4_1;
  const auto bytes = static_cast<std::size_t>(gguf_block_bytes(type));
  std::mt19937_64 rng = weight_only_gemv_edge_generator(seed);
  for (std::size_t b = 0; b < blocks.size() / bytes; ++b) {
    std::uint8_t* block = blocks.data() + b * bytes;
    switch (b % 8) {
      case 1:  // every weight 0
        put_half_bits(block, 0, kHalfPlusZero);
        if (with_min) put_half_bits(block, 1, kHalfPlusZero);
        break;
      case 3:  // every weight 0, or m (q4_1)
        put_half_bits(block, 0, kHalfMinusZero);
        break;
      case 5:
        put_half(block, 0, subnormal_half(rng));
        break;
      case 6:
        if (with_min) put_half(block, 1, subnormal_half(rng));
        break;
      default:
        break;
    }
  }
  for (const std::int64_t block : weight_only_gemv_nan_scales(p, blocks_per_row(p), rng))
    put_half_bits(blocks.data() + static_cast<std::size_t>(block) * bytes, 0, kHalfNanBits);
}

// Random valid blocks, one row of w after another, from the seed; with the edge cases of
// src/gemv_gguf_edges.hpp in the problems that have them.
std::vector<std::uint8_t> draw_blocks(const Problem& p, std::uint64_t seed) {
  const GgufBlockType type = gguf_block_type(p);
  const int bytes = gguf_block_bytes(type);
  const std::size_t blocks = static_cast<std::size_t>(p.dims[1] * blocks_per_row(p));
  std::vector<std::uint8_t> out(blocks * static_cast<std::size_t>(bytes));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_scale(-10.0, -4.0), log_offset(-10.0, -2.0);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::size_t b = 0; b < blocks; ++b) {
    std::uint8_t* block = out.data() + b * static_cast<std::size_t>(bytes);
    // d of either sign: llama.cpp's q4_0 quantizer divides the block's largest-magnitude value by
    // -8, so half of a real file's q4_0 scales are negative; a kernel must not assume d > 0.
    const double d = std::exp2(log_scale(rng));
    put_half(block, 0, byte(rng) < 128 ? -d : d);
    int first = 2;
    if (type == GgufBlockType::q4_1) {
      const double magnitude = std::exp2(log_offset(rng));  // a normal half, either sign
      put_half(block, 1, byte(rng) < 128 ? -magnitude : magnitude);
      first = 4;
    }
    for (int i = first; i < bytes; ++i) block[i] = static_cast<std::uint8_t>(byte(rng));
  }
  if (weight_only_gemv_has_edge_cases(p)) add_edge_cases(p, out, seed);
  return out;
}

void fill_blocks(const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
  const std::vector<std::uint8_t> blocks = draw_blocks(p, blocks_seed(seed));
  tensor.upload(blocks.data(), blocks.size(), stream);
}

// One of the repacked operands: at layout=1 or 2 that repack of w's blocks, at layout=0 poison (no
// rung of that layout may read it).
OperandSpec repacked_operand(const char* name, ShapeFn shape, DType dtype, bool is_quants) {
  OperandSpec operand = input(name, std::move(shape), FillSpec{}, dtype);
  operand.is_read = [](const Problem& p) { return gguf_layout(p) != GgufLayout::blocks; };
  operand.initialize = [is_quants](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    if (gguf_layout(p) == GgufLayout::blocks) {
      poison(tensor.raw(), tensor.dtype, tensor.count(), stream);
      return;
    }
    const std::vector<std::uint8_t> blocks = draw_blocks(p, blocks_seed(seed));
    const int n = static_cast<int>(p.dims[1]), k = static_cast<int>(p.dims[2]);
    const GgufRepacked repacked =
        gguf_layout(p) == GgufLayout::mma_weights_a
            ? repack_gguf_blocks_for_mma16(gguf_block_type(p), blocks.data(), blocks.size(), n, k)
        : gguf_layout(p) == GgufLayout::mma ? repack_gguf_blocks_for_mma(gguf_block_type(p), blocks.data(), blocks.size(), n, k)
                                            : repack_gguf_blocks(gguf_block_type(p), blocks.data(), blocks.size());
    const std::vector<std::uint8_t>& bytes = is_quants ? repacked.quants : repacked.scales;
    tensor.upload(bytes.data(), bytes.size(), stream);
  };
  return operand;
}

}  // namespace

std::vector<std::uint8_t> gemv_gguf_draw_blocks(const Problem& problem, std::uint64_t seed) {
  return draw_blocks(problem, seed);
}

GgufBlockType gguf_block_type(const Problem& problem) {
  const double type = problem.param("ggml_type");
  if (type == 2.0) return GgufBlockType::q4_0;
  if (type == 3.0) return GgufBlockType::q4_1;
  if (type == 8.0) return GgufBlockType::q8_0;
  throw Error(fmt::format("gemv_gguf: ggml_type {} is not q4_0 (2), q4_1 (3) or q8_0 (8)", type));
}

GgufLayout gguf_layout(const Problem& problem) {
  const double layout = problem.param("layout");
  if (layout == 0.0) return GgufLayout::blocks;
  if (layout == 1.0) return GgufLayout::repacked;
  if (layout == 2.0) return GgufLayout::mma;
  if (layout == 3.0) return GgufLayout::mma_weights_a;
  throw Error(fmt::format("gemv_gguf: layout {} is not 0 (the GGUF blocks as stored), 1 (repacked), 2 (the mma "
                          "fragment layout) or 3 (the fragment layout with the weights as A)",
                          layout));
}

GgufRepacked repack_gguf_blocks(GgufBlockType type, const std::uint8_t* bytes, std::size_t byte_count) {
  const auto size = static_cast<std::size_t>(gguf_block_bytes(type));
  if (byte_count % size != 0)
    throw Error(fmt::format("repack_gguf_blocks: {} bytes are not whole blocks of {} bytes (ggml type {}); a "
                            "GGUF tensor of this type holds a multiple of {} bytes",
                            byte_count, size, static_cast<int>(type), size));
  const std::size_t blocks = byte_count / size;
  const auto quant_bytes = static_cast<std::size_t>(gguf_quant_bytes(type));
  const auto scale_bytes = static_cast<std::size_t>(gguf_scale_bytes(type));
  GgufRepacked out;
  out.quants.resize(blocks * quant_bytes);
  out.scales.resize(blocks * scale_bytes);
  for (std::size_t b = 0; b < blocks; ++b) {
    // A block is its scales (d, and m for q4_1) then its quants: the first scale_bytes go to the
    // scales array as they are (d before m: a half2 (d, m)), the rest to the quants array.
    const std::uint8_t* block = bytes + b * size;
    std::memcpy(out.scales.data() + b * scale_bytes, block, scale_bytes);
    std::memcpy(out.quants.data() + b * quant_bytes, block + scale_bytes, quant_bytes);
  }
  return out;
}

namespace {

// A fragment layout's repack on the host: the byte count checked against the weight's, then every
// lane of every tile-chunk written by repack_gguf_fragment_lane (padding included).
GgufRepacked repack_for_fragments(GgufBlockType type, const GgufFragmentLayout& layout, const std::uint8_t* bytes,
                                  std::size_t byte_count, int n, int k, const char* who) {
  const auto size = static_cast<std::size_t>(gguf_block_bytes(type));
  if (n < 1 || k < kGgufBlockWeights || k % kGgufBlockWeights != 0)
    throw Error(fmt::format("{}: N must be >= 1 and K a positive multiple of {} (got N {}, K {})", who,
                            kGgufBlockWeights, n, k));
  const std::size_t k_blocks = static_cast<std::size_t>(k / kGgufBlockWeights);
  if (byte_count != static_cast<std::size_t>(n) * k_blocks * size)
    throw Error(fmt::format("{}: {} bytes are not the {} x {} blocks of {} bytes of an N = {}, K = {} weight (ggml "
                            "type {})",
                            who, byte_count, n, k_blocks, size, n, k, static_cast<int>(type)));
  GgufRepacked out;
  out.quants.resize(gguf_fragment_quant_bytes(type, layout, n, k));
  out.scales.resize(gguf_fragment_scale_bytes(type, layout, n, k));
  const std::size_t tile_chunks = gguf_fragment_tiles(layout, n, k);
  for (std::size_t tile_chunk = 0; tile_chunk < tile_chunks; ++tile_chunk)
    for (int lane = 0; lane < 32; ++lane)
      repack_gguf_fragment_lane(type, layout, bytes, n, k, tile_chunk, lane, out.quants.data(), out.scales.data());
  return out;
}

}  // namespace

GgufRepacked repack_gguf_blocks_for_mma(GgufBlockType type, const std::uint8_t* bytes, std::size_t byte_count,
                                        int n, int k) {
  return repack_for_fragments(type, kGgufLayoutMma, bytes, byte_count, n, k, "repack_gguf_blocks_for_mma");
}

GgufRepacked repack_gguf_blocks_for_mma16(GgufBlockType type, const std::uint8_t* bytes, std::size_t byte_count,
                                          int n, int k) {
  return repack_for_fragments(type, kGgufLayoutMmaWeightsA, bytes, byte_count, n, k,
                              "repack_gguf_blocks_for_mma16");
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
  if (p.dims[0] > kGgufBatchMaxRows)
    return fmt::format("M must be at most {} (a batch of decode steps; larger M is a GEMM's work)", kGgufBatchMaxRows);
  if (p.dims[2] % kGgufBlockWeights != 0) return "K must be a multiple of 32, the GGUF block";
  const double layout = p.param("layout");
  if (layout != 0.0 && layout != 1.0 && layout != 2.0 && layout != 3.0)
    return "layout must be 0 (the GGUF blocks as stored), 1 (repacked), 2 (the mma fragment layout) or 3 (the same "
           "with the weights as A)";
  return "";
}

void check_gguf_batch_args(const GgufGemvArgs& a, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
                           const char* rung, int x_alignment) {
  require(a.m >= 1 && a.m <= kGgufBatchMaxRows && a.n >= 1 && a.k >= kGgufBlockWeights && a.k % kGgufBlockWeights == 0,
          "GGUF GEMV ({}): M must be in [1, {}], N >= 1 and K a positive multiple of 32 (got {}x{}x{})", rung,
          kGgufBatchMaxRows, a.m, a.n, a.k);
  require(a.x != nullptr && a.quants != nullptr && a.scales != nullptr && a.y != nullptr,
          "GGUF GEMV ({}): x, quants, scales and y must be non-null (the layout of repack_gguf_blocks_for_mma16, "
          "layout=3)",
          rung);
  require(reinterpret_cast<std::uintptr_t>(a.x) % static_cast<std::uintptr_t>(x_alignment) == 0 &&
              reinterpret_cast<std::uintptr_t>(a.quants) % 16 == 0 &&
              reinterpret_cast<std::uintptr_t>(a.scales) % 16 == 0,
          "GGUF GEMV ({}): quants and scales must be 16-byte aligned and x {}-byte aligned (copied in 16- and "
          "{}-byte pieces)",
          rung, x_alignment, x_alignment);
  check_gguf_batch_plan("GGUF GEMV", rung, a.m, a.n, a.k, plan, workspace);
}

void check_gguf_batch_plan(const char* op, const char* rung, int m, int n, int k, const GgufBatchPlan& plan,
                           const GgufBatchWorkspace& workspace) {
  const GgufBatchPlan expected = plan_gguf_batch(m, n, k, 1, 1);
  require(plan.token_tiles == expected.token_tiles && plan.column_blocks == expected.column_blocks &&
              plan.chunks == expected.chunks && plan.splits >= 1 && plan.splits <= plan.chunks && plan.splits <= 65535,
          "{} ({}): the plan ({} token tiles, {} column blocks, {} chunks, {} splits) is not one for {}x{}x{}; make "
          "it with plan_gguf_batch",
          op, rung, plan.token_tiles, plan.column_blocks, plan.chunks, plan.splits, m, n, k);
  require(!plan.needs_workspace() || (workspace.partials != nullptr && workspace.counters != nullptr),
          "{} ({}): {} splits need a workspace of {} floats and {} zeroed counters", op, rung, plan.splits,
          plan.partial_floats(), plan.counters());
}

std::string gemv_gguf_layout_error(const Problem& p, GgufLayout layout, int max_rows) {
  if (std::string error = gemv_gguf_shape_error(p); !error.empty()) return error;
  if (p.dims[0] > max_rows)
    return fmt::format("this rung takes at most {} rows of x (a decode step); rungs 09 and 10 take up to {}", max_rows,
                       kGgufBatchMaxRows);
  if (gguf_layout(p) == layout) return "";
  static constexpr const char* kReads[] = {"the GGUF blocks as stored (layout=0)",
                                           "the blocks repacked by repack_gguf_blocks (layout=1)",
                                           "the fragment layout of repack_gguf_blocks_for_mma (layout=2)",
                                           "the weights-as-A layout of repack_gguf_blocks_for_mma16 (layout=3)"};
  return fmt::format("this rung reads {}; layout={} problems are for the rungs that read {}",
                     kReads[static_cast<int>(layout)], static_cast<int>(gguf_layout(p)),
                     kReads[static_cast<int>(gguf_layout(p))]);
}

std::vector<std::string> gemv_gguf_refusals(GgufLayout layout, int max_rows) {
  std::vector<std::string> labels;
  for (const Problem& problem : make_gemv_gguf_op().conformance_problems)
    if (gguf_layout(problem) != layout || problem.dims[0] > max_rows) labels.push_back(problem.label());
  return labels;
}

GgufGemvArgs gemv_gguf_args(const Problem& p, Operands& o) {
  GgufGemvArgs args;
  args.m = static_cast<int>(p.dims[0]);
  args.n = static_cast<int>(p.dims[1]);
  args.k = static_cast<int>(p.dims[2]);
  args.type = gguf_block_type(p);
  args.x = o["x"].data<__nv_bfloat16>();
  if (gguf_layout(p) == GgufLayout::blocks) {
    args.w = reinterpret_cast<const std::uint8_t*>(o["w"].raw());
  } else {
    args.quants = reinterpret_cast<const std::uint8_t*>(o["w_quants"].raw());
    args.scales = o["w_scales"].raw();
  }
  args.y = o["y"].data<__nv_bfloat16>();
  return args;
}

OpSpec make_gemv_gguf_op() {
  OpConfig op;
  op.name = kGemvGgufOp;
  op.description =
      "y = x.w^T, x [M,K] (M <= 64) and y [M,N] bf16, w [N,K] in llama.cpp's GGUF blocks of 32 (q4_0, q4_1 or q8_0), "
      "as stored (layout=0), repacked at load time (layout=1) or repacked for the mma fragments (layout=2; layout=3 "
      "with the weights as the A operand), FP32 accumulation";
  op.dim_names = {"M", "N", "K"};
  op.dtypes = {DType::bf16};
  op.params = {{"ggml_type", 2.0, "the block format: 2 q4_0, 3 q4_1, 8 q8_0"},
               {"layout", 0.0,
                "0: the GGUF blocks as stored; 1: repacked at load time (quants in 16-byte rows, scales apart); "
                "2: repacked for mma.sync's fragments (tiles of 8 rows x 128 k); 3: the same with the weights as A "
                "(tiles of 16 rows x 128 k)"}};
  op.bound = Bound::memory;
  // A rung may multiply on the tensor cores (rung 03): the plausibility check of a time uses their peak.
  op.math = MathUnit::fp16_tensor;
  OperandSpec w = input("w", &w_shape, FillSpec{}, DType::i8);
  w.initialize = &fill_blocks;
  // w stays operand kBlocksOperand: the repacked operands draw its blocks again from its seed.
  op.operands = {weight_only_gemv_x(), w, repacked_operand("w_quants", &quants_shape, DType::i8, true),
                 repacked_operand("w_scales", &scales_shape, DType::f16, false), output("y", dims_at({0, 1}))};
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
  // K products summed in FP32, one rounding to bf16; 2 M N K FLOPs (the reference's work, M N K,
  // matters only to ops with a device reference too).
  set_gemm_accounting(op, [](const Problem& p) { return GemmShape{p.dims[0], p.dims[1], p.dims[2]}; });
  // The same at both layouts: the repack splits each block into quants and scales, adding no byte.
  op.bytes = [](const Problem& p) {
    return static_cast<double>(p.dims[0] * p.dims[2] * 2 + p.dims[0] * p.dims[1] * 2) +
           static_cast<double>(p.dims[1] * blocks_per_row(p) * gguf_block_bytes(gguf_block_type(p)));
  };
  op.supports = &gemv_gguf_shape_error;
  // Decode steps of Llama-3-8B's projections (4096 -> 4096, 4096 -> 14336, 14336 -> 4096) at M = 1,
  // and at M = 16 the first, in q4_0; q4_1 and q8_0 at M = 1 of the first. Each at every layout, so
  // every rung has its row (a rung refuses the other layouts' columns).
  using P = ParamValues;
  for (const double layout : {0.0, 1.0, 2.0, 3.0}) {
    for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{{4096, 4096}, {14336, 4096}, {4096, 14336}})
      op.bench.push_back({{1, n, k}, std::nullopt, P{{"layout", layout}}});
    op.bench.push_back({{16, 4096, 4096}, std::nullopt, P{{"layout", layout}}});
    op.bench.push_back({{1, 4096, 4096}, std::nullopt, P{{"ggml_type", 3.0}, {"layout", layout}}});
    op.bench.push_back({{1, 4096, 4096}, std::nullopt, P{{"ggml_type", 8.0}, {"layout", layout}}});
  }
  // Batches of decode steps (rungs 09 and 10, layout=3): M = 32 and 64 on the 4096 x 4096 weight in every
  // type, and M = 16 and 64 on the 8B's up (14336 x 4096) and down (4096 x 14336) in q4_0.
  for (const double type : {2.0, 3.0, 8.0})
    for (const std::int64_t m : {32, 64})
      op.bench.push_back({{m, 4096, 4096}, std::nullopt, P{{"ggml_type", type}, {"layout", 3.0}}});
  for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{{14336, 4096}, {4096, 14336}})
    for (const std::int64_t m : {16, 64}) op.bench.push_back({{m, n, k}, std::nullopt, P{{"layout", 3.0}}});
  // Odd N, K of one block and of many, M from 1 to 16, every type, every layout.
  for (const double layout : {0.0, 1.0, 2.0, 3.0})
    for (const double type : {2.0, 3.0, 8.0})
      for (const Shape& dims : std::vector<Shape>{{1, 1, 32}, {3, 37, 96}, {16, 257, 576}, {7, 100, 1024}})
        op.conformance.push_back({dims, std::nullopt, P{{"ggml_type", type}, {"layout", layout}}});
  // More than 16 rows (rungs 09 and 10; the decode rungs refuse them): a partial last token tile, a K tail
  // of one block past the last whole chunk, and K long enough for several splits.
  for (const double type : {2.0, 3.0, 8.0})
    for (const Shape& dims : std::vector<Shape>{{17, 40, 160}, {33, 129, 4224}, {64, 300, 2080}})
      op.conformance.push_back({dims, std::nullopt, P{{"ggml_type", type}, {"layout", 3.0}}});
  op.copy_scratch = std::make_shared<CopyScratch>();
  return build_op(std::move(op));
}

}  // namespace kc::stage3

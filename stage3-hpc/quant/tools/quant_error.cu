// kc-quant-error — what each low-precision path of stage 3 does to a GEMM's output, against BF16.
//
// The question a user of FP8, INT8 or 4-bit weights asks first is not "how fast" but "how wrong".
// This tool answers it for the kernels of this stage on one set of inputs. It draws A [M, K] (the
// activations, standard normal) and B [N, K] (the weights, normal with sigma 0.02) and rounds them
// to bf16: those are the model's values. The exact product R = A.B^T is formed in double on the
// host. Then, for each path:
//   bf16       cuBLAS's BF16 GEMM (FP32 accumulation and split-K reductions, bf16 out; kc::cublas_gemm_ex)
//              on A and B as they are: the yardstick;
//   fp8        A and B quantized to e4m3 with one scale per tensor (max |x| / 448), stage3/fp8_gemm/05;
//   fp8 block  A in 1 x 128 pieces and B in 128 x 128 blocks, a scale each (DeepSeek-V3's recipe),
//              stage3/fp8_gemm/03 (rungs 04 and 05 take per-tensor scales in their fast path only);
//   int8       A per row and B per output channel (max |x| / 127, round to nearest), s8 x s8 -> s32
//              and the dequantizing epilogue, stage3/int8_gemm/02 (03 on a GPU other than Hopper);
//   q8_0, q4_1, q4_0   B alone in llama.cpp's GGUF blocks (32 weights a block, ggml's reference
//              quantizers), A kept bf16, through kc::stage3::quantized_gemv on the first gguf-M rows;
//   int4 g128, g32     B alone in 4-bit groups of 128 or 32 with a scale and a zero point each
//              (GPTQ/AWQ's format, rounded to nearest by quantize_int4_groups_on_host), A kept bf16,
//              through kc::stage3::int4_gemv on the same rows.
// Each path's output C is compared with R (the total error: quantization plus arithmetic) and with
// D, the exact product of the values the kernel was given (its dequantized inputs, in double): the
// kernel's own arithmetic error, which must stay at a bf16 GEMM's size (the tool fails otherwise).
// Errors are relative Frobenius norms, ||C - R|| / ||R||, and the largest |C - R| over the RMS of
// R.
//
//   kc-quant-error [--m 128] [--n 2048] [--k 4096] [--gguf-m min(M, 16)] [--seed 1] [--markdown DIR]
//                  [--outlier-columns C --outlier-scale S]   (A's first C columns times S: outlier
//                                                             channels, where per-tensor scales suffer)
//
// Writes the table to stdout and, with --markdown, to DIR/stage3-quant-error.md (headed like
// kc-bench's tables). The FP8 and INT8 Hopper rungs need compute capability 9.0 (sm_90a); the FP8
// rows are left out elsewhere and INT8 runs rung 03. Exit status: 0, or 1 when a kernel's own error
// passes kKernelErrorLimit (or on bad input), 77 without a GPU (1 with KC_REQUIRE_GPU=1).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/common/blas.hpp"
#include "kc/common/buffer.hpp"
#include "kc/common/context.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/gemm.hpp"
#include "kc/common/provenance.hpp"
#include "kc/common/text_io.hpp"
#include "kc/stage3/fp8_gemm_args.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "kc/stage3/gemv_int4.hpp"
#include "kc/stage3/int8_gemm_args.hpp"
#include "kc/stage3/quantize_gguf.hpp"
#include "kc/stage3/quantized_gemv.hpp"

namespace kc::stage3 {
namespace {

struct Options {
  int m = 128, n = 2048, k = 4096, gguf_m = 0;  // gguf_m 0: min(M, 16)
  int outlier_columns = 0;                         // the first columns of A scaled by outlier_scale
  double outlier_scale = 1.0;
  std::uint64_t seed = 1;
  std::string markdown;
};

// The kernel's own error (C against the exact product of its inputs) above which the tool fails:
// a bf16 output alone is off by up to 2^-9 relative, ~1.6e-3 in relative Frobenius norm for
// random rounding; FP8's tensor-core sums between promotions add less than that at these K.
constexpr double kKernelErrorLimit = 1e-2;

std::vector<double> random_bf16_values(std::size_t count, double sigma, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, sigma);
  std::vector<double> out(count);
  for (double& v : out) v = static_cast<double>(__bfloat162float(__float2bfloat16(static_cast<float>(normal(rng)))));
  return out;
}

std::vector<bf16> to_bf16(const std::vector<double>& values) {
  std::vector<bf16> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = __float2bfloat16(static_cast<float>(values[i]));
  return out;
}

// C [rows, N] = A [rows, K] . B [N, K]^T in double: kc's GEMM reference on the host.
std::vector<double> gemm_double(const std::vector<double>& a, const std::vector<double>& b, int rows, int n, int k) {
  std::vector<double> c(static_cast<std::size_t>(rows) * n);
  gemm_reference(GemmShape{rows, n, k}, 1.0, a.data(), b.data(), BLayout::n_by_k, 0.0, nullptr, c.data());
  return c;
}

struct ErrorStats {
  double relative = 0;   // ||C - R||_F / ||R||_F
  double max_by_rms = 0; // max |C - R| / RMS(R)
};

ErrorStats compare(const std::vector<double>& c, const std::vector<double>& r, std::size_t count) {
  double diff = 0, norm = 0, largest = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double d = c[i] - r[i];
    diff += d * d;
    norm += r[i] * r[i];
    largest = std::max(largest, std::abs(d));
  }
  return {std::sqrt(diff / norm), largest / std::sqrt(norm / static_cast<double>(count))};
}

std::vector<double> download(const DeviceBuffer<bf16>& c) { return to_host_double(c.data(), DType::bf16, c.size()); }

// e4m3 of x / scale (round to nearest, saturating at 448 as the kernels' quantizer does).
fp8e4m3 to_e4m3(double x, double scale) {
  return fp8e4m3(static_cast<float>(std::clamp(x / scale, -double{kE4m3Max}, double{kE4m3Max})));
}
double from_e4m3(fp8e4m3 q) { return static_cast<double>(static_cast<float>(q)); }

double amax(const double* x, std::size_t count) {
  double m = 0;
  for (std::size_t i = 0; i < count; ++i) m = std::max(m, std::abs(x[i]));
  return m;
}

// A and B quantized to one-byte values with their FP32 scales, and the values they stand for.
template <typename Q>
struct Quantized {
  std::vector<Q> a, b;
  std::vector<double> a_values, b_values;  // dequantized: what the kernel is given
  std::vector<float> scale_a, scale_b;
};

struct Row {
  std::string path, quantized, kernel;
  ErrorStats total, kernel_only;
  bool has_kernel_only = true;
  int rows = 0;
};

struct Inputs {
  int m, n, k;
  std::vector<double> a, b, exact;  // the bf16 values, and R
};

// What the FP8 and INT8 paths share: the operands and scales onto the device, C poisoned, the
// rung launched on Args (Fp8GemmArgs or Int8GemmArgs, set up by the caller but for the sizes and
// pointers), and C against R and against the exact product of the dequantized inputs.
template <typename Q, typename Args, typename Launch>
std::pair<ErrorStats, ErrorStats> run_byte_gemm(const Inputs& in, const Quantized<Q>& q, Args args, Launch launch,
                                                cudaStream_t stream) {
  DeviceBuffer<Q> a(q.a.size()), b(q.b.size());
  DeviceBuffer<float> scale_a(q.scale_a.size()), scale_b(q.scale_b.size());
  DeviceBuffer<bf16> c(static_cast<std::size_t>(in.m) * in.n);
  a.copy_from_host(q.a, stream);
  b.copy_from_host(q.b, stream);
  scale_a.copy_from_host(q.scale_a, stream);
  scale_b.copy_from_host(q.scale_b, stream);
  poison(c.data(), DType::bf16, c.size(), stream);
  args.m = in.m;
  args.n = in.n;
  args.k = in.k;
  args.a = a.data();
  args.b = b.data();
  args.c = c.data();
  args.scale_a = scale_a.data();
  args.scale_b = scale_b.data();
  launch(args);
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<double> out = download(c);
  const std::vector<double> d = gemm_double(q.a_values, q.b_values, in.m, in.n, in.k);
  return {compare(out, in.exact, out.size()), compare(out, d, out.size())};
}

// cuBLAS's BF16 GEMM of A and B as they are (FP32 accumulation, bf16 out): the yardstick.
std::vector<double> run_bf16(const Inputs& in, Context& context, cudaStream_t stream) {
  DeviceBuffer<bf16> a(in.a.size()), b(in.b.size()), c(static_cast<std::size_t>(in.m) * in.n);
  a.copy_from_host(to_bf16(in.a), stream);
  b.copy_from_host(to_bf16(in.b), stream);
  poison(c.data(), DType::bf16, c.size(), stream);
  // kc's cuBLAS call (kc/common/blas.hpp): FP32 accumulation and split-K reductions in FP32.
  cublas_gemm_ex(context.cublas(), stream, GemmShape{in.m, in.n, in.k}, DType::bf16, DType::bf16, 1.f, a.data(),
                 b.data(), BLayout::n_by_k, 0.f, c.data());
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return download(c);
}

Row run_fp8(const Inputs& in, Fp8Scaling scaling, HopperLaunchCache& cache, cudaStream_t stream) {
  const int m = in.m, n = in.n, k = in.k, kb = fp8_k_blocks(k), nb = fp8_n_blocks(n);
  Quantized<fp8e4m3> q;
  if (scaling == Fp8Scaling::per_tensor) {
    q.scale_a = {static_cast<float>(std::max(amax(in.a.data(), in.a.size()) / kE4m3Max, 1e-30))};
    q.scale_b = {static_cast<float>(std::max(amax(in.b.data(), in.b.size()) / kE4m3Max, 1e-30))};
  } else {
    q.scale_a.assign(static_cast<std::size_t>(kb) * m, 1.f);
    q.scale_b.assign(static_cast<std::size_t>(nb) * kb, 1.f);
    for (int row = 0; row < m; ++row)
      for (int j = 0; j < kb; ++j) {
        const int width = std::min(kFp8ScaleBlock, k - j * kFp8ScaleBlock);
        const double a = amax(in.a.data() + static_cast<std::size_t>(row) * k + j * kFp8ScaleBlock, width);
        q.scale_a[static_cast<std::size_t>(j) * m + row] = a > 0 ? static_cast<float>(a / kE4m3Max) : 1.f;
      }
    for (int i = 0; i < nb; ++i)
      for (int j = 0; j < kb; ++j) {
        double a = 0;
        for (int row = i * kFp8ScaleBlock; row < std::min(n, (i + 1) * kFp8ScaleBlock); ++row)
          a = std::max(a, amax(in.b.data() + static_cast<std::size_t>(row) * k + j * kFp8ScaleBlock,
                               std::min(kFp8ScaleBlock, k - j * kFp8ScaleBlock)));
        q.scale_b[static_cast<std::size_t>(i) * kb + j] = a > 0 ? static_cast<float>(a / kE4m3Max) : 1.f;
      }
  }
  // Each element divided by its scale, rounded to e4m3; the value it stands for, for the reference.
  const auto quantize = [k](const std::vector<double>& x, int rows, const std::vector<float>& scales, Fp8ScaleMap map,
                            std::vector<fp8e4m3>& out, std::vector<double>& values) {
    out.resize(x.size());
    values.resize(x.size());
    for (int row = 0; row < rows; ++row)
      for (int col = 0; col < k; ++col) {
        const std::size_t i = static_cast<std::size_t>(row) * k + col;
        const double s = scales[map(row, col)];
        out[i] = to_e4m3(x[i], s);
        values[i] = from_e4m3(out[i]) * s;
      }
  };
  quantize(in.a, m, q.scale_a, fp8_scale_map_a(scaling, m), q.a, q.a_values);
  quantize(in.b, n, q.scale_b, fp8_scale_map_b(scaling, k), q.b, q.b_values);
  const bool block = scaling == Fp8Scaling::block;
  Fp8GemmArgs args;
  args.scaling = scaling;
  const auto [total, own] = run_byte_gemm(in, q, args, [&](const Fp8GemmArgs& a) {
    if (block)
      fp8_gemm_03_tma_store(a, stream, cache);  // rungs 04 and 05 promote every step with block scales
    else
      fp8_gemm_05_tile_per_shape(a, stream, cache);
  }, stream);
  return {block ? "fp8 e4m3, block scales" : "fp8 e4m3, per-tensor scales",
          block ? "A and B (A: a scale per 1 x 128, B: per 128 x 128)" : "A and B (a scale per tensor)",
          block ? "stage3/fp8_gemm/03_tma_store" : "stage3/fp8_gemm/05_tile_per_shape", total, own, true, m};
}

Row run_int8(const Inputs& in, bool hopper, HopperLaunchCache& cache, cudaStream_t stream) {
  const int k = in.k;
  Quantized<std::int8_t> q;
  // A scale per row (max |x| / 127), each element rounded to the nearest step.
  const auto quantize_rows = [k](const std::vector<double>& x, int rows, std::vector<std::int8_t>& out,
                                 std::vector<double>& values, std::vector<float>& scales) {
    out.resize(x.size());
    values.resize(x.size());
    scales.resize(static_cast<std::size_t>(rows));
    for (int row = 0; row < rows; ++row) {
      const double* v = x.data() + static_cast<std::size_t>(row) * k;
      const double a = amax(v, k);
      const float s = a > 0 ? static_cast<float>(a / 127.0) : 1.f;
      scales[row] = s;
      for (int col = 0; col < k; ++col) {
        const std::size_t i = static_cast<std::size_t>(row) * k + col;
        out[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(v[col] / s), -127.0, 127.0));
        values[i] = static_cast<double>(out[i]) * s;
      }
    }
  };
  quantize_rows(in.a, in.m, q.a, q.a_values, q.scale_a);
  quantize_rows(in.b, in.n, q.b, q.b_values, q.scale_b);
  const auto [total, own] = run_byte_gemm(in, q, Int8GemmArgs{}, [&](const Int8GemmArgs& a) {
    if (hopper)
      int8_gemm_02_tma_store(a, stream, cache);
    else
      int8_gemm_03_mma_sync(a, stream);
  }, stream);
  return {"int8, per-row scales", "A and B (A: a scale per row, B: per output channel)",
          hopper ? "stage3/int8_gemm/02_tma_store, dequantizing epilogue" : "stage3/int8_gemm/03_mma_sync, dequantizing epilogue",
          total, own, true, in.m};
}

Row run_gguf(const Inputs& in, int rows, GgufBlockType type, cudaStream_t stream) {
  const int n = in.n, k = in.k;
  const std::vector<bf16> b16 = to_bf16(in.b);
  const std::vector<std::uint8_t> blocks = quantize_gguf_on_host(type, b16.data(), b16.size());
  const std::vector<double> db = decode_gguf_blocks(type, blocks.data(), b16.size() / kGgufBlockWeights);
  const std::vector<double> a_rows(in.a.begin(), in.a.begin() + static_cast<std::ptrdiff_t>(rows) * k);
  DeviceBuffer<std::uint8_t> w(blocks.size());
  DeviceBuffer<std::uint8_t> quants(quantized_gemv_prepared_quant_bytes(type, n, k));
  DeviceBuffer<std::uint8_t> scales(quantized_gemv_prepared_scale_bytes(type, n, k));
  DeviceBuffer<bf16> x(a_rows.size()), y(static_cast<std::size_t>(rows) * n);
  w.copy_from_host(blocks, stream);
  x.copy_from_host(to_bf16(a_rows), stream);
  quantized_gemv_prepare(type, w.data(), n, k, quants.data(), scales.data(), stream);
  poison(y.data(), DType::bf16, y.size(), stream);
  QuantizedGemvArgs args;
  args.m = rows;
  args.n = n;
  args.k = k;
  args.type = type;
  args.x = x.data();
  args.quants = quants.data();
  args.scales = scales.data();
  args.y = y.data();
  const QuantizedGemvKernel ran = quantized_gemv(args, stream);
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<double> out = download(y);
  const std::vector<double> d = gemm_double(a_rows, db, rows, n, k);
  const std::string name(gguf_block_type_name(type));
  const char* what = type == GgufBlockType::q8_0   ? "B (8 bits and a scale per 32 weights)"
                     : type == GgufBlockType::q4_1 ? "B (4 bits, a scale and a minimum per 32 weights)"
                                                   : "B (4 bits and a scale per 32 weights)";
  return {name + " (GGUF)", what, std::string(quantized_gemv_kernel_name(ran)) + " (kc::stage3::quantized_gemv)",
          compare(out, in.exact, out.size()), compare(out, d, out.size()), true, rows};
}

Row run_int4(const Inputs& in, int rows, int group_size, cudaStream_t stream) {
  const int n = in.n, k = in.k;
  const std::vector<float> b(in.b.begin(), in.b.end());  // the bf16 values, exact in float
  const Int4GroupHost w = quantize_int4_groups_on_host(b.data(), n, k, group_size);
  const std::vector<double> db = dequantize_int4_groups(w.view());
  const std::vector<double> a_rows(in.a.begin(), in.a.begin() + static_cast<std::ptrdiff_t>(rows) * k);
  DeviceBuffer<std::uint8_t> qweight(w.qweight.size()), zeros(w.zeros.size());
  DeviceBuffer<std::uint16_t> scales(w.scales.size());
  DeviceBuffer<std::uint8_t> quants(int4_prepared_quant_bytes(n, k));
  DeviceBuffer<std::uint32_t> entries(int4_prepared_scale_bytes(n, k, group_size) / 4);
  DeviceBuffer<bf16> x(a_rows.size()), y(static_cast<std::size_t>(rows) * n);
  qweight.copy_from_host(w.qweight, stream);
  zeros.copy_from_host(w.zeros, stream);
  scales.copy_from_host(w.scales, stream);
  x.copy_from_host(to_bf16(a_rows), stream);
  Int4GroupWeights device = w.view();
  device.qweight = qweight.data();
  device.scales = scales.data();
  device.zeros = zeros.data();
  prepare_int4_groups_on_device(device, quants.data(), entries.data(), stream);
  poison(y.data(), DType::bf16, y.size(), stream);
  Int4GemvArgs args;
  args.m = rows;
  args.n = n;
  args.k = k;
  args.group_size = group_size;
  args.x = x.data();
  args.quants = quants.data();
  args.scales = entries.data();
  args.y = y.data();
  const Int4GemvKernel ran = int4_gemv(args, stream);
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<double> out = download(y);
  const std::vector<double> d = gemm_double(a_rows, db, rows, n, k);
  return {fmt::format("int4 g{} (GPTQ/AWQ form)", group_size),
          fmt::format("B (4 bits, a scale and a zero point per {} weights, round to nearest)", group_size),
          std::string(int4_gemv_kernel_name(ran)) + " (kc::stage3::int4_gemv)", compare(out, in.exact, out.size()),
          compare(out, d, out.size()), true, rows};
}

std::string format_table(const std::vector<Row>& rows, const ErrorStats& bf16_total, const ErrorStats& bf16_gguf) {
  std::string out =
      "| path | quantized | kernel | rows of A | error vs the exact product | × the bf16 GEMM's | largest error / RMS | "
      "kernel vs its dequantized inputs |\n|---|---|---|---:|---:|---:|---:|---:|\n";
  for (const Row& r : rows) {
    const double yardstick = r.rows == rows.front().rows ? bf16_total.relative : bf16_gguf.relative;
    char line[1024];
    std::snprintf(line, sizeof line, "| %s | %s | %s | %d | %.2e | %.1f | %.3f | %s |\n", r.path.c_str(),
                  r.quantized.c_str(), r.kernel.c_str(), r.rows, r.total.relative, r.total.relative / yardstick,
                  r.total.max_by_rms, r.has_kernel_only ? fmt::format("{:.2e}", r.kernel_only.relative).c_str() : "–");
    out += line;
  }
  return out;
}

int run(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    require(i + 1 < argc, "{} needs a value", flag);
    const std::string value = argv[++i];
    if (flag == "--m") o.m = parse_int(flag, value);
    else if (flag == "--n") o.n = parse_int(flag, value);
    else if (flag == "--k") o.k = parse_int(flag, value);
    else if (flag == "--gguf-m") o.gguf_m = parse_int(flag, value);
    else if (flag == "--seed") o.seed = static_cast<std::uint64_t>(parse_int(flag, value));
    else if (flag == "--markdown") o.markdown = value;
    else if (flag == "--outlier-columns") o.outlier_columns = parse_int(flag, value);
    else if (flag == "--outlier-scale") o.outlier_scale = parse_double(flag, value);
    else require(false, "unknown flag {} (--m, --n, --k, --gguf-m, --seed, --outlier-columns, --outlier-scale, --markdown)",
                 flag);
  }
  require(o.m >= 1 && o.n >= 1 && o.k >= 128 && o.k % 128 == 0,
          "M and N must be positive and K a positive multiple of 128 (got {}x{}x{})", o.m, o.n, o.k);
  require(o.outlier_columns >= 0 && o.outlier_columns <= o.k && o.outlier_scale > 0 && std::isfinite(o.outlier_scale),
          "--outlier-columns must be in 0..K and --outlier-scale positive and finite (got {} and {})", o.outlier_columns,
          o.outlier_scale);
  if (o.gguf_m == 0) o.gguf_m = std::min(o.m, kGgufGemvMaxRows);
  require(o.gguf_m >= 1 && o.gguf_m <= std::min(o.m, kGgufGemvMaxRows), "--gguf-m must be in 1..min(M, {}) = 1..{} (got {})",
          kGgufGemvMaxRows, std::min(o.m, kGgufGemvMaxRows), o.gguf_m);
  if (!gpu_visible_or_explain("kc-quant-error", "; it runs the kernels on a GPU.")) return exit_status_without_gpu();
  const DeviceInfo device = query_device();
  const bool hopper = device.compute_capability() == 90;
  Context context;
  const Stream owned_stream;
  const cudaStream_t stream = owned_stream.get();
  HopperLaunchCache cache;

  std::mt19937_64 rng(o.seed);
  Inputs in{o.m, o.n, o.k, random_bf16_values(static_cast<std::size_t>(o.m) * o.k, 1.0, rng),
            random_bf16_values(static_cast<std::size_t>(o.n) * o.k, 0.02, rng), {}};
  // Outlier channels, as real activations have: a few columns of A many times larger than the rest
  // (rounded to bf16 again, so they stay the model's values).
  for (int row = 0; row < o.m; ++row)
    for (int col = 0; col < o.outlier_columns; ++col) {
      double& v = in.a[static_cast<std::size_t>(row) * o.k + col];
      v = static_cast<double>(__bfloat162float(__float2bfloat16(static_cast<float>(v * o.outlier_scale))));
    }
  in.exact = gemm_double(in.a, in.b, o.m, o.n, o.k);

  const std::vector<double> bf16_out = run_bf16(in, context, stream);
  const char* bf16_kernel = "cuBLAS cublasGemmEx, FP32 accumulation and reductions";
  const ErrorStats bf16_all = compare(bf16_out, in.exact, bf16_out.size());
  // The same GEMM's error on the first gguf-M rows: the GGUF rows' yardstick.
  const ErrorStats bf16_gguf = compare(bf16_out, in.exact, static_cast<std::size_t>(o.gguf_m) * o.n);
  std::vector<Row> rows;
  rows.push_back({"bf16", "nothing (A and B as bf16)", bf16_kernel, bf16_all, {}, false, o.m});
  if (hopper) {
    rows.push_back(run_fp8(in, Fp8Scaling::per_tensor, cache, stream));
    rows.push_back(run_fp8(in, Fp8Scaling::block, cache, stream));
  }
  rows.push_back(run_int8(in, hopper, cache, stream));
  if (o.gguf_m != o.m) rows.push_back({"bf16", "nothing (A and B as bf16)", bf16_kernel, bf16_gguf, {}, false, o.gguf_m});
  for (const GgufBlockType type : {GgufBlockType::q8_0, GgufBlockType::q4_1, GgufBlockType::q4_0})
    rows.push_back(run_gguf(in, o.gguf_m, type, stream));
  for (const int group_size : {128, 32}) rows.push_back(run_int4(in, o.gguf_m, group_size, stream));

  const std::string table = format_table(rows, bf16_all, bf16_gguf);
  const std::string header = fmt::format(
      "| | |\n|---|---|\n| GPU | {} |\n| date | {} |\n| commit | `{}` |\n| command | `kc-quant-error --m {} --n {} "
      "--k {} --gguf-m {} --seed {}{}` |\n| inputs | A [M, K] ~ N(0, 1){}, B [N, K] ~ N(0, 0.02), both rounded to bf16 |\n",
      device.summary(), utc_now(), source_commit(), o.m, o.n, o.k, o.gguf_m, o.seed,
      o.outlier_columns > 0 ? fmt::format(" --outlier-columns {} --outlier-scale {:g}", o.outlier_columns, o.outlier_scale)
                            : std::string(),
      o.outlier_columns > 0 ? fmt::format(" with its first {} columns times {:g}", o.outlier_columns, o.outlier_scale)
                            : std::string());
  std::printf("%s\n%s", header.c_str(), table.c_str());
  if (!hopper) std::printf("\n(no FP8 rows: the FP8 rungs need compute capability 9.0)\n");
  if (!o.markdown.empty()) {
    write_text_file(o.markdown + "/stage3-quant-error.md",
                    "# stage3 — low-precision error against BF16\n\nGenerated by `kc-quant-error` "
                    "(stage3-hpc/quant/tools/quant_error.cu); do not edit by hand.\n\n" +
                        header + "\n" + table);
    std::printf("wrote %s/stage3-quant-error.md\n", o.markdown.c_str());
  }
  bool ok = true;
  for (const Row& r : rows)
    if (r.has_kernel_only && !(r.kernel_only.relative <= kKernelErrorLimit)) {
      std::fprintf(stderr, "kc-quant-error: %s: the kernel is %.3g from the exact product of its own inputs (limit %.0e)\n",
                   r.path.c_str(), r.kernel_only.relative, kKernelErrorLimit);
      ok = false;
    }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace kc::stage3

int main(int argc, char** argv) {
  try {
    return kc::stage3::run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-quant-error: %s\n", error.what());
    return 1;
  }
}

// Files the stage-3 ops and every rung of the tensor-core GEMM ladder with the registry.
#include "kc/stage3/register.hpp"

#include <functional>
#include <memory>
#include <utility>

#include "hgemm.hpp"
#include "kc/common/device.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "kc/stage3/fp8_gemm.hpp"
#include "kc/stage3/fp8_grouped_gemm.hpp"
#include "kc/stage3/int8_gemm.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "kc/stage3/gemv_int4.hpp"
#include "kc/stage3/quantize_int4.hpp"
#include "kc/stage3/gemm.hpp"
#include "kc/stage3/grouped_gemm.hpp"
#include "kc/stage3/quantize_gguf.hpp"
#include "arch/sm90/tma_descriptor.hpp"
#include "gguf_batch_rung.hpp"
#include "register_attention.hpp"
#include "register_attention_decode.hpp"
#include "small_m_weights_as_a_rung.hpp"

namespace kc::stage3 {
KernelEntry rung_entry(const std::string& op, const std::string& name, int rung, std::string idea,
                       std::vector<DType> dtypes, std::string report, int min_compute_capability) {
  KernelEntry entry;
  entry.id = "stage3/" + op + "/" + name;
  entry.op = op;
  entry.rung = rung;
  entry.idea = std::move(idea);
  entry.dtypes = std::move(dtypes);
  entry.min_compute_capability = min_compute_capability;
  entry.report = std::move(report);
  return entry;
}

namespace {

constexpr int kAmpere = 80;
constexpr int kHopper = 90;
constexpr const char* kShapeConstraint = "K % 8 == 0";

using PortableLaunch = void (*)(const HgemmArgs&, cudaStream_t);
using HopperLaunch = void (*)(const HgemmArgs&, cudaStream_t, HopperLaunchCache&);

KernelEntry ladder_entry(const std::string& op, const std::string& name, int rung, std::string idea) {
  KernelEntry entry = rung_entry(op, name, rung, std::move(idea), {DType::bf16}, kReportGroup, kAmpere);
  entry.constraints = kShapeConstraint;
  entry.supports = &hgemm_shape_error;
  entry.refuses = hgemm_refusals();
  return entry;
}

KernelEntry portable_entry(const std::string& name, int rung, std::string idea, PortableLaunch launch) {
  KernelEntry entry = ladder_entry(kHgemmOp, name, rung, std::move(idea));
  entry.launch = [launch](const Problem& problem, Operands& operands, cudaStream_t stream) {
    launch(gemm_args<bf16>(problem, operands, BLayout::n_by_k), stream);
  };
  return entry;
}

// sm_90a machine code (wgmma, setmaxnreg, multicast) runs on compute capability 9.0 only. Each
// entry owns its cache of tensor maps and launch facts.
KernelEntry hopper_entry(const std::string& name, int rung, std::string idea, HopperLaunch launch) {
  KernelEntry entry = ladder_entry(kHgemmOp, name, rung, std::move(idea));
  entry.min_compute_capability = kHopper;
  entry.max_compute_capability = kHopper;
  auto cache = std::make_shared<HopperLaunchCache>();
  entry.launch = [launch, cache](const Problem& problem, Operands& operands, cudaStream_t stream) {
    launch(gemm_args<bf16>(problem, operands, BLayout::n_by_k), stream, *cache);
  };
  return entry;
}

// What rung 11 keeps between launches: the SM count its split rule reads (asked once) and the FP32
// workspace of partial sums (a DeviceScratch: grown on first use, never shrunk).
class SmallMSplitKRung {
 public:
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (sm_count_ == 0) sm_count_ = current_device_sm_count();
    const HgemmArgs args = gemm_args<bf16>(problem, operands, BLayout::n_by_k);
    const SmallMSplitKPlan plan = plan_small_m_split_k(args.m, args.n, args.k, sm_count_);
    const auto floats = static_cast<std::size_t>(small_m_split_k_workspace_floats(plan, args.m, args.n));
    float* workspace = floats == 0 ? nullptr : reinterpret_cast<float*>(scratch_.reserve(floats * sizeof(float)));
    hgemm_11_small_m_split_k(args, plan, workspace, stream);
  }

 private:
  int sm_count_ = 0;
  DeviceScratch scratch_;
};

KernelEntry small_m_entry() {
  KernelEntry entry = ladder_entry(kHgemmOp, "11_small_m_split_k", 11,
                                   "M <= 64: B streamed once through a cp.async ring, K split over CTAs, "
                                   "partials reduced in split order");
  entry.min_compute_capability = kAmpere;
  entry.constraints = "M <= 64, K % 8 == 0";
  entry.supports = &small_m_shape_error;
  entry.refuses = small_m_refusals();
  auto rung = std::make_shared<SmallMSplitKRung>();
  entry.launch = [rung](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung->run(problem, operands, stream);
  };
  return entry;
}

KernelEntry small_m_gemv_entry() {
  KernelEntry entry = portable_entry("12_small_m_gemv", 12,
                                     "M <= 8: a GEMV on the CUDA cores, B streamed once in 16-byte pieces, "
                                     "K shared by a thread group, one launch",
                                     &hgemm_12_small_m_gemv);
  entry.constraints = "M <= 8, K % 8 == 0";
  entry.supports = &small_m_gemv_shape_error;
  entry.refuses = small_m_gemv_refusals();
  return entry;
}

// Rung 14: rung 11's split with the MMA's operands swapped, reduced by the last CTA of each column
// block; its workspace (partial tiles and zeroed counters) lives in SmallMWeightsAsARung.
KernelEntry small_m_weights_as_a_entry() {
  KernelEntry entry = ladder_entry(kHgemmOp, "14_small_m_weights_as_a", 14,
                                   "M <= 64: B as mma.sync's A (ldmatrix, 16 columns a product), A's rows as n8 "
                                   "token tiles, split-K reduced in split order by the last CTA, one launch");
  entry.constraints = "M <= 64, K % 8 == 0";
  entry.supports = &small_m_weights_as_a_shape_error;
  entry.refuses = small_m_refusals();
  auto rung = std::make_shared<SmallMWeightsAsARung>(&hgemm_14_small_m_weights_as_a);
  entry.launch = [rung](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung->run(problem, operands, stream);
  };
  return entry;
}

// The Hopper small-M rungs (15, 16): rung 14's shapes and refusals, sm_90 only, each with its cache
// of tensor maps, its plan and (rung 15) rung 14's workspace.
using SmallMHopperLaunch = void (*)(const HgemmArgs&, const SmallMWeightsAsAPlan&, const SmallMWeightsAsAWorkspace&,
                                    cudaStream_t, HopperLaunchCache&);
KernelEntry small_m_hopper_entry(const std::string& name, int rung_number, std::string idea, SmallMHopperLaunch launch,
                                 SmallMWeightsAsAPlanner planner, bool uses_workspace) {
  KernelEntry entry = ladder_entry(kHgemmOp, name, rung_number, std::move(idea));
  entry.constraints = "M <= 64, K % 8 == 0";
  entry.supports = &small_m_weights_as_a_shape_error;
  entry.refuses = small_m_refusals();
  entry.min_compute_capability = kHopper;
  entry.max_compute_capability = kHopper;
  auto cache = std::make_shared<HopperLaunchCache>();
  auto rung = std::make_shared<SmallMWeightsAsARung>(
      [cache, launch](const HgemmArgs& args, const SmallMWeightsAsAPlan& plan, const SmallMWeightsAsAWorkspace& workspace,
                      cudaStream_t stream) { launch(args, plan, workspace, stream, *cache); },
      planner, uses_workspace);
  entry.launch = [rung](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung->run(problem, operands, stream);
  };
  return entry;
}

// Rung 15: rung 14's product, plan and workspace on TMA and WGMMA.
KernelEntry small_m_tma_wgmma_entry() {
  return small_m_hopper_entry("15_small_m_tma_wgmma", 15,
                              "M <= 64: rung 14's swapped product on Hopper: B's 128 rows and A's token rows by TMA "
                              "from a producer warp, wgmma m64nNk16 (N = 8 token tiles) from shared memory, the same "
                              "split-K by the last CTA",
                              &hgemm_15_small_m_tma_wgmma, &plan_small_m_tma_wgmma, true);
}

// Rung 16: rung 15 with the splits of a column block as one cluster, added in distributed shared
// memory (no workspace).
KernelEntry small_m_cluster_split_entry() {
  return small_m_hopper_entry("16_small_m_cluster_split", 16,
                              "M <= 64: rung 15 with the splits of a column block launched as one cluster; each CTA "
                              "adds a share of the partial tiles from the others' shared memory (ld.shared::cluster), "
                              "no workspace, no atomics",
                              &hgemm_16_small_m_cluster_split, &plan_small_m_cluster_split, false);
}

// The public GEMM entry (kc/stage3/gemm.hpp) as kc-bench sees it: what stage 4 gets for a shape —
// rung 09, 03, 12 or 16, or cuBLAS where none of them runs it or none is at parity (the dispatch:
// choose_gemm_path, with the small-M table for 1 < M <= 64). Not a rung of the ladder: its own report (stage3-gemm-entry), timed against
// the same cuBLAS baseline over a sweep of shapes (stage3-hpc/gemm/shape_sweep.txt). It takes
// every shape the op defines, K % 8 != 0 included. Each row names the path the entry took (its
// note), so that a row at about 100% reads as cuBLAS against cuBLAS, with the reason.
class GemmEntryRung {
 public:
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    gemm().run(gemm_args<bf16>(problem, operands, BLayout::n_by_k), stream);
  }
  // The path run() takes on these operands (Gemm::plan: the same checks and decision, no launch).
  std::string path(const Problem& problem, Operands& operands) {
    return gemm().plan(gemm_args<bf16>(problem, operands, BLayout::n_by_k)).name();
  }

 private:
  Gemm& gemm() {
    if (!gemm_) gemm_ = make_gemm_on_current_device();
    return *gemm_;
  }
  std::unique_ptr<Gemm> gemm_;
};

KernelEntry gemm_entry_entry() {
  KernelEntry entry = rung_entry(kHgemmOp, kGemmEntryName, kGemmEntryRung,
                                 "the public entry kc::stage3::Gemm::run: rung 09, 03, 12 or 16 where its dispatch "
                                 "picks one (1 < M <= 64: the small-M table), cuBLAS GemmEx elsewhere",
                                 {DType::bf16}, kGemmEntryReport, kAmpere);
  entry.constraints = "any shape the op defines (cuBLAS where no rung runs it)";
  entry.supports = [](const Problem&) { return std::string(); };
  auto rung = std::make_shared<GemmEntryRung>();
  entry.launch = [rung](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung->run(problem, operands, stream);
  };
  entry.note = [rung](const Problem& problem, Operands& operands) { return "path: " + rung->path(problem, operands); };
  return entry;
}

KernelEntry fused_entry() {
  KernelEntry entry = ladder_entry(kBiasGeluOp, "10_fused_bias_gelu", 10,
                                   "bias + GELU run by the producer warpgroup's idle warps beside the next tile's mainloop");
  entry.min_compute_capability = kHopper;
  entry.max_compute_capability = kHopper;
  auto cache = std::make_shared<HopperLaunchCache>();
  entry.launch = [cache](const Problem& problem, Operands& operands, cudaStream_t stream) {
    BiasGeluArgs args;
    args.gemm = gemm_args<bf16>(problem, operands, BLayout::n_by_k);
    args.bias = operands["bias"].data<bf16>();
    gemm_bias_gelu_10_fused(args, stream, *cache);
  };
  return entry;
}

// A rung of the GGUF GEMV: it reads the weights in one layout (the op's parameter `layout`), takes
// up to `max_rows` rows of x, and refuses the other problems.
KernelEntry gguf_entry(const std::string& name, int rung, std::string idea, GgufLayout layout,
                       std::function<void(const GgufGemvArgs&, cudaStream_t)> gemv,
                       int max_rows = kGgufGemvMaxRows) {
  KernelEntry entry = rung_entry(kGemvGgufOp, name, rung, std::move(idea), {DType::bf16}, "stage3-quant", kAmpere);
  entry.constraints = fmt::format("M <= {}, K % 32 == 0, layout={}", max_rows, static_cast<int>(layout));
  entry.supports = [layout, max_rows](const Problem& p) { return gemv_gguf_layout_error(p, layout, max_rows); };
  entry.refuses = gemv_gguf_refusals(layout, max_rows);
  entry.launch = [gemv = std::move(gemv)](const Problem& p, Operands& o, cudaStream_t stream) {
    gemv(gemv_gguf_args(p, o), stream);
  };
  return entry;
}

// A Hopper rung that keeps x in shared memory (07, 08, 11, 12): it also refuses the problems whose x (and
// what the rung keeps with it, `kept`) does not fit next to its ring (`fits`).
KernelEntry gguf_x_resident_entry(const std::string& name, int rung, std::string idea,
                                  void (*gemv)(const GgufGemvArgs&, cudaStream_t),
                                  bool (*fits)(GgufBlockType, int, int), const std::string& kept) {
  KernelEntry entry = gguf_entry(name, rung, std::move(idea), GgufLayout::mma_weights_a, gemv);
  entry.min_compute_capability = kHopper;
  entry.max_compute_capability = kHopper;
  entry.constraints += fmt::format(", {} and the ring in 200 KiB of shared memory", kept);
  entry.supports = [fits, kept](const Problem& p) {
    if (std::string error = gemv_gguf_layout_error(p, GgufLayout::mma_weights_a); !error.empty()) return error;
    if (!fits(gguf_block_type(p), static_cast<int>(p.dims[0]), static_cast<int>(p.dims[2])))
      return fmt::format("{} does not fit next to the ring in 200 KiB of shared memory (rung 06 streams x with "
                         "the weights)",
                         kept);
    return std::string();
  };
  return entry;
}

}  // namespace

void register_kernels(Registry& registry) {
  if (!registry.has_op(kHgemmOp)) registry.add_op(make_hgemm_op());
  if (!registry.has_op(kBiasGeluOp)) registry.add_op(make_gemm_bias_gelu_op());
  // Attention: the op, its references and its baseline, then the FlashAttention ladder.
  if (!registry.has_op(kAttentionFwdOp)) registry.add_op(make_attention_fwd_op());
  register_attention_kernels(registry);
  // Decoding over a paged KV cache: the op, its references and its copy baseline, then its ladder.
  if (!registry.has_op(kAttentionDecodeOp)) registry.add_op(make_attention_decode_op());
  register_attention_decode_kernels(registry);
  // The same with the new tokens' RoPE and cache write (decode rung 06).
  if (!registry.has_op(kAttentionDecodeRopeOp)) registry.add_op(make_attention_decode_rope_op());
  register_attention_decode_rope_kernels(registry);

  // Mixture-of-experts: the grouped GEMM (gemm/grouped/), its own table.
  register_grouped_gemm_kernels(registry);

  // Low precision: the FP8 GEMM (quant/fp8/), its own table.
  register_fp8_gemm_kernels(registry);
  // Low precision and mixture-of-experts: the FP8 grouped GEMM (quant/fp8/grouped_*), its own table.
  register_fp8_grouped_gemm_kernels(registry);
  // Low precision: the INT8 GEMM (quant/int8/), its own table.
  register_int8_gemm_kernels(registry);

  // Low precision: the GEMV on GGUF blocks (quant/), its own table.
  if (!registry.has_op(kGemvGgufOp)) registry.add_op(make_gemv_gguf_op());
  registry.add_kernel(gguf_entry("01_warp_per_column", 1,
                                 "a warp per output column, GGUF blocks decoded where they are read, FP32 "
                                 "accumulators per row",
                                 GgufLayout::blocks, &gemv_gguf_01_warp_per_column));
  registry.add_kernel(gguf_entry("02_repacked", 2,
                                 "blocks repacked at load time (quants in 16-byte rows, scales apart): one "
                                 "LDG.128 of quants per block",
                                 GgufLayout::repacked, &gemv_gguf_02_repacked));
  registry.add_kernel(gguf_entry("03_mma", 3,
                                 "blocks repacked for mma.sync's fragments: nibbles to bf16 with one LOP3 a pair, "
                                 "products on the tensor cores, the scales applied once a block in FP32",
                                 GgufLayout::mma, &gemv_gguf_03_mma));
  registry.add_kernel(gguf_entry("04_cp_async", 4,
                                 "rung 03 with the quants and scales streamed through a 4-stage cp.async pipeline "
                                 "in shared memory per warp",
                                 GgufLayout::mma, &gemv_gguf_04_cp_async));
  registry.add_kernel(gguf_entry("05_weights_as_a", 5,
                                 "the operands swapped: the weights as mma.sync's A (16 columns a product), the "
                                 "M <= 8 rows of x as B, no zero rows to build",
                                 GgufLayout::mma_weights_a, &gemv_gguf_05_weights_as_a));
  KernelEntry bulk_stream = gguf_entry("06_bulk_stream", 6,
                                       "rung 05's arithmetic, the weights, scales and x slices streamed into a "
                                       "4-stage shared-memory ring by the copy engine (cp.async.bulk) from a "
                                       "producer warp: bytes in flight without registers",
                                       GgufLayout::mma_weights_a, &gemv_gguf_06_bulk_stream);
  bulk_stream.min_compute_capability = kHopper;
  bulk_stream.max_compute_capability = kHopper;
  registry.add_kernel(std::move(bulk_stream));
  registry.add_kernel(gguf_x_resident_entry("07_x_resident", 7,
                                            "rung 06's weight stream in persistent CTAs that keep x in shared memory "
                                            "(where a decode step's RMSNorm or SwiGLU is applied on the way in); as a "
                                            "programmatic dependent the weights start before the kernel ahead ends",
                                            &gemv_gguf_07_x_resident, &gemv_gguf_07_fits,
                                            "M x (K + 8) x 2 bytes of x"));
  registry.add_kernel(gguf_x_resident_entry(
      "08_x_f16", 8,
      "rung 07 with x kept as fp16 scaled per row by a power of two: nibbles decoded with one LOP3 a pair and no "
      "shift, the block sums of x formed once and started from in the accumulator",
      &gemv_gguf_08_x_f16, &gemv_gguf_08_fits, "M x (K + 8) x 2 bytes of x with M x K / 2 bytes of block sums"));
  auto batch = std::make_shared<GgufBatchRung>(&gemv_gguf_09_batch, &gemv_gguf_09_ctas_per_sm);  // its workspace
  registry.add_kernel(gguf_entry("09_batch", 9,
                                 "M up to 64: hgemm rung 14's split-K frame on layout=3, each block's nibbles "
                                 "decoded once to bf16 integers and multiplied with every token tile, one FFMA "
                                 "an output and block",
                                 GgufLayout::mma_weights_a,
                                 [batch](const GgufGemvArgs& args, cudaStream_t stream) { batch->run(args, stream); },
                                 kGgufBatchMaxRows));
  auto wgmma_batch = std::make_shared<GgufBatchRung>(&gemv_gguf_10_wgmma, &gemv_gguf_10_ctas_per_sm);
  KernelEntry wgmma = gguf_entry("10_wgmma", 10,
                                 "rung 09 on WGMMA: a warpgroup's 64 columns of decoded weights as the A operand "
                                 "from registers, every row of x as B from shared memory, a block's products "
                                 "running while the warps decode the next",
                                 GgufLayout::mma_weights_a,
                                 [wgmma_batch](const GgufGemvArgs& args, cudaStream_t stream) {
                                   wgmma_batch->run(args, stream);
                                 },
                                 kGgufBatchMaxRows);
  wgmma.min_compute_capability = kHopper;
  wgmma.max_compute_capability = kHopper;
  registry.add_kernel(std::move(wgmma));
  registry.add_kernel(gguf_x_resident_entry(
      "11_x_in_step", 11,
      "rung 07 with x staged in step with the weights: each consumer warp stages only its own chunks' slice of x, "
      "a stage ahead of its products, during the CTA's first tile, so the weights' stream never waits for x",
      &gemv_gguf_11_x_in_step, &gemv_gguf_11_fits, "M x (K + 8) x 2 bytes of x"));
  registry.add_kernel(gguf_x_resident_entry(
      "12_x_cluster_staged", 12,
      "rung 07 launched in clusters of 4 CTAs: each CTA stages a quarter of x into the shared memory of all "
      "four (distributed shared memory), so the L2 serves x a quarter as often",
      &gemv_gguf_12_x_cluster_staged, &gemv_gguf_12_fits, "M x (K + 8) x 2 bytes of x"));
  // Low precision: bf16 rows to the GGUF blocks the GEMV reads (quant/quantize_gguf_*), the same table.
  register_quantize_gguf_kernels(registry);
  // Low precision: the GEMV on 4-bit groups with zero points (GPTQ/AWQ; quant/int4/), a table of its
  // own (stage3-int4, with the int4 quantize), so that its rows can be re-run without the GGUF ladder.
  if (!registry.has_op(kGemvInt4Op)) registry.add_op(make_gemv_int4_op());
  const auto int4_entry = [](const char* name, int rung, const char* idea, int min_cc, int max_rows,
                              std::function<void(const Int4GemvArgs&, cudaStream_t)> gemv) {
    KernelEntry entry = rung_entry(kGemvInt4Op, name, rung, idea, {DType::bf16}, "stage3-int4", min_cc);
    entry.constraints = fmt::format("M <= {}, group_size 32, 64 or a multiple of 128, K % group_size == 0",
                                    max_rows);
    entry.supports = [max_rows](const Problem& p) { return gemv_int4_rows_error(p, max_rows); };
    entry.refuses = gemv_int4_refusals(max_rows);
    entry.launch = [gemv = std::move(gemv)](const Problem& p, Operands& o, cudaStream_t stream) {
      gemv(gemv_int4_args(p, o), stream);
    };
    return entry;
  };
  registry.add_kernel(int4_entry("01_group_scales", 1,
                                 "the GGUF GEMV's rung 05 frame on 4-bit groups with zero points: a group's blocks "
                                 "summed on the tensor cores, its scale and zero point applied once",
                                 kAmpere, kInt4GemvMaxRows, &gemv_int4_01_group_scales));
  KernelEntry int4_bulk = int4_entry("02_bulk_stream", 2,
                                     "rung 01's arithmetic, the weights, scale entries and x slices streamed into a "
                                     "4-stage shared-memory ring by the copy engine (cp.async.bulk) from a producer "
                                     "warp",
                                     kHopper, kInt4GemvMaxRows, &gemv_int4_02_bulk_stream);
  int4_bulk.max_compute_capability = kHopper;
  registry.add_kernel(std::move(int4_bulk));
  auto int4_batch = std::make_shared<Int4BatchRung>(&gemv_int4_03_batch, &gemv_int4_03_ctas_per_sm);  // its workspace
  registry.add_kernel(int4_entry("03_batch", 3,
                                 "M up to 64 in the GGUF rung 09 frame: each block's nibbles centred once to q - z "
                                 "(one HSUB2 a pair) for every token tile, a group's products chained, one FFMA an "
                                 "output and group",
                                 kAmpere, kInt4BatchMaxRows,
                                 [int4_batch](const Int4GemvArgs& args, cudaStream_t stream) {
                                   int4_batch->run(args, stream);
                                 }));
  // The links (04, 05) also refuse the problems whose x (and what the rung keeps with it, `kept`)
  // does not fit next to the ring (`fits`).
  const auto int4_link_entry = [&](const char* name, int rung, const char* idea,
                                   void (*gemv)(const Int4GemvArgs&, cudaStream_t), bool (*fits)(int, int, int),
                                   const std::string& kept) {
    KernelEntry entry = int4_entry(name, rung, idea, kHopper, kInt4GemvMaxRows, gemv);
    entry.max_compute_capability = kHopper;
    entry.constraints += fmt::format(", {} and the ring in 200 KiB of shared memory", kept);
    entry.supports = [fits, kept](const Problem& p) {
      if (std::string error = gemv_int4_rows_error(p, kInt4GemvMaxRows); !error.empty()) return error;
      if (!fits(static_cast<int>(p.dims[0]), static_cast<int>(p.dims[2]), gemv_int4_group_size(p)))
        return fmt::format("{} does not fit next to the ring in 200 KiB of shared memory (rung 02 streams x with "
                           "the weights)",
                           kept);
      return std::string();
    };
    return entry;
  };
  registry.add_kernel(int4_link_entry("04_x_resident", 4,
                                      "the GGUF rung 07 frame on the groups: x resident in shared memory (the "
                                      "decode chain's RMSNorm or SwiGLU applied on the way in), the weights streamed "
                                      "before the kernel ahead ends, persistent CTAs",
                                      &gemv_int4_04_x_resident, &gemv_int4_04_fits, "M x (K + 8) x 2 bytes of x"));
  registry.add_kernel(int4_link_entry(
      "05_x_f16", 5,
      "rung 04 with x as fp16 scaled per row and its block sums formed once (the GGUF rung 08 staging): nibbles "
      "decoded straight to fp16, no products against ones",
      &gemv_int4_05_x_f16, &gemv_int4_05_fits, "M x (K + 8) x 2 bytes of x with M x K / 2 bytes of block sums"));
  // bf16 weights to those groups (quant/int4/quantize_*), the same table.
  register_quantize_int4_kernels(registry);

  registry.add_kernel(portable_entry("01_wmma", 1,
                                     "WMMA 16x16x16 fragments, tiles staged through shared memory",
                                     &hgemm_01_wmma));
  registry.add_kernel(portable_entry("02_mma_ldmatrix", 2,
                                     "mma.sync m16n8k16 fed by ldmatrix from 128B-swizzled shared memory",
                                     &hgemm_02_mma_ldmatrix));
  registry.add_kernel(portable_entry("03_cp_async", 3,
                                     "3-stage cp.async pipeline: loads overlap the MMAs",
                                     &hgemm_03_cp_async));
  registry.add_kernel(hopper_entry("04_tma_wgmma", 4,
                                   "TMA loads on mbarriers, WGMMA from one warpgroup (64x256 tiles)",
                                   &hgemm_04_tma_wgmma));
  registry.add_kernel(hopper_entry("05_two_consumers", 5,
                                   "two consumer warpgroups share 128x256 tiles",
                                   &hgemm_05_two_consumers));
  registry.add_kernel(hopper_entry("06_warp_specialized", 6,
                                   "producer warpgroup (setmaxnreg down) feeds two consumers (up)",
                                   &hgemm_06_warp_specialized));
  registry.add_kernel(hopper_entry("07_persistent", 7,
                                   "persistent blocks, tile scheduler, grouped raster order",
                                   &hgemm_07_persistent));
  registry.add_kernel(hopper_entry("08_cluster_multicast", 8,
                                   "clusters of 2 CTAs share B tiles through TMA multicast",
                                   &hgemm_08_cluster_multicast));
  registry.add_kernel(hopper_entry("09_tma_store", 9,
                                   "epilogue through swizzled shared memory and TMA stores",
                                   &hgemm_09_tma_store));
  registry.add_kernel(fused_entry());
  registry.add_kernel(small_m_entry());
  registry.add_kernel(small_m_gemv_entry());
  registry.add_kernel(gemm_entry_entry());
  registry.add_kernel(small_m_weights_as_a_entry());
  registry.add_kernel(small_m_tma_wgmma_entry());
  registry.add_kernel(small_m_cluster_split_entry());
  registry.add_kernel(hopper_entry("17_unaligned_k_clusters", 17,
                                   "rung 09 in clusters of 2 CTAs sharing B tiles through multicast: half the L2 "
                                   "reads of B where rows of A and B are not 128-byte aligned (K % 64 != 0)",
                                   &hgemm_17_unaligned_k_clusters));
}

}  // namespace kc::stage3

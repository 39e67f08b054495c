// The public quantized GEMV entry (kc/stage3/quantized_gemv.hpp): the checks, then rung 01 (w as
// stored) or, for w prepared, rung 06 at M <= 8 where it runs (Hopper) and rung 05 otherwise; the
// link (quantized_gemv_link) runs rung 08 for one row of q4_0 or q4_1 whose CTAs take several
// tiles, rung 07 otherwise (quantized_gemv_link_kernel); and the int4 group format's entry
// (int4_gemv): the checks, then its rung 01 at every M (int4_gemv_kernel: the measured rule).
#include "kc/stage3/quantized_gemv.hpp"

#include <fmt/format.h>

#include "arch/util.hpp"
#include "kc/common/error.hpp"

namespace kc::stage3 {

std::string_view quantized_gemv_kernel_name(QuantizedGemvKernel kernel) {
  switch (kernel) {
    case QuantizedGemvKernel::gemv_gguf_01_warp_per_column:
      return "stage3/gemv_gguf/01_warp_per_column";
    case QuantizedGemvKernel::gemv_gguf_03_mma:
      return "stage3/gemv_gguf/03_mma";
    case QuantizedGemvKernel::gemv_gguf_04_cp_async:
      return "stage3/gemv_gguf/04_cp_async";
    case QuantizedGemvKernel::gemv_gguf_05_weights_as_a:
      return "stage3/gemv_gguf/05_weights_as_a";
    case QuantizedGemvKernel::gemv_gguf_06_bulk_stream:
      return "stage3/gemv_gguf/06_bulk_stream";
    case QuantizedGemvKernel::gemv_gguf_07_x_resident:
      return "stage3/gemv_gguf/07_x_resident";
    case QuantizedGemvKernel::gemv_gguf_08_x_f16:
      return "stage3/gemv_gguf/08_x_f16";
    case QuantizedGemvKernel::gemv_gguf_11_x_in_step:
      return "stage3/gemv_gguf/11_x_in_step";
    case QuantizedGemvKernel::gemv_gguf_12_x_cluster_staged:
      return "stage3/gemv_gguf/12_x_cluster_staged";
  }
  return "unknown";
}

std::string_view gguf_block_type_name(GgufBlockType type) {
  switch (type) {
    case GgufBlockType::q4_0:
      return "q4_0";
    case GgufBlockType::q4_1:
      return "q4_1";
    case GgufBlockType::q8_0:
      return "q8_0";
  }
  return "unknown";
}

void check_quantized_gemv_args(const QuantizedGemvArgs& a) {
  constexpr const char* entry = "kc::stage3::quantized_gemv";
  require(a.type == GgufBlockType::q4_0 || a.type == GgufBlockType::q4_1 || a.type == GgufBlockType::q8_0,
          "{}: block type {} is not q4_0 (2), q4_1 (3) or q8_0 (8), the GGUF blocks the GEMV reads; other "
          "types run dequantized to bf16 through kc::stage3::Gemm",
          entry, static_cast<int>(a.type));
  require(a.m >= 1 && a.m <= kGgufGemvMaxRows,
          "{}: M = {} is outside [1, {}]: the GEMV takes the rows of a decode step; run more rows as a GEMM "
          "(kc::stage3::Gemm on the dequantized weight)",
          entry, a.m, kGgufGemvMaxRows);
  require(a.n >= 1, "{}: N = {} must be at least 1 (skip the call for an empty output)", entry, a.n);
  require(a.k >= kGgufBlockWeights && a.k % kGgufBlockWeights == 0,
          "{}: K = {} is not a positive multiple of {}: a row of w is whole blocks of {} weights", entry, a.k,
          kGgufBlockWeights, kGgufBlockWeights);
  const bool prepared = a.quants != nullptr || a.scales != nullptr;
  require(prepared != (a.w != nullptr),
          "{}: give the weight either as stored (w) or prepared by quantized_gemv_prepare (quants and scales), "
          "exactly one of the two (w {}, quants {}, scales {})",
          entry, static_cast<const void*>(a.w), static_cast<const void*>(a.quants), a.scales);
  require(a.x != nullptr, "{}: x (M x K, bf16) is a null pointer", entry);
  require(a.y != nullptr, "{}: y (M x N, bf16) is a null pointer", entry);
  if (prepared) {
    require(a.quants != nullptr && a.scales != nullptr, "{}: a prepared weight needs both quants and scales", entry);
    require(aligned(a.quants, 16) && aligned(a.scales, 16) && aligned(a.x, 16),
            "{}: quants {}, scales {} and x {} must be 16-byte aligned: the tensor-core rung reads them in 16-byte "
            "pieces",
            entry, static_cast<const void*>(a.quants), a.scales, static_cast<const void*>(a.x));
  } else {
    require(aligned(a.w, 4), "{}: w at {} is not 4-byte aligned: the rung reads the blocks' halves in place",
            entry, static_cast<const void*>(a.w));
    require(aligned(a.x, 4), "{}: x at {} is not 4-byte aligned: the rung reads x in bf16 pairs", entry,
            static_cast<const void*>(a.x));
  }
  require(aligned(a.y, 2), "{}: y at {} is not aligned to a bf16 element (2 bytes)", entry,
          static_cast<const void*>(a.y));
}

QuantizedGemvKernel quantized_gemv_prepared_kernel(int m) {
  return m <= 8 && gemv_gguf_06_runs_here() ? QuantizedGemvKernel::gemv_gguf_06_bulk_stream
                                            : QuantizedGemvKernel::gemv_gguf_05_weights_as_a;
}

QuantizedGemvKernel quantized_gemv(const QuantizedGemvArgs& args, cudaStream_t stream) {
  check_quantized_gemv_args(args);
  if (args.quants != nullptr) {
    const QuantizedGemvKernel kernel = quantized_gemv_prepared_kernel(args.m);
    if (kernel == QuantizedGemvKernel::gemv_gguf_06_bulk_stream)
      gemv_gguf_06_bulk_stream(args, stream);
    else
      gemv_gguf_05_weights_as_a(args, stream);
    return kernel;
  }
  gemv_gguf_01_warp_per_column(args, stream);
  return QuantizedGemvKernel::gemv_gguf_01_warp_per_column;
}

bool quantized_gemv_link_runs(GgufBlockType type, int m, int k) {
  const bool known = type == GgufBlockType::q4_0 || type == GgufBlockType::q4_1 || type == GgufBlockType::q8_0;
  return known && m >= 1 && m <= kGgufGemvMaxRows && k >= kGgufBlockWeights && k % kGgufBlockWeights == 0 &&
         gemv_gguf_06_runs_here() && gemv_gguf_07_fits(type, m, k);
}

QuantizedGemvKernel quantized_gemv_link_kernel(const QuantizedGemvLinkArgs& a) {
  // q8_0 has no nibbles to decode: rung 08 measured level with rung 07 or behind it there.
  if (a.type == GgufBlockType::q8_0 || a.m != 1 || !gemv_gguf_08_fits(a.type, a.m, a.k))
    return QuantizedGemvKernel::gemv_gguf_07_x_resident;
  return gemv_gguf_08_ctas_take_several_tiles(a) ? QuantizedGemvKernel::gemv_gguf_08_x_f16
                                                 : QuantizedGemvKernel::gemv_gguf_07_x_resident;
}

namespace {

// The arguments every link checks before any CUDA call, GGUF blocks or 4-bit groups: the number
// of weights, the prologue, then each weight's arguments (`check_weight(w)`).
template <class LinkArgs, class CheckWeight>
void check_link_args(const LinkArgs& a, const char* entry, CheckWeight check_weight) {
  require(a.weights >= 1 && a.weights <= kGgufGemvLinkMaxWeights, "{}: weights = {} is outside [1, {}]", entry,
          a.weights, kGgufGemvLinkMaxWeights);
  require(a.prologue == GgufGemvPrologue::none || a.prologue == GgufGemvPrologue::rmsnorm ||
              a.prologue == GgufGemvPrologue::swiglu,
          "{}: prologue {} is not none (0), rmsnorm (1) or swiglu (2)", entry, static_cast<int>(a.prologue));
  for (int w = 0; w < a.weights; ++w) check_weight(w);
}

void check_quantized_gemv_link_args(const QuantizedGemvLinkArgs& a, const char* entry) {
  check_link_args(a, entry, [&a](int w) { check_quantized_gemv_args(gemv_gguf_link_weight_args(a, w)); });
}

// The rungs quantized_gemv_link runs by name: each one's launch and whether M rows of x of K fit
// next to its ring (rung 07's rule is quantized_gemv_link_runs' own).
struct LinkRung {
  QuantizedGemvKernel kernel;
  void (*link)(const QuantizedGemvLinkArgs&, cudaStream_t);
  bool (*fits)(GgufBlockType, int, int);
};
constexpr LinkRung kLinkRungs[] = {
    {QuantizedGemvKernel::gemv_gguf_07_x_resident, &gemv_gguf_07_link, &gemv_gguf_07_fits},
    {QuantizedGemvKernel::gemv_gguf_08_x_f16, &gemv_gguf_08_link, &gemv_gguf_08_fits},
    {QuantizedGemvKernel::gemv_gguf_11_x_in_step, &gemv_gguf_11_link, &gemv_gguf_11_fits},
    {QuantizedGemvKernel::gemv_gguf_12_x_cluster_staged, &gemv_gguf_12_link, &gemv_gguf_12_fits},
};

// `rung`'s row of kLinkRungs; nullptr where it is not a link rung.
const LinkRung* find_link_rung(QuantizedGemvKernel rung) {
  for (const LinkRung& row : kLinkRungs)
    if (row.kernel == rung) return &row;
  return nullptr;
}

// Launches link rung `rung` (a row of kLinkRungs) on checked arguments; returns it.
QuantizedGemvKernel launch_link_rung(const QuantizedGemvLinkArgs& a, QuantizedGemvKernel rung, cudaStream_t stream) {
  find_link_rung(rung)->link(a, stream);
  return rung;
}

}  // namespace

bool quantized_gemv_link_runs(GgufBlockType type, int m, int k, QuantizedGemvKernel rung) {
  const LinkRung* row = find_link_rung(rung);
  return row != nullptr && quantized_gemv_link_runs(type, m, k) && row->fits(type, m, k);
}

QuantizedGemvKernel quantized_gemv_link(const QuantizedGemvLinkArgs& a, QuantizedGemvKernel rung,
                                        cudaStream_t stream) {
  constexpr const char* entry = "kc::stage3::quantized_gemv_link";
  require(find_link_rung(rung) != nullptr,
          "{}: {} is not a link rung (07_x_resident, 08_x_f16, 11_x_in_step or 12_x_cluster_staged)", entry,
          quantized_gemv_kernel_name(rung));
  check_quantized_gemv_link_args(a, entry);
  require(quantized_gemv_link_runs(a.type, a.m, a.k, rung),
          "{}: the link cannot run {} rows of K = {} here ({} needs a Hopper GPU, sm_90a code and x in shared "
          "memory); run the prologue and quantized_gemv instead",
          entry, a.m, a.k, quantized_gemv_kernel_name(rung));
  return launch_link_rung(a, rung, stream);
}

QuantizedGemvKernel quantized_gemv_link(const QuantizedGemvLinkArgs& a, cudaStream_t stream) {
  constexpr const char* entry = "kc::stage3::quantized_gemv_link";
  check_quantized_gemv_link_args(a, entry);
  require(quantized_gemv_link_runs(a.type, a.m, a.k),
          "{}: the link cannot run {} rows of K = {} here (rungs 07 and 08 need a Hopper GPU, sm_90a code and x "
          "in shared memory: gemv_gguf_07_fits); run the prologue and quantized_gemv instead",
          entry, a.m, a.k);
  return launch_link_rung(a, quantized_gemv_link_kernel(a), stream);
}

std::size_t quantized_gemv_prepared_quant_bytes(GgufBlockType type, int n, int k) {
  return gguf_mma16_quant_bytes(type, n, k);
}

std::size_t quantized_gemv_prepared_scale_bytes(GgufBlockType type, int n, int k) {
  return gguf_mma16_scale_bytes(type, n, k);
}

void quantized_gemv_prepare(GgufBlockType type, const std::uint8_t* blocks, int n, int k, std::uint8_t* quants,
                            void* scales, cudaStream_t stream) {
  constexpr const char* entry = "kc::stage3::quantized_gemv_prepare";
  require(type == GgufBlockType::q4_0 || type == GgufBlockType::q4_1 || type == GgufBlockType::q8_0,
          "{}: block type {} is not q4_0 (2), q4_1 (3) or q8_0 (8)", entry, static_cast<int>(type));
  require(n >= 1 && k >= kGgufBlockWeights && k % kGgufBlockWeights == 0,
          "{}: N = {} must be at least 1 and K = {} a positive multiple of {}", entry, n, k, kGgufBlockWeights);
  require(blocks != nullptr && quants != nullptr && scales != nullptr, "{}: blocks, quants and scales must be non-null",
          entry);
  require(aligned(quants, 16) && aligned(scales, 16), "{}: quants {} and scales {} must be 16-byte aligned", entry,
          static_cast<const void*>(quants), scales);
  repack_gguf_blocks_for_mma16_on_device(type, blocks, n, k, quants, scales, stream);
}

std::string_view int4_gemv_kernel_name(Int4GemvKernel kernel) {
  switch (kernel) {
    case Int4GemvKernel::gemv_int4_01_group_scales:
      return "stage3/gemv_int4/01_group_scales";
    case Int4GemvKernel::gemv_int4_02_bulk_stream:
      return "stage3/gemv_int4/02_bulk_stream";
    case Int4GemvKernel::gemv_int4_04_x_resident:
      return "stage3/gemv_int4/04_x_resident";
    case Int4GemvKernel::gemv_int4_05_x_f16:
      return "stage3/gemv_int4/05_x_f16";
  }
  return "unknown";
}

void check_int4_gemv_args(const Int4GemvArgs& a) {
  constexpr const char* entry = "kc::stage3::int4_gemv";
  require(a.m >= 1 && a.m <= kInt4GemvMaxRows,
          "{}: M = {} is outside [1, {}]: the entry takes the rows of a decode step (rung 03, "
          "stage3/gemv_int4/03_batch, takes up to {} with a workspace)",
          entry, a.m, kInt4GemvMaxRows, kInt4BatchMaxRows);
  check_int4_group_shape(a.n, a.k, a.group_size, entry);
  require(a.x != nullptr && a.quants != nullptr && a.scales != nullptr && a.y != nullptr,
          "{}: x, quants, scales and y must be non-null (quants and scales as prepare_int4_groups_on_device writes "
          "them)",
          entry);
  require(aligned(a.x, 16) && aligned(a.quants, 16) && aligned(a.scales, 16),
          "{}: x {}, quants {} and scales {} must be 16-byte aligned: the rungs read them in 16-byte pieces", entry,
          static_cast<const void*>(a.x), static_cast<const void*>(a.quants), static_cast<const void*>(a.scales));
  require(aligned(a.y, 2), "{}: y at {} is not aligned to a bf16 element (2 bytes)", entry,
          static_cast<const void*>(a.y));
}

Int4GemvKernel int4_gemv_kernel(int m) {
  (void)m;  // rung 01 at every M the entry takes: the measured rule (quantized_gemv.hpp)
  return Int4GemvKernel::gemv_int4_01_group_scales;
}

Int4GemvKernel int4_gemv(const Int4GemvArgs& args, cudaStream_t stream) {
  check_int4_gemv_args(args);
  const Int4GemvKernel kernel = int4_gemv_kernel(args.m);
  if (kernel == Int4GemvKernel::gemv_int4_02_bulk_stream)
    gemv_int4_02_bulk_stream(args, stream);
  else
    gemv_int4_01_group_scales(args, stream);
  return kernel;
}

bool int4_gemv_link_runs(int m, int k, int group_size, Int4GemvKernel rung) {
  const bool shape = m >= 1 && m <= kInt4GemvMaxRows && k >= 1 && int4_group_size_supported(group_size) &&
                     k % group_size == 0 && gemv_gguf_06_runs_here();
  if (!shape) return false;
  switch (rung) {
    case Int4GemvKernel::gemv_int4_04_x_resident: return gemv_int4_04_fits(m, k, group_size);
    case Int4GemvKernel::gemv_int4_05_x_f16: return gemv_int4_05_fits(m, k, group_size);
    default: return false;
  }
}

bool int4_gemv_link_runs(int m, int k, int group_size) {
  return int4_gemv_link_runs(m, k, group_size, Int4GemvKernel::gemv_int4_04_x_resident);
}

Int4GemvKernel int4_gemv_link_kernel(const Int4GemvLinkArgs&) { return Int4GemvKernel::gemv_int4_04_x_resident; }

Int4GemvKernel int4_gemv_link(const Int4GemvLinkArgs& a, Int4GemvKernel rung, cudaStream_t stream) {
  constexpr const char* entry = "kc::stage3::int4_gemv_link";
  require(rung == Int4GemvKernel::gemv_int4_04_x_resident || rung == Int4GemvKernel::gemv_int4_05_x_f16,
          "{}: {} is not a link rung (04_x_resident or 05_x_f16)", entry, int4_gemv_kernel_name(rung));
  check_link_args(a, entry, [&a](int w) { check_int4_gemv_args(gemv_int4_link_weight_args(a, w)); });
  require(int4_gemv_link_runs(a.m, a.k, a.group_size, rung),
          "{}: the link cannot run {} rows of K = {} here ({} needs a Hopper GPU, sm_90a code and x in shared "
          "memory); run the prologue and int4_gemv instead",
          entry, a.m, a.k, int4_gemv_kernel_name(rung));
  if (rung == Int4GemvKernel::gemv_int4_05_x_f16)
    gemv_int4_05_link(a, stream);
  else
    gemv_int4_04_link(a, stream);
  return rung;
}

Int4GemvKernel int4_gemv_link(const Int4GemvLinkArgs& a, cudaStream_t stream) {
  return int4_gemv_link(a, int4_gemv_link_kernel(a), stream);
}

}  // namespace kc::stage3

// The candidate tile configurations of rung 03's kernel, each instantiated once here.
//
// Why these: every one keeps a 64 x 64 warp tile (the most outputs per ldmatrix byte that fit
// the registers). 128 x 128 with 4 warps is the tile rung 03 started from: 2 blocks per SM, so one
// block's barrier waits and epilogue overlap the other's MMAs. 128 x 256 and 256 x 128 with 8
// warps move a quarter fewer global -> shared bytes per FLOP (per K step 48 KiB for 4.2 MFLOP
// instead of 32 KiB for 2.1), ~5.4 instead of ~7.3 TB/s of L2 -> SM traffic at 470 TFLOPS, and
// 23.8 instead of 21.8 FLOP per shared-memory byte (ldmatrix + cp.async), with 1 block per SM.
// 128 x 128 with 8 warps of 32 x 64: 64 accumulators fit 128 registers (ptxas: 128, no spill;
// 64 x 32 warps spill 8 bytes), so two blocks, 16 warps per SM (every other configuration has 8):
// more warps to cover each other's barrier and ldmatrix waits, for 1.5x the fragment bytes per
// FLOP.
// Stages: 3 keeps two K steps in flight (each ~1 us of MMAs at that rate, far more than
// an L2 or DRAM round trip); 4 (H100/H200 only, 193 KiB) measures whether the depth matters.
// Epilogue: every candidate stores through shared memory (staged), as rung 03 does now; the
// 128 x 256 configuration with direct fragment stores is the rung as it was before, kept as the
// control that shows what the staged epilogue is worth.
#include <fmt/format.h>

#include "03_cp_async.cuh"
#include "mma_sync_variants.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

template <class Config>
MmaSyncVariant variant_of() {
  return {Config::kShape, &launch_hgemm_cp_async<Config>};
}

bool same_shape(const MmaSyncShape& x, const MmaSyncShape& y) {
  return x.block_m == y.block_m && x.block_n == y.block_n && x.warps_m == y.warps_m && x.warps_n == y.warps_n &&
         x.stages == y.stages && x.staged_epilogue == y.staged_epilogue;
}

}  // namespace

std::string MmaSyncVariant::name() const {
  return fmt::format("{}x{} w{}x{} s{} {}", shape.block_m, shape.block_n, shape.warps_m, shape.warps_n, shape.stages,
                     shape.staged_epilogue ? "staged" : "direct");
}

std::string MmaSyncVariant::config_line() const {
  return fmt::format(
      "using Rung03Config = MmaSyncConfig</*kBlockM=*/{}, /*kBlockN=*/{}, /*kWarpsM=*/{}, /*kWarpsN=*/{}, "
      "/*kStages=*/{},\n                                   /*kStagedEpilogue=*/{}>;",
      shape.block_m, shape.block_n, shape.warps_m, shape.warps_n, shape.stages, shape.staged_epilogue);
}

CheckOutcome MmaSyncVariant::check(const OpSpec& op, const Problem& problem, std::uint64_t seed,
                                   Context& context) const {
  return check_run(
      op,
      [this](const Problem& p, Operands& o, Context& c) { launch(gemm_args<bf16>(p, o, BLayout::n_by_k), c.stream()); },
      problem, seed, context);
}

const std::vector<MmaSyncVariant>& mma_sync_variants() {
  static const std::vector<MmaSyncVariant> variants = [] {
    std::vector<MmaSyncVariant> list = {variant_of<Rung03Config>()};
    const MmaSyncVariant candidates[] = {
        variant_of<MmaSyncConfig<128, 256, 2, 4, 3, true>>(),  variant_of<MmaSyncConfig<128, 256, 2, 4, 3, false>>(),
        variant_of<MmaSyncConfig<128, 128, 2, 2, 3, true>>(),  variant_of<MmaSyncConfig<256, 128, 4, 2, 3, true>>(),
        variant_of<MmaSyncConfig<128, 256, 2, 4, 4, true>>(),  variant_of<MmaSyncConfig<128, 128, 4, 2, 3, true>>(),
    };
    for (const MmaSyncVariant& candidate : candidates)
      if (list.size() < 6 && !same_shape(candidate.shape, list.front().shape)) list.push_back(candidate);
    return list;
  }();
  return variants;
}

}  // namespace kc::stage3

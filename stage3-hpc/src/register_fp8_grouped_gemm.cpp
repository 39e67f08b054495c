// Files the fp8_grouped_gemm op and its ladder with the registry (quant/fp8/grouped_NN_*.cu: 01 the
// FP8 GEMM's rung 09 kernel walking every expert's 128 x 128 tiles from a tile table, 02 rung 10's
// kernel walking 128 x 192 tiles, 03 either, chosen per layer).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/common/buffer.hpp"
#include "kc/stage3/fp8_grouped_gemm.hpp"
#include "kc/stage3/grouped_gemm.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

constexpr int kHopper = 90;
// What every rung asks of a problem (fp8_grouped_gemm_rung_shape_error says why, for a problem).
constexpr const char* kRungConstraints = "K % 16 == 0, each expert's rows % 4 == 0 (row_align=4)";

// What a rung keeps between launches: the tile tables (the experts' first rows, then their first
// tiles of kFp8GroupedTileRows x kFp8GroupedTileCols and of kFp8GroupedTileRows x
// kFp8GroupedWideTileCols: 3 x (G + 1) ints), built on the host from the padded routing and
// uploaded when the problem changes (in the untimed warm-up launches), so a timed launch is the
// kernel alone; and its cache of tensor maps and launch facts. `Rung` is the rung's launch function.
template <void (*Rung)(const Fp8GroupedGemmArgs&, cudaStream_t, HopperLaunchCache&)>
class Fp8TileTableRung {
 public:
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    const std::string label = problem.label();
    if (label != label_) {
      const std::vector<std::int64_t> counts = fp8_grouped_gemm_counts(problem);
      std::vector<int> table = group_row_starts(counts);
      const std::vector<int> tile_starts =
          group_tile_starts(counts, problem.dims[1], kFp8GroupedTileRows, kFp8GroupedTileCols);
      const std::vector<int> wide_tile_starts =
          group_tile_starts(counts, problem.dims[1], kFp8GroupedTileRows, kFp8GroupedWideTileCols);
      groups_ = static_cast<int>(counts.size());
      tokens_ = table.back();
      tiles_ = tile_starts.back();
      wide_tiles_ = wide_tile_starts.back();
      table.insert(table.end(), tile_starts.begin(), tile_starts.end());
      table.insert(table.end(), wide_tile_starts.begin(), wide_tile_starts.end());
      if (table_.size() < table.size()) table_ = DeviceBuffer<int>(table.size());
      table_.copy_from_host(table, stream);
      label_ = label;
    }
    Fp8GroupedGemmArgs args;
    args.groups = groups_;
    args.n = static_cast<int>(problem.dims[1]);
    args.k = static_cast<int>(problem.dims[2]);
    args.a = operands["A"].data<fp8e4m3>();
    args.b = operands["B"].data<fp8e4m3>();
    args.c = operands["C"].data<bf16>();
    args.scale_a = operands["scale_a"].data<float>();
    args.scale_b = operands["scale_b"].data<float>();
    args.row_starts = table_.data();
    args.tile_starts = table_.data() + groups_ + 1;
    args.wide_tile_starts = table_.data() + 2 * (groups_ + 1);
    args.tiles = tiles_;
    args.wide_tiles = wide_tiles_;
    args.tokens = tokens_;
    Rung(args, stream, cache_);
  }

 private:
  std::string label_;
  int groups_ = 0, tiles_ = 0, wide_tiles_ = 0, tokens_ = 0;
  DeviceBuffer<int> table_;
  HopperLaunchCache cache_;
};

}  // namespace

LaunchFn fp8_grouped_gemm_01_launch_with_neighbours_weight_scales() {
  return launch_of_rung<Fp8TileTableRung<fp8_grouped_gemm_01_neighbours_weight_scales>>();
}

namespace {

// A rung of the ladder: Hopper only (sm_90a machine code: wgmma, setmaxnreg), the op's rules for the
// rungs, the tile tables.
template <void (*Rung)(const Fp8GroupedGemmArgs&, cudaStream_t, HopperLaunchCache&)>
KernelEntry fp8_grouped_rung_entry(const char* name, int number, const char* description) {
  KernelEntry entry = rung_entry(kFp8GroupedGemmOp, name, number, description, {DType::f8e4m3},
                                 kFp8GroupedGemmReport, kHopper);
  entry.max_compute_capability = kHopper;
  entry.constraints = kRungConstraints;
  entry.supports = &fp8_grouped_gemm_rung_shape_error;
  entry.refuses = fp8_grouped_gemm_rung_refusals();
  entry.launch = launch_of_rung<Fp8TileTableRung<Rung>>();
  return entry;
}

}  // namespace

void register_fp8_grouped_gemm_kernels(Registry& registry) {
  if (!registry.has_op(kFp8GroupedGemmOp)) registry.add_op(make_fp8_grouped_gemm_op());
  registry.add_kernel(fp8_grouped_rung_entry<fp8_grouped_gemm_01_scales_in_stage>(
      "01_scales_in_stage", 1,
      "the FP8 GEMM's rung 09 kernel (128x128 tiles, each K step's block scales in the stage) walking every expert's "
      "tiles from the grouped GEMM's tile table; TMA stores where a 64-row half lies inside its expert, guarded stores "
      "where not"));
  registry.add_kernel(fp8_grouped_rung_entry<fp8_grouped_gemm_02_wide_tiles>(
      "02_wide_tiles", 2,
      "rung 01 on 128x192 tiles: the FP8 GEMM's rung 10 kernel (each K step waited for and promoted, B's two blocks "
      "of scales in the stage) walking a tile table of 192-column tiles; rung 01's epilogue"));
  registry.add_kernel(fp8_grouped_rung_entry<fp8_grouped_gemm_03_width_per_layer>(
      "03_width_per_layer", 3,
      "rung 01 or rung 02, whichever tile width fills the persistent waves in less estimated time (the layer's "
      "narrow and wide tiles counted from its tile tables, as FP8 rung 11 counts one GEMM's)"));
}

}  // namespace kc::stage3

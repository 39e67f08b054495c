// Files the grouped_gemm op and its ladder with the registry (gemm/grouped/: 01 a loop of GEMMs
// through stage 3's entry, 02 one launch over every expert's tiles, 03 the same tiles on the
// Hopper kernel of the GEMM ladder, 04 with its TMA-store epilogue, 05 without the WGMMAs of rows
// past an expert, 06 with the last wave split along K, 07 with half the A tile for small experts).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/common/buffer.hpp"
#include "kc/stage3/grouped_gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/stage3/split_last_wave_workspace.hpp"

namespace kc::stage3 {
namespace {

constexpr int kAmpere = 80;
constexpr int kHopper = 90;

KernelEntry grouped_entry(const std::string& name, int rung, std::string idea) {
  return rung_entry(kGroupedGemmOp, name, rung, std::move(idea), {DType::bf16}, kGroupedGemmReport, kAmpere);
}

// What rungs 02-07 keep between launches: their tile table (the experts' first rows, then
// their first tiles: 2 x (G + 1) ints), built on the host from the routing and uploaded when the
// problem changes (in the untimed warm-up launches), so a timed launch is the kernel alone. An
// engine whose router runs on the GPU would build the same prefix sums there with a scan.
// `Launch` runs the rung on the arguments (and keeps what the launch caches).
template <class Launch>
class TileTableRung {
 public:
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    const std::string label = problem.label();
    if (label != label_) {
      const GroupedRouting routing(problem);
      const std::vector<int> tile_starts =
          group_tile_starts(routing.counts, problem.dims[1], kGroupedTileRows, kGroupedTileCols);
      std::vector<int> host = routing.row_starts;
      host.insert(host.end(), tile_starts.begin(), tile_starts.end());
      groups_ = static_cast<int>(routing.counts.size());
      tiles_ = tile_starts.back();
      tokens_ = routing.row_starts.back();
      if (table_.size() < host.size()) table_ = DeviceBuffer<int>(host.size());
      table_.copy_from_host(host, stream);
      label_ = label;
    }
    GroupedGemmArgs args;
    args.groups = groups_;
    args.n = static_cast<int>(problem.dims[1]);
    args.k = static_cast<int>(problem.dims[2]);
    args.a = operands["A"].data<bf16>();
    args.b = operands["B"].data<bf16>();
    args.c = operands["C"].data<bf16>();
    args.row_starts = table_.data();
    args.tile_starts = table_.data() + groups_ + 1;
    args.tiles = tiles_;
    args.tokens = tokens_;
    launch_(args, stream);
  }

 private:
  std::string label_;
  int groups_ = 0, tiles_ = 0, tokens_ = 0;
  DeviceBuffer<int> table_;
  Launch launch_;
};

struct CpAsyncOneLaunch {
  void operator()(const GroupedGemmArgs& args, cudaStream_t stream) { grouped_gemm_02_one_launch(args, stream); }
};

// Rungs 03-05: `Rung` is the rung's launch function; the cache keeps the tensor maps of A, B (and
// C) and the kernel's resident blocks.
template <void (*Rung)(const GroupedGemmArgs&, cudaStream_t, HopperLaunchCache&)>
struct HopperOneLaunch {
  HopperLaunchCache cache;
  void operator()(const GroupedGemmArgs& args, cudaStream_t stream) { Rung(args, stream, cache); }
};

// Rungs 06-07 also keep their split's workspace (split_last_wave_workspace.hpp).
template <void (*Rung)(const GroupedGemmArgs&, const GroupedSplitWorkspace&, cudaStream_t, HopperLaunchCache&)>
struct HopperSplitLastWave {
  HopperLaunchCache cache;
  SplitLastWaveWorkspace workspace;
  void operator()(const GroupedGemmArgs& args, cudaStream_t stream) {
    Rung(args, workspace.reserve(stream), stream, cache);
  }
};

// sm_90a machine code (wgmma, setmaxnreg) runs on compute capability 9.0 only.
template <class Launch>
KernelEntry hopper_entry(const std::string& name, int rung, std::string idea) {
  KernelEntry entry = grouped_entry(name, rung, std::move(idea));
  entry.min_compute_capability = kHopper;
  entry.max_compute_capability = kHopper;
  entry.constraints = "K % 8 == 0";
  entry.supports = &grouped_gemm_tiles_shape_error;
  entry.refuses = grouped_gemm_tiles_refusals();
  entry.launch = launch_of_rung<TileTableRung<Launch>>();
  return entry;
}

}  // namespace

LaunchFn grouped_gemm_07_launch_adding_a_piece_twice() {
  return launch_of_rung<TileTableRung<HopperSplitLastWave<grouped_gemm_07_half_a_tiles_adds_a_piece_twice>>>();
}

void register_grouped_gemm_kernels(Registry& registry) {
  if (!registry.has_op(kGroupedGemmOp)) registry.add_op(make_grouped_gemm_op());

  KernelEntry loop = grouped_entry("01_loop_of_gemms", 1,
                                   "one call of stage 3's GEMM entry per expert with tokens: G launches in a row");
  loop.launch = grouped_gemm_01_loop_of_gemms();
  registry.add_kernel(std::move(loop));

  KernelEntry one_launch = grouped_entry("02_one_launch", 2,
                                         "every expert's 128x256 tiles in one grid, a tile table of prefix sums, "
                                         "rung 03's cp.async mainloop per tile");
  one_launch.constraints = "K % 8 == 0";
  one_launch.supports = &grouped_gemm_tiles_shape_error;
  one_launch.refuses = grouped_gemm_tiles_refusals();
  one_launch.launch = launch_of_rung<TileTableRung<CpAsyncOneLaunch>>();
  registry.add_kernel(std::move(one_launch));

  registry.add_kernel(hopper_entry<HopperOneLaunch<grouped_gemm_03_warp_specialized>>(
      "03_warp_specialized", 3,
      "rung 02's tile table on the GEMM ladder's persistent TMA + WGMMA kernel (rung 07): the tensor cores at "
      "Hopper's rate"));
  registry.add_kernel(hopper_entry<HopperOneLaunch<grouped_gemm_04_tma_store>>(
      "04_tma_store", 4,
      "rung 03 with the GEMM ladder's rung 09 epilogue (shared memory + TMA store) wherever a 64-row half "
      "lies inside its expert's rows"));
  registry.add_kernel(hopper_entry<HopperOneLaunch<grouped_gemm_05_skip_empty_halves>>(
      "05_skip_empty_halves", 5,
      "rung 04 whose consumer warpgroups issue no WGMMA for a half that lies wholly past its expert's rows"));
  registry.add_kernel(hopper_entry<HopperSplitLastWave<grouped_gemm_06_split_last_wave>>(
      "06_split_last_wave", 6,
      "rung 05 with the tiles of the last, partial wave split along K over the idle SMs, the pieces added by "
      "the last to finish"));
  registry.add_kernel(hopper_entry<HopperSplitLastWave<grouped_gemm_07_half_a_tiles>>(
      "07_half_a_tiles", 7,
      "rung 06, and a tile whose second half is empty loads 64 rows of A instead of 128"));
}

}  // namespace kc::stage3

// kc/stage1/sgemm_autotune.hpp — rung 10's search space, its shape classes and the table of
// winners that rung 10 dispatches through.
//
// The search space is a list of tile configurations of the rung-09 kernel (every one checked by
// config_error() at compile time and in the tests). kc-sgemm-tune (stage1-sgemm/tune/) checks each
// configuration for correctness, times every (configuration, split-K) pair on representative shapes
// of each shape class and prints the winners as a replacement for kShapeClassChoices below.
#pragma once

#include <cstdint>
#include <string>

#include "kc/stage1/sgemm_tiling.hpp"

namespace kc::stage1 {

// Why shapes are put in classes: the best tile depends on how many tiles C has compared with the
// number of SMs (small and skinny problems need small tiles or split-K to fill the GPU) and on how
// long K is, not on the exact sizes.
enum class ShapeClass {
  small,   // M*N*K <= 1024^3: launch and fill latency matter, a big tile leaves SMs idle
  long_k,  // M*N <= 2^21 outputs and K >= 2048: too few tiles of C for the SMs; split K
  skinny,  // min(M, N) <= 512: few tile rows (or columns) of C, long otherwise
  large,   // everything else: big tiles, many waves
};
constexpr int kShapeClassCount = 4;

constexpr const char* shape_class_name(ShapeClass shape_class) {
  switch (shape_class) {
    case ShapeClass::small: return "small";
    case ShapeClass::long_k: return "long_k";
    case ShapeClass::skinny: return "skinny";
    case ShapeClass::large: return "large";
  }
  return "unknown";
}

constexpr ShapeClass classify_shape(int m, int n, int k) {
  const std::int64_t outputs = static_cast<std::int64_t>(m) * n;
  if (outputs * k <= std::int64_t{1024} * 1024 * 1024) return ShapeClass::small;
  if (outputs <= (std::int64_t{1} << 21) && k >= 2048) return ShapeClass::long_k;
  if ((m < n ? m : n) <= 512) return ShapeClass::skinny;
  return ShapeClass::large;
}

// The search space. Rules (config_error): 4 x 4 sub-tiles, (wm/tm)*(wn/tn) = 32 lanes, at most 64
// accumulators per thread (128 registers), at most 512 threads, bk a multiple of 8, loads divide
// evenly among the threads, shared memory within 163 KiB. Kept to 15 entries: CI compiles each
// one for two architectures on two cores. Entry 0 is rung 09's configuration.
//                                          bm   bn  bk  wm  wn tm tn stages   threads
inline constexpr WarpTileConfig kSearchSpace[] = {
    {128, 128, 8, 32, 64, 8, 8, 3},   // 0: rung 09                                256
    {128, 128, 8, 64, 32, 8, 8, 3},   // 1: warps 64 x 32 (lanes 8 x 4)            256
    {128, 128, 8, 32, 64, 8, 8, 2},   // 2: double buffer only                     256
    {128, 128, 8, 32, 64, 8, 8, 4},   // 3: four stages                            256
    {128, 128, 16, 32, 64, 8, 8, 3},  // 4: deeper k tile, half the barriers       256
    {128, 128, 16, 32, 64, 8, 8, 2},  // 5                                         256
    {128, 256, 8, 32, 64, 8, 8, 3},   // 6: one 16-warp block per SM               512
    {256, 128, 16, 64, 32, 8, 8, 3},  // 7: one 16-warp block per SM               512
    {128, 64, 8, 64, 32, 8, 8, 3},    // 8: half-width tile for few columns        128
    {64, 128, 8, 32, 64, 8, 8, 3},    // 9: half-height tile for few rows          128
    {64, 64, 8, 32, 32, 8, 4, 3},     // 10: small problems                        128
    {64, 64, 16, 32, 32, 8, 4, 4},    // 11                                        128
    {128, 64, 16, 64, 32, 8, 8, 3},   // 12                                        128
    {128, 128, 32, 32, 64, 8, 8, 2},  // 13: k tile 32: a quarter of bk 8's barriers 256
    {128, 128, 32, 32, 64, 8, 8, 3},  // 14                                        256
};
inline constexpr int kSearchSpaceSize = static_cast<int>(sizeof(kSearchSpace) / sizeof(kSearchSpace[0]));

// Search-space entry `kIndex` as a type, for the kernel templates (`Tiles::config()`): rung 10
// instantiates the pipelined kernel for every entry, rung 11 its stream-K kernel for the entries
// its shape classes pick.
template <int kIndex>
struct SearchSpaceTiles {
  static_assert(kIndex >= 0 && kIndex < kSearchSpaceSize, "no such search-space entry");
  static constexpr WarpTileConfig config() { return kSearchSpace[kIndex]; }
};

// Rung 09 runs this entry, without split-K.
inline constexpr int kRung09Config = 0;

// "128x128x8_w32x64_t8x8_s3": block tile, warp tile, thread tile, stages.
inline std::string config_name(const WarpTileConfig& c) {
  return std::to_string(c.bm) + "x" + std::to_string(c.bn) + "x" + std::to_string(c.bk) + "_w" +
         std::to_string(c.wm) + "x" + std::to_string(c.wn) + "_t" + std::to_string(c.tm) + "x" +
         std::to_string(c.tn) + "_s" + std::to_string(c.stages);
}

// Blocks walk `kRasterGroup` tile rows before moving right (see grouped_tile).
inline constexpr int kRasterGroup = 8;

struct ShapeClassChoice {
  ShapeClass shape_class;
  int config;  // index into kSearchSpace
  int splits;  // split-K factor (1 = none)
};

// The winners of kc-sgemm-tune on the H200 by geometric-mean TFLOPS over each class's shapes.
// Where two entries tied for a class, the one faster on the square shapes was kept (entry 4 for
// `large`, in both runs). A re-run after rung 09's loop began loading A/B values one k ahead
// picked, for `small`, another entry with split-K 4 that was faster timed alone; kc-bench, timing
// it alongside cuBLAS, put it below the `small` entry here at 256^3 and 512^3, so that entry
// stays. The runs, with their dates, commits and figures:
// docs/notes/2026-12-01-source-measurements.md.
inline constexpr ShapeClassChoice kShapeClassChoices[kShapeClassCount] = {
    {ShapeClass::small, 11, 2},   // 64x64x16_w32x32_t8x4_s4, split-K 2
    {ShapeClass::long_k, 4, 4},   // 128x128x16_w32x64_t8x8_s3, split-K 4
    {ShapeClass::skinny, 4, 1},   // 128x128x16_w32x64_t8x8_s3
    {ShapeClass::large, 4, 1},    // 128x128x16_w32x64_t8x8_s3
};

constexpr ShapeClassChoice class_choice(ShapeClass shape_class) {
  for (const ShapeClassChoice& choice : kShapeClassChoices)
    if (choice.shape_class == shape_class) return choice;
  return kShapeClassChoices[kShapeClassCount - 1];
}

constexpr ShapeClassChoice choose_config(int m, int n, int k) { return class_choice(classify_shape(m, n, k)); }

}  // namespace kc::stage1

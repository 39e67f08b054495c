// fa2_layout.hpp — the block shape and the shared-memory layout of the mma.sync attention rungs
// (03-05, 16, 21-24 and the decode rungs' tiles): Fa2Shape, the XOR swizzle of a tile's 16-byte
// chunks (swizzled_offset), the lane offsets of the warp step's ldmatrix reads and rung 23's split
// of a slice's XOR offset (xor_slice_offset). Host and device alike, so that a CPU test
// (tests/attention_fa2_layout_test.cpp) can check the identities the ldmatrix addressing of
// fa2_mma.cuh relies on.
#pragma once

#include <cstdint>

#include "kc/common/host_device.hpp"

namespace kc::stage3 {

template <int kHeadDim_, int kTilesPerWarp_ = 1, int kBlockKeys_ = 64>
struct Fa2Shape {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kTilesPerWarp = kTilesPerWarp_;  // 16-row MMA tiles of query rows per warp
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpRows = 16 * kTilesPerWarp;    // query rows per warp
  static constexpr int kBlockRows = kWarpRows * kWarps;   // query rows per block
  static constexpr int kThreadRows = 2 * kTilesPerWarp;   // query rows per thread: lane/4 + 8r
  static constexpr int kBlockKeys = kBlockKeys_;          // keys per K/V tile: 64 (32 in rung 22)
  static constexpr int kChunkElements = 8;                // 16 bytes
  static constexpr int kChunksPerRow = kHeadDim / kChunkElements;
  static constexpr int kRowBytes = kHeadDim * 2;
  static constexpr int kTileBytes = kBlockKeys * kRowBytes;   // one K or V tile
  static constexpr int kQTileBytes = kBlockRows * kRowBytes;  // the block's Q tile
  static constexpr int kDimSlices = kHeadDim / 16;    // k16 slices of Q K^T
  static constexpr int kKeyBlocks = kBlockKeys / 8;   // n8 blocks of S per MMA tile
  static constexpr int kKeySlices = kBlockKeys / 16;  // k16 slices of P V
  static constexpr int kDimBlocks = kHeadDim / 8;     // n8 blocks of O per MMA tile
  // Q's A fragments (D/4 registers per tile) stay in registers for the whole K/V loop when they
  // fit beside the O accumulators (D/2 per tile) and S (kBlockKeys/2 per tile) with room for
  // addresses and the row state under the 255 registers of a thread: everywhere but two tiles at
  // D = 128 (64 + 128 + 64 = 256; with 32-key tiles 224), where they are read from the Q tile
  // again for each K/V tile.
  static constexpr int kFragmentRegisters = kTilesPerWarp * (kHeadDim / 4 + kHeadDim / 2 + kBlockKeys / 2);
  static constexpr bool kQInRegisters = kFragmentRegisters <= 192;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "the rungs are compiled for D = 64 and 128");
  static_assert(kTilesPerWarp == 1 || kTilesPerWarp == 2, "a warp owns one or two 16-row MMA tiles");
  static_assert(kBlockKeys == 32 || kBlockKeys == 64, "K/V tiles of 32 or 64 keys (whole k16 slices of P V)");
};

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile.
template <class Shape>
KC_HOST_DEVICE inline std::uint32_t swizzled_offset(int row, int chunk) {
  return static_cast<std::uint32_t>(row * Shape::kRowBytes + ((chunk ^ (row % 8)) * 16));
}

// The lane offsets of the warp step's ldmatrix reads (fa2_mma.cuh), each the offset of slice 0
// (or O block pair 0) in its tile; the slices are at lane_offset ^ (32 i) (xor_slice_offset).
// K (Fa2Warp::scores): matrices (keys 0-7, chunk 0), (keys 0-7, 1), (keys 8-15, 0), (keys 8-15, 1).
template <class Shape>
KC_HOST_DEVICE inline std::uint32_t k_lane_offset(int lane) {
  return swizzled_offset<Shape>(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
}
// V (Fa2Warp::accumulate_pv, ldmatrix.trans): (keys 0-7, chunk 0), (keys 8-15, 0), (keys 0-7, 1),
// (keys 8-15, 1).
template <class Shape>
KC_HOST_DEVICE inline std::uint32_t v_lane_offset(int lane) {
  return swizzled_offset<Shape>(lane % 8 + 8 * ((lane / 8) % 2), lane / 16);
}
// Q, read from the Q tile (WarpQ, not held): rows 0-15 of the warp's first MMA tile, chunks 0, 1.
template <class Shape>
KC_HOST_DEVICE inline std::uint32_t q_lane_offset(int warp, int lane) {
  return swizzled_offset<Shape>(Shape::kWarpRows * warp + lane % 16, lane / 16);
}

// lane_offset ^ (32 i): the offset of slice (or pair of 8-column blocks) i where slice 0 is at
// lane_offset, for the lane offsets of the ldmatrix reads above, whose swizzled chunk index is
// below 8 (chunk 0 or 1 of a row XOR row % 8). XOR 32 i flips chunk bits 1-3 with the bits of i;
// chunk bit 3 is 0 in every lane, so flipping it is adding 128 bytes, and only i % 4 needs the
// XOR: four offsets a loop, each read at +0 and +128 (an immediate of the LDSM), instead of eight
// at D = 128 (attention rung 23). i < 4 at D = 64, where bit 7 is already the row's.
KC_HOST_DEVICE inline std::uint32_t xor_slice_offset(std::uint32_t lane_offset, int i) {
  return (lane_offset ^ (32u * static_cast<std::uint32_t>(i % 4))) + 128u * static_cast<std::uint32_t>(i / 4);
}

}  // namespace kc::stage3

// The fragment layouts' repack on the GPU (layout=2 for rungs 03-04, layout=3 for rung 05): once
// at load time, a thread per lane of every tile-chunk writes that lane's quants and scales with
// repack_gguf_fragment_lane (kc/stage3/gemv_gguf_args.hpp), the routine the host's
// repack_gguf_blocks_for_mma / _mma16 run lane by lane — so the GPU writes the host's bytes, which
// the op's tests hold the rungs to (and GemvGgufGpu.DeviceMmaRepacksMatchTheHostRepacks checks).
#include <algorithm>
#include <cstdint>

#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

template <GgufBlockType kType>
__global__ void repack_fragments_kernel(GgufFragmentLayout layout, const std::uint8_t* __restrict__ blocks, int n,
                                        int k, std::size_t lanes, std::uint8_t* __restrict__ quants,
                                        std::uint8_t* __restrict__ scales) {
  for (std::size_t index = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; index < lanes;
       index += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    repack_gguf_fragment_lane(kType, layout, blocks, n, k, index / 32, static_cast<int>(index % 32), quants, scales);
}

void repack_on_device(GgufBlockType type, const GgufFragmentLayout& layout, const std::uint8_t* blocks, int n, int k,
                      std::uint8_t* quants, void* scales, cudaStream_t stream, const char* who) {
  require(n >= 1 && k >= kGgufBlockWeights && k % kGgufBlockWeights == 0,
          "{}: N must be >= 1 and K a positive multiple of 32 (got N {}, K {})", who, n, k);
  require(blocks != nullptr && quants != nullptr && scales != nullptr, "{}: blocks, quants and scales must be non-null",
          who);
  require(reinterpret_cast<std::uintptr_t>(quants) % 16 == 0 && reinterpret_cast<std::uintptr_t>(scales) % 16 == 0,
          "{}: quants and scales must start 16-byte aligned (the rungs that read them load 16 bytes at a time)", who);
  const std::size_t lanes = gguf_fragment_tiles(layout, n, k) * static_cast<std::size_t>(32);
  const unsigned grid = static_cast<unsigned>(std::min<std::size_t>((lanes + 255) / 256, 65535));
  auto* s = static_cast<std::uint8_t*>(scales);
  switch (type) {
    case GgufBlockType::q4_0:
      repack_fragments_kernel<GgufBlockType::q4_0><<<grid, 256, 0, stream>>>(layout, blocks, n, k, lanes, quants, s);
      break;
    case GgufBlockType::q4_1:
      repack_fragments_kernel<GgufBlockType::q4_1><<<grid, 256, 0, stream>>>(layout, blocks, n, k, lanes, quants, s);
      break;
    case GgufBlockType::q8_0:
      repack_fragments_kernel<GgufBlockType::q8_0><<<grid, 256, 0, stream>>>(layout, blocks, n, k, lanes, quants, s);
      break;
    default:
      throw Error(fmt::format("{}: ggml type {} is not q4_0, q4_1 or q8_0", who, static_cast<int>(type)));
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void repack_gguf_blocks_for_mma_on_device(GgufBlockType type, const std::uint8_t* blocks, int n, int k,
                                          std::uint8_t* quants, void* scales, cudaStream_t stream) {
  repack_on_device(type, kGgufLayoutMma, blocks, n, k, quants, scales, stream, "repack_gguf_blocks_for_mma_on_device");
}

void repack_gguf_blocks_for_mma16_on_device(GgufBlockType type, const std::uint8_t* blocks, int n, int k,
                                            std::uint8_t* quants, void* scales, cudaStream_t stream) {
  repack_on_device(type, kGgufLayoutMmaWeightsA, blocks, n, k, quants, scales, stream,
                   "repack_gguf_blocks_for_mma16_on_device");
}

}  // namespace kc::stage3

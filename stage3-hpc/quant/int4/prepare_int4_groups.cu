// The int4 GEMV's prepare on the GPU: once at load time, a thread per lane of every tile-chunk
// writes that lane's quants and scale entries with prepare_int4_group_lane
// (kc/stage3/gemv_int4_args.hpp), the routine the host's prepare_int4_groups runs lane by lane —
// so the GPU writes the host's bytes, which the op's tests hold rung 01 to (GemvInt4Gpu checks the
// two against each other).
#include <algorithm>

#include "kc/common/error.hpp"
#include "kc/stage3/gemv_int4_args.hpp"

namespace kc::stage3 {
namespace {

__global__ void prepare_int4_groups_kernel(Int4GroupWeights weights, std::size_t lanes, std::uint8_t* __restrict__ quants,
                                           std::uint32_t* __restrict__ scales) {
  for (std::size_t index = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; index < lanes;
       index += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    prepare_int4_group_lane(weights, index / 32, static_cast<int>(index % 32), quants, scales);
}

}  // namespace

void prepare_int4_groups_on_device(const Int4GroupWeights& weights, std::uint8_t* quants, std::uint32_t* scales,
                                   cudaStream_t stream) {
  check_int4_group_weights(weights, "prepare_int4_groups_on_device");
  require(quants != nullptr && scales != nullptr,
          "prepare_int4_groups_on_device: the prepared quants and scales must be non-null");
  require(reinterpret_cast<std::uintptr_t>(quants) % 16 == 0 && reinterpret_cast<std::uintptr_t>(scales) % 16 == 0,
          "prepare_int4_groups_on_device: quants and scales must be 16-byte aligned (rung 01 reads them in 16-byte "
          "pieces)");
  const std::size_t lanes = int4_tile_chunks(weights.n, weights.k) * 32;
  const auto grid = static_cast<unsigned>(std::min<std::size_t>((lanes + 255) / 256, 65535));
  prepare_int4_groups_kernel<<<grid, 256, 0, stream>>>(weights, lanes, quants, scales);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3

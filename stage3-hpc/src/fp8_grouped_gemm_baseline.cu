// The fp8_grouped_gemm baseline's first kernel: cuBLASLt's FP8 matmul reads the 1 x 128 scales of its
// A operand as [ceil(K/128), M] with M contiguous, one matrix per call, while the op stores them
// for every token at once, [ceil(K/128), stride] (kc/stage3/fp8_grouped_gemm_args.hpp). This copies
// them, for all experts in one launch, to the layout of one cuBLASLt call per expert: expert g's
// [ceil(K/128), rows_g] array at offset ceil(K/128) row_starts[g]. Memory-bound and small (4 bytes
// read and written per scale, one scale per 128 values of A), coalesced on both sides: consecutive
// threads take consecutive tokens of one K block, which stay consecutive inside their expert.
#include <algorithm>
#include <cstdint>

#include "kc/common/error.hpp"
#include "kc/stage3/grouped_gemm_args.hpp"

namespace kc::stage3 {
namespace {

__global__ void gather_expert_scales_kernel(const float* scale_a, int scale_a_stride, int k_blocks,
                                            const int* row_starts, int groups, int rows, float* expert_scales) {
  const std::int64_t count = static_cast<std::int64_t>(k_blocks) * rows;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int k_block = static_cast<int>(i / rows);
    const int row = static_cast<int>(i % rows);
    // The row starts are the tile table of tiles one row high and one column wide: the tile lookup
    // finds the row's expert (never an empty one) and its row inside that expert.
    const GroupedTile at = grouped_tile_at(row, row_starts, row_starts, groups, 1);
    const int first_row = row_starts[at.group];
    const int expert_rows = row_starts[at.group + 1] - first_row;
    expert_scales[static_cast<std::int64_t>(k_blocks) * first_row + static_cast<std::int64_t>(k_block) * expert_rows +
                  at.m] = scale_a[static_cast<std::int64_t>(k_block) * scale_a_stride + row];
  }
}

}  // namespace

void fp8_grouped_gather_expert_scales(const float* scale_a, int scale_a_stride, int k_blocks, const int* row_starts,
                                      int groups, int rows, float* expert_scales, cudaStream_t stream) {
  const std::int64_t count = static_cast<std::int64_t>(k_blocks) * rows;
  if (count == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((count + 255) / 256, std::int64_t{1} << 16));
  gather_expert_scales_kernel<<<blocks, 256, 0, stream>>>(scale_a, scale_a_stride, k_blocks, row_starts, groups, rows,
                                                         expert_scales);
  KC_CHECK_LAUNCH();
}

}  // namespace kc::stage3

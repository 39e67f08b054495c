// quant/bulk_stream_ring.cuh — the shared-memory ring of the bulk-stream GEMVs (the GGUF GEMV's
// rung 06 and the int4 GEMV's rung 02 run their stages through it; the GGUF rungs 07 and 08, whose
// producer walks several tiles, initialise theirs with it): kStages slots in shared memory, each with two mbarriers —
// `full`, which the producer's copies complete (one arrival and the bytes it announced), and
// `empty`, which every consumer thread arrives on once it has read the slot. Stage s goes to slot
// s % kStages; the producer refills a slot only after its consumers released the stage before, and
// waits by phase parity (a fresh barrier is in phase 0, so the first pass over the slots does not
// wait). Hopper only: cp.async.bulk completes on mbarriers (arch/sm90/).
#pragma once

#include <cstdint>

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/sm90a.hpp"

namespace kc::stage3::bulk_ring {

#if KC_STAGE3_SM90A

// Thread 0 initialises the barriers; then the whole CTA synchronises.
template <int kStages, int kConsumerThreads>
__device__ __forceinline__ void init(std::uint64_t (&full)[kStages], std::uint64_t (&empty)[kStages]) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);
      sm90::mbarrier_init(&empty[s], kConsumerThreads);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();
}

// The producer (one thread): fill(s, slot, &full[slot]) announces and issues stage s's copies into
// `slot`, once the slot's previous stage has been released.
template <int kStages, class Fill>
__device__ __forceinline__ void produce(std::uint64_t (&full)[kStages], std::uint64_t (&empty)[kStages], int stages,
                                        Fill fill) {
  for (int s = 0; s < stages; ++s) {
    const int slot = s % kStages;
    if (s >= kStages) sm90::mbarrier_wait(&empty[slot], ((s / kStages) - 1) & 1);
    fill(s, slot, &full[slot]);
  }
}

// A consumer thread: consume(s, slot) once stage s has landed, then the thread's release of it.
template <int kStages, class Consume>
__device__ __forceinline__ void consume(std::uint64_t (&full)[kStages], std::uint64_t (&empty)[kStages], int stages,
                                        Consume consume_stage) {
  for (int s = 0; s < stages; ++s) {
    const int slot = s % kStages;
    sm90::mbarrier_wait(&full[slot], (s / kStages) & 1);
    consume_stage(s, slot);
    sm90::mbarrier_arrive(&empty[slot]);  // every consumer thread: its reads of the stage are done
  }
}

#endif

}  // namespace kc::stage3::bulk_ring

// small_m_gemv_knobs.hpp — rung 12's launch knobs (stage3-hpc/gemm/12_small_m_gemv.cu), process-wide
// and read at each launch (a CUDA graph keeps what was read when it was captured). kc-gemv-chain sets
// them to compare; kc-engine-bench sets the first trip before the wait (--gemv-first-trip); the
// tests run every setting. None of them changes a product's bits.
#pragma once

#include <cstddef>

namespace kc::stage3 {

// Launched as a programmatic dependent (kc/core/dependent_launch.hpp), rung 12's grid asks the L2
// for up to this many bytes of its weights before it waits for the kernel ahead of it (each block
// its share, at most its own rows); 0 turns the prefetch off. The default, 4 MiB (a fifteenth of an
// H100/H200's L2), is the budget kc-gemv-chain (gemm/tune/gemv_chain.cu, which sets it to compare)
// found no slower than none, 12 or 32 MiB at the three Llama widths once the large grids took the
// one-piece K loop (the stage-3 README's rung-12 section). Read at launch.
inline constexpr std::size_t kSmallMGemvDefaultPrefetchBudget = std::size_t{4} << 20;
void set_small_m_gemv_prefetch_budget(std::size_t bytes);
std::size_t small_m_gemv_prefetch_budget();

// How rung 12 at M = 1 walks K (12_small_m_gemv.cu's header): two 16-byte pieces of each of a
// thread's rows a loop trip (half the trips: the instance for grids the GPU holds at once), or one
// (fewer registers, so more blocks resident: grids larger than that). `automatic` chooses by the
// grid; the other two force an instance (kc-gemv-chain compares them, the tests run both). M > 1
// always takes two. Both add the products in the same order: the same bits. Read at launch.
enum class SmallMGemvTrip { automatic, two_pieces, one_piece };
void set_small_m_gemv_trip(SmallMGemvTrip trip);
SmallMGemvTrip small_m_gemv_trip();

// Launched as a programmatic dependent, whether rung 12's threads also issue the loads of their
// first trip of the K loop (each its rows' first pieces, into registers) before the wait for the
// kernel ahead, as well as the L2 prefetch: the first trip then arrives while that kernel runs.
// Same products in the same order either way (the same bits). Read at launch. On by default: the
// engine's batch-1 steps measured faster with it where a short kernel (the decode attention) runs
// ahead of rung 12 and no slower elsewhere (docs/notes/2026-12-07-stage4-first-trip-h100-a8b1fef.md).
inline constexpr bool kSmallMGemvDefaultFirstTripBeforeWait = true;
void set_small_m_gemv_first_trip_before_wait(bool on);
bool small_m_gemv_first_trip_before_wait();

// The three knobs as they are when it is made, put back when it goes: for a caller that sets them
// to compare (a test, a benchmark) and must leave the process as it found it, also when a check
// throws or returns early.
class SmallMGemvKnobsRestorer {
 public:
  SmallMGemvKnobsRestorer()
      : budget_(small_m_gemv_prefetch_budget()), trip_(small_m_gemv_trip()),
        first_trip_before_wait_(small_m_gemv_first_trip_before_wait()) {}
  ~SmallMGemvKnobsRestorer() {
    set_small_m_gemv_prefetch_budget(budget_);
    set_small_m_gemv_trip(trip_);
    set_small_m_gemv_first_trip_before_wait(first_trip_before_wait_);
  }
  SmallMGemvKnobsRestorer(const SmallMGemvKnobsRestorer&) = delete;
  SmallMGemvKnobsRestorer& operator=(const SmallMGemvKnobsRestorer&) = delete;

 private:
  std::size_t budget_;
  SmallMGemvTrip trip_;
  bool first_trip_before_wait_;
};

}  // namespace kc::stage3

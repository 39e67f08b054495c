// kc/core/dependent_launch.hpp — programmatic dependent launch, the host side: who asked for it.
//
// Between two kernels of a stream the GPU normally drains: the second grid starts only once the
// first has finished and its writes are visible. For a chain of short memory-bound kernels (a
// decode step: a GEMV, RoPE, attention, the next GEMV ...) that gap, and the ramp of each kernel
// back up to full bandwidth, is a large part of the time. Hopper (compute capability 9.0) lets a
// kernel be launched as a *programmatic dependent* of the work before it in the stream
// (cudaLaunchAttributeProgrammaticStreamSerialization): its blocks may start as soon as every
// block of the previous grid has started and said so (griddepcontrol.launch_dependents), run
// what does not depend on that grid — fetch their weights, which no kernel of the chain writes —
// and then wait for it to finish (griddepcontrol.wait) before they read its output. Captured
// into a CUDA graph, the stream's order becomes programmatic edges and the replay keeps it.
//
// The contract is the kernel's: one launched this way must call
// core::wait_for_previous_grids() (kc/core/dependent_launch.cuh) before it reads anything an
// earlier kernel of the stream wrote and before it writes anything an earlier kernel reads; a
// kernel that never calls it could finish before its predecessor and break the chain for the
// kernel after it. So only kernels written to the contract are launched through
// core::launch_dependent(), and it launches them programmatically only where the caller asked:
// inside a ProgrammaticLaunchScope on the launching thread (the engine's decode step, with
// RunnerOptions::programmatic_launch), on a GPU of compute capability 9.0 or newer. Everywhere
// else they launch the ordinary way and the wait is a no-op. Host-only header.
#pragma once

namespace kc::core {

namespace detail {
inline thread_local bool programmatic_launch_requested = false;
}  // namespace detail

// While one is alive on a thread, kernels that core::launch_dependent() launches from that
// thread go as programmatic dependents (where the GPU has them). Scopes nest; each restores what
// it found. Stream capture keeps the choice in the graph.
class ProgrammaticLaunchScope {
 public:
  explicit ProgrammaticLaunchScope(bool enable = true) : previous_(detail::programmatic_launch_requested) {
    detail::programmatic_launch_requested = enable;
  }
  ~ProgrammaticLaunchScope() { detail::programmatic_launch_requested = previous_; }
  ProgrammaticLaunchScope(const ProgrammaticLaunchScope&) = delete;
  ProgrammaticLaunchScope& operator=(const ProgrammaticLaunchScope&) = delete;

 private:
  bool previous_;
};

// True inside an enabling ProgrammaticLaunchScope on this thread.
inline bool programmatic_launch_requested() { return detail::programmatic_launch_requested; }

}  // namespace kc::core

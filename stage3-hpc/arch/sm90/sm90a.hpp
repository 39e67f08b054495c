// arch/sm90/sm90a.hpp — KC_STAGE3_SM90A: 1 in the compilation pass that may use sm_90a-only
// instructions, 0 in every other pass.
//
// A .cu file is compiled once for the host and once per device architecture (sm_80 and sm_90a in
// the ci preset). wgmma, setmaxnreg and TMA multicast exist only with the "a" (architecture-
// specific) feature set of sm_90, so the wrappers in arch/sm90/ and the Hopper kernels' bodies are
// compiled only where this is 1. Elsewhere those kernels are empty, and the launch code refuses
// to run them (HopperLaunchCache::prepare_kernel, arch/sm90/tma_descriptor.hpp).
#pragma once

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KC_STAGE3_SM90A 1
#else
#define KC_STAGE3_SM90A 0
#endif

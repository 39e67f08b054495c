// kc/common/host_device.hpp — KC_HOST_DEVICE: `__host__ __device__` where nvcc compiles, nothing
// where the host compiler does, for the functions that one definition serves on both sides (the
// per-element compare, splitmix64, the attention rungs' work order).
#pragma once

#ifndef KC_HOST_DEVICE
#ifdef __CUDACC__
#define KC_HOST_DEVICE __host__ __device__
#else
#define KC_HOST_DEVICE
#endif
#endif

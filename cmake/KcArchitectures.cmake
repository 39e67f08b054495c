# Chooses CMAKE_CUDA_ARCHITECTURES before the CUDA language is enabled.
#
# KC_CUDA_ARCH=auto (the default preset) asks nvidia-smi for the local GPU's compute capability
# and builds for exactly that GPU (9.0 becomes 90a so that Hopper-only instructions such as wgmma
# are available). With no GPU visible it falls back to the CI pair, sm_80 and sm_90a.
# An explicit -DCMAKE_CUDA_ARCHITECTURES=... always wins.
set(KC_CUDA_ARCH "auto" CACHE STRING "auto: the local GPU's architecture, else 80;90a")
set(KC_FALLBACK_CUDA_ARCHITECTURES "80;90a")

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  if(KC_CUDA_ARCH STREQUAL "auto")
    set(_kc_arch "")
    find_program(KC_NVIDIA_SMI nvidia-smi)
    if(KC_NVIDIA_SMI)
      execute_process(
        COMMAND ${KC_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
        OUTPUT_VARIABLE _kc_caps RESULT_VARIABLE _kc_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(_kc_rc EQUAL 0 AND _kc_caps MATCHES "^([0-9]+)\\.([0-9]+)")
        set(_kc_arch "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
        if(_kc_arch STREQUAL "90")
          set(_kc_arch "90a")
        endif()
      endif()
    endif()
    if(_kc_arch STREQUAL "")
      message(STATUS "kc: no GPU visible, building for ${KC_FALLBACK_CUDA_ARCHITECTURES}")
      set(CMAKE_CUDA_ARCHITECTURES "${KC_FALLBACK_CUDA_ARCHITECTURES}" CACHE STRING "CUDA architectures")
    else()
      message(STATUS "kc: building for the local GPU, sm_${_kc_arch}")
      set(CMAKE_CUDA_ARCHITECTURES "${_kc_arch}" CACHE STRING "CUDA architectures")
    endif()
  else()
    set(CMAKE_CUDA_ARCHITECTURES "${KC_CUDA_ARCH}" CACHE STRING "CUDA architectures")
  endif()
endif()

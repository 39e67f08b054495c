# Every dependency is looked up with find_package first; FetchContent downloads it only where
# the machine lacks it (FIND_PACKAGE_ARGS, CMake >= 3.24).
include(FetchContent)

find_package(CUDAToolkit 12.8 REQUIRED)   # CUDA::cudart, CUDA::cublas, CUDA::cublasLt, CUDA::nvtx3

FetchContent_Declare(fmt
  URL https://github.com/fmtlib/fmt/releases/download/10.2.1/fmt-10.2.1.zip
  FIND_PACKAGE_ARGS 9)
FetchContent_MakeAvailable(fmt)

if(KC_BUILD_TESTS)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  FetchContent_Declare(googletest
    URL https://github.com/google/googletest/archive/refs/tags/v1.14.0.tar.gz
    FIND_PACKAGE_ARGS NAMES GTest)
  FetchContent_MakeAvailable(googletest)
endif()

if(KC_BUILD_BENCH)
  set(BENCHMARK_ENABLE_TESTING OFF CACHE BOOL "" FORCE)
  set(BENCHMARK_ENABLE_INSTALL OFF CACHE BOOL "" FORCE)
  FetchContent_Declare(benchmark
    URL https://github.com/google/benchmark/archive/refs/tags/v1.8.3.tar.gz
    FIND_PACKAGE_ARGS 1.6)
  FetchContent_MakeAvailable(benchmark)
endif()

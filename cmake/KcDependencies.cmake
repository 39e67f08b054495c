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

# cuDNN 9 (optional): the attention op's baseline is cuDNN SDPA where it is found, the unfused
# cuBLAS path where it is not. KC_WITH_CUDNN: AUTO (use it if found), ON (fail without it), OFF.
# Looked up under KC_CUDNN_ROOT, $CUDNN_ROOT / $CUDNN_PATH, the CUDA toolkit, and the cuDNN that
# PyTorch's wheels install (python3's nvidia.cudnn package: include/ and lib/libcudnn.so.9).
# Linked by its full path, so the build tree's binaries carry that folder in their run path and
# need no LD_LIBRARY_PATH; libcudnn.so.9 loads its sub-libraries from its own folder.
set(KC_WITH_CUDNN AUTO CACHE STRING "Use cuDNN for the attention baseline: AUTO, ON or OFF")
set_property(CACHE KC_WITH_CUDNN PROPERTY STRINGS AUTO ON OFF)
set(KC_CUDNN_ROOT "" CACHE PATH "A cuDNN 9 install (holding include/cudnn_version.h and lib/ or lib64/)")
set(KC_HAS_CUDNN OFF)
if(NOT KC_WITH_CUDNN STREQUAL "OFF")
  set(_kc_cudnn_hints ${KC_CUDNN_ROOT} $ENV{CUDNN_ROOT} $ENV{CUDNN_PATH} ${CUDAToolkit_LIBRARY_ROOT})
  foreach(_kc_dir IN LISTS CUDAToolkit_INCLUDE_DIRS CUDAToolkit_LIBRARY_DIR)
    get_filename_component(_kc_parent "${_kc_dir}" DIRECTORY)
    list(APPEND _kc_cudnn_hints "${_kc_parent}")
  endforeach()
  find_program(_kc_python3 NAMES python3)
  if(_kc_python3)
    execute_process(
      COMMAND ${_kc_python3} -c "import nvidia.cudnn as m; print(list(m.__path__)[0])"
      OUTPUT_VARIABLE _kc_wheel_cudnn OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _kc_rc)
    if(_kc_rc EQUAL 0 AND _kc_wheel_cudnn)
      list(APPEND _kc_cudnn_hints "${_kc_wheel_cudnn}")
    endif()
  endif()
  find_path(KC_CUDNN_INCLUDE_DIR cudnn_version.h HINTS ${_kc_cudnn_hints} PATH_SUFFIXES include)
  find_library(KC_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_kc_cudnn_hints} PATH_SUFFIXES lib lib64)
  if(KC_CUDNN_INCLUDE_DIR AND KC_CUDNN_LIBRARY)
    file(STRINGS "${KC_CUDNN_INCLUDE_DIR}/cudnn_version.h" _kc_cudnn_version_lines
         REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
    foreach(_kc_part MAJOR MINOR PATCHLEVEL)
      string(REGEX REPLACE ".*#define CUDNN_${_kc_part} +([0-9]+).*" "\\1" _kc_cudnn_${_kc_part}
             "${_kc_cudnn_version_lines}")
    endforeach()
    set(KC_CUDNN_VERSION "${_kc_cudnn_MAJOR}.${_kc_cudnn_MINOR}.${_kc_cudnn_PATCHLEVEL}")
    if(_kc_cudnn_MAJOR EQUAL 9)
      set(KC_HAS_CUDNN ON)
      add_library(kc_cudnn UNKNOWN IMPORTED)
      add_library(kc::cudnn ALIAS kc_cudnn)
      set_target_properties(kc_cudnn PROPERTIES IMPORTED_LOCATION "${KC_CUDNN_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${KC_CUDNN_INCLUDE_DIR}")
      message(STATUS "kc: cuDNN ${KC_CUDNN_VERSION}: ${KC_CUDNN_LIBRARY} (attention baseline: cuDNN SDPA)")
    else()
      set(_kc_cudnn_missing "cuDNN ${KC_CUDNN_VERSION} at ${KC_CUDNN_INCLUDE_DIR} is not cuDNN 9")
    endif()
  else()
    set(_kc_cudnn_missing "no cudnn_version.h and libcudnn found (searched: ${_kc_cudnn_hints})")
  endif()
  if(NOT KC_HAS_CUDNN)
    if(KC_WITH_CUDNN STREQUAL "ON")
      message(FATAL_ERROR "KC_WITH_CUDNN=ON but ${_kc_cudnn_missing}. Point KC_CUDNN_ROOT at a cuDNN 9 "
                          "install, or configure with KC_WITH_CUDNN=AUTO or OFF.")
    endif()
    message(STATUS "kc: cuDNN not used: ${_kc_cudnn_missing}; the attention baseline is the unfused cuBLAS path")
  endif()
endif()

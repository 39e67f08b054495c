// kc/common/error.hpp — one error family for the whole project.
//
// Every CUDA runtime call goes through KC_CUDA_CHECK and every cuBLAS/cuBLASLt call through
// KC_CUBLAS_CHECK: a failure throws kc::CudaError / kc::CublasError naming the call, the file and
// the line. Bad arguments from host code throw kc::Error with a sentence a learner can act on
// (kc::require). Nothing aborts silently.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kc {

// Base of every error kc throws: a message that says what went wrong and what to do about it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A CUDA runtime call returned something other than cudaSuccess.
class CudaError : public Error {
 public:
  CudaError(cudaError_t code, const char* call, const char* file, int line);
  cudaError_t code() const noexcept { return code_; }
  // Errors such as an illegal address leave the CUDA context unusable: nothing else can run
  // in this process afterwards.
  bool is_sticky() const noexcept;

 private:
  cudaError_t code_;
};

// A cuBLAS or cuBLASLt call returned something other than CUBLAS_STATUS_SUCCESS.
class CublasError : public Error {
 public:
  CublasError(cublasStatus_t status, const char* call, const char* file, int line);
  cublasStatus_t status() const noexcept { return status_; }

 private:
  cublasStatus_t status_;
};

// Throws kc::Error with the formatted message unless `condition` holds.
template <typename... Args>
void require(bool condition, fmt::format_string<Args...> message, Args&&... args) {
  if (!condition) throw Error(fmt::format(message, std::forward<Args>(args)...));
}

namespace detail {
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);
}  // namespace detail

}  // namespace kc

#define KC_CUDA_CHECK(call)                                                   \
  do {                                                                        \
    const cudaError_t kc_status_ = (call);                                    \
    if (kc_status_ != cudaSuccess)                                            \
      ::kc::detail::throw_cuda_error(kc_status_, #call, __FILE__, __LINE__);  \
  } while (0)

#define KC_CUBLAS_CHECK(call)                                                   \
  do {                                                                          \
    const cublasStatus_t kc_status_ = (call);                                   \
    if (kc_status_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::kc::detail::throw_cublas_error(kc_status_, #call, __FILE__, __LINE__);  \
  } while (0)

// After a <<<...>>> launch: reports a bad launch configuration (too many threads, too much
// shared memory) at the launch site instead of at some later, unrelated call.
#define KC_CHECK_LAUNCH() KC_CUDA_CHECK(cudaGetLastError())

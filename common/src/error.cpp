#include "kc/common/error.hpp"

namespace kc {

CudaError::CudaError(cudaError_t code, const char* call, const char* file, int line)
    : Error(fmt::format("CUDA error {} ({}) from `{}` at {}:{}", cudaGetErrorName(code),
                        cudaGetErrorString(code), call, file, line)),
      code_(code) {}

bool CudaError::is_sticky() const noexcept {
  switch (code_) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
  }
}

CublasError::CublasError(cublasStatus_t status, const char* call, const char* file, int line)
    : Error(fmt::format("cuBLAS error {} ({}) from `{}` at {}:{}", cublasGetStatusName(status),
                        cublasGetStatusString(status), call, file, line)),
      status_(status) {}

namespace detail {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  throw CudaError(code, call, file, line);
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw CublasError(status, call, file, line);
}

}  // namespace detail
}  // namespace kc

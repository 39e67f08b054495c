// kc/common/problem.hpp — one problem instance and the device tensors it runs on.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/dtype.hpp"
#include "kc/common/error.hpp"

namespace kc {

// What to compute: an op name, its dimensions (named by the op: sgemm's are M, N, K) and the
// scalars alpha and beta where the op has them.
struct Problem {
  std::string op;
  std::vector<std::int64_t> dims;
  double alpha = 1.0;
  double beta = 0.0;

  std::string shape() const;  // "4096x4096x4096"
  std::string label() const;  // shape, plus " a=1.5 b=0.5" when the scalars are not 1 and 0
};

// "4096x4096x4096" -> {4096, 4096, 4096}; throws kc::Error on anything else.
std::vector<std::int64_t> parse_shape(std::string_view text);

// A named device tensor, row-major with the given shape.
struct Tensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  bool is_output = false;
  DeviceBuffer<std::byte> storage;

  std::size_t count() const;
  void* raw() { return storage.data(); }
  const void* raw() const { return storage.data(); }
  template <typename T>
  T* data() {
    check_type(dtype_of_v<T>);
    return reinterpret_cast<T*>(storage.data());
  }
  template <typename T>
  const T* data() const {
    check_type(dtype_of_v<T>);
    return reinterpret_cast<const T*>(storage.data());
  }

 private:
  void check_type(DType requested) const;
};

// The tensors of one problem, inputs and outputs, looked up by name. References returned by add()
// and operator[] stay valid as more tensors are added.
class Operands {
 public:
  Tensor& add(std::string name, DType dtype, std::vector<std::int64_t> shape, bool is_output);
  Tensor& operator[](std::string_view name);
  const Tensor& operator[](std::string_view name) const;
  std::deque<Tensor>& tensors() { return tensors_; }
  const std::deque<Tensor>& tensors() const { return tensors_; }

 private:
  std::deque<Tensor> tensors_;
};

}  // namespace kc

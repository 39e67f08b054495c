// kc/common/problem.hpp — one problem instance and the device tensors it runs on.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/dtype.hpp"
#include "kc/common/error.hpp"

namespace kc {

// A named number an op takes besides its dimensions: `alpha`, `beta` (GEMM), `causal`, `scale`,
// `window` (attention), `group_size` (quantized GEMM), `page_size` (paged KV cache),
// `position_offset` (RoPE). Every op declares its parameters with their defaults (OpSpec::params).
struct ParamSpec {
  std::string name;
  double default_value = 0.0;
  std::string meaning;  // one line for --list and the docs: "scales A.B"
};

struct Param {
  std::string name;
  double value = 0.0;
  double default_value = 0.0;
  bool is_default() const { return value == default_value; }
};

// Values for some of an op's parameters, by name: {{"alpha", 1.5}, {"beta", 0.5}}.
using ParamValues = std::vector<std::pair<std::string, double>>;

// What to compute: an op name, its dimensions (named by the op: sgemm's are M, N, K), the data
// type (the op says which operands it types: a GEMM's A, B and C, a norm's x and y) and a value
// for every parameter the op declares, in the op's order. Make problems with make_problem() or
// OpSpec::problem(), which fill in the defaults.
struct Problem {
  std::string op;
  std::vector<std::int64_t> dims;
  DType dtype = DType::f32;
  std::vector<Param> params;

  // The value of parameter `name`; throws kc::Error naming the parameters the problem has.
  double param(std::string_view name) const;
  bool has_param(std::string_view name) const;
  // Sets an existing parameter; throws kc::Error for a name the op does not declare.
  Problem& set(std::string_view name, double value);

  std::string shape() const;        // "4096x4096x4096"
  std::string params_text() const;  // parameters off their defaults: "alpha=1.5 beta=0.5", or ""
  // shape, dtype and the parameters off their defaults: "4096x4096x4096 bf16 alpha=1.5".
  // Identifies the problem within its op: the reference cache, kc-bench's benchmark names and the
  // report columns key on it.
  std::string label() const;
};

// A problem of op `op` whose parameters are `specs` at their defaults, then `values` applied;
// throws kc::Error for a value naming no parameter of the op.
Problem make_problem(std::string op, const std::vector<ParamSpec>& specs,
                     std::vector<std::int64_t> dims, DType dtype, const ParamValues& values = {});

// "4096x4096x4096" -> {4096, 4096, 4096}; throws kc::Error on anything else.
std::vector<std::int64_t> parse_shape(std::string_view text);

// "causal=1" -> {"causal", 1.0}; throws kc::Error on anything else.
std::pair<std::string, double> parse_param(std::string_view text);

// A named device tensor, row-major with the given shape.
//
// Its storage carries guard bytes before and after the data, filled with a known pattern when the
// operands are made and checked after every checked run: a kernel that writes past either end of
// a tensor fails its check (check.hpp) instead of silently corrupting a neighbour.
struct Tensor {
  static constexpr std::size_t kGuardBytes = 4096;  // each side; keeps the data 256-byte aligned

  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  bool is_output = false;
  DeviceBuffer<std::byte> storage;  // guard + data + guard

  std::size_t count() const;
  std::size_t bytes() const { return dtype_bytes(dtype, count()); }
  void* raw() { return storage.data() + kGuardBytes; }
  const void* raw() const { return storage.data() + kGuardBytes; }
  template <typename T>
  T* data() {
    check_type(dtype_of_v<T>);
    return reinterpret_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    check_type(dtype_of_v<T>);
    return reinterpret_cast<const T*>(raw());
  }
  // Copies `bytes` bytes of host data into the tensor's data (after anything queued on `stream`)
  // and waits.
  void upload(const void* host, std::size_t bytes, cudaStream_t stream);
  // Writes the guard pattern into both guards; how many guard bytes no longer hold it (after a
  // kernel wrote past the data) — this one waits for `stream`.
  void fill_guards(cudaStream_t stream);
  std::size_t damaged_guard_bytes(cudaStream_t stream) const;

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

// kc/engine/device_pool.hpp — the engine's one device allocation: weights, the KV cache and the
// activations of a step carved out of a single cudaMalloc, each piece named, so that the memory a
// model takes is one number decided at start-up and reported piece by piece.
//
// A DevicePool is filled in two passes over the same list of pieces: a PoolLayout adds them up
// (bytes, each piece aligned to 256 bytes), the pool allocates the total once, and the same calls
// against the pool hand out the pointers. Nothing is freed piece by piece: the pool lives as long
// as the model.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kc/common/buffer.hpp"

namespace kc::engine {

inline constexpr std::size_t kPoolAlignment = 256;

struct PoolPiece {
  std::string name;
  std::size_t offset = 0, bytes = 0;
};

// The pieces and their offsets, before any allocation.
class PoolLayout {
 public:
  // Adds a piece of `bytes` (rounded up to kPoolAlignment) and returns its offset.
  std::size_t add(std::string name, std::size_t bytes);
  std::size_t total_bytes() const { return total_; }
  const std::vector<PoolPiece>& pieces() const { return pieces_; }

 private:
  std::size_t total_ = 0;
  std::vector<PoolPiece> pieces_;
};

class DevicePool {
 public:
  DevicePool() = default;
  // One cudaMalloc of layout.total_bytes() on the current device. Throws kc::CudaError when the
  // device has not that much free (the message names the bytes asked for).
  explicit DevicePool(PoolLayout layout);

  // The piece's memory, by name (kc::Error naming it when the layout has no such piece).
  template <typename T>
  T* get(const std::string& name) const {
    return reinterpret_cast<T*>(base_ + piece(name).offset);
  }
  const PoolPiece& piece(const std::string& name) const;
  const std::vector<PoolPiece>& pieces() const { return layout_.pieces(); }
  std::size_t total_bytes() const { return layout_.total_bytes(); }

 private:
  PoolLayout layout_;
  DeviceBuffer<std::byte> memory_;
  std::byte* base_ = nullptr;
};

}  // namespace kc::engine

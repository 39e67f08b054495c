// The engine's device pool (kc/engine/device_pool.hpp).
#include "kc/engine/device_pool.hpp"

#include "kc/common/error.hpp"

namespace kc::engine {

std::size_t PoolLayout::add(std::string name, std::size_t bytes) {
  for (const PoolPiece& piece : pieces_)
    require(piece.name != name, "device pool: the piece '{}' is added twice", name);
  const std::size_t offset = total_;
  const std::size_t rounded = (bytes + kPoolAlignment - 1) / kPoolAlignment * kPoolAlignment;
  pieces_.push_back(PoolPiece{std::move(name), offset, bytes});
  total_ += rounded;
  return offset;
}

DevicePool::DevicePool(PoolLayout layout)
    : layout_(std::move(layout)), memory_(layout_.total_bytes() == 0 ? 1 : layout_.total_bytes()),
      base_(memory_.data()) {}

const PoolPiece& DevicePool::piece(const std::string& name) const {
  for (const PoolPiece& piece : layout_.pieces())
    if (piece.name == name) return piece;
  throw Error(fmt::format("device pool: no piece named '{}'", name));
}

}  // namespace kc::engine

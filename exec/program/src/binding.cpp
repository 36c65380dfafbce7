#include "reshard/exec/binding.hpp"

namespace reshard::exec {

void MemoryBinding::bind(const ShardBinding& b) {
  for (ShardBinding& x : bindings_)
    if (x.gpu == b.gpu && x.side == b.side && x.tensor == b.tensor && x.box == b.box) {
      x = b;
      return;
    }
  bindings_.push_back(b);
}

const ShardBinding* MemoryBinding::find(model::GpuId gpu, Side side, std::int32_t tensor, const model::Box& box) const {
  for (const ShardBinding& x : bindings_)
    if (x.gpu == gpu && x.side == side && x.tensor == tensor && x.box == box) return &x;
  return nullptr;
}

}  // namespace reshard::exec

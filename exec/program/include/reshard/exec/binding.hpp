// Memory binding (docs/execution.md): a shard of the run bound to a caller's buffer, so the refit
// moves the caller's own bytes (a trainer's parameters into a server's), or, unbound, allocated by
// the executor as a benchmark does. A buffer holds the shard's elements row-major over the shard's
// box, in the tensor's dtype (what a framework's parameter slice is, `qkv_proj.weight[a:b]` a view
// of one). Staging regions are the executor's own, bounded by the budget (model/memory.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "reshard/model/layout.hpp"
#include "reshard/model/topology.hpp"

namespace reshard::exec {

enum class Side : std::uint8_t { Source, Destination };

// Memory of the caller's on the host (the host backend) or on a device (the GPU backends).
enum class MemoryKind : std::uint8_t { Host, Device };

struct ShardBinding {
  model::GpuId gpu = -1;
  Side side = Side::Source;
  std::int32_t tensor = -1;
  model::Box box;               // the shard's box, as the ShardMap has it
  void* data = nullptr;
  std::int64_t bytes = 0;       // the buffer's size: at least box.elements() x dtype size
  MemoryKind memory = MemoryKind::Host;
};

class MemoryBinding {
 public:
  // Binds one shard; a second binding of the same (GPU, side, tensor, box) replaces the first.
  void bind(const ShardBinding& b);
  // The binding of a shard, or null.
  const ShardBinding* find(model::GpuId gpu, Side side, std::int32_t tensor, const model::Box& box) const;
  const std::vector<ShardBinding>& all() const { return bindings_; }
  bool empty() const { return bindings_.empty(); }

 private:
  std::vector<ShardBinding> bindings_;
};

}  // namespace reshard::exec

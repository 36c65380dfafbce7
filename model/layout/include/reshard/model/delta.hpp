// A delta refit (docs/design.md, "Delta refit"): after one optimizer step only a small share of the
// weights' elements change their bits (about 1-3 % of BF16 weights), so each transfer can carry the
// changed elements of its slices instead of all of them. A scenario's `delta:` (or `--delta DENSITY`)
// gives the density d -- the expected share of changed elements -- per tensor class (a class
// without one travels dense) and names the encoding.
//
// Encoded size of a run of n elements of s bytes each (one slice of a piece that one operation
// carries), of which k = round(d n) changed:
//   indices   index/value pairs: E = k (i + s), i = 4 bytes (a uint32 offset in the run; 8 for a
//             run of more than 2^32 elements)
//   bitmask   a bit per element, then the changed values: E = ceil(n / 8) + k s
//   dense     (a class without a density) E = n s
// and V = k s of those bytes are the changed values themselves. The two encodings cross at
// d = 1 / (8 i) = 3.1 %: below it indices are smaller, above it the bitmask. At d = 1 both exceed
// the dense n s (indices 3x for BF16, the bitmask by n / 8).
//
// Every transfer's bytes are its encoded bytes (encode_delta, model/schedule.hpp), so every
// strategy, the estimate, the simulator and the tuner see them. The passes around the transfer,
// memory-bound at the GPU's memory bandwidth (model/cost.hpp, T_delta_*), per GPU g with W(g) the
// bytes of its shards of the classes with a density:
//   source       diff its shards against its snapshot of the previous step's values, write the
//                encoded stream and the changed values into the snapshot:
//                  snapshot: gpu   (2 W + E(W) + V(W)) / memory bandwidth
//                  snapshot: host  max((W + E(W)) / memory bandwidth, (W + V(W)) / host link)
//                  (the previous values read from and the changed ones written to pinned host memory)
//   destination  read the encoded stream and write the changed values in place: (E(W) + V(W)) / memory bandwidth
// Memory: a GPU snapshot holds W(g) more bytes on every source GPU (GpuMemoryUse::delta_snapshot,
// checked against its limit); a host snapshot takes none.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reshard/model/units.hpp"

namespace reshard::model {

enum class TensorClass : std::uint8_t;  // model/inventory.hpp
inline constexpr int kDeltaClasses = 11;  // kTensorClassCount (checked in inventory.hpp)

enum class DeltaEncoding : std::uint8_t { Indices, Bitmask };
enum class SnapshotSite : std::uint8_t { Gpu, Host };
const char* to_string(DeltaEncoding e);  // "indices", "bitmask"
const char* to_string(SnapshotSite s);   // "gpu", "host"

struct DeltaSpec {
  std::array<double, kDeltaClasses> density{};  // per TensorClass; 0: the class travels dense
  DeltaEncoding encoding = DeltaEncoding::Indices;
  SnapshotSite snapshot = SnapshotSite::Gpu;

  bool active() const;                           // some class has a density
  double density_of(TensorClass c) const { return density[static_cast<std::size_t>(c)]; }
  // k = round(d n): the changed elements of a run of n elements of class c (0 for a dense class).
  std::int64_t changed(std::int64_t n, TensorClass c) const;
  // E: the bytes a run of n elements of `element_size` bytes of class c travels as (above).
  Bytes encoded(std::int64_t n, std::int64_t element_size, TensorClass c) const;
  // V = k s: the changed values among them (0 for a dense class).
  Bytes values(std::int64_t n, std::int64_t element_size, TensorClass c) const { return Bytes{changed(n, c) * element_size}; }
  // "3 % of every tensor's elements changed" or "expert_ffn 2 %, attention 5 % changed; other classes
  // dense", then the encoding and where the snapshot lives.
  std::string describe() const;
};

}  // namespace reshard::model

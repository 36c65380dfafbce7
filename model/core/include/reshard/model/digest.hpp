// Digests that tie a Measurement (written by `reshard exec -o`) to what it measured (the scenario's
// files: reshard/model/scenario_digest.hpp). A digest is
// FNV-1a over 64 bits, 16 hex digits: it detects an edited or stale file (op bytes changed, an
// operation dropped, `verified` flipped, the scenario changed since), not a deliberate forgery.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace reshard::model {

// FNV-1a over 64 bits, fed in pieces: h = (h XOR byte) * 1099511628211 for every byte, from
// 14695981039346656037.
class Fnv1a {
 public:
  void add(std::string_view bytes) {
    for (const unsigned char c : bytes) {
      h_ ^= c;
      h_ *= 1099511628211ull;
    }
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 14695981039346656037ull;
};

// A 64-bit digest as 16 hex digits.
std::string hex_digest(std::uint64_t h);
// 16 hex digits of FNV-1a over `text`.
std::string digest(std::string_view text);
// The digest of a Measurement document: its compact JSON without its "digest" member.
std::string document_digest(const nlohmann::json& doc);

}  // namespace reshard::model

#include "reshard/model/digest.hpp"

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace reshard::model {

std::string hex_digest(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string digest(std::string_view text) {
  Fnv1a h;
  h.add(text);
  return hex_digest(h.value());
}

std::string document_digest(const nlohmann::json& doc) {
  nlohmann::json rest = doc;
  if (rest.is_object()) rest.erase("digest");
  return digest(rest.dump());
}

}  // namespace reshard::model

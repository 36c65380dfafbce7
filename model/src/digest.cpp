#include "reshard/model/digest.hpp"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reshard/model/errors.hpp"
#include "reshard/model/json_file.hpp"
#include "reshard/model/scenario.hpp"

namespace reshard::model {

namespace {
std::string hex(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}
}  // namespace

std::string digest(std::string_view text) {
  Fnv1a h;
  h.add(text);
  return hex(h.value());
}

std::string scenario_digest(const Scenario& s) {
  Fnv1a h;
  for (const auto& path : {std::filesystem::path(s.file), s.model_path, s.topology_path}) {
    check_input_file(path, "file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ConfigError(path.string(), 0, "", "cannot open the file to compute its digest");
    std::stringstream ss;
    ss << in.rdbuf();
    h.add(ss.str());
    h.add(std::string_view("\0", 1));  // a boundary, so moving bytes between files changes the digest
  }
  return hex(h.value());
}

std::string document_digest(const nlohmann::json& doc) {
  nlohmann::json rest = doc;
  if (rest.is_object()) rest.erase("digest");
  return digest(rest.dump());
}

std::string measurement_distrust(const nlohmann::json& doc, const Scenario& s) {
  const auto d = doc.find("digest");
  if (d == doc.end() || !d->is_object() || !d->contains("document") || !d->contains("scenario"))
    return "it carries no digest";
  if ((*d)["document"] != document_digest(doc)) return "it was edited after it was written (its digest does not match)";
  if ((*d)["scenario"] != scenario_digest(s))
    return "the scenario, model or topology file changed since it was measured (the scenario digest does not match)";
  const auto v = doc.find("verified");
  if (v == doc.end() || *v != true) return "the run's data was not verified";
  return "";
}

}  // namespace reshard::model

#include "reshard/model/scenario_digest.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reshard/model/digest.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/json_file.hpp"

namespace reshard::model {

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
  return hex_digest(h.value());
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

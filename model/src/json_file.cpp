#include "reshard/model/json_file.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "reshard/model/errors.hpp"

namespace reshard::model {

nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path.string(), 0, "", "cannot open the " + what);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path.string(), 0, "", std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace reshard::model

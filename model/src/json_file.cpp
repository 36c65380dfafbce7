#include "reshard/model/json_file.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "reshard/model/errors.hpp"

namespace reshard::model {

void check_input_file(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw ConfigError(path.string(), 0, "", "cannot open the " + what);
  if (!std::filesystem::is_regular_file(st)) throw ConfigError(path.string(), 0, "", "the " + what + " is not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxInputFileBytes)
    throw ConfigError(path.string(), 0, "", "the " + what + " is larger than " + std::to_string(kMaxInputFileBytes >> 20) + " MiB");
}

nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what) {
  check_input_file(path, what);
  std::ifstream in(path);
  if (!in) throw ConfigError(path.string(), 0, "", "cannot open the " + what);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path.string(), 0, "", std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace reshard::model

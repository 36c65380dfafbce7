#include "reshard/model/json_file.hpp"

#include <fstream>
#include <set>
#include <string>
#include <vector>
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
  // A key twice in one object is refused (the parser would keep the last silently), named by its
  // JSON path.
  std::vector<std::set<std::string>> seen;  // per open object: its keys so far
  std::vector<std::string> where;           // per open object: its path
  std::string last_key;
  std::string duplicate;
  auto refuse_duplicates = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      seen.emplace_back();
      where.push_back(where.empty() ? "" : where.back() + (last_key.empty() ? "" : "." + last_key));
      last_key.clear();
    } else if (event == E::object_end) {
      seen.pop_back();
      where.pop_back();
      last_key.clear();
    } else if (event == E::key) {
      last_key = parsed.get<std::string>();
      if (!seen.back().insert(last_key).second && duplicate.empty())
        duplicate = where.back().empty() ? last_key : where.back() + "." + last_key;
    } else if (event == E::array_start || event == E::array_end) {
      last_key.clear();
    }
    return true;
  };
  try {
    nlohmann::json j = nlohmann::json::parse(in, refuse_duplicates);
    if (!duplicate.empty())
      throw ConfigError(path.string(), 0, duplicate,
                        "appears twice in one object; a parser would keep one of the two silently, so write it once");
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path.string(), 0, "", std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace reshard::model

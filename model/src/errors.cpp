#include "reshard/model/errors.hpp"

#include <string_view>

namespace reshard::model {
namespace {
std::string compose(const std::string& file, int line, const std::string& key, const std::string& what) {
  std::string m;
  m.append(file.empty() ? std::string_view("<input>") : std::string_view(file));
  if (line > 0) m += ":" + std::to_string(line);
  m += ": ";
  if (!key.empty()) m += key + ": ";
  return m + what;
}
}  // namespace

ConfigError::ConfigError(std::string file, int line, std::string key, const std::string& what)
    : Error(compose(file, line, key, what)),
      file_(std::move(file)),
      line_(line),
      key_(std::move(key)),
      reason_(what) {}

}  // namespace reshard::model

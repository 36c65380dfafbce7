#include "reshard/model/errors.hpp"

#include <sstream>

namespace reshard::model {
namespace {
std::string compose(const std::string& file, int line, const std::string& key, const std::string& what) {
  std::ostringstream m;
  m << (file.empty() ? "<input>" : file);
  if (line > 0) m << ':' << line;
  m << ": ";
  if (!key.empty()) m << key << ": ";
  m << what;
  return m.str();
}
}  // namespace

ConfigError::ConfigError(std::string file, int line, std::string key, const std::string& what)
    : Error(compose(file, line, key, what)),
      file_(std::move(file)),
      line_(line),
      key_(std::move(key)),
      reason_(what) {}

ConfigError::ConfigError(const std::string& message, const ConfigError& from)
    : Error(message), file_(from.file_), line_(from.line_), key_(from.key_), reason_(from.reason_) {}

OverrideError::OverrideError(const std::string& override_text, const ConfigError& e)
    : ConfigError(override_text + ": " + e.what(), e), override_(override_text) {}

}  // namespace reshard::model

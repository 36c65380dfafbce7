#include "reshard/model/errors.hpp"

#include <sstream>

namespace reshard::model {
namespace {
// A hostile input can make a file name, key or reason of any length; each is cut for the message.
std::string cut(const std::string& s, std::size_t limit) {
  if (s.size() <= limit) return s;
  std::string out(s, 0, limit);
  out.append("... (").append(std::to_string(s.size())).append(" characters)");
  return out;
}
std::string compose(const std::string& file, int line, const std::string& key, const std::string& what) {
  std::ostringstream m;
  m << (file.empty() ? "<input>" : cut(file, 240));
  if (line > 0) m << ':' << line;
  m << ": ";
  if (!key.empty()) m << cut(key, 160) << ": ";
  m << cut(what, 2000);
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

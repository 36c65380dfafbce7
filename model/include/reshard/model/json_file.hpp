// Reading a JSON document from a file (schedules, measurements, flow dumps).
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace reshard::model {

// The whole file parsed as JSON. An unreadable file ("cannot open the WHAT") or malformed JSON
// ("not valid JSON: ...") is one ConfigError naming the file.
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what);

}  // namespace reshard::model

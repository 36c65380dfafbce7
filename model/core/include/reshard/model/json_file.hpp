// Reading a JSON document from a file (schedules, measurements, flow dumps).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace reshard::model {

// Every input file is a regular file of at most kMaxInputFileBytes (a device such as /dev/zero
// or a huge file would read without end); otherwise one ConfigError naming the file and the WHAT.
inline constexpr std::uintmax_t kMaxInputFileBytes = std::uintmax_t{1} << 30;
void check_input_file(const std::filesystem::path& path, const std::string& what);

// The whole file parsed as JSON. An unreadable file ("cannot open the WHAT") or malformed JSON
// ("not valid JSON: ...") is one ConfigError naming the file.
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what);

}  // namespace reshard::model

// Shared by the libFuzzer targets (one per reader). A target feeds its input to one reader and
// lets only the project's typed errors (model::Error) through: any other exception escapes and
// libFuzzer reports it, like a crash, a sanitizer report, a leak or a timeout.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace reshard::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// A per-process scratch directory; readers that only take a path read the input from a file in it.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("reshard-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::filesystem::path write_scratch(const std::string& name, const std::string& text) {
  const auto p = scratch_dir() / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  return p;
}

inline std::string source_path(const std::string& rel) { return std::string(RESHARD_SOURCE_DIR) + "/" + rel; }

}  // namespace reshard::fuzz

// Where a test finds the shipped data and the reshard command: where CMake built them
// (RESHARD_SOURCE_DIR, RESHARD_BINARY), unless the environment says otherwise -- the GPU bundle's
// test binary runs on another machine, from another folder (scripts/gpu-check.sh sets both).
#pragma once

#include <cstdlib>
#include <string>

namespace reshard::test {

inline std::string source_dir() {
  const char* e = std::getenv("RESHARD_SOURCE_DIR");
  return e && *e ? e : RESHARD_SOURCE_DIR;
}

#ifdef RESHARD_BINARY
inline std::string reshard_binary() {
  const char* e = std::getenv("RESHARD_BIN");
  return e && *e ? e : RESHARD_BINARY;
}
#endif

}  // namespace reshard::test

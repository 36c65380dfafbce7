// Every test process writes its temporary files in a folder of its own.
//
// ctest runs each test of an executable as its own process, several at once, and many tests write
// a file under a fixed name in the temporary folder (a schedule, a measurement, a scenario): two
// tests of one executable running together would write one file while the other reads it. Before
// main(), this sets TMPDIR to <TMPDIR or /tmp>/reshard-test-<pid> (std::filesystem's
// temp_directory_path() and the commands a test starts read it) and removes that folder at exit.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace {

struct ScratchFolder {
  std::filesystem::path dir;
  ScratchFolder() {
    const char* base = std::getenv("TMPDIR");
    dir = std::filesystem::path(base && *base ? base : "/tmp") / ("reshard-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~ScratchFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
};

const ScratchFolder scratch;

}  // namespace

// Running the command line from a test: what a shell command prints, and its exit status.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace reshard::test {

// Runs `command` in the shell (redirections as it writes them) and returns what it printed on
// stdout; *status: its exit code, 128 + the signal when a signal ended it.
inline std::string run_command(const std::string& command, int* status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int s = pclose(p);
  *status = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
  return out;
}

}  // namespace reshard::test

// Typed exceptions. Library code throws these and never exits; the `reshard` command turns each into
// one message on stderr and a non-zero exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace reshard::model {

// Base of every error this project throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input in a file (topology, model, scenario, parameters, schedule). The message reads
// "FILE:LINE: KEY: what is wrong" (line 1-based; 0 when unknown, then omitted).
class ConfigError : public Error {
 public:
  ConfigError(std::string file, int line, std::string key, const std::string& what);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& key() const { return key_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string file_;
  int line_;
  std::string key_;
  std::string reason_;
};

// A layout pair or scenario that cannot be planned (sizes that do not divide, a layout larger than
// its GPU set, a destination element nobody holds).
class PlanError : public Error {
 public:
  using Error::Error;
};

// A schedule that is inconsistent with itself or with its scenario.
class ScheduleError : public Error {
 public:
  using Error::Error;
};

}  // namespace reshard::model

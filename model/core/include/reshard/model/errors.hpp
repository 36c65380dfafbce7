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

 protected:
  // `message` replaces the composed "FILE:LINE: KEY: what" (OverrideError prefixes it).
  ConfigError(const std::string& message, const ConfigError& from);

 private:
  std::string file_;
  int line_;
  std::string key_;
  std::string reason_;
};

// A ConfigError about a key a `--set KEY=VALUE` override set (that key, one under it, or the
// mapping it sits in): the reader's own file, line, key and reason, the message prefixed with the
// override: "--set destination.tpp=16: FILE:LINE: destination.tpp: unknown key; allowed here: ...".
class OverrideError : public ConfigError {
 public:
  OverrideError(const std::string& override_text, const ConfigError& e);
  const std::string& override_text() const { return override_; }

 private:
  std::string override_;
};

// A layout pair or scenario that cannot be planned (sizes that do not divide, a layout larger than
// its GPU set, a destination element nobody holds).
class PlanError : public Error {
 public:
  using Error::Error;
};

// A GPU, NVLink domain or host-link index a topology does not have (Topology's accessors check
// every index they are given; the message names the topology and how many it has).
class IndexError : public Error {
 public:
  using Error::Error;
};

// A schedule that is inconsistent with itself or with its scenario.
class ScheduleError : public Error {
 public:
  using Error::Error;
};

}  // namespace reshard::model

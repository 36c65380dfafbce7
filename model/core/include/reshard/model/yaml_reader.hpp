// Strict YAML access for every input file (the model's readers and study's sweep specs; it includes
// yaml-cpp, which its users link). Each accessor knows its file,
// its line and its dotted key path, so any problem becomes one ConfigError "FILE:LINE: KEY: what".
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reshard/model/errors.hpp"
#include "reshard/model/overrides.hpp"
#include "reshard/model/units.hpp"

namespace reshard::model::yaml {

class Node {
 public:
  Node(YAML::Node node, std::shared_ptr<const std::string> file, std::string key, int line);

  const std::string& file() const { return *file_; }
  const std::string& key() const { return key_; }
  int line() const { return line_; }

  bool is_map() const { return node_.IsMap(); }
  bool is_seq() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }
  bool is_null() const { return !node_ || node_.IsNull(); }

  bool has(std::string_view k) const;
  Node at(std::string_view k) const;                   // throws when missing
  std::optional<Node> get(std::string_view k) const;   // nullopt when missing or null
  // Throws naming the first key (in file order) that is not in `allowed`.
  void allow_only(std::initializer_list<std::string_view> allowed) const;
  void allow_only(const std::vector<std::string>& allowed) const;

  std::size_t size() const;                     // sequence length (throws unless a sequence)
  Node operator[](std::size_t i) const;         // sequence element
  std::vector<Node> items() const;              // sequence elements (a scalar counts as one item)
  std::vector<std::pair<std::string, Node>> entries() const;  // map entries in file order

  std::string str() const;
  std::int64_t integer() const;                                // any 64-bit integer, exactly
  std::int64_t integer_in(std::int64_t lo, std::int64_t hi) const;  // an integer in lo..hi
  std::int64_t positive_integer() const;  // >= 1
  double number() const;
  bool boolean() const;
  BytesPerSecond bandwidth() const;  // unit suffix required
  Seconds duration() const;          // unit suffix required
  Bytes size_bytes() const;          // unit suffix required
  std::vector<std::int64_t> integers() const;  // a sequence of integers

  [[noreturn]] void fail(const std::string& what) const;

 private:
  std::string key_text(const YAML::Node& k) const;

  YAML::Node node_;
  std::shared_ptr<const std::string> file_;
  std::string key_;
  int line_;
};

// Parses a file (syntax errors become ConfigError with the line); the root must be a mapping.
// `overrides` (keys from this file's root) are applied to the tree, in order, before it is returned.
Node load_file(const std::filesystem::path& path, const std::vector<Override>& overrides = {});
// Parses text; `name` stands for the file in messages.
Node load_string(const std::string& text, const std::string& name, const std::vector<Override>& overrides = {});

// Called inside a catch of ConfigError `e`: rethrows it as an OverrideError naming the first
// override whose key is e's key, above it, or under it (an override with an empty key owns the
// whole file); rethrows `e` unchanged when none relates to it or it already names one.
[[noreturn]] void rethrow_naming_override(const ConfigError& e, const std::vector<Override>& overrides);

// f(), with any ConfigError it throws about an overridden key naming that override.
template <class F>
auto naming_overrides(const std::vector<Override>& overrides, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ConfigError& e) {
    rethrow_naming_override(e, overrides);
  }
}

}  // namespace reshard::model::yaml

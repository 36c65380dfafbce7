#include "yaml_reader.hpp"

#include "reshard/model/checked.hpp"
#include "reshard/model/json_file.hpp"

#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace reshard::model::yaml {

namespace {
int line_of(const YAML::Node& n, int fallback) {
  if (!n) return fallback;
  const YAML::Mark m = n.Mark();
  return m.line >= 0 ? m.line + 1 : fallback;
}
std::string join(const std::string& a, std::string_view b) {
  return a.empty() ? std::string(b) : a + "." + std::string(b);
}
}  // namespace

// A mapping's key: a plain scalar (a sequence or mapping as a key, "? [a]: 1", is refused).
std::string Node::key_text(const YAML::Node& k) const {
  if (!k.IsScalar()) throw ConfigError(*file_, line_of(k, line_), key_, "a key must be a plain name, not a list or mapping");
  return k.Scalar();
}

Node::Node(YAML::Node node, std::shared_ptr<const std::string> file, std::string key, int line)
    : node_(std::move(node)), file_(std::move(file)), key_(std::move(key)), line_(line_of(node_, line)) {}

void Node::fail(const std::string& what) const { throw ConfigError(*file_, line_, key_, what); }

bool Node::has(std::string_view k) const {
  if (!node_.IsMap()) return false;
  for (const auto& kv : node_)
    if (key_text(kv.first) == k) return true;
  return false;
}

std::optional<Node> Node::get(std::string_view k) const {
  if (!node_.IsMap()) {
    if (is_null()) return std::nullopt;
    fail("expected a mapping with key '" + std::string(k) + "'");
  }
  for (const auto& kv : node_)
    if (key_text(kv.first) == k) {
      if (!kv.second || kv.second.IsNull()) return std::nullopt;
      Node n(kv.second, file_, join(key_, k), line_);
      n.line_ = line_of(kv.first, line_);  // report the key's line, not where its value starts
      return n;
    }
  return std::nullopt;
}

Node Node::at(std::string_view k) const {
  auto n = get(k);
  if (!n) throw ConfigError(*file_, line_, join(key_, k), "required key is missing");
  return *n;
}

void Node::allow_only(std::initializer_list<std::string_view> allowed) const {
  std::vector<std::string> v(allowed.begin(), allowed.end());
  allow_only(v);
}

void Node::allow_only(const std::vector<std::string>& allowed) const {
  if (!node_.IsMap()) fail("expected a mapping");
  for (const auto& kv : node_) {
    const std::string k = key_text(kv.first);
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw ConfigError(*file_, line_of(kv.first, line_), join(key_, k), "unknown key; allowed here: " + list);
    }
  }
}

std::size_t Node::size() const {
  if (!node_.IsSequence()) fail("expected a list");
  return node_.size();
}

Node Node::operator[](std::size_t i) const {
  if (!node_.IsSequence()) fail("expected a list");
  return Node(node_[i], file_, key_ + "[" + std::to_string(i) + "]", line_);
}

std::vector<Node> Node::items() const {
  std::vector<Node> out;
  if (node_.IsScalar()) {
    out.push_back(*this);
    return out;
  }
  if (!node_.IsSequence()) fail("expected a list");
  for (std::size_t i = 0; i < node_.size(); ++i) out.push_back((*this)[i]);
  return out;
}

std::vector<std::pair<std::string, Node>> Node::entries() const {
  if (!node_.IsMap()) fail("expected a mapping");
  std::vector<std::pair<std::string, Node>> out;
  for (const auto& kv : node_) {
    std::string k = key_text(kv.first);
    Node n(kv.second, file_, join(key_, k), line_);
    n.line_ = line_of(kv.first, line_);
    out.emplace_back(k, std::move(n));
  }
  return out;
}

std::string Node::str() const {
  if (!node_.IsScalar()) fail("expected a single value");
  return node_.Scalar();
}

std::int64_t Node::integer() const {
  const std::string s = str();
  const auto v = checked::parse_integer(s);
  if (!v) fail("expected an integer, got " + checked::quote(s));
  return *v;
}

std::int64_t Node::integer_in(std::int64_t lo, std::int64_t hi) const {
  const std::string s = str();
  const auto v = checked::parse_integer(s);
  if (!v || *v < lo || *v > hi) fail("expected an integer in " + checked::range_text(lo, hi) + ", got " + checked::quote(s));
  return *v;
}

std::int64_t Node::positive_integer() const {
  const auto v = integer();
  if (v < 1) fail("must be a positive integer, got " + std::to_string(v));
  return v;
}

double Node::number() const {
  const std::string s = str();
  const auto v = checked::parse_finite(s);
  if (!v) fail("expected a finite number, got " + checked::quote(s));
  return *v;
}

bool Node::boolean() const {
  const std::string s = str();
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  fail("expected true or false, got " + checked::quote(s));
}

BytesPerSecond Node::bandwidth() const {
  try {
    return parse_bandwidth(str());
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
}
Seconds Node::duration() const {
  try {
    return parse_duration(str());
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
}
Bytes Node::size_bytes() const {
  try {
    return parse_size(str());
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
}

std::vector<std::int64_t> Node::integers() const {
  std::vector<std::int64_t> out;
  for (const auto& n : items()) out.push_back(n.integer());
  return out;
}

Node load_string(const std::string& text, const std::string& name) {
  auto file = std::make_shared<const std::string>(name);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    throw ConfigError(name, e.mark.line >= 0 ? e.mark.line + 1 : 0, "",
                      "YAML syntax error: lists or mappings nested more than " + std::to_string(e.depth()) + " deep");
  } catch (const YAML::Exception& e) {
    throw ConfigError(name, e.mark.line >= 0 ? e.mark.line + 1 : 0, "", "YAML syntax error: " + e.msg);
  }
  Node n(root, file, "", 1);
  if (!root.IsMap()) throw ConfigError(name, 1, "", "expected a YAML mapping at the top level");
  return n;
}

Node load_file(const std::filesystem::path& path) {
  check_input_file(path, "file");
  std::ifstream in(path);
  if (!in) throw ConfigError(path.string(), 0, "", "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return load_string(ss.str(), path.string());
}

}  // namespace reshard::model::yaml

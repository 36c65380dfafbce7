#include "reshard/model/yaml_reader.hpp"

#include "reshard/model/checked.hpp"
#include "reshard/model/json_file.hpp"

#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
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

namespace {

bool is_index(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A copy without marks: an override's lines are not lines of the file, so messages about its
// nodes report the line of the key it sits under.
YAML::Node unmarked(const YAML::Node& n) {
  if (n.IsScalar()) return YAML::Node(n.Scalar());
  if (n.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const auto& x : n) out.push_back(unmarked(x));
    return out;
  }
  if (n.IsMap()) {
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& kv : n) out[kv.first.Scalar()] = unmarked(kv.second);
    return out;
  }
  return YAML::Node(YAML::NodeType::Null);
}

// Sets o.key in `root` to o.value (parsed as YAML), creating missing mappings on the way.
void apply(YAML::Node& root, const Override& o, const std::string& name) {
  auto fail = [&](const std::string& key, int line, const std::string& what) {
    throw OverrideError(o.text, ConfigError(name, line, key, what));
  };
  YAML::Node value;
  try {
    value = unmarked(YAML::Load(o.value));
  } catch (const YAML::Exception& e) {
    fail(o.key, 0, "the value is not valid YAML: " + e.msg);
  }
  YAML::Node cur = root;  // reset() moves it; assigning would overwrite the tree
  std::string path;
  std::size_t start = 0;
  while (true) {
    const auto dot = o.key.find('.', start);
    const std::string part = o.key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool last = dot == std::string::npos;
    const int line = line_of(cur, 0);
    if (cur.IsSequence()) {
      if (!is_index(part) || std::stoul(part) >= cur.size())
        fail(path, line, "is a list of " + std::to_string(cur.size()) + "; '" + part + "' is not an index into it");
      const std::string here = path + "[" + part + "]";
      if (last) {
        cur[std::stoul(part)] = value;
        return;
      }
      YAML::Node next = cur[std::stoul(part)];
      cur.reset(next);
      path = here;
    } else {
      if (cur.IsScalar()) fail(path, line, "is a single value, not a mapping; there is no '" + part + "' under it");
      if (!cur.IsMap()) cur = YAML::Node(YAML::NodeType::Map);  // null: becomes a mapping in the tree
      if (last) {
        cur[part] = value;
        return;
      }
      YAML::Node next = cur[part];
      cur.reset(next);
      path = join(path, part);
    }
    start = dot + 1;
  }
}

bool related(const std::string& error_key, const std::string& override_key) {
  auto under = [](const std::string& a, const std::string& b) {  // a at or below b
    return a.rfind(b, 0) == 0 && (a.size() == b.size() || a[b.size()] == '.' || a[b.size()] == '[');
  };
  if (override_key.empty()) return true;
  // Override keys index lists with dots (links.3), reader keys with brackets (links[3]).
  std::string k;
  std::size_t start = 0;
  while (true) {
    const auto dot = override_key.find('.', start);
    const std::string part = override_key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    k += is_index(part) && !k.empty() ? "[" + part + "]" : (k.empty() ? "" : ".") + part;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return under(error_key, k) || (!error_key.empty() && under(k, error_key));
}

}  // namespace

void rethrow_naming_override(const ConfigError& e, const std::vector<Override>& overrides) {
  if (!dynamic_cast<const OverrideError*>(&e) && !overrides.empty()) {
    for (const auto& o : overrides)
      if (related(e.key(), o.key)) throw OverrideError(o.text, e);
    // About another key, but the file was read with the overrides applied (one may have added a
    // key that clashes with this one): name them all.
    std::string all;
    for (const auto& o : overrides) all += (all.empty() ? "" : ", ") + o.text;
    throw OverrideError("with " + all + " applied", e);
  }
  throw;
}

namespace {
// A key twice in one mapping: YAML parsers keep one of the two silently (yaml-cpp the first,
// PyYAML the last), so a file that says both is refused, at the second, naming the first's line.
void refuse_duplicate_keys(const YAML::Node& node, const std::string& name, const std::string& path, int depth = 0) {
  if (depth > 256) return;  // deeper than the parser's own limit allows
  if (node.IsSequence()) {
    std::size_t i = 0;
    for (const auto& item : node) refuse_duplicate_keys(item, name, path + "[" + std::to_string(i++) + "]", depth + 1);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, int> first_line;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) continue;
    const std::string key = kv.first.Scalar();
    const std::string at = path.empty() ? key : path + "." + key;
    const int line = kv.first.Mark().line >= 0 ? kv.first.Mark().line + 1 : 0;
    if (auto [it, fresh] = first_line.emplace(key, line); !fresh)
      throw ConfigError(name, line, at,
                        "appears twice in one mapping (first at line " + std::to_string(it->second) +
                            "); a parser would keep one of the two silently, so write it once");
    refuse_duplicate_keys(kv.second, name, at, depth + 1);
  }
}
}  // namespace

Node load_string(const std::string& text, const std::string& name, const std::vector<Override>& overrides) {
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
  if (!root.IsMap()) throw ConfigError(name, 1, "", "expected a YAML mapping at the top level");
  refuse_duplicate_keys(root, name, "");
  for (const auto& o : overrides) apply(root, o, name);
  return Node(root, file, "", 1);
}

Node load_file(const std::filesystem::path& path, const std::vector<Override>& overrides) {
  check_input_file(path, "file");
  std::ifstream in(path);
  if (!in) throw ConfigError(path.string(), 0, "", "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return load_string(ss.str(), path.string(), overrides);
}

}  // namespace reshard::model::yaml

// Reading a sweep spec (sweep.hpp; format: docs/sweep.md) with the strict reader every input file
// uses, so a bad spec is one ConfigError naming its file, line and key.
#include <cstring>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "reshard/model/cost.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/study/sweep.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace reshard::study {

using namespace reshard::model;

namespace {

constexpr std::size_t kMaxPoints = 1'000'000;

// A value as override text: a scalar as written, a list of scalars as a flow list.
std::string value_text(const yaml::Node& n) {
  if (!n.is_seq()) return n.str();
  std::string s = "[";
  for (const auto& x : n.items()) s += (s.size() > 1 ? ", " : "") + x.str();
  return s + "]";
}

// A number as a range writes it: an integer without decimals, otherwise its shortest exact form.
std::string number_text(double v) {
  if (std::abs(v) < 1e15 && v == std::round(v)) return std::to_string(static_cast<long long>(v));
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// One axis: its keys (one, or the members of a zip) and its values, one tuple per step.
struct Axis {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;
  int line = 0;
};

std::vector<std::string> axis_values(const yaml::Node& n) {
  const bool has_values = n.has("values"), has_range = n.has("range");
  if (has_values == has_range) n.fail("an axis needs exactly one of 'values' or 'range'");
  std::vector<std::string> out;
  if (has_values) {
    for (const auto& v : n.at("values").items()) out.push_back(value_text(v));
    if (out.empty()) n.at("values").fail("an axis needs at least one value");
    return out;
  }
  const auto r = n.at("range");
  r.allow_only({"from", "to", "step", "times", "unit"});
  const double from = r.at("from").number(), to = r.at("to").number();
  const std::string unit = r.get("unit") ? r.at("unit").str() : "";
  const auto step = r.get("step"), times = r.get("times");
  if (step.has_value() == times.has_value()) r.fail("a range needs exactly one of 'step' (added) or 'times' (multiplied)");
  if (to < from) r.at("to").fail("the range runs backwards: to " + number_text(to) + " < from " + number_text(from));
  const double s = step ? step->number() : times->number();
  if (step && !(s > 0)) step->fail("must be positive, got " + step->str());
  if (times && !(s > 1)) times->fail("must be more than 1, got " + times->str());
  if (times && !(from > 0)) r.at("from").fail("a multiplied range must start above 0, got " + r.at("from").str());
  const double tolerance = 1e-9 * std::max(std::abs(from), std::abs(to));
  for (double v = from; v <= to + tolerance; v = step ? from + s * static_cast<double>(out.size()) : v * s) {
    if (out.size() == kMaxPoints) r.fail("the range makes more than " + std::to_string(kMaxPoints) + " values");
    out.push_back(number_text(v) + unit);
  }
  return out;
}

Axis read_axis(const yaml::Node& n) {
  Axis a;
  a.line = n.line();
  if (n.has("zip")) {
    n.allow_only({"zip"});
    const auto members = n.at("zip").items();
    if (members.size() < 2) n.at("zip").fail("a zip pairs two or more axes");
    for (const auto& m : members) {
      m.allow_only({"key", "values", "range"});
      const auto values = axis_values(m);
      if (!a.values.empty() && values.size() != a.values.size())
        m.fail("zipped axes must have the same length: " + std::to_string(values.size()) + " values here, " +
               std::to_string(a.values.size()) + " in the first");
      a.values.resize(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) a.values[i].push_back(values[i]);
      a.keys.push_back(m.at("key").str());
    }
    return a;
  }
  n.allow_only({"key", "values", "range"});
  a.keys.push_back(n.at("key").str());
  for (auto& v : axis_values(n)) a.values.push_back({std::move(v)});
  return a;
}

// Checks a strategy line as compare reads it: a named strategy (with parameters) or auto.
void check_strategy(const yaml::Node& n) {
  const std::string s = n.str();
  if (s == "auto") return;
  const std::string name = s.substr(0, s.find(' '));
  const auto& names = strategy_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string known;
    for (const auto& k : names) known += k + ", ";
    n.fail("unknown strategy '" + name + "'; known: " + known + "auto");
  }
  try {
    parse_strategy(s);
  } catch (const PlanError& e) {
    n.fail(e.what());
  }
}

// A profiles entry names a cost parameters file by its extension, a profile otherwise.
bool is_params_file_name(const std::string& entry) {
  for (const char* ext : {".yaml", ".yml", ".json"})
    if (entry.size() > std::strlen(ext) && entry.compare(entry.size() - std::strlen(ext), std::strlen(ext), ext) == 0)
      return true;
  return false;
}

}  // namespace

SweepSpec SweepSpec::parse(const std::string& text, const std::string& name, const std::filesystem::path& base_dir) {
  const auto root = yaml::load_string(text, name);
  root.allow_only({"name", "description", "scenario", "set", "combine", "axes", "strategies", "profiles", "simulate"});
  SweepSpec spec;
  spec.file = name;
  spec.base_dir = base_dir;
  spec.name = root.get("name") ? root.at("name").str() : std::filesystem::path(name).stem().string();
  const std::string scenario = root.at("scenario").str();
  spec.scenario = std::filesystem::path(scenario).is_absolute() ? std::filesystem::path(scenario)
                                                                : (base_dir / scenario).lexically_normal();
  if (std::error_code ec; !std::filesystem::exists(spec.scenario, ec))
    root.at("scenario").fail("no such file: tried " + spec.scenario.string() +
                             " (relative paths are read from the spec's folder)");
  auto override_of = [&](const yaml::Node& at, const std::string& key, const std::string& value) {
    try {
      return parse_override(key + "=" + value, base_dir);
    } catch (const ConfigError& e) {
      at.fail(e.reason());
    }
  };
  if (auto set = root.get("set"))
    for (const auto& [key, value] : set->entries()) spec.base.push_back(override_of(value, key, value_text(value)));

  std::string combine = "product";
  if (auto c = root.get("combine")) {
    combine = c->str();
    if (combine != "product" && combine != "zip") c->fail("expected product or zip, got '" + combine + "'");
  }
  std::vector<Axis> axes;
  const auto axes_node = root.at("axes");
  for (const auto& n : axes_node.items()) axes.push_back(read_axis(n));
  if (axes.empty()) axes_node.fail("a sweep needs at least one axis");
  {
    std::set<std::string> seen;
    for (const auto& a : axes)
      for (const auto& k : a.keys) {
        override_of(axes_node, k, "");  // checks the key's form
        if (!seen.insert(k).second)
          throw ConfigError(name, a.line, "axes", "key '" + k + "' is on two axes");
        spec.keys.push_back(k);
      }
  }
  if (combine == "zip") {
    for (const auto& a : axes)
      if (a.values.size() != axes.front().values.size())
        throw ConfigError(name, a.line, "axes",
                          "combine: zip needs axes of the same length: " + std::to_string(a.values.size()) +
                              " values here, " + std::to_string(axes.front().values.size()) + " in the first");
    for (std::size_t i = 0; i < axes.front().values.size(); ++i) {
      std::vector<std::string> p;
      for (const auto& a : axes) p.insert(p.end(), a.values[i].begin(), a.values[i].end());
      spec.points.push_back(std::move(p));
    }
  } else {
    std::size_t count = 1;
    for (const auto& a : axes) {
      count *= a.values.size();
      if (count > kMaxPoints) axes_node.fail("the product makes more than " + std::to_string(kMaxPoints) + " points");
    }
    for (std::size_t i = 0; i < count; ++i) {  // mixed radix, the last axis fastest
      std::vector<std::string> p;
      std::size_t rest = i, stride = count;
      for (const auto& a : axes) {
        stride /= a.values.size();
        const auto& v = a.values[rest / stride];
        rest %= stride;
        p.insert(p.end(), v.begin(), v.end());
      }
      spec.points.push_back(std::move(p));
    }
  }

  if (auto s = root.get("strategies")) {
    for (const auto& n : s->items()) {
      check_strategy(n);
      spec.strategies.push_back(n.str());
    }
    if (spec.strategies.empty()) s->fail("list at least one strategy");
  } else {
    spec.strategies = strategy_names();
  }
  if (auto p = root.get("profiles")) {
    for (const auto& n : p->items()) {
      spec.profiles.push_back(n.str());
      const std::filesystem::path file = spec.params_file(spec.profiles.size() - 1);
      try {
        CostParams::named_or_loaded(n.str(), file);
      } catch (const ConfigError& e) {
        n.fail(file.empty() ? e.reason() : std::string(e.what()));
      }
    }
    if (spec.profiles.empty()) p->fail("list at least one profile");
  } else {
    spec.profiles = {model::kDefaultProfile};
  }
  if (auto s = root.get("simulate")) spec.simulate = s->boolean();
  return spec;
}

SweepSpec SweepSpec::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path.string(), 0, "", "cannot open sweep spec");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path.string(), path.parent_path());
}

std::filesystem::path SweepSpec::params_file(std::size_t k) const {
  return is_params_file_name(profiles.at(k)) ? base_dir / profiles[k] : std::filesystem::path();
}

void SweepSpec::use_params_file(const std::string& file) {
  CostParams::load(file);  // refused here, before any point runs
  profiles = {std::filesystem::absolute(file).string()};
}

void SweepSpec::add_axis(const std::string& key, const std::vector<std::string>& values) {
  for (const auto& k : keys)
    if (k == key) throw ConfigError(file, 0, key, "the sweep has an axis of '" + key + "' already");
  if (points.size() * values.size() > kMaxPoints)
    throw ConfigError(file, 0, key, "the axes make more than " + std::to_string(kMaxPoints) + " points");
  keys.push_back(key);
  std::vector<std::vector<std::string>> out;
  for (const auto& p : points)
    for (const auto& v : values) {
      out.push_back(p);
      out.back().push_back(v);
    }
  points = std::move(out);
}

std::vector<Override> SweepSpec::overrides(std::size_t point) const {
  std::vector<Override> out = base;
  for (std::size_t k = 0; k < keys.size(); ++k) out.push_back(parse_override(keys[k] + "=" + points.at(point)[k], base_dir));
  return out;
}

}  // namespace reshard::study

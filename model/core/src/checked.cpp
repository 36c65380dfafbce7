#include "reshard/model/checked.hpp"

#include <atomic>
#include <algorithm>
#include <charconv>
#include <cmath>

#include "reshard/model/errors.hpp"

namespace reshard::model::checked {

namespace {
std::atomic<std::int64_t> limit_gpus{ReadLimits{}.gpus};
std::atomic<std::int64_t> limit_tensors{ReadLimits{}.tensors};
}  // namespace

ReadLimits read_limits() { return {limit_gpus.load(), limit_tensors.load()}; }

void set_read_limits(const ReadLimits& limits) {
  limit_gpus = limits.gpus;
  limit_tensors = limits.tensors;
}

std::string cut(std::string_view text) {
  if (text.size() <= kQuoteLimit) return std::string(text);
  std::string out(text.substr(0, kQuoteLimit));
  out.append("... (").append(std::to_string(text.size())).append(" characters)");
  return out;
}

std::string quote(std::string_view text) {
  std::string out(1, '\'');
  out.append(cut(text)).push_back('\'');
  return out;
}

std::optional<std::int64_t> parse_integer(std::string_view s) {
  std::int64_t v = 0;
  if (s.empty() || s.front() == '+') return std::nullopt;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_finite(std::string_view s) {
  double v = 0;
  if (s.empty() || s.front() == '+') return std::nullopt;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::int64_t> mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<std::int64_t> add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::string range_text(std::int64_t lo, std::int64_t hi) { return std::to_string(lo) + ".." + std::to_string(hi); }

JsonWhere JsonWhere::at(std::string_view key) const {
  return {file, path.empty() ? std::string(key) : path + "." + std::string(key)};
}
JsonWhere JsonWhere::at(std::size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }
void JsonWhere::fail(const std::string& what) const { throw ConfigError(file, 0, path, what); }

namespace {
std::string shown(const nlohmann::json& v) { return cut(v.dump()); }
}  // namespace

const nlohmann::json& member(const nlohmann::json& obj, const char* key, const JsonWhere& w) {
  if (!obj.is_object()) w.fail("expected a JSON object, got " + shown(obj));
  const auto it = obj.find(key);
  if (it == obj.end()) w.at(key).fail("missing");
  return *it;
}

std::int64_t integer(const nlohmann::json& v, const JsonWhere& w, std::int64_t lo, std::int64_t hi) {
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) w.fail("expected an integer in " + range_text(lo, hi) + ", got " + shown(v));
    x = static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else {
    w.fail("expected an integer in " + range_text(lo, hi) + ", got " + shown(v));
  }
  if (x < lo || x > hi) w.fail("expected an integer in " + range_text(lo, hi) + ", got " + shown(v));
  return x;
}

double finite(const nlohmann::json& v, const JsonWhere& w) {
  if (!v.is_number()) w.fail("expected a number, got " + shown(v));
  const double x = v.get<double>();
  if (!std::isfinite(x)) w.fail("expected a finite number, got " + shown(v));
  return x;
}

bool boolean(const nlohmann::json& v, const JsonWhere& w) {
  if (!v.is_boolean()) w.fail("expected true or false, got " + shown(v));
  return v.get<bool>();
}

std::string string(const nlohmann::json& v, const JsonWhere& w) {
  if (!v.is_string()) w.fail("expected a string, got " + shown(v));
  return v.get<std::string>();
}

const nlohmann::json& array(const nlohmann::json& v, const JsonWhere& w) {
  if (!v.is_array()) w.fail("expected an array, got " + shown(v));
  return v;
}

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  // Optimal string alignment distance, one row at a time.
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::size_t> two(b.size() + 1), one(b.size() + 1), row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) one[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        row[j] = std::min({one[j] + 1, row[j - 1] + 1, one[j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], two[j - 2] + 1);
      }
      two.swap(one);
      one.swap(row);
    }
    return one[b.size()];
  };
  std::string best;
  std::size_t best_d = std::min<std::size_t>(2, name.size() / 3) + 1;
  for (const auto& c : candidates) {
    if (c == name) continue;
    const std::size_t d = distance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace reshard::model::checked

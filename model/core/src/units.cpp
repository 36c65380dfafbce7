#include "reshard/model/units.hpp"

#include "reshard/model/checked.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace reshard::model {

Bytes operator*(BytesPerSecond r, Seconds t) {
  return Bytes{static_cast<std::int64_t>(std::llround(r.value * t.value))};
}

namespace {

struct Unit {
  std::string_view suffix;
  double factor;
};

// Splits "<number><suffix>" and returns number * factor of the matching suffix.
double parse_with_units(std::string_view full_text, const Unit* units, std::size_t n, const char* what) {
  const std::string shown = checked::cut(full_text);  // quoted in messages, cut
  const std::string_view text = full_text;
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  std::string_view s = trim(text);
  std::size_t split = 0;
  while (split < s.size() && (std::isdigit(static_cast<unsigned char>(s[split])) || s[split] == '.' ||
                              s[split] == '-' || s[split] == '+' || s[split] == 'e' || s[split] == 'E')) {
    // 'e' only counts as exponent when followed by a digit or sign (so "1e3GBps" works but "GBps" does not start here)
    if ((s[split] == 'e' || s[split] == 'E') &&
        !(split + 1 < s.size() && (std::isdigit(static_cast<unsigned char>(s[split + 1])) ||
                                   s[split + 1] == '-' || s[split + 1] == '+')))
      break;
    ++split;
  }
  std::string_view number = s.substr(0, split);
  std::string_view suffix = trim(s.substr(split));
  std::string expected;
  for (std::size_t i = 0; i < n; ++i) expected += (i ? ", " : "") + std::string(units[i].suffix);
  if (number.empty())
    throw std::invalid_argument("expected a " + std::string(what) + " like '" + "12.5" +
                                std::string(units[0].suffix) + "', got '" + shown + "'");
  double v = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || ptr != number.data() + number.size() || !std::isfinite(v))
    throw std::invalid_argument("'" + shown + "' is not a number followed by a unit");
  if (suffix.empty())
    throw std::invalid_argument("'" + shown + "' has no unit; write the " + what +
                                " with one of: " + expected);
  for (std::size_t i = 0; i < n; ++i)
    if (suffix == units[i].suffix) {
      if (v < 0) throw std::invalid_argument("negative " + std::string(what) + " '" + shown + "'");
      if (!std::isfinite(v * units[i].factor))
        throw std::invalid_argument(std::string(what) + " '" + shown + "' is too large");
      return v * units[i].factor;
    }
  throw std::invalid_argument("unknown " + std::string(what) + " unit '" + checked::cut(suffix) + "' in '" +
                              shown + "'; expected one of: " + expected);
}

// Bytes per second as reshard writes them (GB/s) and as configs often do (GBps, GiB/s); bits per
// second as NICs are sold (Gbps, Gbit/s).
constexpr std::array<Unit, 28> kBandwidthUnits{{{"Bps", 1},
                                                {"KBps", 1e3},
                                                {"MBps", 1e6},
                                                {"GBps", 1e9},
                                                {"TBps", 1e12},
                                                {"B/s", 1},
                                                {"KB/s", 1e3},
                                                {"MB/s", 1e6},
                                                {"GB/s", 1e9},
                                                {"TB/s", 1e12},
                                                {"KiB/s", 1024.0},
                                                {"MiB/s", 1024.0 * 1024},
                                                {"GiB/s", 1024.0 * 1024 * 1024},
                                                {"TiB/s", 1024.0 * 1024 * 1024 * 1024},
                                                {"bps", 1.0 / 8},
                                                {"Kbps", 1e3 / 8},
                                                {"Mbps", 1e6 / 8},
                                                {"Gbps", 1e9 / 8},
                                                {"Tbps", 1e12 / 8},
                                                {"bit/s", 1.0 / 8},
                                                {"Kbit/s", 1e3 / 8},
                                                {"Mbit/s", 1e6 / 8},
                                                {"Gbit/s", 1e9 / 8},
                                                {"Tbit/s", 1e12 / 8},
                                                {"Gb/s", 1e9 / 8},
                                                {"Tb/s", 1e12 / 8},
                                                {"Mb/s", 1e6 / 8},
                                                {"Kb/s", 1e3 / 8}}};
constexpr std::array<Unit, 4> kDurationUnits{{{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}}};
constexpr std::array<Unit, 10> kSizeUnits{{{"B", 1},
                                          {"KB", 1e3},
                                          {"MB", 1e6},
                                          {"GB", 1e9},
                                          {"TB", 1e12},
                                          {"PB", 1e15},
                                          {"KiB", 1024.0},
                                          {"MiB", 1024.0 * 1024},
                                          {"GiB", 1024.0 * 1024 * 1024},
                                          {"TiB", 1024.0 * 1024 * 1024 * 1024}}};

std::string fmt(double v, const char* unit) {
  char buf[64];
  double a = std::fabs(v);
  const char* f = a >= 100 ? "%.0f %s" : a >= 10 ? "%.1f %s" : "%.2f %s";
  std::snprintf(buf, sizeof buf, f, v, unit);
  return buf;
}

}  // namespace

BytesPerSecond parse_bandwidth(std::string_view text) {
  const double v = parse_with_units(text, kBandwidthUnits.data(), kBandwidthUnits.size(), "bandwidth");
  if (v > kMostBandwidth.value)
    throw std::invalid_argument("bandwidth '" + checked::cut(text) + "' is above 1 PB/s; no link is that fast");
  return BytesPerSecond{v};
}
Seconds parse_duration(std::string_view text) {
  return Seconds{parse_with_units(text, kDurationUnits.data(), kDurationUnits.size(), "duration")};
}
Bytes parse_size(std::string_view text) {
  const double v = parse_with_units(text, kSizeUnits.data(), kSizeUnits.size(), "size");
  if (v >= 9.2e18) throw std::invalid_argument("size '" + checked::cut(text) + "' does not fit in 64 bits");
  return Bytes{static_cast<std::int64_t>(std::llround(v))};
}

std::string format(Bytes b) {
  double v = b.as_double();
  double a = std::fabs(v);
  if (a >= 1e15) return fmt(v / 1e15, "PB");
  if (a >= 1e12) return fmt(v / 1e12, "TB");
  if (a >= 1e9) return fmt(v / 1e9, "GB");
  if (a >= 1e6) return fmt(v / 1e6, "MB");
  if (a >= 1e3) return fmt(v / 1e3, "KB");
  return std::to_string(b.value) + " B";
}

std::string format(ByteAmount b) {
  const double rounded = std::round(b.value);
  if (std::fabs(b.value) < 1e3 && rounded != b.value) return fmt(b.value, "B");
  return format(Bytes{static_cast<std::int64_t>(rounded)});
}

std::string format(Seconds s) {
  double a = std::fabs(s.value);
  if (a == 0) return "0 s";
  if (a >= 1) return fmt(s.value, "s");
  if (a >= 1e-3) return fmt(s.value * 1e3, "ms");
  if (a >= 1e-6) return fmt(s.value * 1e6, "us");
  return fmt(s.value * 1e9, "ns");
}

std::string format(BytesPerSecond r) {
  double a = std::fabs(r.value);
  if (a == 0) return "0 B/s";
  if (a >= 1e15) return fmt(r.value / 1e15, "PB/s");
  if (a >= 1e12) return fmt(r.value / 1e12, "TB/s");
  if (a >= 1e9) return fmt(r.value / 1e9, "GB/s");
  if (a >= 1e6) return fmt(r.value / 1e6, "MB/s");
  return fmt(r.value, "B/s");
}

}  // namespace reshard::model

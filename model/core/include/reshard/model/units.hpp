// Strong unit types. Every quantity that crosses a function boundary carries its unit in its type;
// files write units as suffixes ("450GBps", "400Gbps", "1.5us", "64MiB") and are parsed here.
//
//   Bytes           exact byte counts (int64): tensor sizes, piece sizes, link loads.
//   Seconds         time (double).
//   BytesPerSecond  bandwidth per direction (double).
//
//   Bytes / BytesPerSecond = Seconds,  BytesPerSecond * Seconds = Bytes (rounded to nearest).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace reshard::model {

struct Bytes {
  std::int64_t value = 0;
  constexpr Bytes() = default;
  constexpr explicit Bytes(std::int64_t v) : value(v) {}
  constexpr Bytes& operator+=(Bytes o) { value += o.value; return *this; }
  constexpr Bytes& operator-=(Bytes o) { value -= o.value; return *this; }
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return Bytes{a.value + b.value}; }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return Bytes{a.value - b.value}; }
  friend constexpr Bytes operator*(Bytes a, std::int64_t k) { return Bytes{a.value * k}; }
  friend constexpr Bytes operator*(std::int64_t k, Bytes a) { return Bytes{a.value * k}; }
  friend constexpr auto operator<=>(Bytes, Bytes) = default;
  constexpr double as_double() const { return static_cast<double>(value); }
};

// An amount of bytes that may be fractional: an equal share of a transfer (an ECMP sub-flow
// carries exactly bytes / k of its operation, docs/design.md §9). Whole Bytes convert to it.
struct ByteAmount {
  double value = 0.0;
  constexpr ByteAmount() = default;
  constexpr explicit ByteAmount(double v) : value(v) {}
  constexpr ByteAmount(Bytes b) : value(b.as_double()) {}  // NOLINT: implicit, every count is an amount
  constexpr ByteAmount& operator+=(ByteAmount o) { value += o.value; return *this; }
  friend constexpr ByteAmount operator+(ByteAmount a, ByteAmount b) { return ByteAmount{a.value + b.value}; }
  friend constexpr auto operator<=>(ByteAmount, ByteAmount) = default;
  constexpr double as_double() const { return value; }
};

struct Seconds {
  double value = 0.0;
  constexpr Seconds() = default;
  constexpr explicit Seconds(double v) : value(v) {}
  constexpr Seconds& operator+=(Seconds o) { value += o.value; return *this; }
  friend constexpr Seconds operator+(Seconds a, Seconds b) { return Seconds{a.value + b.value}; }
  friend constexpr Seconds operator-(Seconds a, Seconds b) { return Seconds{a.value - b.value}; }
  friend constexpr Seconds operator*(Seconds a, double k) { return Seconds{a.value * k}; }
  friend constexpr Seconds operator*(double k, Seconds a) { return Seconds{a.value * k}; }
  friend constexpr double operator/(Seconds a, Seconds b) { return a.value / b.value; }
  friend constexpr auto operator<=>(Seconds, Seconds) = default;
};

struct BytesPerSecond {
  double value = 0.0;
  constexpr BytesPerSecond() = default;
  constexpr explicit BytesPerSecond(double v) : value(v) {}
  constexpr BytesPerSecond& operator+=(BytesPerSecond o) { value += o.value; return *this; }
  friend constexpr BytesPerSecond operator+(BytesPerSecond a, BytesPerSecond b) {
    return BytesPerSecond{a.value + b.value};
  }
  friend constexpr BytesPerSecond operator*(BytesPerSecond a, double k) { return BytesPerSecond{a.value * k}; }
  friend constexpr BytesPerSecond operator*(double k, BytesPerSecond a) { return BytesPerSecond{a.value * k}; }
  friend constexpr double operator/(BytesPerSecond a, BytesPerSecond b) { return a.value / b.value; }
  friend constexpr auto operator<=>(BytesPerSecond, BytesPerSecond) = default;
};

constexpr Seconds operator/(Bytes b, BytesPerSecond r) { return Seconds{b.as_double() / r.value}; }
Bytes operator*(BytesPerSecond r, Seconds t);

namespace literals {
constexpr Bytes operator""_B(unsigned long long v) { return Bytes{static_cast<std::int64_t>(v)}; }
constexpr Bytes operator""_MiB(unsigned long long v) { return Bytes{static_cast<std::int64_t>(v) << 20}; }
constexpr Bytes operator""_GiB(unsigned long long v) { return Bytes{static_cast<std::int64_t>(v) << 30}; }
constexpr Bytes operator""_GB(unsigned long long v) { return Bytes{static_cast<std::int64_t>(v) * 1'000'000'000}; }  // decimal
constexpr Seconds operator""_s(long double v) { return Seconds{static_cast<double>(v)}; }
constexpr Seconds operator""_us(long double v) { return Seconds{static_cast<double>(v) * 1e-6}; }
constexpr BytesPerSecond operator""_GBps(long double v) { return BytesPerSecond{static_cast<double>(v) * 1e9}; }
constexpr BytesPerSecond operator""_GBps(unsigned long long v) { return BytesPerSecond{static_cast<double>(v) * 1e9}; }
constexpr BytesPerSecond operator""_Gbps(unsigned long long v) { return BytesPerSecond{static_cast<double>(v) * 1e9 / 8}; }
}  // namespace literals

// Parsing. Each throws std::invalid_argument with a message saying what was expected; callers that
// know the file and line wrap it into a ConfigError.
//   bandwidth: <number><unit>, unit one of Bps KBps MBps GBps TBps (bytes/s, decimal),
//              bps Kbps Mbps Gbps Tbps (bits/s, decimal). "400Gbps" = 5e10 B/s. At most
//              kMostBandwidth (1 PB/s, a thousand times NVLink 5).
//   duration:  <number><unit>, unit one of s ms us ns. "1.5us" = 1.5e-6 s.
//   size:      <number><unit>, unit one of B KB MB GB TB (decimal) KiB MiB GiB TiB (binary).
inline constexpr BytesPerSecond kMostBandwidth{1e15};
BytesPerSecond parse_bandwidth(std::string_view text);
Seconds parse_duration(std::string_view text);
Bytes parse_size(std::string_view text);

// Human-readable formatting with units ("450 GB/s", "1.94 s", "1.34 TB").
std::string format(Bytes b);
std::string format(ByteAmount b);
std::string format(Seconds s);
std::string format(BytesPerSecond r);

}  // namespace reshard::model

// Checked numbers for every reader (YAML, JSON, CSV): a value read from a file becomes a number of
// the type it is stored in only if it is exactly that kind of number and fits. Integers are never
// wrapped (4294967296 is not GPU 0), never taken from a bool or a float (`true`, `11.7`), floats are
// finite, and products of counts are checked for overflow. Values quoted in messages are cut at
// kQuoteLimit characters, so a hostile 100 000-character value makes a short message.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::model::checked {

inline constexpr std::size_t kQuoteLimit = 80;

// `text` for a message: at most kQuoteLimit characters, then "... (N characters)".
std::string cut(std::string_view text);
// "'text'" cut as above.
std::string quote(std::string_view text);

// The whole of `s` as a decimal integer (optional leading '-'); nullopt when it is anything else
// or does not fit in 64 bits.
std::optional<std::int64_t> parse_integer(std::string_view s);
// The whole of `s` as a finite decimal number; nullopt for nan, inf, trailing text or overflow.
std::optional<double> parse_finite(std::string_view s);

// a * b and a + b, nullopt on 64-bit overflow.
std::optional<std::int64_t> mul(std::int64_t a, std::int64_t b);
std::optional<std::int64_t> add(std::int64_t a, std::int64_t b);

// The largest model and cluster a reader accepts, checked before anything is allocated, so that a
// file asking for more gets a clear error instead of running out of memory. Process-wide; the
// defaults cover frontier scale many times over (Kimi-K3: 9 216 GPUs, about 0.35 M tensors). The
// fuzz harnesses lower them to keep every input cheap.
struct ReadLimits {
  std::int64_t gpus = 4'000'000;     // GPUs of a generated topology
  std::int64_t tensors = 10'000'000;  // tensors of a model's inventory
};
ReadLimits read_limits();
void set_read_limits(const ReadLimits& limits);

// "in lo..hi" for a message.
std::string range_text(std::int64_t lo, std::int64_t hi);

// The candidate a mistyped name most likely meant: the nearest by edit distance (insertions,
// deletions, substitutions, adjacent swaps), when within 2 edits and a third of the name's length;
// "" when none is that near.
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

// JSON readers. Each throws ConfigError(file, 0, path, what): `path` is the JSON path of the value
// (ops[3].buffer), `file` the document's file ("" when it has none).
struct JsonWhere {
  const std::string& file;
  std::string path;
  JsonWhere at(std::string_view key) const;  // path.key
  JsonWhere at(std::size_t index) const;     // path[index]
  [[noreturn]] void fail(const std::string& what) const;
};
// The member `key` of an object (missing or not an object: error).
const nlohmann::json& member(const nlohmann::json& obj, const char* key, const JsonWhere& w);
// An integer in lo..hi: a JSON integer, not a bool, not a float.
std::int64_t integer(const nlohmann::json& v, const JsonWhere& w, std::int64_t lo, std::int64_t hi);
template <class T>
T integer_as(const nlohmann::json& v, const JsonWhere& w, T lo = std::numeric_limits<T>::min(),
             T hi = std::numeric_limits<T>::max()) {
  return static_cast<T>(integer(v, w, lo, hi));
}
double finite(const nlohmann::json& v, const JsonWhere& w);  // a finite JSON number (integer or float)
bool boolean(const nlohmann::json& v, const JsonWhere& w);
std::string string(const nlohmann::json& v, const JsonWhere& w);
const nlohmann::json& array(const nlohmann::json& v, const JsonWhere& w);

}  // namespace reshard::model::checked

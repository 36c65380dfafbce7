// Aligned text tables for the readable output of every command.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace reshard::cli {

class Table {
 public:
  enum class Align { Left, Right };
  // Columns whose header ends with '>' are right-aligned (the '>' is not printed).
  explicit Table(std::vector<std::string> headers);
  void add(std::vector<std::string> row);
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

// A number with a fixed count of decimals ("1.11").
std::string fixed(double v, int digits);

// A count scaled to billions (B) from 1e9, millions (M) from 1e6, thousands (K) below: "1.23 M".
std::string format_count(std::int64_t n);

// "key: value" lines with the values aligned.
void print_fields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace reshard::cli

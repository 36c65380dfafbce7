// Aligned text tables for the readable output of every command.
#pragma once

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

// "key: value" lines with the values aligned.
void print_fields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace reshard::cli

#include "table.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>

namespace reshard::cli {

Table::Table(std::vector<std::string> headers) {
  for (auto& h : headers) {
    if (!h.empty() && h.back() == '>') {
      h.pop_back();
      align_.push_back(Align::Right);
    } else {
      align_.push_back(Align::Left);
    }
    headers_.push_back(h);
  }
}

void Table::add(std::vector<std::string> row) {
  row.resize(headers_.size());
  rows_.push_back(std::move(row));
}

void Table::print(std::ostream& out) const {
  std::vector<std::size_t> width(headers_.size());
  for (std::size_t c = 0; c < headers_.size(); ++c) {
    width[c] = headers_[c].size();
    for (const auto& r : rows_) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::size_t pad = width[c] - cells[c].size();
      if (c) s += "  ";
      if (align_[c] == Align::Right) s += std::string(pad, ' ') + cells[c];
      else s += cells[c] + (c + 1 < cells.size() ? std::string(pad, ' ') : "");
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << '\n';
  };
  line(headers_);
  std::vector<std::string> rule;
  for (auto w : width) rule.push_back(std::string(w, '-'));
  line(rule);
  for (const auto& r : rows_) line(r);
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string format_count(std::int64_t n) {
  char buf[64];
  const double v = static_cast<double>(n);
  if (n >= 1'000'000'000) std::snprintf(buf, sizeof buf, "%.2f B", v / 1e9);
  else if (n >= 1'000'000) std::snprintf(buf, sizeof buf, "%.2f M", v / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2f K", v / 1e3);
  return buf;
}

void print_fields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields) {
  std::size_t w = 0;
  for (const auto& [k, v] : fields) w = std::max(w, k.size());
  for (const auto& [k, v] : fields) out << k << ':' << std::string(w - k.size() + 1, ' ') << v << '\n';
}

}  // namespace reshard::cli

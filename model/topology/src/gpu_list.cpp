#include <algorithm>
#include <stdexcept>

#include "reshard/model/checked.hpp"
#include "reshard/model/topology.hpp"

namespace reshard::model {

std::vector<GpuId> parse_gpu_list(const std::vector<std::string>& items) {
  std::vector<GpuId> out;
  for (const auto& raw : items) {
    std::string s;
    for (char c : raw)
      if (c != ' ') s += c;
    const auto dash = s.find('-', 1);
    auto num = [&](const std::string& t) {
      std::size_t pos = 0;
      long v = -1;
      try {
        v = std::stol(t, &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
      if (pos != t.size() || t.empty() || v < 0)
        throw std::invalid_argument(checked::quote(raw) + " is not a GPU index or range like 0-255");
      // Refused before any range is expanded: no topology has this many GPUs.
      if (v >= kMaxGpus)
        throw std::invalid_argument("GPU " + checked::cut(t) + " in " + checked::quote(raw) + " is beyond " +
                                    std::to_string(kMaxGpus - 1) + ", the largest GPU index reshard reads");
      return static_cast<GpuId>(v);
    };
    if (dash == std::string::npos) {
      out.push_back(num(s));
    } else {
      const GpuId a = num(s.substr(0, dash)), b = num(s.substr(dash + 1));
      if (b < a) throw std::invalid_argument("range " + checked::quote(raw) + " runs backwards");
      if (static_cast<std::int64_t>(out.size()) + (b - a) >= kMaxGpus)
        throw std::invalid_argument("the list names more than " + std::to_string(kMaxGpus) + " GPUs");
      for (GpuId g = a; g <= b; ++g) out.push_back(g);
    }
  }
  return out;
}

std::vector<GpuId> parse_gpu_list(const std::string& text) {
  std::vector<std::string> items;
  for (std::size_t at = 0; at <= text.size();) {
    const auto comma = std::min(text.find(',', at), text.size());
    items.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return parse_gpu_list(items);
}

std::string gpu_ranges(std::vector<GpuId> gpus) {
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  std::string out;
  for (std::size_t i = 0; i < gpus.size();) {
    std::size_t j = i;
    while (j + 1 < gpus.size() && gpus[j + 1] == gpus[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(gpus[i]) + (j > i ? "-" + std::to_string(gpus[j]) : "");
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

}  // namespace reshard::model

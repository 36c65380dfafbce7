#include "reshard/model/overrides.hpp"

#include "reshard/model/errors.hpp"

namespace reshard::model {

Override parse_override(const std::string& text, const std::filesystem::path& base_dir) {
  const std::string shown = "--set " + text;
  const auto eq = text.find('=');
  if (eq == std::string::npos)
    throw ConfigError(shown, 0, "", "expected KEY=VALUE, e.g. destination.tp=16 or topology.cluster.nic_speed=800Gbps");
  Override o{text.substr(0, eq), text.substr(eq + 1), shown};
  if (o.key.empty() || o.key.front() == '.' || o.key.back() == '.' || o.key.find("..") != std::string::npos ||
      o.key.find_first_of(" \t[]") != std::string::npos)
    throw ConfigError(shown, 0, "", "'" + o.key + "' is not a dotted key like destination.tp");
  if ((o.key == "model" || o.key == "topology") && !o.value.empty()) {
    const std::filesystem::path p(o.value);
    if (p.is_relative())
      o.value = ((base_dir.empty() ? std::filesystem::current_path() : std::filesystem::absolute(base_dir)) / p)
                    .lexically_normal()
                    .string();
  }
  return o;
}

std::vector<Override> parse_overrides(const std::vector<std::string>& texts, const std::filesystem::path& base_dir) {
  std::vector<Override> out;
  for (const auto& text : texts) out.push_back(parse_override(text, base_dir));
  return out;
}

}  // namespace reshard::model

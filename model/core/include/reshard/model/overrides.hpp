// `--set KEY=VALUE`: one change to a scenario or to a file it names, applied to the parsed YAML
// tree before the file's reader sees it, so the result is validated exactly like a file and every
// error is the reader's own (file, line, key), prefixed with the override (OverrideError).
//
//   destination.tp=16                    the scenario's destination.tp
//   source.gpus=0-255                    any scenario key; the value is YAML ("[0-7, 16-23]" too)
//   model=models/kimi-k2.yaml            another model file (relative to `base_dir`)
//   topology.cluster.nic_speed=800Gbps   a key of the topology file the scenario names
//   model.num_hidden_layers=4            a key of the model file
//
// A path descends through mappings (missing ones are created) and, by index, through lists
// (topology.links.3.bandwidth). The value replaces what was there, or adds the key.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace reshard::model {

struct Override {
  std::string key;    // dotted path from the root of the file it applies to
  std::string value;  // YAML text
  std::string text;   // as written, for messages: "--set destination.tp=16"
};

// "KEY=VALUE" -> Override{KEY, VALUE, "--set KEY=VALUE"}. A `model` or `topology` value (a file
// path) is made absolute against `base_dir` (empty: the current directory), as a path on the
// command line reads. Throws ConfigError (key "--set") for text without '=' or a malformed key.
Override parse_override(const std::string& key_equals_value, const std::filesystem::path& base_dir = {});
// Every text of a `--set` list, in order.
std::vector<Override> parse_overrides(const std::vector<std::string>& texts, const std::filesystem::path& base_dir = {});

}  // namespace reshard::model

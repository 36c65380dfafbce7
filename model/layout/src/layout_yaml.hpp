// The scenario file's per-framework layout readers (private to reshard_model): each reads its
// framework's keys of a `source:` or `destination:` block (docs/scenario.md), checks them, and
// checks that the layout's world is the `count` GPUs the block lists. Each is defined beside its
// framework's builder (layout_<framework>.cpp); parse_layout (scenario.cpp) picks one by
// `framework`. Errors are ConfigErrors naming file, line and key (yaml_reader.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "reshard/model/layout.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace reshard::model::layouts {

MegatronSpec read_megatron(const yaml::Node& n, std::int64_t count);
VllmSpec read_vllm(const yaml::Node& n, std::int64_t count);
SglangSpec read_sglang(const yaml::Node& n, std::int64_t count);
DTensorSpec read_dtensor(const yaml::Node& n, std::int64_t count);

// A parallel size: a positive integer of at most a million.
std::int32_t small_int(const yaml::Node& n);
// Fails on `n` unless the layout's `world` (what: how it is formed) is the `count` GPUs listed.
void check_world(const yaml::Node& n, std::int64_t count, std::int64_t world, const std::string& what);

}  // namespace reshard::model::layouts

// The reader of a scenario's `source:` or `destination:` block (docs/scenario.md): its `gpus` list
// and its framework's keys (megatron, vllm, sglang, dtensor), each checked by the reader beside its
// framework's builder (layout_<framework>.cpp). Errors are ConfigErrors naming file, line and key.
#pragma once

#include "reshard/model/layout.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace reshard::model {

LayoutSpec parse_layout(const yaml::Node& n);

}  // namespace reshard::model

// Per-framework ShardMap builders (private to reshard_model).
#pragma once

#include <string>
#include <vector>

#include "reshard/model/layout.hpp"

namespace reshard::model::layouts {

ShardMap build_megatron(const Inventory& inv, const MegatronSpec& m, const LayoutSpec& spec);
ShardMap build_vllm(const Inventory& inv, const VllmSpec& v, const LayoutSpec& spec);
ShardMap build_dtensor(const Inventory& inv, const DTensorSpec& d, const LayoutSpec& spec);

// Even split of [0, n) into k parts; part i. Throws PlanError (naming `what`) unless k divides n.
Interval even_split(std::int64_t n, std::int32_t k, std::int32_t i, const std::string& what);
// torch.chunk semantics: chunk size ceil(n / k); part i is [i*c, (i+1)*c) clipped to n (may be empty).
Interval chunk_split(std::int64_t n, std::int32_t k, std::int32_t i);

// The boxes tensor-parallel rank `r` of `tp` holds of tensor `t` under its ParallelRole (Megatron
// and vLLM agree on roles): Replicated -> the whole tensor; ColumnParallel -> dim 0 split evenly
// (each of `column_parts` split separately when present); RowParallel -> dim 1 split evenly;
// VocabParallel -> the vocabulary padded to a multiple of `vocab_pad` split evenly, then clipped to
// the real vocabulary (so the last ranks may hold fewer rows, or none). `heads` > 0 additionally
// requires tp to divide the head count (a split may not cut a head).
std::vector<Box> tp_slice(const TensorInfo& t, std::int32_t tp, std::int32_t r, std::int64_t vocab_pad,
                          std::int64_t heads, const std::string& layout);

// Contiguous split of `layers` layers into `chunks` chunks: the first (layers % chunks) chunks get one
// more layer, unless `explicit_counts` gives the counts (which must sum to `layers`).
std::vector<std::int32_t> split_layers(std::int32_t layers, std::int32_t chunks,
                                       const std::vector<std::int32_t>& explicit_counts, const std::string& layout);

// Ranks (as a RankSet) start + i*stride for i < count, times an optional second axis.
RankSet grid(Rank start, std::vector<RankGrid::Axis> axes);

}  // namespace reshard::model::layouts

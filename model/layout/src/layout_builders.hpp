// Per-framework ShardMap builders (private to reshard_model).
#pragma once

#include <string>
#include <vector>

#include "reshard/model/layout.hpp"

namespace reshard::model::layouts {

ShardMap build_megatron(const Inventory& inv, const MegatronSpec& m, const LayoutSpec& spec);
ShardMap build_vllm(const Inventory& inv, const VllmSpec& v, const LayoutSpec& spec);
ShardMap build_dtensor(const Inventory& inv, const DTensorSpec& d, const LayoutSpec& spec);
ShardMap build_sglang(const Inventory& inv, const SglangSpec& s, const LayoutSpec& spec);

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

// The EP rank holding physical expert slot `s` of `slots` spread over `ep` ranks (ExpertPlacement).
std::int32_t expert_slot_rank(std::int64_t s, std::int64_t slots, std::int32_t ep, ExpertPlacement placement);

// Adds tensor `t` split by its role over `tp` ranks base + i (i < tp), each shard replicated over the
// `replicas` axes, as vLLM's and SGLang's parallel linear layers split it: the vocabulary padded to
// a multiple of 64; q (and o) by whole heads; with fewer KV heads than tp (tp a multiple of their
// count KVH) TP index i holds KV head i / (tp/KVH), replicated over tp/KVH neighbours.
void add_tp_shards(ShardMap& map, const Inventory& inv, const TensorInfo& t, std::int32_t tp, Rank base,
                   const std::vector<RankGrid::Axis>& replicas, const std::string& layout);

// A gpt-oss expert tensor's box on MoE tensor-parallel rank f of n (vLLM's and SGLang's gpt-oss
// loaders): c = ceil(I / block / n) * block intermediate rows per rank, rank f holding
// [f*c, min((f+1)*c, I)) -- gate_up and its bias rows 2x that (interleaved pairs), down's columns;
// down_proj_bias whole on rank 0 only. Empty when the rank holds none of it.
Box gpt_oss_moe_tp_box(const TensorInfo& t, std::int64_t I, std::int32_t n, std::int32_t f, std::int64_t block);

// Ranks (as a RankSet) start + i*stride for i < count, times an optional second axis.
RankSet grid(Rank start, std::vector<RankGrid::Axis> axes);

}  // namespace reshard::model::layouts

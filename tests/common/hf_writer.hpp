// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Writes Hugging Face Llama checkpoints, so that the loader (refdec/torch/hf_loader.hpp) can be
// tested on round trips and sharding without downloading one. Test-side only: refdec reads
// checkpoints, it does not produce them.

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/safetensors.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

namespace torch_detail {

inline void write_json_file(const std::filesystem::path& path, const nlohmann::json& value) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REFDEC_CHECK_IO(out.good(), "cannot create " << path);
  out << value.dump(2) << "\n";
  out.close();
  REFDEC_CHECK_IO(out.good(), "failed to write " << path);
}

inline const char* hf_torch_dtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kDouble: return "float64";
    default: return nullptr;
  }
}

// Reorders the rows of a q or k projection [heads * head_dim, in] from interleaved rotary pairs
// (2i, 2i+1) to half-split pairs (i, i + head_dim/2), as Hugging Face's
// convert_llama_weights_to_hf.py does; rows of each head move within that head only.
inline at::Tensor interleaved_to_half_rows(const at::Tensor& w, std::int64_t heads) {
  const std::int64_t head_dim = w.size(0) / heads, in = w.size(1);
  return w.view({heads, head_dim / 2, 2, in}).transpose(1, 2).reshape({heads * head_dim, in});
}

}  // namespace torch_detail

/// Saves `model` as a Hugging Face Llama checkpoint in `dir` (created if needed): config.json and
/// the weights in the model's dtype, in model.safetensors when `num_shards` is 1, else in
/// model-0000k-of-0000n.safetensors files listed by model.safetensors.index.json. A stale
/// model.safetensors or index left by an earlier save of the other kind is removed, since it
/// would take precedence or mislead. An interleaved-rotary model (llama2.c) has its q and k
/// projections permuted to the half-split convention, so that load_hf_llama() returns a model
/// computing the same function. Throws refdec::ArgumentError for a dtype Hugging Face configs
/// cannot name (only float32, float16, bfloat16 and float64 are allowed) or a shard count outside
/// [1, number of tensors], and refdec::IoError for an I/O failure.
inline void save_hf_llama(const LlamaModel& model, const std::filesystem::path& dir, int num_shards = 1) {
  const auto& c = model.config();
  const auto& mw = model.weights();
  const char* torch_dtype = torch_detail::hf_torch_dtype(model.dtype());
  REFDEC_CHECK(torch_dtype != nullptr, "save_hf_llama: cannot save a model of type " << model.dtype());
  REFDEC_CHECK(!model.packed(), "save_hf_llama: the model's linear layers are packed and their weights released");

  std::vector<std::pair<std::string, at::Tensor>> tensors;
  tensors.emplace_back("model.embed_tokens.weight", mw.embedding);
  const bool permute = c.rope_style == RopeStyle::kInterleaved;
  for (std::size_t i = 0; i < mw.layers.size(); ++i) {
    const auto& l = mw.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    tensors.emplace_back(p + "self_attn.q_proj.weight",
                         permute ? torch_detail::interleaved_to_half_rows(l.wq, c.n_heads) : l.wq);
    tensors.emplace_back(p + "self_attn.k_proj.weight",
                         permute ? torch_detail::interleaved_to_half_rows(l.wk, c.n_kv_heads) : l.wk);
    tensors.emplace_back(p + "self_attn.v_proj.weight", l.wv);
    tensors.emplace_back(p + "self_attn.o_proj.weight", l.wo);
    tensors.emplace_back(p + "mlp.gate_proj.weight", l.w1);
    tensors.emplace_back(p + "mlp.up_proj.weight", l.w3);
    tensors.emplace_back(p + "mlp.down_proj.weight", l.w2);
    tensors.emplace_back(p + "input_layernorm.weight", l.attn_norm);
    tensors.emplace_back(p + "post_attention_layernorm.weight", l.ffn_norm);
  }
  tensors.emplace_back("model.norm.weight", mw.final_norm);
  // A model whose output shares the embedding's storage is tied whatever its config says.
  const bool tied = mw.output.is_same(mw.embedding);
  if (!tied) tensors.emplace_back("lm_head.weight", mw.output);
  REFDEC_CHECK(num_shards >= 1 && static_cast<std::size_t>(num_shards) <= tensors.size(),
               "save_hf_llama: num_shards " << num_shards << " must be in [1, " << tensors.size() << "]");

  std::filesystem::create_directories(dir);
  nlohmann::json config = {
      {"architectures", nlohmann::json::array({"LlamaForCausalLM"})},
      {"model_type", "llama"},
      {"hidden_size", c.dim},
      {"intermediate_size", c.hidden_dim},
      {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_seq_len},
      {"rms_norm_eps", c.norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"tie_word_embeddings", tied},
      {"bos_token_id", c.bos_id},
      {"eos_token_id", c.eos_id},
      {"torch_dtype", torch_dtype},
  };
  torch_detail::write_json_file(dir / "config.json", config);

  // transformers refuses safetensors files whose metadata lacks the framework.
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  std::error_code ec;
  if (num_shards == 1) {
    std::filesystem::remove(dir / "model.safetensors.index.json", ec);
    write_safetensors(dir / "model.safetensors", tensors, metadata);
    return;
  }
  // Consecutive tensors per shard, cutting when a shard passes its share of the bytes, and
  // early enough that every shard gets at least one tensor.
  std::uint64_t total = 0;
  for (const auto& [name, t] : tensors) total += static_cast<std::uint64_t>(t.numel() * t.element_size());
  const auto n = static_cast<std::size_t>(num_shards);
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> shards(n);
  std::uint64_t done = 0;
  std::size_t s = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    shards[s].push_back(tensors[i]);
    done += static_cast<std::uint64_t>(tensors[i].second.numel() * tensors[i].second.element_size());
    const std::size_t tensors_left = tensors.size() - i - 1, shards_left = n - 1 - s;
    if (shards_left > 0 && (done * n >= total * (s + 1) || tensors_left == shards_left)) ++s;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  std::filesystem::remove(dir / "model.safetensors", ec);
  for (std::size_t k = 0; k < n; ++k) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", k + 1, n);
    write_safetensors(dir / name, shards[k], metadata);
    for (const auto& [tensor, t] : shards[k]) weight_map[tensor] = name;
  }
  nlohmann::json index = nlohmann::json::object();
  index["metadata"]["total_size"] = total;
  index["weight_map"] = std::move(weight_map);
  torch_detail::write_json_file(dir / "model.safetensors.index.json", index);
}

REFDEC_TORCH_NAMESPACE_END

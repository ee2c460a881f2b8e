// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Loads and saves Hugging Face Llama-family checkpoints: a directory with config.json and
// safetensors weights, in one file or sharded with an index.

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/safetensors.hpp"

REFDEC_NAMESPACE_BEGIN

namespace detail {

inline nlohmann::json read_json_file(const std::filesystem::path& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  REFDEC_CHECK(in.good(), "cannot open " << what << " " << path);
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    REFDEC_CHECK(false, what << " " << path << " is not valid JSON: " << e.what());
  }
  return value;
}

inline void write_json_file(const std::filesystem::path& path, const nlohmann::json& value) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REFDEC_CHECK(out.good(), "cannot create " << path);
  out << value.dump(2) << "\n";
  out.close();
  REFDEC_CHECK(out.good(), "failed to write " << path);
}

// Reads the fields of a Hugging Face config.json that LlamaConfig needs, naming the file and the
// field in every error.
class HfConfigReader {
 public:
  HfConfigReader(const nlohmann::json& json, std::filesystem::path path) : json_(json), path_(std::move(path)) {}

  // The field, or nullopt when absent or null (Hugging Face writes null for "use the default").
  const nlohmann::json* find(const char* field) const {
    const auto it = json_.find(field);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  std::int64_t integer(const char* field, std::optional<std::int64_t> fallback = std::nullopt) const {
    const auto* v = find(field);
    if (v == nullptr) {
      REFDEC_CHECK(fallback.has_value(), "Hugging Face config " << path_ << " lacks the required field \""
                                                                << field << "\"");
      return *fallback;
    }
    REFDEC_CHECK(v->is_number_integer(), "Hugging Face config " << path_ << ": \"" << field
                                                                << "\" must be an integer, got " << v->dump());
    return v->get<std::int64_t>();
  }
  double number(const char* field, std::optional<double> fallback = std::nullopt) const {
    const auto* v = find(field);
    if (v == nullptr) {
      REFDEC_CHECK(fallback.has_value(), "Hugging Face config " << path_ << " lacks the required field \""
                                                                << field << "\"");
      return *fallback;
    }
    REFDEC_CHECK(v->is_number(), "Hugging Face config " << path_ << ": \"" << field << "\" must be a number, got "
                                                        << v->dump());
    return v->get<double>();
  }
  bool boolean(const char* field, bool fallback) const {
    const auto* v = find(field);
    if (v == nullptr) return fallback;
    REFDEC_CHECK(v->is_boolean(), "Hugging Face config " << path_ << ": \"" << field << "\" must be true or false, got "
                                                         << v->dump());
    return v->get<bool>();
  }
  // A token id; recent configs give a list of end tokens, of which LlamaConfig keeps the first.
  std::int64_t token(const char* field, std::int64_t fallback) const {
    const auto* v = find(field);
    if (v == nullptr) return fallback;
    const auto* id = v;
    if (v->is_array()) {
      if (v->empty()) return fallback;
      id = &(*v)[0];
    }
    REFDEC_CHECK(id->is_number_integer(), "Hugging Face config " << path_ << ": \"" << field
                                                                 << "\" must be a token id, got " << v->dump());
    return id->get<std::int64_t>();
  }

 private:
  const nlohmann::json& json_;
  std::filesystem::path path_;
};

inline LlamaConfig read_hf_llama_config(const std::filesystem::path& path) {
  const auto json = read_json_file(path, "Hugging Face config");
  REFDEC_CHECK(json.is_object(), "Hugging Face config " << path << " is not a JSON object");
  const HfConfigReader r(json, path);
  const auto* type = r.find("model_type");
  REFDEC_CHECK(type != nullptr, "Hugging Face config " << path << " lacks the required field \"model_type\"");
  REFDEC_CHECK(type->is_string() && (*type == "llama" || *type == "mistral"),
               "Hugging Face config " << path << " has model_type " << type->dump()
                                      << "; only \"llama\" and \"mistral\" are supported");
  // Features the reference model does not implement: refuse rather than compute something else.
  REFDEC_CHECK(r.find("rope_scaling") == nullptr,
               "Hugging Face config " << path << " sets rope_scaling " << json["rope_scaling"].dump()
                                      << ", which refdec does not support");
  REFDEC_CHECK(!r.boolean("attention_bias", false),
               "Hugging Face config " << path << " sets attention_bias, which refdec does not support");
  REFDEC_CHECK(!r.boolean("mlp_bias", false),
               "Hugging Face config " << path << " sets mlp_bias, which refdec does not support");
  if (const auto* act = r.find("hidden_act"))
    REFDEC_CHECK(*act == "silu", "Hugging Face config " << path << " has hidden_act " << act->dump()
                                                        << "; only \"silu\" is supported");

  LlamaConfig c;
  c.dim = r.integer("hidden_size");
  c.hidden_dim = r.integer("intermediate_size");
  c.n_layers = r.integer("num_hidden_layers");
  c.n_heads = r.integer("num_attention_heads");
  c.n_kv_heads = r.integer("num_key_value_heads", c.n_heads);
  c.vocab_size = r.integer("vocab_size");
  c.max_seq_len = r.integer("max_position_embeddings");
  c.norm_eps = r.number("rms_norm_eps");
  c.rope_theta = r.number("rope_theta", 10000.0);
  c.tied_embeddings = r.boolean("tie_word_embeddings", false);
  c.bos_id = r.token("bos_token_id", c.bos_id);
  c.eos_id = r.token("eos_token_id", c.eos_id);
  c.rope_style = RopeStyle::kHalf;
  if (c.n_heads > 0 && r.find("head_dim") != nullptr) {
    const auto head_dim = r.integer("head_dim");
    REFDEC_CHECK(head_dim == c.dim / c.n_heads, "Hugging Face config " << path << " has head_dim " << head_dim
                                                                       << " != hidden_size / num_attention_heads = "
                                                                       << c.dim / c.n_heads
                                                                       << ", which refdec does not support");
  }
  // Mistral's sliding-window attention equals full attention over sequences no longer than the
  // window, so capping the context keeps the model exact.
  if (const auto* window = r.find("sliding_window")) {
    const auto w = r.integer("sliding_window");
    REFDEC_CHECK(w > 0, "Hugging Face config " << path << " has sliding_window " << window->dump());
    c.max_seq_len = std::min(c.max_seq_len, w);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    REFDEC_CHECK(false, "Hugging Face config " << path << " is inconsistent: " << e.what());
  }
  return c;
}

// The weights of a checkpoint directory: model.safetensors, or the shards named by
// model.safetensors.index.json, each opened on first use.
class HfWeightSource {
 public:
  explicit HfWeightSource(const std::filesystem::path& dir) : dir_(dir) {
    const auto single = dir / "model.safetensors";
    const auto index = dir / "model.safetensors.index.json";
    if (std::filesystem::exists(single)) {
      files_.emplace("model.safetensors", std::make_unique<SafetensorsFile>(single));
      single_ = "model.safetensors";
      return;
    }
    REFDEC_CHECK(std::filesystem::exists(index),
                 "Hugging Face checkpoint " << dir << " has neither model.safetensors nor model.safetensors.index.json");
    const auto json = read_json_file(index, "safetensors index");
    REFDEC_CHECK(json.is_object() && json.contains("weight_map") && json["weight_map"].is_object(),
                 "safetensors index " << index << " has no \"weight_map\" object");
    for (const auto& [name, file] : json["weight_map"].items()) {
      REFDEC_CHECK(file.is_string(), "safetensors index " << index << ": the shard of \"" << name
                                                          << "\" must be a file name, got " << file.dump());
      const auto shard = file.get<std::string>();
      // A shard must be a plain file name inside the checkpoint directory.
      const std::filesystem::path p(shard);
      REFDEC_CHECK(!shard.empty() && p == p.filename() && shard != "." && shard != "..",
                   "safetensors index " << index << ": shard \"" << shard << "\" of \"" << name
                                        << "\" is not a file name in the checkpoint directory");
      weight_map_.emplace(name, shard);
    }
  }

  // Tensor `name` as `dtype` on `device`, checked to have `shape`.
  at::Tensor get(const std::string& name, const std::vector<std::int64_t>& shape, at::ScalarType dtype,
                 at::Device device) {
    const SafetensorsFile& file = locate(name);
    const auto& info = file.info(name);
    REFDEC_CHECK(info.shape == shape, "Hugging Face checkpoint " << dir_ << ": tensor \"" << name << "\" has shape "
                                                                 << at::IntArrayRef(info.shape) << ", expected "
                                                                 << at::IntArrayRef(shape));
    return file.get(name, dtype, device);
  }

  bool contains(const std::string& name) {
    if (!single_.empty()) return files_.at(single_)->contains(name);
    return weight_map_.count(name) != 0;
  }

 private:
  const SafetensorsFile& locate(const std::string& name) {
    std::string shard = single_;
    if (shard.empty()) {
      const auto it = weight_map_.find(name);
      REFDEC_CHECK(it != weight_map_.end(), "Hugging Face checkpoint " << dir_ << " lacks tensor \"" << name
                                                                       << "\" (not in model.safetensors.index.json)");
      shard = it->second;
    }
    auto& file = files_[shard];
    if (!file) {
      const auto path = dir_ / shard;
      REFDEC_CHECK(std::filesystem::exists(path), "Hugging Face checkpoint " << dir_ << ": shard " << path
                                                                             << " of tensor \"" << name
                                                                             << "\" does not exist");
      file = std::make_unique<SafetensorsFile>(path);
    }
    REFDEC_CHECK(file->contains(name), "Hugging Face checkpoint " << dir_ << " lacks tensor \"" << name << "\" (not in "
                                                                  << file->path().filename() << ")");
    return *file;
  }

  std::filesystem::path dir_;
  std::string single_;                             // "model.safetensors" when not sharded
  std::map<std::string, std::string> weight_map_;  // tensor name -> shard file name
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;  // shard file name -> open file
};

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

}  // namespace detail

/// Loads a Hugging Face Llama or Mistral checkpoint directory: config.json and the weights in
/// model.safetensors or in the shards listed by model.safetensors.index.json. Weights are
/// converted to `dtype` on `device`. The model uses half-split rotary pairs (RopeStyle::kHalf).
/// Mistral's sliding window caps max_seq_len, within which it equals full attention.
/// Throws refdec::Error for a missing or invalid file, a model_type other than llama or mistral,
/// a missing required field, an unsupported feature (rope_scaling, attention or MLP biases, a
/// head_dim other than hidden_size / num_attention_heads), or a missing or misshapen tensor.
inline LlamaModel load_hf_llama(const std::filesystem::path& dir, at::ScalarType dtype = at::kFloat,
                                at::Device device = at::kCPU) {
  REFDEC_CHECK(std::filesystem::is_directory(dir), "Hugging Face checkpoint " << dir << " is not a directory");
  const LlamaConfig c = detail::read_hf_llama_config(dir / "config.json");
  detail::HfWeightSource source(dir);
  const std::int64_t d = c.dim, hd = c.head_dim(), h = c.hidden_dim;
  auto get = [&](const std::string& name, std::vector<std::int64_t> shape) {
    return source.get(name, shape, dtype, device);
  };
  LlamaWeights w;
  w.embedding = get("model.embed_tokens.weight", {c.vocab_size, d});
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LlamaLayerWeights l;
    l.attn_norm = get(p + "input_layernorm.weight", {d});
    l.wq = get(p + "self_attn.q_proj.weight", {c.n_heads * hd, d});
    l.wk = get(p + "self_attn.k_proj.weight", {c.n_kv_heads * hd, d});
    l.wv = get(p + "self_attn.v_proj.weight", {c.n_kv_heads * hd, d});
    l.wo = get(p + "self_attn.o_proj.weight", {d, c.n_heads * hd});
    l.ffn_norm = get(p + "post_attention_layernorm.weight", {d});
    l.w1 = get(p + "mlp.gate_proj.weight", {h, d});
    l.w2 = get(p + "mlp.down_proj.weight", {d, h});
    l.w3 = get(p + "mlp.up_proj.weight", {h, d});
    w.layers.push_back(std::move(l));
  }
  w.final_norm = get("model.norm.weight", {d});
  // With tied embeddings Hugging Face ignores any lm_head.weight in the file, and so do we.
  w.output = c.tied_embeddings ? w.embedding : get("lm_head.weight", {c.vocab_size, d});
  return LlamaModel(c, std::move(w));
}

/// Saves `model` as a Hugging Face Llama checkpoint in `dir` (created if needed): config.json and
/// the weights in the model's dtype, in model.safetensors when `num_shards` is 1, else in
/// model-0000k-of-0000n.safetensors files listed by model.safetensors.index.json. A stale
/// model.safetensors or index left by an earlier save of the other kind is removed, since it
/// would take precedence or mislead. An interleaved-rotary model (llama2.c) has its q and k
/// projections permuted to the half-split convention, so that load_hf_llama() returns a model
/// computing the same function. Throws refdec::Error for a dtype Hugging Face configs cannot name
/// (only float32, float16, bfloat16 and float64 are allowed), a shard count outside
/// [1, number of tensors], or an I/O failure.
inline void save_hf_llama(const LlamaModel& model, const std::filesystem::path& dir, int num_shards = 1) {
  const auto& c = model.config();
  const auto& mw = model.weights();
  const char* torch_dtype = detail::hf_torch_dtype(model.dtype());
  REFDEC_CHECK(torch_dtype != nullptr, "save_hf_llama: cannot save a model of type " << model.dtype());

  std::vector<std::pair<std::string, at::Tensor>> tensors;
  tensors.emplace_back("model.embed_tokens.weight", mw.embedding);
  const bool permute = c.rope_style == RopeStyle::kInterleaved;
  for (std::size_t i = 0; i < mw.layers.size(); ++i) {
    const auto& l = mw.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    tensors.emplace_back(p + "self_attn.q_proj.weight",
                         permute ? detail::interleaved_to_half_rows(l.wq, c.n_heads) : l.wq);
    tensors.emplace_back(p + "self_attn.k_proj.weight",
                         permute ? detail::interleaved_to_half_rows(l.wk, c.n_kv_heads) : l.wk);
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
  detail::write_json_file(dir / "config.json", config);

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
  detail::write_json_file(dir / "model.safetensors.index.json", index);
}

REFDEC_NAMESPACE_END

// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Loads Hugging Face Llama-family checkpoints: a directory with config.json and safetensors
// weights, in one file or sharded with an index. (tests/common/hf_writer.hpp writes them.)

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/torch/abi.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/safetensors.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

namespace torch_detail {

inline nlohmann::json read_json_file(const std::filesystem::path& path, const char* what) {
  const std::string text = read_file_bytes(path, what);  // regular files only: a directory is named as such
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    REFDEC_CHECK_IO(false, what << " " << path << " is not valid JSON: " << e.what());
  }
  return value;
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
      REFDEC_CHECK_IO(fallback.has_value(), "Hugging Face config " << path_ << " lacks the required field \"" << field << "\"");
      return *fallback;
    }
    REFDEC_CHECK_IO(v->is_number_integer(),
                    "Hugging Face config " << path_ << ": \"" << field << "\" must be an integer, got " << v->dump());
    return v->get<std::int64_t>();
  }
  double number(const char* field, std::optional<double> fallback = std::nullopt) const {
    const auto* v = find(field);
    if (v == nullptr) {
      REFDEC_CHECK_IO(fallback.has_value(), "Hugging Face config " << path_ << " lacks the required field \"" << field << "\"");
      return *fallback;
    }
    REFDEC_CHECK_IO(v->is_number(), "Hugging Face config " << path_ << ": \"" << field << "\" must be a number, got " << v->dump());
    return v->get<double>();
  }
  bool boolean(const char* field, bool fallback) const {
    const auto* v = find(field);
    if (v == nullptr) return fallback;
    REFDEC_CHECK_IO(v->is_boolean(), "Hugging Face config " << path_ << ": \"" << field << "\" must be true or false, got " << v->dump());
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
    REFDEC_CHECK_IO(id->is_number_integer(),
                    "Hugging Face config " << path_ << ": \"" << field << "\" must be a token id, got " << v->dump());
    return id->get<std::int64_t>();
  }

 private:
  const nlohmann::json& json_;
  std::filesystem::path path_;
};

inline LlamaConfig read_hf_llama_config(const std::filesystem::path& path) {
  const auto json = read_json_file(path, "Hugging Face config");
  REFDEC_CHECK_IO(json.is_object(), "Hugging Face config " << path << " is not a JSON object");
  const HfConfigReader r(json, path);
  const auto* type = r.find("model_type");
  REFDEC_CHECK_IO(type != nullptr, "Hugging Face config " << path << " lacks the required field \"model_type\"");
  REFDEC_CHECK_IO(type->is_string() && (*type == "llama" || *type == "mistral"),
                  "Hugging Face config " << path << " has model_type " << type->dump() << "; only \"llama\" and \"mistral\" are supported");
  // Features the reference model does not implement: refuse rather than compute something else.
  REFDEC_CHECK_IO(r.find("rope_scaling") == nullptr, "Hugging Face config " << path << " sets rope_scaling " << json["rope_scaling"].dump()
                                                                            << ", which refdec does not support");
  REFDEC_CHECK_IO(!r.boolean("attention_bias", false),
                  "Hugging Face config " << path << " sets attention_bias, which refdec does not support");
  REFDEC_CHECK_IO(!r.boolean("mlp_bias", false), "Hugging Face config " << path << " sets mlp_bias, which refdec does not support");
  if (const auto* act = r.find("hidden_act"))
    REFDEC_CHECK_IO(*act == "silu", "Hugging Face config " << path << " has hidden_act " << act->dump() << "; only \"silu\" is supported");

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
  // Ids the file gives must lie in the vocabulary (the defaults are left to LlamaConfig).
  for (const char* field : {"bos_token_id", "eos_token_id"}) {
    if (r.find(field) == nullptr) continue;
    const std::int64_t id = r.token(field, 0);
    REFDEC_CHECK_IO(id >= 0 && id < c.vocab_size, "Hugging Face config " << path << ": \"" << field << "\" " << id
                                                                         << " is outside the vocabulary [0, " << c.vocab_size << ")");
  }
  c.rope_style = RopeStyle::kHalf;
  if (c.n_heads > 0 && r.find("head_dim") != nullptr) {
    const auto head_dim = r.integer("head_dim");
    REFDEC_CHECK_IO(head_dim == c.dim / c.n_heads, "Hugging Face config " << path << " has head_dim " << head_dim
                                                                          << " != hidden_size / num_attention_heads = " << c.dim / c.n_heads
                                                                          << ", which refdec does not support");
  }
  // Mistral's sliding-window attention equals full attention over sequences no longer than the
  // window, so capping the context keeps the model exact.
  if (const auto* window = r.find("sliding_window")) {
    const auto w = r.integer("sliding_window");
    REFDEC_CHECK_IO(w > 0, "Hugging Face config " << path << " has sliding_window " << window->dump());
    c.max_seq_len = std::min(c.max_seq_len, w);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    REFDEC_CHECK_IO(false, "Hugging Face config " << path << " is inconsistent: " << detail::message_of(e));
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
    REFDEC_CHECK_IO(std::filesystem::exists(index),
                    "Hugging Face checkpoint " << dir << " has neither model.safetensors nor model.safetensors.index.json");
    const auto json = read_json_file(index, "safetensors index");
    REFDEC_CHECK_IO(json.is_object() && json.contains("weight_map") && json["weight_map"].is_object(),
                    "safetensors index " << index << " has no \"weight_map\" object");
    for (const auto& [name, file] : json["weight_map"].items()) {
      REFDEC_CHECK_IO(file.is_string(),
                      "safetensors index " << index << ": the shard of \"" << name << "\" must be a file name, got " << file.dump());
      const auto shard = file.get<std::string>();
      // A shard must be a plain file name inside the checkpoint directory.
      const std::filesystem::path p(shard);
      REFDEC_CHECK_IO(!shard.empty() && p == p.filename() && shard != "." && shard != "..",
                      "safetensors index " << index << ": shard \"" << shard << "\" of \"" << name
                                           << "\" is not a file name in the checkpoint directory");
      weight_map_.emplace(name, shard);
    }
  }

  // Tensor `name` as `dtype` on `device`, checked to have `shape`.
  at::Tensor get(const std::string& name, const std::vector<std::int64_t>& shape, at::ScalarType dtype, at::Device device) {
    const SafetensorsFile& file = locate(name);
    const auto& info = file.info(name);
    REFDEC_CHECK_IO(info.shape == shape, "Hugging Face checkpoint " << dir_ << ": tensor \"" << name << "\" has shape "
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
      REFDEC_CHECK_IO(it != weight_map_.end(),
                      "Hugging Face checkpoint " << dir_ << " lacks tensor \"" << name << "\" (not in model.safetensors.index.json)");
      shard = it->second;
    }
    auto& file = files_[shard];
    if (!file) {
      const auto path = dir_ / shard;
      REFDEC_CHECK_IO(std::filesystem::exists(path),
                      "Hugging Face checkpoint " << dir_ << ": shard " << path << " of tensor \"" << name << "\" does not exist");
      file = std::make_unique<SafetensorsFile>(path);
    }
    REFDEC_CHECK_IO(file->contains(name),
                    "Hugging Face checkpoint " << dir_ << " lacks tensor \"" << name << "\" (not in " << file->path().filename() << ")");
    return *file;
  }

  std::filesystem::path dir_;
  std::string single_;                                             // "model.safetensors" when not sharded
  std::map<std::string, std::string> weight_map_;                  // tensor name -> shard file name
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;  // shard file name -> open file
};

}  // namespace torch_detail

/// Loads a Hugging Face Llama or Mistral checkpoint directory: config.json and the weights in
/// model.safetensors or in the shards listed by model.safetensors.index.json. Weights are
/// converted to `dtype` on `device`; `kernel` picks the linear layers' kernel and `choice` (LinearChoice::parse() of an earlier
/// load's linear_choice().describe()) skips its measurement (LlamaModel's constructor). The model uses half-split rotary pairs
/// (RopeStyle::kHalf). Mistral's sliding window caps max_seq_len, within which it equals full attention. Throws refdec::IoError for a
/// missing or invalid file, a model_type other than llama or mistral, a missing required field, an unsupported feature (rope_scaling,
/// attention or MLP biases, a head_dim other than hidden_size / num_attention_heads), or a missing or misshapen tensor.
inline LlamaModel load_hf_llama(const std::filesystem::path& dir, at::ScalarType dtype = at::kFloat, at::Device device = at::kCPU,
                                LinearKernel kernel = LinearKernel::kAuto, std::optional<LinearChoice> choice = std::nullopt) {
  REFDEC_CHECK_IO(std::filesystem::is_directory(dir), "Hugging Face checkpoint " << dir << " is not a directory");
  const LlamaConfig c = torch_detail::read_hf_llama_config(dir / "config.json");
  torch_detail::HfWeightSource source(dir);
  const std::int64_t d = c.dim, hd = c.head_dim(), h = c.hidden_dim;
  auto get = [&](const std::string& name, std::vector<std::int64_t> shape) { return source.get(name, shape, dtype, device); };
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
  return LlamaModel(c, std::move(w), kernel, std::move(choice));
}

REFDEC_TORCH_NAMESPACE_END

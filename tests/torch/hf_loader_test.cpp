// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The safetensors reader and writer, and Hugging Face Llama checkpoints: round trips, sharding,
// the rotary permutation from llama2.c, and the errors for malformed files.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/step_plan.hpp"
#include "refdec/torch/contiguous_kv_store.hpp"
#include "common/hf_writer.hpp"
#include "refdec/torch/hf_loader.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/llama2c_loader.hpp"
#include "refdec/torch/safetensors.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;
namespace fs = std::filesystem;

using refdec_test::TempDir;

// Runs `fn`, expecting a refdec::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
    return;
  }
  ADD_FAILURE() << "no refdec::Error thrown";
}

// A safetensors file made of a raw header and `data_bytes` zero bytes of data.
void write_raw(const fs::path& path, const std::string& header, std::size_t data_bytes) {
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_json(const fs::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2);
}

// ---------------------------------------------------------------------------------------------
// safetensors

TEST(Safetensors, RoundTripKeepsTypesShapesAndExactValues) {
  TempDir dir;
  auto gen = at::detail::createCPUGenerator(7);
  const auto f = at::randn({3, 5}, gen, at::TensorOptions().dtype(at::kFloat));
  std::vector<std::pair<std::string, at::Tensor>> tensors = {
      {"f32", f},
      {"f64", at::randn({2, 2, 3}, gen, at::TensorOptions().dtype(at::kDouble))},
      {"f16", f.to(at::kHalf)},
      {"bf16", f.t().to(at::kBFloat16)},  // non-contiguous source
      {"i64", at::arange(-5, 7, at::kLong).view({3, 4})},
      {"i32", at::tensor(std::vector<std::int32_t>{-2147483647 - 1, 0, 2147483647}, at::kInt)},
      {"i16", at::tensor(std::vector<std::int16_t>{-32768, 1, 32767}, at::kShort)},
      {"i8", at::arange(-128, 128, at::kInt).to(at::kChar)},
      {"u8", at::arange(0, 256, at::kInt).to(at::kByte)},
      {"bool", at::tensor(std::vector<std::int64_t>{1, 0, 0, 1, 1}, at::kLong).to(at::kBool)},
      {"scalar", at::scalar_tensor(3.5, at::kFloat)},
      {"empty", at::empty({0, 4}, at::kFloat)},
  };
  const auto path = dir / "t.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "hello"}});

  // The data buffer starts 8-byte aligned.
  std::ifstream in(path, std::ios::binary);
  std::uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);
  EXPECT_EQ(header_size % 8, 0u);

  const SafetensorsFile file(path);
  EXPECT_EQ(file.tensors().size(), tensors.size());
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "hello");
  EXPECT_EQ(file.info("bf16").dtype, "BF16");
  EXPECT_EQ(file.info("bool").dtype, "BOOL");
  EXPECT_EQ(file.info("f16").shape, (std::vector<std::int64_t>{3, 5}));
  // Tensors are listed in file order, which is the order they were given.
  for (std::size_t i = 0; i < tensors.size(); ++i) EXPECT_EQ(file.tensors()[i].name, tensors[i].first);
  for (const auto& [name, t] : tensors) {
    const auto back = file.get(name);
    EXPECT_EQ(back.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(back.sizes(), t.sizes()) << name;
    EXPECT_TRUE(at::equal(back, t)) << name;
  }
  // Conversion on the way out.
  EXPECT_TRUE(at::equal(file.get("bf16", at::kFloat), f.t().to(at::kBFloat16).to(at::kFloat)));
  EXPECT_TRUE(at::equal(file.get("f16", at::kDouble), f.to(at::kHalf).to(at::kDouble)));
  EXPECT_EQ(file.get("i32", at::kFloat).scalar_type(), at::kFloat);
  EXPECT_TRUE(file.contains("f32"));
  EXPECT_FALSE(file.contains("nope"));
  expect_error([&] { file.get("nope"); }, {"no tensor \"nope\"", path.string()});
}

TEST(Safetensors, MovedFileStaysUsableAndTensorsOutliveIt) {
  TempDir dir;
  const auto path = dir / "m.safetensors";
  const auto t = at::arange(10, at::kFloat);
  write_safetensors(path, {{"x", t}});
  at::Tensor copy;
  {
    SafetensorsFile a(path);
    SafetensorsFile b(std::move(a));
    SafetensorsFile c(path);
    c = std::move(b);
    copy = c.get("x");
  }
  EXPECT_TRUE(at::equal(copy, t));
}

TEST(Safetensors, WriterRejectsBadInput) {
  TempDir dir;
  const auto path = dir / "w.safetensors";
  const auto t = at::zeros({2});
  expect_error([&] { write_safetensors(path, {{"a", t}, {"a", t}}); }, {"\"a\" is given twice"});
  expect_error([&] { write_safetensors(path, {{"__metadata__", t}}); }, {"invalid tensor name"});
  expect_error([&] { write_safetensors(path, {{"u", at::Tensor()}}); }, {"\"u\" is undefined"});
  expect_error([&] { write_safetensors(path, {{"c", at::zeros({2}, at::kComplexFloat)}}); },
               {"cannot store"});
  expect_error([&] { write_safetensors(path, {{"t", t}}, {{"bad", "\xff"}}); }, {"cannot encode the header"});
  EXPECT_FALSE(fs::exists(path));
}

TEST(Safetensors, MalformedFilesGiveClearErrors) {
  TempDir dir;
  const auto p = dir / "bad.safetensors";
  const std::string ps = p.string();
  const auto open_file = [&] { SafetensorsFile file(p); };

  write_bytes(p, "abcd");
  expect_error(open_file, {ps, "4 bytes long, shorter than its 8-byte header size"});

  write_bytes(p, "");
  expect_error(open_file, {ps, "0 bytes long"});

  {  // a header size far beyond the file
    std::ofstream out(p, std::ios::binary);
    const std::uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  expect_error(open_file, {ps, "header size 1000 is larger than the 2 bytes"});

  write_raw(p, "{\"a\": {\"dtype\": ", 0);
  expect_error(open_file, {ps, "not valid JSON"});
  write_raw(p, "[1, 2]", 0);
  expect_error(open_file, {ps, "not an object"});

  const auto entry = [](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return "{\"t\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": " + offsets + "}}";
  };
  write_raw(p, entry("F17", "[2]", "[0, 8]"), 8);
  expect_error(open_file, {ps, "tensor \"t\"", "unknown dtype \"F17\""});

  write_raw(p, entry("F32", "[2]", "[0, 64]"), 8);
  expect_error(open_file, {ps, "tensor \"t\"", "[0, 64] are out of bounds of the 8-byte data buffer"});
  write_raw(p, entry("F32", "[2]", "[8, 4]"), 8);
  expect_error(open_file, {ps, "out of bounds"});
  write_raw(p, entry("F32", "[3]", "[0, 8]"), 8);
  expect_error(open_file, {ps, "span 8 bytes, but shape [3] of F32 needs 12"});
  write_raw(p, entry("F32", "[-2]", "[0, 8]"), 8);
  expect_error(open_file, {ps, "non-negative integers"});
  write_raw(p, entry("F32", "[2.0]", "[0, 8]"), 8);
  expect_error(open_file, {ps, "non-negative integers"});
  write_raw(p, entry("F32", "[4294967296, 4294967296, 4294967296]", "[0, 8]"), 8);
  expect_error(open_file, {ps, "more than 2^64"});
  write_raw(p, entry("F32", "[2]", "[0]"), 8);
  expect_error(open_file, {ps, "\"data_offsets\" must be [begin, end]"});
  write_raw(p, entry("F32", "[2]", "[0, 8]"), 4);  // data truncated
  expect_error(open_file, {ps, "out of bounds of the 4-byte data buffer"});
  write_raw(p, entry("F32", "[2]", "[0, 8]"), 12);  // trailing bytes
  expect_error(open_file, {ps, "cover 8 bytes of the 12-byte data buffer"});

  write_raw(p, "{\"t\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", 8);
  expect_error(open_file, {ps, "tensor \"t\" has no \"dtype\""});
  write_raw(p, "{\"t\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", 8);
  expect_error(open_file, {ps, "has no \"shape\""});
  write_raw(p, "{\"t\": {\"dtype\": \"F32\", \"shape\": [2]}}", 8);
  expect_error(open_file, {ps, "has no \"data_offsets\""});
  write_raw(p, "{\"t\": 5}", 0);
  expect_error(open_file, {ps, "must be a JSON object"});

  // Overlapping tensors and gaps are forbidden by the format.
  write_raw(p,
            "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
            " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
            12);
  expect_error(open_file, {ps, "tensor \"b\" starts at byte 4", "overlapping"});
  write_raw(p,
            "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
            " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
            12);
  expect_error(open_file, {ps, "a gap"});
  write_raw(p,
            "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
            " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
            8);
  expect_error(open_file, {ps, "\"a\" appears more than once"});
  write_raw(p, "{\"__metadata__\": {\"k\": 3}}", 0);
  expect_error(open_file, {ps, "metadata \"k\" must be a string"});

  // Valid but unreadable by ATen: the file opens, reading that tensor fails.
  write_raw(p, entry("U32", "[2]", "[0, 8]"), 8);
  const SafetensorsFile file(p);
  EXPECT_EQ(file.info("t").dtype, "U32");
  expect_error([&] { file.get("t"); }, {ps, "dtype U32, which refdec cannot read"});

  // Spaces after the JSON are allowed padding; an empty header object is a valid empty file.
  write_raw(p, entry("F32", "[2]", "[0, 8]") + "     ", 8);
  EXPECT_EQ(SafetensorsFile(p).get("t").numel(), 2);
  write_raw(p, "{}", 0);
  EXPECT_TRUE(SafetensorsFile(p).tensors().empty());

  expect_error([&] { SafetensorsFile file2(dir / "missing.safetensors"); }, {"cannot open", "missing.safetensors"});
}

// ---------------------------------------------------------------------------------------------
// Hugging Face checkpoints

LlamaConfig small_config(bool tied, RopeStyle style) {
  LlamaConfig c;
  c.dim = 32;
  c.hidden_dim = 48;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;  // grouped-query attention
  c.vocab_size = 97;
  c.max_seq_len = 128;
  c.rope_theta = 5000.0;
  c.norm_eps = 1e-6;
  c.tied_embeddings = tied;
  c.rope_style = style;
  c.bos_id = 3;
  c.eos_id = 4;
  return c;
}

at::Tensor logits_of(const LlamaModel& model) {
  ContiguousKvStore store(model.kv_layout(), 64);
  store.add();
  const std::vector<LinearTree> chain = {LinearTree::chain(std::vector<Token>{1, 5, 9, 20})};
  StepPlan plan;
  plan_step(chain, {}, store.lengths(), model.vocab_size(), plan);
  return model.forward(plan, store);
}

void expect_same_weights(const LlamaModel& a, const LlamaModel& b) {
  const auto &wa = a.weights(), &wb = b.weights();
  EXPECT_TRUE(at::equal(wa.embedding, wb.embedding));
  EXPECT_TRUE(at::equal(wa.final_norm, wb.final_norm));
  EXPECT_TRUE(at::equal(wa.output, wb.output));
  ASSERT_EQ(wa.layers.size(), wb.layers.size());
  for (std::size_t i = 0; i < wa.layers.size(); ++i) {
    const auto &la = wa.layers[i], &lb = wb.layers[i];
    for (const auto& [x, y] : {std::pair(la.attn_norm, lb.attn_norm), std::pair(la.wq, lb.wq), std::pair(la.wk, lb.wk),
                               std::pair(la.wv, lb.wv), std::pair(la.wo, lb.wo), std::pair(la.ffn_norm, lb.ffn_norm),
                               std::pair(la.w1, lb.w1), std::pair(la.w2, lb.w2), std::pair(la.w3, lb.w3)})
      EXPECT_TRUE(at::equal(x, y)) << "layer " << i;
  }
}

// A random model saved as a checkpoint, with one of its JSON files kept so that a test can write
// edited copies of it and check what loading then says.
struct EditedCheckpoint {
  TempDir dir;
  LlamaModel model;
  fs::path json_path;
  nlohmann::json good;

  EditedCheckpoint(bool tied, std::uint64_t seed, const std::string& json_name, int shards = 1)
      : model(LlamaModel::random(small_config(tied, RopeStyle::kHalf), seed)) {
    save_hf_llama(model, dir.path(), shards);
    json_path = dir / json_name;
    good = read_json(json_path);
  }
  void load() const { load_hf_llama(dir.path()); }
  // Writes the kept JSON with `edit` applied.
  void write(const std::function<void(nlohmann::json&)>& edit) const {
    auto j = good;
    edit(j);
    write_json(json_path, j);
  }
};

void expect_same_config(const LlamaConfig& a, const LlamaConfig& b) {
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.hidden_dim, b.hidden_dim);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_seq_len, b.max_seq_len);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.eos_id, b.eos_id);
}

TEST(HfLoader, RoundTripTiedAndUntiedGqa) {
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    TempDir dir;
    const auto model = LlamaModel::random(small_config(tied, RopeStyle::kHalf), 11);
    save_hf_llama(model, dir.path());
    EXPECT_TRUE(fs::exists(dir / "config.json"));
    EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
    EXPECT_EQ(SafetensorsFile(dir / "model.safetensors").contains("lm_head.weight"), !tied);
    EXPECT_EQ(SafetensorsFile(dir / "model.safetensors").metadata().at("format"), "pt");
    const auto loaded = load_hf_llama(dir.path());
    EXPECT_EQ(loaded.config().rope_style, RopeStyle::kHalf);
    expect_same_config(model.config(), loaded.config());
    EXPECT_EQ(loaded.weights().output.is_same(loaded.weights().embedding), tied);
    expect_same_weights(model, loaded);
    EXPECT_TRUE(at::equal(logits_of(model), logits_of(loaded)));
  }
}

TEST(HfLoader, InterleavedModelIsPermutedToTheSameFunction) {
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    TempDir dir;
    const auto model = LlamaModel::random(small_config(tied, RopeStyle::kInterleaved), 12);
    save_hf_llama(model, dir.path());
    const auto loaded = load_hf_llama(dir.path());
    EXPECT_EQ(loaded.config().rope_style, RopeStyle::kHalf);
    EXPECT_FALSE(at::equal(model.weights().layers[0].wq, loaded.weights().layers[0].wq));
    EXPECT_FALSE(at::equal(model.weights().layers[0].wk, loaded.weights().layers[0].wk));
    EXPECT_TRUE(at::equal(model.weights().layers[0].wv, loaded.weights().layers[0].wv));
    EXPECT_TRUE(at::allclose(logits_of(model), logits_of(loaded), 1e-5, 1e-5));
  }
}

TEST(HfLoader, ShardedSaveLoadsTheSame) {
  TempDir dir;
  const auto model = LlamaModel::random(small_config(false, RopeStyle::kHalf), 13);
  save_hf_llama(model, dir.path(), 3);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  const auto index = read_json(dir / "model.safetensors.index.json");
  std::set<std::string> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) shards.insert(shard.get<std::string>());
  EXPECT_EQ(shards, (std::set<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                           "model-00003-of-00003.safetensors"}));
  std::uint64_t bytes = 0;
  for (const auto& shard : shards) {
    const SafetensorsFile file(dir / shard);
    for (const auto& t : file.tensors()) bytes += t.nbytes();
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<std::uint64_t>(), bytes);
  EXPECT_EQ(index["weight_map"].size(), 2u + 9u * 2u + 1u);  // embedding, layers, norm, lm_head

  const auto loaded = load_hf_llama(dir.path());
  expect_same_weights(model, loaded);
  EXPECT_TRUE(at::equal(logits_of(model), logits_of(loaded)));

  // Saving unsharded again replaces the index, which would otherwise be stale.
  save_hf_llama(model, dir.path());
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  expect_same_weights(model, load_hf_llama(dir.path()));

  expect_error([&] { save_hf_llama(model, dir.path(), 0); }, {"num_shards 0"});
  expect_error([&] { save_hf_llama(model, dir.path(), 1000); }, {"num_shards 1000"});
}

TEST(HfLoader, Bf16ModelKeepsItsDtypeOnDisk) {
  TempDir dir;
  // at::linear keeps the weights to save and compare (packed models release them).
  const auto model = LlamaModel::random(small_config(true, RopeStyle::kHalf), 14, at::kBFloat16, at::kCPU, LinearKernel::kAten);
  save_hf_llama(model, dir.path(), 2);
  EXPECT_EQ(read_json(dir / "config.json")["torch_dtype"], "bfloat16");
  EXPECT_EQ(SafetensorsFile(dir / "model-00001-of-00002.safetensors").tensors()[0].dtype, "BF16");
  const auto loaded = load_hf_llama(dir.path(), at::kBFloat16, at::kCPU, LinearKernel::kAten);
  EXPECT_EQ(loaded.dtype(), at::kBFloat16);
  expect_same_weights(model, loaded);
  // Loading as float32 widens the same values.
  const auto wide = load_hf_llama(dir.path(), at::kFloat);
  EXPECT_TRUE(at::equal(wide.weights().embedding, model.weights().embedding.to(at::kFloat)));
  // A choice kept from another load is taken as given, where the streaming kernel runs.
  if (packed_backend_unavailable(PackedBackend::kStream, at::kBFloat16).empty()) {
    const auto given =
        load_hf_llama(dir.path(), at::kBFloat16, at::kCPU, LinearKernel::kAuto, LinearChoice::parse("stream (avx2 for every row count)"));
    EXPECT_EQ(given.linear_path(), "stream (avx2 for every row count) (given)");
  }
}

TEST(HfLoader, Stories260KThroughHfFormatGivesTheSameLogits) {
  const auto path = refdec_test::data_file("models/stories260K/stories260K.bin");
  if (path.empty()) GTEST_SKIP() << "stories260K not found under " << refdec_test::data_dir();
  TempDir dir;
  const auto original = load_llama2c(path);
  save_hf_llama(original, dir.path());
  const auto loaded = load_hf_llama(dir.path());
  EXPECT_EQ(loaded.config().rope_style, RopeStyle::kHalf);
  expect_same_config(original.config(), loaded.config());
  const auto a = logits_of(original), b = logits_of(loaded);
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-5);
  EXPECT_TRUE(at::equal(a.argmax(-1), b.argmax(-1)));
}

TEST(HfLoader, ConfigAndWeightErrorsNameTheProblem) {
  const EditedCheckpoint checkpoint(false, 15, "config.json");
  const auto& dir = checkpoint.dir;
  const auto& config_path = checkpoint.json_path;
  const auto& good = checkpoint.good;
  const auto& model = checkpoint.model;
  const auto load = [&] { checkpoint.load(); };
  const auto with = [&](const std::function<void(nlohmann::json&)>& edit) { checkpoint.write(edit); };

  with([](auto& j) { j.erase("hidden_size"); });
  expect_error(load, {"config.json", "lacks the required field \"hidden_size\""});
  with([](auto& j) { j.erase("rms_norm_eps"); });
  expect_error(load, {"\"rms_norm_eps\""});
  with([](auto& j) { j["model_type"] = "gpt2"; });
  expect_error(load, {"model_type \"gpt2\"", "only \"llama\" and \"mistral\""});
  with([](auto& j) { j.erase("model_type"); });
  expect_error(load, {"\"model_type\""});
  with([](auto& j) { j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; });
  expect_error(load, {"rope_scaling", "not support"});
  with([](auto& j) { j["attention_bias"] = true; });
  expect_error(load, {"attention_bias"});
  with([](auto& j) { j["num_attention_heads"] = "four"; });
  expect_error(load, {"\"num_attention_heads\" must be an integer"});
  with([](auto& j) { j["num_key_value_heads"] = 3; });
  expect_error(load, {"inconsistent", "n_kv_heads 3"});

  // Defaults: num_key_value_heads = num_attention_heads, rope_theta 10000, untied; null means absent.
  with([](auto& j) {
    j.erase("num_key_value_heads");
    j.erase("rope_theta");
    j.erase("tie_word_embeddings");
    j["rope_scaling"] = nullptr;
  });
  expect_error(load, {"self_attn.k_proj.weight\" has shape [16, 32], expected [32, 32]"});

  // A mistral config with a sliding window shorter than the context caps the context.
  with([](auto& j) {
    j["model_type"] = "mistral";
    j["sliding_window"] = 64;
    j["eos_token_id"] = {4, 7};
  });
  const auto mistral = load_hf_llama(dir.path());
  EXPECT_EQ(mistral.max_seq_len(), 64);
  EXPECT_EQ(mistral.config().eos_id, 4);
  EXPECT_TRUE(at::equal(logits_of(mistral), logits_of(model)));

  write_json(config_path, good);
  // A missing tensor is named. Rewrites model.safetensors without the tensors in `drop`.
  const auto drop = [&](const std::set<std::string>& names) {
    std::vector<std::pair<std::string, at::Tensor>> kept;
    {
      const SafetensorsFile file(dir / "model.safetensors");
      for (const auto& t : file.tensors())
        if (names.count(t.name) == 0) kept.emplace_back(t.name, file.get(t.name));
    }
    write_safetensors(dir / "model.safetensors", kept);
  };
  drop({"lm_head.weight"});
  expect_error(load, {"lacks tensor \"lm_head.weight\"", "model.safetensors"});
  // Tied embeddings need no lm_head.
  with([](auto& j) { j["tie_word_embeddings"] = true; });
  const auto tied_model = load_hf_llama(dir.path());
  EXPECT_TRUE(tied_model.weights().output.is_same(tied_model.weights().embedding));
  drop({"model.layers.1.mlp.up_proj.weight"});
  expect_error(load, {"lacks tensor \"model.layers.1.mlp.up_proj.weight\""});

  // Missing files.
  fs::remove(dir / "model.safetensors");
  expect_error(load, {"neither model.safetensors nor model.safetensors.index.json"});
  fs::remove(config_path);
  expect_error(load, {"cannot open Hugging Face config", "config.json"});
  expect_error([&] { load_hf_llama(dir / "nowhere"); }, {"is not a directory"});
}

// bos/eos ids outside the vocabulary, and a config.json that is a directory or a FIFO, give a
// clear error naming the file (a FIFO must not block).
TEST(HfLoader, OutOfVocabularyIdsAndNonRegularConfigAreRejected) {
  const EditedCheckpoint checkpoint(false, 16, "config.json");
  const auto& config_path = checkpoint.json_path;
  const auto load = [&] { checkpoint.load(); };
  const std::int64_t vocab = checkpoint.model.config().vocab_size;
  checkpoint.write([&](auto& j) { j["eos_token_id"] = vocab; });
  expect_error(load, {"config.json", "\"eos_token_id\" " + std::to_string(vocab), "outside the vocabulary"});
  checkpoint.write([](auto& j) { j["bos_token_id"] = -1; });
  expect_error(load, {"\"bos_token_id\" -1", "outside the vocabulary"});
  checkpoint.write([&](auto& j) { j["eos_token_id"] = {vocab + 5, 2}; });
  expect_error(load, {"\"eos_token_id\"", "outside the vocabulary"});

  fs::remove(config_path);
  fs::create_directory(config_path);
  expect_error(load, {"Hugging Face config", "config.json", "is a directory"});
  fs::remove(config_path);
  ASSERT_EQ(::mkfifo(config_path.c_str(), 0600), 0);
  expect_error(load, {"Hugging Face config", "config.json", "not a regular file"});
}

TEST(HfLoader, ShardErrorsNameTheProblem) {
  const EditedCheckpoint checkpoint(true, 16, "model.safetensors.index.json", 3);
  const auto& dir = checkpoint.dir;
  const auto& index_path = checkpoint.json_path;
  const auto& good = checkpoint.good;
  const auto load = [&] { checkpoint.load(); };

  checkpoint.write([](auto& j) { j["weight_map"].erase("model.norm.weight"); });
  expect_error(load, {"lacks tensor \"model.norm.weight\"", "not in model.safetensors.index.json"});
  checkpoint.write([](auto& j) { j["weight_map"]["model.norm.weight"] = "../escape.safetensors"; });
  expect_error(load, {"not a file name in the checkpoint directory"});
  checkpoint.write([](auto& j) { j["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors"; });
  expect_error(load, {"lacks tensor \"model.norm.weight\"", "model-00001-of-00003.safetensors"});

  write_json(index_path, good);
  fs::remove(dir / "model-00002-of-00003.safetensors");
  expect_error(load, {"model-00002-of-00003.safetensors", "does not exist"});

  write_json(index_path, nlohmann::json{{"metadata", nlohmann::json::object()}});
  expect_error(load, {"no \"weight_map\""});
  write_bytes(index_path, "{oops");
  expect_error(load, {"safetensors index", "not valid JSON"});
}

}  // namespace

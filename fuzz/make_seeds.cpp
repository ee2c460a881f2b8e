// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Writes the seed inputs: a small valid datastore, a JSONL file of generic traces, a plan/walk
// input, and for the checkpoint parsers a config.json and (from DATA_DIR's stories260K, when there)
// the head of a llama2.c checkpoint. Usage: make_seeds DIR [DATA_DIR] (creates DIR/datastore,
// DIR/jsonl, DIR/plan_walk and DIR/checkpoints).

#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "refdec/datastore/builder.hpp"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: make_seeds DIR [DATA_DIR]\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir / "datastore");
  std::filesystem::create_directories(dir / "jsonl");
  std::filesystem::create_directories(dir / "plan_walk");
  // Three sequences, a few paths each, auxiliary tokens, targets that follow the drafts.
  const unsigned char plan[] = {3, 5, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2, 3, 1, 2, 3, 4, 7, 1, 2, 3, 4, 5, 6, 7, 8};
  std::ofstream(dir / "plan_walk" / "seed", std::ios::binary).write(reinterpret_cast<const char*>(plan), sizeof plan);
  std::vector<std::vector<refdec::Token>> docs = {{1, 5, 9, 5, 9, 12, 30, 5, 9, 12}, {7, 5, 9, 12, 40, 41, 42}, {63, 62, 5, 9}};
  refdec::build_datastore(docs, 64, dir / "datastore" / "seed.bin");
  std::ofstream(dir / "jsonl" / "seed.jsonl") << R"({"context": [1, 2, 3], "output": [4, 5], "references": [[3, 4, 5]], "category": "a", "id": "x"})"
                                              << "\n" << R"({"context": [9], "output": [9, 9, 9]})" << "\n";
  // fuzz_checkpoints: the first byte picks the parser (0 llama2.c checkpoint, 2 config.json).
  std::filesystem::create_directories(dir / "checkpoints");
  std::ofstream(dir / "checkpoints" / "config") << "2" << R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 172, )"
                                                << R"("num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 4, )"
                                                << R"("vocab_size": 512, "max_position_embeddings": 512})";
  if (argc == 3) {
    std::ifstream model(std::filesystem::path(argv[2]) / "models/stories260K/stories260K.bin", std::ios::binary);
    std::vector<char> head(4096);
    model.read(head.data(), static_cast<std::streamsize>(head.size()));
    if (model.gcount() > 0) {
      std::ofstream out(dir / "checkpoints" / "llama2c", std::ios::binary);
      out.put('\0');
      out.write(head.data(), model.gcount());
    }
  }
  return 0;
}

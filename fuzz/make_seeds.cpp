// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Writes the seed inputs that ../shared does not hold: a small valid datastore, a JSONL file of
// generic traces and a plan/walk input. Usage: make_seeds DIR (creates DIR/datastore/seed.bin,
// DIR/jsonl/seed.jsonl and DIR/plan_walk/seed).

#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "refdec/datastore/builder.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds DIR\n";
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
  return 0;
}

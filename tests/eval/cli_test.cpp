// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0

#include "eval/cli.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace refdec;

// Parses `args` (after the program name) into an app with an unsigned option "-m" in [1, 1024]
// and a float option "--temperature" in [0, 100]; returns the error message, empty on success.
std::string parse(std::vector<std::string> args, std::size_t& m, float& temperature) {
  CLI::App app{"test"};
  app.add_option("-m", m)->transform(cli::integer_in(1, cli::kMaxSpan));
  app.add_option("--temperature", temperature)->transform(cli::finite_in(0.0, 100.0));
  std::vector<const char*> argv = {"test"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return {};
}

TEST(Cli, NegativeValueForAnUnsignedOptionIsAnError) {
  std::size_t m = 10;
  float t = 0.0f;
  // CLI11 alone converts "-1" to SIZE_MAX for a size_t.
  EXPECT_EQ(parse({"-m", "-1"}, m, t), "-m: value -1 is out of range [1, 1024]");
  EXPECT_EQ(m, 10u);
}

TEST(Cli, IntegersAreDecimalAndBounded) {
  std::size_t m = 10;
  float t = 0.0f;
  EXPECT_EQ(parse({"-m", "1024"}, m, t), "");
  EXPECT_EQ(m, 1024u);
  EXPECT_EQ(parse({"-m", "010"}, m, t), "");  // decimal, not CLI11's octal 8
  EXPECT_EQ(m, 10u);
  EXPECT_EQ(parse({"-m", "+7"}, m, t), "");
  EXPECT_EQ(m, 7u);
  EXPECT_NE(parse({"-m", "1025"}, m, t).find("value 1025 is out of range [1, 1024]"), std::string::npos);
  EXPECT_NE(parse({"-m", "0"}, m, t).find("out of range"), std::string::npos);
  EXPECT_NE(parse({"-m", "1e9"}, m, t).find("value '1e9' is not a whole number"), std::string::npos);
  EXPECT_NE(parse({"-m", "0x10"}, m, t).find("not a whole number"), std::string::npos);
  EXPECT_NE(parse({"-m", "99999999999999999999999"}, m, t).find("is out of range"), std::string::npos);
  EXPECT_EQ(m, 7u);
}

TEST(Cli, FloatsAreFiniteAndBounded) {
  std::size_t m = 10;
  float t = 0.0f;
  EXPECT_EQ(parse({"--temperature", "0.7"}, m, t), "");
  EXPECT_FLOAT_EQ(t, 0.7f);
  EXPECT_NE(parse({"--temperature", "-1"}, m, t).find("value -1 is out of range [0, 100]"), std::string::npos);
  EXPECT_NE(parse({"--temperature", "nan"}, m, t).find("value nan is out of range"), std::string::npos);
  EXPECT_NE(parse({"--temperature", "inf"}, m, t).find("out of range"), std::string::npos);
  EXPECT_NE(parse({"--temperature", "warm"}, m, t).find("is not a number"), std::string::npos);
  EXPECT_FLOAT_EQ(t, 0.7f);
}

TEST(Cli, ParseIntegerTakesWholeDecimalStrings) {
  std::int64_t v = 0;
  EXPECT_TRUE(cli::parse_integer("-42", v));
  EXPECT_EQ(v, -42);
  EXPECT_TRUE(cli::parse_integer("9223372036854775807", v));
  EXPECT_EQ(v, std::numeric_limits<std::int64_t>::max());
  EXPECT_FALSE(cli::parse_integer("9223372036854775808", v));
  EXPECT_FALSE(cli::parse_integer("", v));
  EXPECT_FALSE(cli::parse_integer("+", v));
  EXPECT_FALSE(cli::parse_integer("++1", v));
  EXPECT_FALSE(cli::parse_integer("1 ", v));
  EXPECT_FALSE(cli::parse_integer("4294967297x", v));
}

}  // namespace

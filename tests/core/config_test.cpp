// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The error family: which check throws which kind, and what its message carries.

#include "refdec/core/config.hpp"
#include "refdec/version.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace {

using namespace refdec;

static_assert(std::is_base_of_v<std::runtime_error, Error>);
static_assert(std::is_base_of_v<Error, ArgumentError>);
static_assert(std::is_base_of_v<Error, IoError>);
static_assert(!std::is_base_of_v<std::invalid_argument, Error>);

void check_argument(int value) {
  REFDEC_CHECK(value >= 0, "value must be non-negative, got " << value);
}
void check_file(bool readable) {
  const std::string name = "model.bin";
  REFDEC_CHECK_IO(readable, "cannot open " << name);
}

// The message of the exception of type E that `f` throws ("" when it throws none).
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// Which kind of refdec error `f` throws: "argument", "io", "base" or "none".
template <class F>
std::string kind_of(F&& f) {
  try {
    f();
  } catch (const ArgumentError&) {
    return "argument";
  } catch (const IoError&) {
    return "io";
  } catch (const Error&) {
    return "base";
  }
  return "none";
}

TEST(Errors, CheckThrowsArgumentError) {
  EXPECT_NO_THROW(check_argument(0));
  EXPECT_THROW(check_argument(-3), ArgumentError);
  EXPECT_THROW(check_argument(-3), Error);
  const std::string msg = message_of<ArgumentError>([] { check_argument(-3); });
  EXPECT_NE(msg.find("value must be non-negative, got -3"), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind("refdec: ", 0), 0u) << msg;
}

TEST(Errors, CheckIoThrowsIoError) {
  EXPECT_NO_THROW(check_file(true));
  EXPECT_THROW(check_file(false), IoError);
  EXPECT_THROW(check_file(false), Error);
  EXPECT_EQ(kind_of([] { check_file(false); }), "io");  // and not the other kind
  EXPECT_EQ(kind_of([] { check_argument(-1); }), "argument");
  EXPECT_EQ(kind_of([] { check_file(true); }), "none");
  const std::string msg = message_of<IoError>([] { check_file(false); });
  EXPECT_NE(msg.find("cannot open model.bin"), std::string::npos) << msg;
}

TEST(Errors, MessagesNameTheCheckSite) {
  const int line = __LINE__ + 1;
  const std::string msg = message_of<Error>([] { REFDEC_CHECK(1 + 1 == 3, "arithmetic"); });
  EXPECT_NE(msg.find(std::string("config_test.cpp:") + std::to_string(line)), std::string::npos)
      << msg;
  const int io_line = __LINE__ + 1;
  const std::string io_msg = message_of<Error>([] { REFDEC_CHECK_IO(false, "unreadable"); });
  EXPECT_NE(io_msg.find(std::string("config_test.cpp:") + std::to_string(io_line)),
            std::string::npos)
      << io_msg;
}

// An error rethrown with the context it passed through keeps its kind, says "refdec: " once, and
// names the site of the check that failed, not of the rethrow.
TEST(Errors, RethrownInContextKeepTheirKindAndFirstSite) {
  const auto nested = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      detail::rethrow_in_context(e, "Session: request 3");
    }
  };
  const int line = __LINE__ + 1;
  const auto io = [] { REFDEC_CHECK_IO(false, "datastore truncated"); };
  EXPECT_EQ(kind_of([&] { nested(io); }), "io");
  EXPECT_EQ(kind_of([&] { nested([] { check_argument(-2); }); }), "argument");
  EXPECT_EQ(kind_of([&] { nested([] { throw Error("refdec: CUDA failed"); }); }), "base");
  const std::string msg = message_of<IoError>([&] { nested(io); });
  EXPECT_EQ(msg.rfind("refdec: Session: request 3: datastore truncated (", 0), 0u) << msg;
  EXPECT_EQ(msg.find("refdec: ", 1), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::string("config_test.cpp:") + std::to_string(line) + ")"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('('), msg.rfind('(')) << "one site: " << msg;
}

TEST(Errors, StandardHandlersCatchThem) {
  EXPECT_THROW(check_argument(-1), std::runtime_error);
  EXPECT_THROW(check_file(false), std::exception);
}


// The messages' own number formatting (no iostreams) writes what an ostream writes, for every kind
// of value a check streams: integers of every width and sign, floating-point values (%g, 6
// digits, infinities and NaN), strings, characters, booleans, paths and types with an operator<<.
struct Streamable {
  int id;
};
std::ostream& operator<<(std::ostream& os, const Streamable& s) { return os << "streamable #" << s.id; }

template <class T>
void expect_as_ostream(const T& value) {
  std::ostringstream os;
  os << value;
  detail::Message m;
  m << value;
  EXPECT_EQ(m.str(), os.str());
}

TEST(Errors, MessagesWriteValuesAsAnOstreamDoes) {
  for (const std::int64_t v : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{42}, std::numeric_limits<std::int64_t>::min(),
                               std::numeric_limits<std::int64_t>::max()})
    expect_as_ostream(v);
  expect_as_ostream(std::numeric_limits<std::uint64_t>::max());
  expect_as_ostream(std::numeric_limits<std::int32_t>::min());
  expect_as_ostream(std::size_t{123456789});
  expect_as_ostream(std::int16_t{-7});
  expect_as_ostream(std::uint8_t{65});  // a character to an ostream: 'A'
  for (const double v : {0.0, -0.0, 0.1, 1.0 / 3.0, 3.0, 1e-5, 123456.0, 1234567.0, 1e20, -2.5e-300, 0.000123456789,
                         std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::max()})
    expect_as_ostream(v);
  for (const float v : {0.1f, 2.5f, 1e-7f, 16777216.0f, std::numeric_limits<float>::lowest()}) expect_as_ostream(v);
  expect_as_ostream(true);
  expect_as_ostream(false);
  expect_as_ostream('x');
  expect_as_ostream("text");
  expect_as_ostream(std::string("a string"));
  expect_as_ostream(std::string_view("a view"));
  expect_as_ostream(std::filesystem::path("/tmp/some file.bin"));
  expect_as_ostream(Streamable{7});
  // And a whole check's message, as REFDEC_CHECK builds it.
  const std::string msg = message_of<ArgumentError>([] {
    REFDEC_CHECK(false, "budget " << std::size_t{16} << " of " << -3 << ", ratio " << 0.25 << ", " << Streamable{2} << ", ok " << true);
  });
  EXPECT_EQ(msg.substr(0, msg.find(" (")), "refdec: budget 16 of -3, ratio 0.25, streamable #2, ok 1");
}

// The version's text is spelled from its three numbers (one place holds the version).
TEST(Version, TheStringIsTheNumbers) {
  const std::string want = std::to_string(REFDEC_VERSION_MAJOR) + "." + std::to_string(REFDEC_VERSION_MINOR) + "." +
                           std::to_string(REFDEC_VERSION_PATCH);
  EXPECT_EQ(std::string(REFDEC_VERSION_STRING), want);
  EXPECT_EQ(REFDEC_VERSION, REFDEC_VERSION_MAJOR * 10000 + REFDEC_VERSION_MINOR * 100 + REFDEC_VERSION_PATCH);
}
}  // namespace

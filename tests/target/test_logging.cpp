#include <gtest/gtest.h>

#include "target/config/logging.h"

using rdmablk::target::parse_log_level;

TEST(Logging, ParsesEveryLevelName) {
  EXPECT_EQ(parse_log_level("trace").value(), spdlog::level::trace);
  EXPECT_EQ(parse_log_level("info").value(), spdlog::level::info);
  EXPECT_EQ(parse_log_level("warning").value(), spdlog::level::warn);
  EXPECT_EQ(parse_log_level("error").value(), spdlog::level::err);
  EXPECT_EQ(parse_log_level("off").value(), spdlog::level::off);
}

TEST(Logging, RejectsUnknownLevelWithTheNameInTheMessage) {
  auto r = parse_log_level("verbose");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("verbose"), std::string::npos);
}

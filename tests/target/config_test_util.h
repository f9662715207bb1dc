// Parsing YAML written inline in the config tests: what a test expects to parse, or the one error line.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "target/config/config.h"

namespace rdmablk::target::testing {

// Test YAML is written from column 1 after a leading newline, so that line 1 is the first line shown.
inline std::string yaml(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return std::string(text);
}

inline TargetConfig parse_ok(std::string_view text) {
  auto config = parse_config(yaml(text), "t.yaml");
  EXPECT_TRUE(config) << config.error().message;
  return config ? *config : TargetConfig{};
}

inline std::string parse_error(std::string_view text) {
  auto config = parse_config(yaml(text), "t.yaml");
  EXPECT_FALSE(config) << "parsed unexpectedly";
  return config ? std::string() : config.error().message;
}

}  // namespace rdmablk::target::testing

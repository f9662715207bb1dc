#include "target/config/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <array>
#include <string>

namespace rdmablk::target {

Result<spdlog::level::level_enum> parse_log_level(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, spdlog::level::level_enum>, 8> kLevels{{
      {"trace", spdlog::level::trace},
      {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},
      {"warning", spdlog::level::warn},
      {"error", spdlog::level::err},
      {"critical", spdlog::level::critical},
      {"off", spdlog::level::off},
  }};
  for (auto& [n, level] : kLevels) {
    if (n == name) return level;
  }
  return make_error("unknown log level '" + std::string(name) +
                    "' (expected trace, debug, info, warn, error, critical or off)");
}

void setup_logging(spdlog::level::level_enum level, bool timestamps) {
  auto logger = spdlog::stderr_color_mt("rdmablk");
  logger->set_pattern(timestamps ? "%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v" : "%^%l%$ [%t] %v");
  logger->set_level(level);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace rdmablk::target

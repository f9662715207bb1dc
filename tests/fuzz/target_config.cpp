// The target's YAML configuration (target/config.*): parse_config on any text, as rdmablk-target reads
// its file at start and on every `reload`; and the value parsers it shares with the CLI (sizes, CPU
// lists) on the same text.
//
// Input: the YAML text.
// Invariants: parsing never throws (yaml-cpp's exceptions stay inside: one error line comes back, in the
// FILE:LINE:COL form); an accepted config describes itself (describe()), parses the same the second time,
// needs no restart against itself, and its CPU list and sizes survive format -> parse. Nothing is read or
// written: parse_config is text in, config out (validate_environment, which looks at the machine, is not
// called).
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "target/config/config.h"

namespace tg = rdmablk::target;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = tg::parse_config(text, "fuzz.yaml");
  if (!cfg) {
    FUZZ_CHECK(!cfg.error().message.empty());
    FUZZ_CHECK(cfg.error().message.rfind("fuzz.yaml", 0) == 0);  // every error names the file
  } else {
    const std::string described = tg::describe(*cfg);
    FUZZ_CHECK(!described.empty());
    FUZZ_CHECK(tg::restart_only_changes(*cfg, *cfg).empty());
    auto again = tg::parse_config(text, "fuzz.yaml");
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(tg::describe(*again) == described);
    if (!cfg->reactor_cpus.empty()) {
      auto cpus = tg::parse_cpu_list(tg::format_cpu_list(cfg->reactor_cpus));
      FUZZ_CHECK(cpus.has_value() && *cpus == cfg->reactor_cpus);
    }
    for (const auto& sub : cfg->subsystems) {
      for (const auto& ns : sub.namespaces) {
        auto bytes = tg::parse_size(tg::format_size(ns.size));
        FUZZ_CHECK(bytes.has_value() && *bytes == ns.size);
      }
    }
  }
  // The same text through the scalar parsers the config and the CLI use.
  if (size <= 256) {
    if (auto cpus = tg::parse_cpu_list(text)) {
      auto again = tg::parse_cpu_list(tg::format_cpu_list(*cpus));
      FUZZ_CHECK(again.has_value() && again->size() == cpus->size());
    }
    if (auto bytes = tg::parse_size(text)) {
      auto again = tg::parse_size(tg::format_size(*bytes));
      FUZZ_CHECK(again.has_value() && *again == *bytes);
    }
  }
  return 0;
}

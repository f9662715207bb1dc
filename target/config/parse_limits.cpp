#include "target/config/parser.h"

#include <map>
#include <thread>

namespace rdmablk::target::config_impl {

SourceLocation Parser::inside_scalar(const Field& f, std::size_t offset) const {
  const YAML::Mark mark = f.value.Mark();
  if (mark.pos < 0 || static_cast<std::size_t>(mark.pos) >= text_.size()) return f.value_at;
  std::size_t start = static_cast<std::size_t>(mark.pos);
  if (text_[start] == '"' || text_[start] == '\'') ++start;
  const std::string& value = f.value.Scalar();
  if (text_.substr(start, value.size()) != value || value.find('\n') != std::string::npos) return f.value_at;
  return {f.value_at.line, f.value_at.column + static_cast<int>(start - static_cast<std::size_t>(mark.pos) + offset)};
}

// `reactors: 4` (a count, 0 = one per online CPU), or the CPUs to pin one reactor each to: a list
// `[2, 3, 6-7]` of CPU numbers and A-B ranges, or the same as one string "2,3,6-7" (taskset -c's and
// systemd CPUAffinity='s form). Only the syntax here; online and allowed are validate_environment()'s.
void Parser::parse_reactors(const Field& f, TargetConfig& config) {
  constexpr std::string_view kExpected = "a reactor count or a CPU list such as [2, 3, 6-7]";
  constexpr std::string_view kEmpty =
      "an empty CPU list (list the CPUs to pin one reactor each to, or write 0 for one reactor per online CPU)";
  std::map<int, SourceLocation> first_at;  // CPU -> where it was first listed
  auto add = [&](std::string_view text, SourceLocation at) {
    std::string problem;
    auto entry = parse_cpu_entry(text, problem);
    if (!entry) fail(at, f.path, problem);
    for (int cpu = entry->first; cpu <= entry->last; ++cpu) {
      auto [it, inserted] = first_at.emplace(cpu, at);
      if (!inserted) {
        fail(at, f.path,
             "duplicate CPU " + std::to_string(cpu) + " (first at line " + std::to_string(it->second.line) +
                 ", column " + std::to_string(it->second.column) + ")");
      }
      if (config.reactor_cpus.size() == kMaxReactors) {
        fail(at, f.path,
             "more than " + std::to_string(kMaxReactors) + " CPUs (one reactor each, at most " +
                 std::to_string(kMaxReactors) + " reactors)");
      }
      config.reactor_cpus.push_back(cpu);
      config.reactor_cpus_at.push_back(at);
    }
  };

  if (f.value.IsSequence()) {
    if (f.value.size() == 0) fail(f.value_at, f.path, kEmpty);
    for (const auto& node : f.value) {
      SourceLocation at = missing(node) ? f.value_at : location_of(node.Mark());
      Field item{f.path, "", node, at, at};
      add(scalar(item, "a CPU number or a range such as 6-7"), at);
    }
  } else {
    std::string text = scalar(f, kExpected);
    if (text.empty()) fail(f.value_at, f.path, kEmpty);
    bool list = text.find(',') != std::string::npos || text.find('-', 1) != std::string::npos;
    if (!list) {
      bool number = (text.front() >= '0' && text.front() <= '9') || text.front() == '-';
      if (!number) fail(f.value_at, f.path, "expected " + std::string(kExpected) + ", got " + in_quotes(text));
      config.reactors = static_cast<unsigned>(integer(f, 0, kMaxReactors));
      unsigned cpus = std::thread::hardware_concurrency();
      if (cpus != 0 && config.reactors > cpus) {
        warn(f.value_at, f.path,
             std::to_string(config.reactors) + " reactors on " + std::to_string(cpus) +
                 " CPUs: busy-polling threads will compete for cores");
      }
      return;
    }
    for (auto [entry, offset] : split_cpu_list(text)) add(entry, inside_scalar(f, offset));
  }
  if (config.reactor_cpus.empty()) fail(f.value_at, f.path, kEmpty);
  config.reactors = static_cast<unsigned>(config.reactor_cpus.size());
}

QueueLimits Parser::parse_limits(const Field& f) {
  Mapping m(*this, f.value, f.path, f.value_at,
            {"io_queue_depth", "admin_queue_depth", "max_io_queues", "max_io_size", "admin_inline_data",
             "io_inline_data", "queue_buffer_bytes", "keep_alive", "connections"});
  QueueLimits limits;
  if (const Field* x = m.find("io_queue_depth")) limits.io_queue_depth = integer32(*x, 2, 1024);
  if (const Field* x = m.find("admin_queue_depth")) limits.admin_queue_depth = integer32(*x, 32, 1024);
  if (const Field* x = m.find("max_io_queues")) limits.max_io_queues = integer32(*x, 1, 65535);
  if (const Field* x = m.find("max_io_size")) {
    limits.max_io_size = static_cast<uint32_t>(size_value(*x, 4096, 64u << 20));
    if ((limits.max_io_size & (limits.max_io_size - 1)) != 0) {
      fail(x->value_at, x->path,
           std::to_string(limits.max_io_size) + " is not a power of two (MDTS is a power of two of 4 KiB pages)");
    }
  }
  auto inline_size = [&](const Field& x, uint32_t min) {
    auto v = static_cast<uint32_t>(size_value(x, min, kMaxInlineData));
    if (v % 16 != 0) {
      fail(x.value_at, x.path, std::to_string(v) + " is not a multiple of 16 (capsule sizes are in 16-byte units)");
    }
    return v;
  };
  if (const Field* x = m.find("admin_inline_data")) {
    // The Linux NVMe/TCP host sends the 1 KiB Connect data in-capsule and sizes it for 8 KiB (protocol/defaults.h).
    limits.admin_inline_data = inline_size(*x, protocol::defaults::kAdminInCapsule);
  }
  if (const Field* x = m.find("io_inline_data")) limits.io_inline_data = inline_size(*x, 0);
  if (const Field* x = m.find("queue_buffer_bytes")) limits.queue_buffer_bytes = size_value(*x, 64 * 1024, 1ull << 40);
  if (const Field* c = m.find("connections")) {
    Mapping k(*this, c->value, c->path, c->value_at, {"per_listener", "per_host", "connect_timeout_ms"});
    auto& out = limits.connections;
    if (const Field* x = k.find("per_listener")) out.per_listener = integer32(*x, 0, 1'000'000);
    if (const Field* x = k.find("per_host")) out.per_host = integer32(*x, 0, 1'000'000);
    if (const Field* x = k.find("connect_timeout_ms")) out.connect_timeout_ms = integer32(*x, 100, 3'600'000);
  }

  if (const Field* ka = m.find("keep_alive")) {
    Mapping k(*this, ka->value, ka->path, ka->value_at, {"discovery_timeout_ms", "max_timeout_ms", "traffic_based"});
    auto& out = limits.keep_alive;
    if (const Field* x = k.find("max_timeout_ms")) out.max_timeout_ms = integer32(*x, 1000, 86'400'000);
    if (const Field* x = k.find("discovery_timeout_ms")) {
      out.discovery_timeout_ms = integer32(*x, 1000, 86'400'000);
      if (out.discovery_timeout_ms > out.max_timeout_ms) {
        fail(
            x->value_at, x->path,
            std::to_string(out.discovery_timeout_ms) + " exceeds max_timeout_ms " + std::to_string(out.max_timeout_ms));
      }
    }
    if (const Field* x = k.find("traffic_based")) out.traffic_based = boolean(*x);
  }
  return limits;
}

}  // namespace rdmablk::target::config_impl

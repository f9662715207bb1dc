#include "target/config/parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

namespace rdmablk::target {

std::string host_port(const std::string& address, uint16_t port) {
  bool v6 = address.find(':') != std::string::npos;
  return (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

const char* listener_role_name(ListenerRole r) noexcept {
  switch (r) {
    case ListenerRole::io:
      return "io";
    case ListenerRole::discovery:
      return "discovery";
  }
  return "unknown";
}

namespace {
constexpr std::array<std::pair<std::string_view, protocol::AnaState>, 5> kAnaStateNames{{
    {"optimized", protocol::AnaState::optimized},
    {"non_optimized", protocol::AnaState::non_optimized},
    {"inaccessible", protocol::AnaState::inaccessible},
    {"persistent_loss", protocol::AnaState::persistent_loss},
    {"change", protocol::AnaState::change},
}};
}  // namespace

Result<protocol::AnaState> parse_ana_state(std::string_view name) {
  for (const auto& [n, st] : kAnaStateNames)
    if (n == name) return st;
  return make_error("unknown ANA state '" + std::string(name) +
                    "' (expected optimized, non_optimized, inaccessible, persistent_loss or change)");
}

const char* ana_state_config_name(protocol::AnaState s) noexcept {
  for (const auto& [n, st] : kAnaStateNames)
    if (st == s) return n.data();
  return "unknown";
}

protocol::AnaState ListenerConfig::ana_state(uint32_t group) const noexcept {
  for (const auto& a : ana)
    if (a.group == group) return a.state;
  return protocol::AnaState::optimized;
}

const char* backend_kind_name(BackendKind k) noexcept {
  switch (k) {
    case BackendKind::file:
      return "file";
    case BackendKind::ram:
      return "ram";
    case BackendKind::null:
      return "null";
    case BackendKind::rbd:
      return "rbd";
  }
  return "unknown";
}

using namespace config_impl;

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}


uint64_t fnv1a64(std::string_view data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer: spreads FNV's weak low bits
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

std::array<uint8_t, 16> derive_id(std::string_view domain, std::string_view nqn, uint32_t nsid) {
  std::string base = std::string(domain) + '\0' + std::string(nqn) + '\0' + std::to_string(nsid);
  std::array<uint8_t, 16> out{};
  for (unsigned half = 0; half < 2; ++half) {
    uint64_t h = mix64(fnv1a64(base + static_cast<char>('0' + half)));
    for (unsigned i = 0; i < 8; ++i) out[half * 8 + i] = static_cast<uint8_t>(h >> (56 - 8 * i));
  }
  return out;
}

}  // namespace

namespace config_impl {

// "N" or "A-B" (decimal, no spaces); nullopt and `problem` set when it is not one.
std::optional<CpuEntry> parse_cpu_entry(std::string_view text, std::string& problem) {
  if (text.empty()) {
    problem = "empty entry (expected a CPU number or a range such as 6-7)";
    return std::nullopt;
  }
  std::size_t dash = text.find('-', 1);
  std::string_view a = text.substr(0, dash);
  std::string_view b = dash == std::string_view::npos ? a : text.substr(dash + 1);
  if (a.front() == '-' || (!b.empty() && b.front() == '-')) {
    problem = "CPU numbers must not be negative (got " + in_quotes(text) + ")";
    return std::nullopt;
  }
  if (!all_digits(a) || !all_digits(b)) {
    problem = "expected a CPU number or a range such as 6-7, got " + in_quotes(text);
    return std::nullopt;
  }
  auto number = [&](std::string_view digits, int& out) {
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    if (ec != std::errc() || out > kMaxCpu) {
      problem = "CPU " + (digits.size() > 24 ? in_quotes(digits) : std::string(digits)) +
                " is out of range (expected 0.." + std::to_string(kMaxCpu) + ")";
      return false;
    }
    return true;
  };
  CpuEntry entry;
  if (!number(a, entry.first) || !number(b, entry.last)) return std::nullopt;
  if (entry.first > entry.last) {
    problem = "range " + std::string(text) + " goes backwards (write " + std::string(b) + "-" + std::string(a) + ")";
    return std::nullopt;
  }
  return entry;
}

// Splits "2, 3,6-7" at commas into entries with their offsets; spaces around an entry are dropped.
std::vector<std::pair<std::string_view, std::size_t>> split_cpu_list(std::string_view text) {
  std::vector<std::pair<std::string_view, std::size_t>> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::size_t end = comma == std::string_view::npos ? text.size() : comma;
    std::size_t b = start, e = end;
    while (b < e && (text[b] == ' ' || text[b] == '\t')) ++b;
    while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t')) --e;
    out.emplace_back(text.substr(b, e - b), b);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace config_impl

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  std::vector<int> cpus;
  if (s.empty()) return cpus;
  auto bad = [&](const std::string& why) {
    return make_error("invalid CPU list " + in_quotes(text) + ": " + why, EINVAL);
  };
  std::set<int> seen;
  for (auto [entry_text, offset] : split_cpu_list(s)) {
    std::string problem;
    auto entry = parse_cpu_entry(entry_text, problem);
    if (!entry) return bad(problem);
    for (int cpu = entry->first; cpu <= entry->last; ++cpu) {
      if (!seen.insert(cpu).second) return bad("CPU " + std::to_string(cpu) + " is listed twice");
      cpus.push_back(cpu);
    }
  }
  return cpus;
}

std::string format_cpu_list(std::span<const int> cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

Result<uint64_t> parse_size(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  auto bad = [&](const std::string& why) { return make_error("invalid size " + in_quotes(text) + ": " + why, EINVAL); };
  if (s.empty()) return bad("empty");
  if (s.front() == '-') return bad("must not be negative");
  std::size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0) return bad("expected a number of bytes, optionally followed by a unit (K, M, G, T, P or KiB...)");
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + digits, value);
  if (ec == std::errc::result_out_of_range) return bad("too large");
  std::string_view unit = s.substr(digits);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  if (!unit.empty() && (unit.front() == '.' || unit.front() == ',')) {
    return bad("fractions are not supported (write 1536MiB rather than 1.5GiB)");
  }
  std::string u = lower(unit);
  unsigned shift = 0;
  if (u.empty() || u == "b") {
    shift = 0;
  } else {
    static constexpr std::string_view kPrefixes = "kmgtp";
    auto pos = kPrefixes.find(u[0]);
    std::string rest = u.substr(1);
    if (pos == std::string_view::npos || !(rest.empty() || rest == "ib" || rest == "b")) {
      return bad("unknown unit " + in_quotes(unit) + " (expected K, M, G, T, P, KiB, MiB, GiB, TiB or PiB)");
    }
    if (rest == "b") {
      std::string suggestion = std::string(1, static_cast<char>(std::toupper(static_cast<unsigned char>(u[0])))) + "iB";
      return bad("ambiguous unit " + in_quotes(unit) + " (write " + suggestion +
                 " for 1024-based units, or a byte count)");
    }
    shift = 10 * static_cast<unsigned>(pos + 1);
  }
  if (shift && value > (UINT64_MAX >> shift)) return bad("too large");
  return value << shift;
}

std::string format_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  unsigned unit = 0;
  uint64_t v = bytes;
  while (unit < 5 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    ++unit;
  }
  return std::to_string(v) + " " + kUnits[unit];
}

backend::FileOptions file_options(const NamespaceConfig& ns) {
  backend::FileOptions o;
  o.path = ns.path;
  o.size = ns.size;
  o.block_size = ns.block_size;
  o.direct = ns.direct;
  o.read_only = ns.read_only;
  return o;
}

backend::MemoryOptions memory_options(const NamespaceConfig& ns) {
  backend::MemoryOptions o;
  o.size = ns.size;
  o.block_size = block_size_or_default(ns);
  o.read_only = ns.read_only;
  return o;
}

backend::RbdOptions rbd_options(const NamespaceConfig& ns) {
  backend::RbdOptions o;
  o.pool = ns.pool;
  o.image = ns.image;
  o.rados_namespace = ns.rados_namespace;
  o.ceph_conf = ns.ceph_conf;
  o.client = ns.client;
  o.keyring = ns.keyring;
  o.block_size = block_size_or_default(ns);
  o.read_only = ns.read_only;
  return o;
}

std::string rbd_location(const NamespaceConfig& ns) {
  return "rbd " + ns.pool + "/" + (ns.rados_namespace.empty() ? "" : ns.rados_namespace + "/") + ns.image +
         " (client " + ns.client + ")";
}

std::string derive_serial(std::string_view subsystem_nqn) {
  uint64_t h = mix64(fnv1a64("serial:" + std::string(subsystem_nqn)));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (unsigned i = 0; i < 16; ++i) out[i] = kHex[(h >> (60 - 4 * i)) & 15];
  return out;
}

std::array<uint8_t, 16> derive_uuid(std::string_view subsystem_nqn, uint32_t nsid) {
  auto id = derive_id("uuid", subsystem_nqn, nsid);
  id[6] = static_cast<uint8_t>((id[6] & 0x0F) | 0x80);  // version 8: custom (RFC 9562)
  id[8] = static_cast<uint8_t>((id[8] & 0x3F) | 0x80);  // variant 10
  return id;
}

std::array<uint8_t, 16> derive_nguid(std::string_view subsystem_nqn, uint32_t nsid) {
  return derive_id("nguid", subsystem_nqn, nsid);
}

std::string format_uuid(const std::array<uint8_t, 16>& uuid) { return protocol::format_uuid(uuid); }

}  // namespace rdmablk::target

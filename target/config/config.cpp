#include "target/config/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "config/yaml_diagnostics.h"
#include "protocol/fabrics.h"
#include "security/dhchap_key.h"
#include "target/config/logging.h"

namespace rdmablk::target {

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

namespace {

using protocol::kDiscoveryNqn;
constexpr uint32_t kMaxNsid = 0xFFFFFFFEu;
constexpr uint32_t kMaxInlineData = 128 * 1024;
constexpr unsigned kMaxReactors = 1024;
constexpr unsigned kMaxBusyPollUs = 1000000;
constexpr int kMaxCpu = 65535;  // a bound on CPU numbers in a list; the machine's are checked later
// sockaddr_un::sun_path less the terminating NUL.
constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;

// --- small helpers ----------------------------------------------------------------------------------

// The message rules and key checks shared with the initiator's attach files (config/yaml_diagnostics.h).
using config::Field;
using config::format_message;
using config::in_quotes;
using config::location_of;
using config::lower;
using config::node_kind;

// Parses an IPv4 or IPv6 literal into its family and 16 address bytes (IPv4 in the first 4).
struct IpAddress {
  int family = AF_UNSPEC;
  std::array<uint8_t, 16> bytes{};
  bool wildcard() const {
    return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
  }
};

std::optional<IpAddress> parse_ip(const std::string& text) {
  IpAddress ip;
  if (inet_pton(AF_INET, text.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET;
    return ip;
  }
  if (inet_pton(AF_INET6, text.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET6;
    return ip;
  }
  return std::nullopt;
}

// "10.0.0.1:4420", "[::1]:4420".
std::string host_port(const std::string& address, uint16_t port) {
  bool v6 = address.find(':') != std::string::npos;
  return (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

std::string endpoint(const ListenerConfig& l) {
  return std::string(transport::transport_name(l.transport)) + " " + host_port(l.address, l.port);
}

// Two TCP sockets that could not both bind: the same port, and the same address or a wildcard that
// covers the other (Linux's default bindv6only=0 makes "::" cover IPv4 too).
bool sockets_overlap(const std::string& a, uint16_t a_port, const std::string& b, uint16_t b_port) {
  if (a_port != b_port) return false;
  auto ia = parse_ip(a);
  auto ib = parse_ip(b);
  if (!ia || !ib) return a == b;
  if (ia->family == ib->family) return ia->bytes == ib->bytes || ia->wildcard() || ib->wildcard();
  return (ia->family == AF_INET6 && ia->wildcard()) || (ib->family == AF_INET6 && ib->wildcard());
}

// Two listeners that could not both bind: same transport, and sockets that overlap.
bool listeners_overlap(const ListenerConfig& a, const ListenerConfig& b) {
  return a.transport == b.transport && sockets_overlap(a.address, a.port, b.address, b.port);
}

// --- CPU lists --------------------------------------------------------------------------------------

// One entry of a CPU list: a CPU, or an inclusive range of them.
struct CpuEntry {
  int first = 0;
  int last = 0;
};

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

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

std::optional<std::array<uint8_t, 16>> parse_hex_id(std::string_view text) {
  std::array<uint8_t, 16> out{};
  unsigned digits = 0;
  for (char c : text) {
    if (c == '-') continue;
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    if (digits >= 32) return std::nullopt;
    out[digits / 2] = static_cast<uint8_t>(out[digits / 2] | (v << (digits % 2 ? 0 : 4)));
    ++digits;
  }
  if (digits != 32) return std::nullopt;
  return out;
}

bool is_canonical_uuid(std::string_view text) {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (text[i] == '-')) return false;
  }
  return true;
}

bool all_zero(const std::array<uint8_t, 16>& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

std::string hex_id(const std::array<uint8_t, 16>& id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : id) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// The NQN rules live in protocol/ (shared with Connect and the initiator); this adapts its answer.
std::optional<std::string> nqn_problem(std::string_view nqn) {
  auto form = protocol::decode_nqn(nqn);
  if (form) return std::nullopt;
  return std::string(form.error().what) + " (at character " + std::to_string(form.error().offset + 1) + ")";
}

// --- the parser ------------------------------------------------------------------------------------

using config::Mapping;

// `backend: null` means the null backend; keys are matched against the known ones ignoring case.
constexpr config::Dialect kDialect{.null_is_a_word = true, .suggest_ignoring_case = true};

class Parser : public config::Reader {
 public:
  Parser(std::string file, std::string_view text) : Reader(std::move(file), text, kDialect), text_(text) {}

  void warn(SourceLocation at, std::string_view field, std::string_view problem) {
    warnings_.push_back(message(at, field, problem));
  }
  std::vector<std::string> take_warnings() { return std::move(warnings_); }

  TargetConfig parse();

 private:
  uint64_t integer(const Field& f, uint64_t min, uint64_t max) const { return Reader::integer(f, min, max); }

  uint32_t integer32(const Field& f, uint32_t min, uint32_t max) const {
    return static_cast<uint32_t>(integer(f, min, max));
  }

  uint64_t size_value(const Field& f, uint64_t min, uint64_t max) const {
    std::string text = scalar(f, "a size such as 1GiB or 4096");
    auto size = parse_size(text);
    if (!size) fail(f.value_at, f.path, size.error().message);
    if (*size < min || *size > max) {
      fail(f.value_at, f.path,
           (text.size() > 24 ? in_quotes(text) : text) + " is out of range (expected " + format_size(min) + ".." +
               format_size(max) + ")");
    }
    return *size;
  }

  bool boolean(const Field& f) const {
    std::string text = scalar(f, "true or false");
    std::string l = lower(text);
    if (l == "true" || l == "yes" || l == "on") return true;
    if (l == "false" || l == "no" || l == "off") return false;
    fail(f.value_at, f.path, "expected true or false, got " + in_quotes(text));
  }

  // The items of a list; a null value is an empty list.
  std::vector<YAML::Node> sequence(const Field& f) const {
    std::vector<YAML::Node> items;
    if (f.value.IsNull()) return items;
    if (!f.value.IsSequence()) {
      fail(f.value_at, f.path, std::string("expected a list (- item), got a ") + node_kind(f.value));
    }
    for (const auto& item : f.value) items.push_back(item);
    return items;
  }

  void check_printable(const Field& f, const std::string& s, std::size_t max_len) const {
    if (s.size() > max_len) {
      fail(f.value_at, f.path,
           "too long (" + std::to_string(s.size()) + " characters, at most " + std::to_string(max_len) + ")");
    }
    for (char c : s) {
      if (c < 0x20 || c > 0x7e) fail(f.value_at, f.path, "only printable ASCII characters are allowed");
    }
    if (s.front() == ' ' || s.back() == ' ') {
      fail(f.value_at, f.path, "must not begin or end with a space (the wire format pads with spaces)");
    }
  }

  void check_nqn(SourceLocation at, const std::string& field, const std::string& nqn) const {
    if (auto problem = nqn_problem(nqn)) fail(at, field, "invalid NQN " + in_quotes(nqn) + ": " + *problem);
  }

  // An IPv4 or IPv6 literal ("[::1]" as "::1"); `what` is the required-key description.
  std::string ip_address(const Field& f, std::string_view what) const;
  // Where the character at `offset` of a scalar value is in the file; the value's start when the
  // scalar is not written verbatim on one line (escapes, folded lines).
  SourceLocation inside_scalar(const Field& f, std::size_t offset) const;
  // A mapping's node, with a hint when a scalar stands where it belongs (`control: off`).
  void expect_mapping(const Field& f, std::string_view keys, std::string_view hint) const;

  ListenerConfig parse_listener(const YAML::Node& node, const std::string& path);
  std::vector<AnaGroupState> parse_ana(const Field& f) const;
  void parse_reactors(const Field& f, TargetConfig& config);
  ControlConfig parse_control(const Field& f) const;
  MetricsConfig parse_metrics(const Field& f) const;
  void check_metrics(const TargetConfig& config) const;
  SubsystemConfig parse_subsystem(const YAML::Node& node, const std::string& path);
  HostConfig parse_host(const YAML::Node& node, const std::string& path, SourceLocation at);
  TlsPskConfig parse_tls_psk(const Mapping& m) const;
  void parse_rbd_keys(const Mapping& m, NamespaceConfig& ns) const;
  DhchapSecretConfig parse_secret(const Mapping& m, std::string_view key_name, std::string_view file_name) const;
  NamespaceConfig parse_namespace(const YAML::Node& node, const std::string& path);
  QueueLimits parse_limits(const Field& f);
  void check_listeners(const TargetConfig& config, const Field& f) const;
  void check_namespaces_across_subsystems(const TargetConfig& config) const;

  std::string_view text_;  // the YAML, to place entries inside a scalar
  std::vector<std::string> warnings_;
};

TargetConfig Parser::parse() {
  YAML::Node root = load_mapping("the configuration is empty (at least `listeners` is required)");
  Mapping top(*this, root, "", location_of(root.Mark()),
              {"listeners", "subsystems", "reactors", "busy_poll_us", "log_level", "limits", "control", "metrics",
               "tls_psk_derivation"});

  TargetConfig config;
  config.source = file();

  const Field& listeners = top.require("listeners", "a list of listeners");
  auto listener_nodes = sequence(listeners);
  if (listener_nodes.empty()) fail(listeners.value_at, listeners.path, "at least one listener is required");
  for (std::size_t i = 0; i < listener_nodes.size(); ++i) {
    config.listeners.push_back(parse_listener(listener_nodes[i], listeners.path + "[" + std::to_string(i) + "]"));
  }

  if (const Field* f = top.find("subsystems")) {
    auto nodes = sequence(*f);
    std::map<std::string, int> first_line;  // NQN -> line
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      std::string path = f->path + "[" + std::to_string(i) + "]";
      SubsystemConfig sub = parse_subsystem(nodes[i], path);
      auto [it, inserted] = first_line.emplace(sub.nqn, sub.nqn_at.line);
      if (!inserted) {
        fail(sub.nqn_at, path + ".nqn",
             "duplicate subsystem NQN " + in_quotes(sub.nqn) + " (first at line " + std::to_string(it->second) + ")");
      }
      config.subsystems.push_back(std::move(sub));
    }
    if (nodes.empty()) warn(f->value_at, f->path, "no subsystems: only discovery will be served");
  } else {
    warn(top.at(), "subsystems", "no subsystems: only discovery will be served");
  }

  check_listeners(config, listeners);
  check_namespaces_across_subsystems(config);
  const bool any_tls = std::any_of(config.listeners.begin(), config.listeners.end(),
                                   [](const ListenerConfig& l) { return l.tls != transport::tcp::TlsPolicy::none; });
  for (std::size_t s = 0; s < config.subsystems.size() && !any_tls; ++s) {
    const auto& hosts = config.subsystems[s].host_configs;
    for (std::size_t h = 0; h < hosts.size(); ++h) {
      if (!hosts[h].tls_psk.configured()) continue;
      warn(hosts[h].tls_psk.at, "subsystems[" + std::to_string(s) + "].hosts[" + std::to_string(h) + "]",
           "a tls_psk, but no listener has tls: optional or required, so it is never used");
    }
  }

  if (const Field* f = top.find("reactors")) parse_reactors(*f, config);
  if (const Field* f = top.find("busy_poll_us")) {
    config.busy_poll_us = static_cast<unsigned>(integer(*f, 0, kMaxBusyPollUs));
  }
  if (const Field* f = top.find("log_level")) {
    auto level = parse_log_level(scalar(*f, "a log level"));
    if (!level) fail(f->value_at, f->path, level.error().message);
    config.log_level = *level;
  }
  if (const Field* f = top.find("limits")) {
    config.limits = parse_limits(*f);
    // The Linux host reads the whole ANA log in one command sized for ANAGRPMAX groups and MNAN NSIDs and
    // turns ANA (multipath) off when that exceeds MDTS.
    std::size_t most = 0;
    for (const auto& sub : config.subsystems) most = std::max(most, sub.namespaces.size());
    const uint64_t ana_log = protocol::ana_log_max_size(kAnaGroupMax, static_cast<uint32_t>(std::max<std::size_t>(1024, most)));
    if (config.limits.max_io_size < ana_log) {
      warn(f->value_at, f->path + ".max_io_size",
           format_size(config.limits.max_io_size) + " is below the ANA log page's " + std::to_string(ana_log) +
               " bytes: Linux hosts will turn ANA multipath off");
    }
  }
  if (const Field* f = top.find("tls_psk_derivation")) {
    config.tls_psk_derivation = one_of<security::PskDerivation>(
        *f, "PSK derivation",
        {{"standard", security::PskDerivation::standard}, {"libnvme_compat", security::PskDerivation::libnvme_compat}});
    config.tls_psk_derivation_at = f->value_at;
  }
  if (const Field* f = top.find("control")) config.control = parse_control(*f);
  if (const Field* f = top.find("metrics")) config.metrics = parse_metrics(*f);
  check_metrics(config);

  config.warnings = take_warnings();
  return config;
}

ListenerConfig Parser::parse_listener(const YAML::Node& node, const std::string& path) {
  SourceLocation at = location_of(node.Mark());
  if (!node.IsMap())
    fail(at, path, std::string("expected a mapping (transport, address, port, role, tls, ana), got a ") + node_kind(node));
  Mapping m(*this, node, path, at, {"transport", "address", "port", "role", "tls", "ana"});
  ListenerConfig l;
  l.at = at;
  if (const Field* f = m.find("transport")) {
    auto type = transport::parse_transport_type(scalar(*f, "tcp or rdma"));
    if (!type) fail(f->value_at, f->path, type.error().message);
    l.transport = *type;
  }
  if (const Field* f = m.find("role")) {
    l.role = one_of<ListenerRole>(*f, "role", {{"io", ListenerRole::io}, {"discovery", ListenerRole::discovery}});
  }
  const Field& address = m.require("address", "an IPv4 or IPv6 address, 0.0.0.0 or :: for all");
  l.address = ip_address(address, "an IPv4 or IPv6 address");
  l.address_at = address.value_at;
  l.port = l.role == ListenerRole::discovery ? transport::kDefaultDiscoveryPort : transport::kDefaultIoPort;
  l.port_at = at;
  if (const Field* f = m.find("port")) {
    l.port = static_cast<uint16_t>(integer(*f, 1, 65535));
    l.port_at = f->value_at;
  }
  if (const Field* f = m.find("tls")) {
    auto policy = transport::tcp::parse_tls_policy(scalar(*f, "none, optional or required"));
    if (!policy) fail(f->value_at, f->path, policy.error().message);
    if (*policy != transport::tcp::TlsPolicy::none && l.transport != transport::TransportType::tcp) {
      fail(f->value_at, f->path, "TLS is for NVMe/TCP listeners only (the RDMA binding has no secure channel)");
    }
    l.tls = *policy;
  }
  if (const Field* f = m.find("ana")) {
    if (l.role == ListenerRole::discovery) {
      fail(f->key_at, f->path, "ANA states apply to io listeners only (a discovery listener serves no namespaces)");
    }
    l.ana = parse_ana(*f);
  }
  return l;
}

// `ana: {1: optimized, 2: inaccessible}`: group -> state, each group once.
std::vector<AnaGroupState> Parser::parse_ana(const Field& f) const {
  if (missing(f.value)) return {};
  if (!f.value.IsMap()) {
    fail(f.value_at, f.path,
         std::string("expected a mapping of ANA group to state ({1: optimized, 2: inaccessible}), got a ") +
             node_kind(f.value));
  }
  std::vector<AnaGroupState> out;
  for (auto it = f.value.begin(); it != f.value.end(); ++it) {
    const SourceLocation key_at = location_of(it->first.Mark());
    const std::string key_text = it->first.IsScalar() ? it->first.Scalar() : std::string();
    Field key{f.path, "", it->first, key_at, key_at};
    AnaGroupState entry;
    entry.group = integer32(key, 1, kAnaGroupMax);  // group 0 is not an ANA group ID
    entry.at = key_at;
    const std::string item_path = f.path + "." + std::to_string(entry.group);
    for (const auto& seen : out) {
      if (seen.group == entry.group) {
        fail(key_at, item_path, "ANA group listed twice (first at line " + std::to_string(seen.at.line) + ")");
      }
    }
    const SourceLocation value_at = missing(it->second) ? key_at : location_of(it->second.Mark());
    Field value{item_path, key_text, it->second, key_at, value_at};
    const std::string name = scalar(value, "an ANA state");
    auto state = parse_ana_state(name);
    if (!state) fail(value_at, item_path, state.error().message);
    entry.state = *state;
    out.push_back(entry);
  }
  std::sort(out.begin(), out.end(), [](const AnaGroupState& a, const AnaGroupState& b) { return a.group < b.group; });
  return out;
}

std::string Parser::ip_address(const Field& f, std::string_view what) const {
  std::string address = string_value(f, what);
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  if (!parse_ip(address)) {
    fail(f.value_at, f.path,
         in_quotes(address) +
             " is not an IPv4 or IPv6 address (host names are not resolved here; "
             "0.0.0.0 or \"::\" listens on every address)");
  }
  return address;
}

SourceLocation Parser::inside_scalar(const Field& f, std::size_t offset) const {
  const YAML::Mark mark = f.value.Mark();
  if (mark.pos < 0 || static_cast<std::size_t>(mark.pos) >= text_.size()) return f.value_at;
  std::size_t start = static_cast<std::size_t>(mark.pos);
  if (text_[start] == '"' || text_[start] == '\'') ++start;
  const std::string& value = f.value.Scalar();
  if (text_.substr(start, value.size()) != value || value.find('\n') != std::string::npos) return f.value_at;
  return {f.value_at.line, f.value_at.column + static_cast<int>(start - static_cast<std::size_t>(mark.pos) + offset)};
}

void Parser::expect_mapping(const Field& f, std::string_view keys, std::string_view hint) const {
  if (missing(f.value) || f.value.IsMap()) return;
  fail(f.value_at, f.path,
       "expected a mapping (" + std::string(keys) + "), got a " + node_kind(f.value) + " (" + std::string(hint) + ")");
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

ControlConfig Parser::parse_control(const Field& f) const {
  expect_mapping(f, "enabled, socket", "write `control: {enabled: false}` to turn the control socket off");
  Mapping m(*this, f.value, f.path, f.value_at, {"enabled", "socket"});
  ControlConfig c;
  c.at = f.value_at;
  if (const Field* x = m.find("enabled")) c.enabled = boolean(*x);
  if (const Field* x = m.find("socket")) {
    std::string path = scalar(*x, "the control socket's absolute path");
    if (path.empty()) {
      fail(x->value_at, x->path, "must not be empty (write enabled: false to turn the control socket off)");
    }
    if (path.front() != '/') {
      fail(x->value_at, x->path,
           in_quotes(path) +
               " is not an absolute path (the control socket's path is used as written, and "
               "clients find it by its full path)");
    }
    if (path.back() == '/') fail(x->value_at, x->path, in_quotes(path) + " names a directory, not a socket file");
    if (path.size() > kMaxSocketPath) {
      fail(x->value_at, x->path,
           "too long for a Unix socket (" + std::to_string(path.size()) + " bytes, at most " +
               std::to_string(kMaxSocketPath) + ")");
    }
    c.socket_path = std::move(path);
    c.socket_at = x->value_at;
  }
  return c;
}

MetricsConfig Parser::parse_metrics(const Field& f) const {
  expect_mapping(f, "enabled, address, port", "write `metrics: {address: 127.0.0.1, port: 9464}` to serve /metrics");
  Mapping m(*this, f.value, f.path, f.value_at, {"enabled", "address", "port"});
  MetricsConfig c;
  c.at = f.value_at;
  c.enabled = true;  // a `metrics:` mapping asks for the endpoint
  if (const Field* x = m.find("enabled")) c.enabled = boolean(*x);
  const Field* address = c.enabled ? &m.require("address",
                                                "the address to serve /metrics on: 127.0.0.1, or 0.0.0.0 "
                                                "or :: for every address")
                                   : m.find("address");
  if (address) {
    c.address = ip_address(*address, "an IPv4 or IPv6 address");
    c.address_at = address->value_at;
  }
  c.port_at = c.at;
  if (const Field* x = m.find("port")) {
    c.port = static_cast<uint16_t>(integer(*x, 1, 65535));
    c.port_at = x->value_at;
  }
  return c;
}

void Parser::check_metrics(const TargetConfig& config) const {
  const MetricsConfig& m = config.metrics;
  if (!m.enabled) return;
  for (std::size_t i = 0; i < config.listeners.size(); ++i) {
    const ListenerConfig& l = config.listeners[i];
    if (l.transport != transport::TransportType::tcp || !sockets_overlap(m.address, m.port, l.address, l.port)) {
      continue;
    }
    fail(m.port_at, "metrics.port",
         host_port(m.address, m.port) + " collides with listeners[" + std::to_string(i) + "] (" + endpoint(l) +
             " at line " + std::to_string(l.at.line) + "): the metrics endpoint needs a port of its own");
  }
}

void Parser::check_listeners(const TargetConfig& config, const Field& f) const {
  const auto& ls = config.listeners;
  for (std::size_t j = 0; j < ls.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      if (!listeners_overlap(ls[i], ls[j])) continue;
      std::string path = f.path + "[" + std::to_string(j) + "]";
      if (ls[i].address == ls[j].address) {
        fail(ls[j].at, path,
             "duplicate listener " + endpoint(ls[j]) + " (first at line " + std::to_string(ls[i].at.line) + ")");
      }
      fail(ls[j].at, path,
           endpoint(ls[j]) + " overlaps " + endpoint(ls[i]) + " at line " + std::to_string(ls[i].at.line) +
               " (a wildcard address already covers the other)");
    }
  }
  bool any_io = std::any_of(ls.begin(), ls.end(), [](const ListenerConfig& l) { return l.role == ListenerRole::io; });
  if (!any_io && !config.subsystems.empty()) {
    fail(f.value_at, f.path, "no listener has role io: the subsystems would be unreachable");
  }
}

SubsystemConfig Parser::parse_subsystem(const YAML::Node& node, const std::string& path) {
  SourceLocation at = location_of(node.Mark());
  if (!node.IsMap())
    fail(at, path, std::string("expected a mapping (nqn, hosts, namespaces, ...), got a ") + node_kind(node));
  Mapping m(*this, node, path, at,
            {"nqn", "serial", "model", "allow_any_host", "hosts", "require_authentication", "namespaces", "cntlid_min",
             "cntlid_max"});
  SubsystemConfig sub;
  sub.at = at;

  const Field& nqn = m.require("nqn", "the subsystem's NQN, e.g. nqn.2024-11.io.rdmablk:vol1");
  sub.nqn = string_value(nqn);
  sub.nqn_at = nqn.value_at;
  check_nqn(nqn.value_at, nqn.path, sub.nqn);
  if (sub.nqn == kDiscoveryNqn) fail(nqn.value_at, nqn.path, "this NQN is reserved for the discovery controller");

  if (const Field* f = m.find("serial")) {
    sub.serial = string_value(*f);
    check_printable(*f, sub.serial, 20);
  } else {
    sub.serial = derive_serial(sub.nqn);
  }
  if (const Field* f = m.find("model")) {
    sub.model = string_value(*f);
    check_printable(*f, sub.model, 40);
  }
  if (const Field* f = m.find("allow_any_host")) sub.allow_any_host = boolean(*f);
  const Field* cntlid_min = m.find("cntlid_min");
  const Field* cntlid_max = m.find("cntlid_max");
  if (cntlid_min) sub.cntlid_min = static_cast<uint16_t>(integer(*cntlid_min, kConfigCntlidMin, kConfigCntlidMax));
  if (cntlid_max) sub.cntlid_max = static_cast<uint16_t>(integer(*cntlid_max, kConfigCntlidMin, kConfigCntlidMax));
  if (sub.cntlid_min > sub.cntlid_max) {
    const Field* f = cntlid_max ? cntlid_max : cntlid_min;
    fail(f->value_at, f->path,
         "cntlid_min " + std::to_string(sub.cntlid_min) + " is greater than cntlid_max " +
             std::to_string(sub.cntlid_max));
  }
  const Field* require_auth = m.find("require_authentication");
  if (require_auth) sub.require_authentication = boolean(*require_auth);

  const Field* hosts = m.find("hosts");
  if (hosts) {
    auto items = sequence(*hosts);
    std::map<std::string, int> first_line;
    for (std::size_t i = 0; i < items.size(); ++i) {
      std::string item_path = hosts->path + "[" + std::to_string(i) + "]";
      SourceLocation item_at = missing(items[i]) ? hosts->value_at : location_of(items[i].Mark());
      HostConfig host;
      if (items[i].IsMap()) {
        host = parse_host(items[i], item_path, item_at);
      } else {
        Field item{item_path, "", items[i], item_at, item_at};
        host.nqn = string_value(item, "a host NQN, or a mapping with nqn and dhchap_key or tls_psk");
        host.at = item_at;
        check_nqn(item_at, item_path, host.nqn);
      }
      const std::string nqn_path = items[i].IsMap() ? item_path + ".nqn" : item_path;
      if (host.nqn == kDiscoveryNqn) fail(host.at, nqn_path, "the discovery NQN is not a host NQN");
      auto [it, inserted] = first_line.emplace(host.nqn, item_at.line);
      if (!inserted) {
        fail(host.at, nqn_path, "duplicate host NQN (first at line " + std::to_string(it->second) + ")");
      }
      if (sub.require_authentication && !host.dhchap_key.configured()) {
        warn(item_at, item_path,
             "no dhchap_key, and the subsystem requires authentication: this host will be refused");
      }
      sub.hosts.push_back(host.nqn);
      sub.host_configs.push_back(std::move(host));
    }
  }
  if (sub.require_authentication && sub.allow_any_host) {
    warn(require_auth->key_at, require_auth->path,
         "with allow_any_host: only the listed hosts with a dhchap_key can connect");
  }
  if (!sub.allow_any_host && sub.hosts.empty()) {
    fail(hosts ? hosts->value_at : at, path + ".hosts",
         "no host may connect: list host NQNs under hosts, or set allow_any_host: true");
  }
  if (sub.allow_any_host && !sub.hosts.empty()) {
    warn(hosts->key_at, hosts->path, "ignored: allow_any_host is true, so any host may connect");
  }

  if (const Field* f = m.find("namespaces")) {
    auto items = sequence(*f);
    std::map<uint32_t, int> first_line;  // NSID -> line
    for (std::size_t i = 0; i < items.size(); ++i) {
      std::string ns_path = f->path + "[" + std::to_string(i) + "]";
      NamespaceConfig ns = parse_namespace(items[i], ns_path);
      if (!ns.uuid_configured) ns.uuid = derive_uuid(sub.nqn, ns.nsid);
      if (!ns.nguid_configured) ns.nguid = derive_nguid(sub.nqn, ns.nsid);
      auto [it, inserted] = first_line.emplace(ns.nsid, ns.nsid_at.line);
      if (!inserted) {
        fail(ns.nsid_at, ns_path + ".nsid",
             "duplicate NSID " + std::to_string(ns.nsid) + " (first at line " + std::to_string(it->second) + ")");
      }
      sub.namespaces.push_back(std::move(ns));
    }
    if (items.empty()) warn(f->value_at, f->path, "no namespaces: hosts will see an empty subsystem");
  } else {
    warn(at, path + ".namespaces", "no namespaces: hosts will see an empty subsystem");
  }
  return sub;
}

DhchapSecretConfig Parser::parse_secret(const Mapping& m, std::string_view key_name,
                                        std::string_view file_name) const {
  DhchapSecretConfig secret;
  const Field* inline_key = m.find(key_name);
  const Field* file = m.find(file_name);
  if (inline_key && file) {
    fail(file->key_at, file->path,
         "give " + std::string(key_name) + " or " + std::string(file_name) + ", not both (" + std::string(key_name) +
             " at line " + std::to_string(inline_key->key_at.line) + ")");
  }
  if (inline_key) {
    // The message never quotes the value: it is a secret.
    if (missing(inline_key->value) || !inline_key->value.IsScalar()) {
      fail(inline_key->value_at, inline_key->path, "expected a secret \"DHHC-1:XX:<base64>:\" (nvme gen-dhchap-key)");
    }
    auto key = security::dhchap::DhchapKey::parse(inline_key->value.Scalar());
    if (!key) fail(inline_key->value_at, inline_key->path, key.error().message);
    secret.key = std::make_shared<const security::dhchap::DhchapKey>(std::move(*key));
    secret.at = inline_key->value_at;
  } else if (file) {
    secret.file = string_value(*file, "the path of a file holding a DHHC-1 secret");
    secret.at = file->value_at;
  }
  return secret;
}

TlsPskConfig Parser::parse_tls_psk(const Mapping& m) const {
  TlsPskConfig psk;
  const Field* inline_key = m.find("tls_psk");
  const Field* file = m.find("tls_psk_file");
  if (inline_key && file) {
    fail(file->key_at, file->path,
         "give tls_psk or tls_psk_file, not both (tls_psk at line " + std::to_string(inline_key->key_at.line) + ")");
  }
  if (inline_key) {
    // Never quotes the value: it is a secret.
    if (missing(inline_key->value) || !inline_key->value.IsScalar()) {
      fail(inline_key->value_at, inline_key->path, "expected a PSK \"NVMeTLSkey-1:XX:<base64>:\" (nvme gen-tls-key)");
    }
    auto key = security::parse_psk_interchange(inline_key->value.Scalar());
    if (!key) fail(inline_key->value_at, inline_key->path, key.error().message);
    psk.key = std::make_shared<const security::ConfiguredPsk>(std::move(*key));
    psk.at = inline_key->value_at;
  } else if (file) {
    psk.file = string_value(*file, "the path of a file holding an NVMeTLSkey-1 PSK");
    psk.at = file->value_at;
  }
  return psk;
}

HostConfig Parser::parse_host(const YAML::Node& node, const std::string& path, SourceLocation at) {
  Mapping m(*this, node, path, at,
            {"nqn", "dhchap_key", "dhchap_key_file", "dhchap_ctrl_key", "dhchap_ctrl_key_file", "dhchap_hashes",
             "dhchap_dhgroups", "tls_psk", "tls_psk_file"});
  HostConfig host;
  host.at = at;
  const Field& nqn = m.require("nqn", "the host's NQN");
  host.nqn = string_value(nqn);
  host.at = nqn.value_at;
  check_nqn(nqn.value_at, nqn.path, host.nqn);
  host.dhchap_key = parse_secret(m, "dhchap_key", "dhchap_key_file");
  host.dhchap_ctrl_key = parse_secret(m, "dhchap_ctrl_key", "dhchap_ctrl_key_file");
  host.tls_psk = parse_tls_psk(m);
  if (host.dhchap_ctrl_key.configured() && !host.dhchap_key.configured()) {
    const Field* f = m.find("dhchap_ctrl_key") ? m.find("dhchap_ctrl_key") : m.find("dhchap_ctrl_key_file");
    fail(f->key_at, f->path,
         "a controller secret needs the host's own dhchap_key (bidirectional authentication authenticates the "
         "host first)");
  }
  using protocol::auth::DhGroupId;
  using protocol::auth::HashId;
  if (const Field* f = m.find("dhchap_hashes")) {
    host.dhchap_hashes.clear();
    auto items = sequence(*f);
    if (items.empty()) fail(f->value_at, f->path, "an empty list (leave the key out for all of them)");
    for (std::size_t i = 0; i < items.size(); ++i) {
      SourceLocation item_at = missing(items[i]) ? f->value_at : location_of(items[i].Mark());
      Field item{f->path + "[" + std::to_string(i) + "]", "", items[i], item_at, item_at};
      HashId id = one_of<HashId>(item, "hash function",
                                 {{"sha256", HashId::sha256}, {"sha384", HashId::sha384}, {"sha512", HashId::sha512}});
      if (std::find(host.dhchap_hashes.begin(), host.dhchap_hashes.end(), id) != host.dhchap_hashes.end()) {
        fail(item_at, item.path, "listed twice");
      }
      host.dhchap_hashes.push_back(id);
    }
    if (!host.dhchap_key.configured()) warn(f->key_at, f->path, "ignored: the host has no dhchap_key");
  }
  if (const Field* f = m.find("dhchap_dhgroups")) {
    host.dhchap_dhgroups.clear();
    auto items = sequence(*f);
    if (items.empty()) fail(f->value_at, f->path, "an empty list (leave the key out for all of them)");
    for (std::size_t i = 0; i < items.size(); ++i) {
      SourceLocation item_at = missing(items[i]) ? f->value_at : location_of(items[i].Mark());
      Field item{f->path + "[" + std::to_string(i) + "]", "", items[i], item_at, item_at};
      DhGroupId id = one_of<DhGroupId>(item, "DH group",
                                       {{"null", DhGroupId::null},
                                        {"ffdhe2048", DhGroupId::ffdhe2048},
                                        {"ffdhe3072", DhGroupId::ffdhe3072},
                                        {"ffdhe4096", DhGroupId::ffdhe4096},
                                        {"ffdhe6144", DhGroupId::ffdhe6144},
                                        {"ffdhe8192", DhGroupId::ffdhe8192}});
      if (std::find(host.dhchap_dhgroups.begin(), host.dhchap_dhgroups.end(), id) != host.dhchap_dhgroups.end()) {
        fail(item_at, item.path, "listed twice");
      }
      host.dhchap_dhgroups.push_back(id);
    }
    if (!host.dhchap_key.configured()) warn(f->key_at, f->path, "ignored: the host has no dhchap_key");
  }
  return host;
}

// backend: rbd's keys (pool, image, namespace, ceph_conf, client, keyring); refused with other backends.
void Parser::parse_rbd_keys(const Mapping& m, NamespaceConfig& ns) const {
  static constexpr std::string_view kKeys[] = {"pool", "image", "namespace", "ceph_conf", "client", "keyring"};
  if (ns.backend != BackendKind::rbd) {
    for (std::string_view k : kKeys) {
      if (const Field* f = m.find(k)) {
        fail(f->key_at, f->path, std::string(k) + " applies only to backend: rbd");
      }
    }
    return;
  }
  // A name librbd / cephx takes as one component: no '/' or '@' (image spec separators), no blanks.
  auto name = [&](const Field& f, std::string_view what) {
    std::string v = string_value(f, what);
    if (v.empty()) fail(f.value_at, f.path, "must not be empty");
    if (v.find_first_of("/@ \t") != std::string::npos) {
      fail(f.value_at, f.path, in_quotes(v) + " is not a valid name (no '/', '@' or blanks)");
    }
    return v;
  };
  ns.pool = name(m.require("pool", "the Ceph pool that holds the image"), "a pool name");
  const Field& image = m.require("image", "the RBD image that holds the namespace");
  ns.image = name(image, "an image name");
  ns.image_at = image.value_at;
  if (const Field* f = m.find("namespace")) ns.rados_namespace = name(*f, "a RADOS namespace name");
  ns.ceph_conf = "/etc/ceph/ceph.conf";
  if (const Field* f = m.find("ceph_conf")) {
    ns.ceph_conf = string_value(*f, "the path of a ceph.conf");
    if (ns.ceph_conf.empty()) fail(f->value_at, f->path, "must not be empty");
  }
  ns.client = "admin";
  if (const Field* f = m.find("client")) {
    ns.client = name(*f, "a cephx user id");
    if (ns.client.rfind("client.", 0) == 0) {
      fail(f->value_at, f->path,
           in_quotes(ns.client) + ": give the id without 'client.' (" + in_quotes(ns.client.substr(7)) + ")");
    }
  }
  if (const Field* f = m.find("keyring")) {
    ns.keyring = string_value(*f, "the path of a keyring file");
    if (ns.keyring.empty()) fail(f->value_at, f->path, "must not be empty");  // (string_value says so first)
  }
}

NamespaceConfig Parser::parse_namespace(const YAML::Node& node, const std::string& path) {
  SourceLocation at = location_of(node.Mark());
  if (!node.IsMap()) fail(at, path, std::string("expected a mapping (nsid, backend, ...), got a ") + node_kind(node));
  Mapping m(*this, node, path, at,
            {"nsid", "backend", "path", "size", "block_size", "direct", "read_only", "uuid", "nguid", "pool", "image",
             "namespace", "ceph_conf", "client", "keyring", "ana_group"});
  NamespaceConfig ns;
  ns.at = at;

  const Field& nsid = m.require("nsid", "1..4294967294");
  ns.nsid = integer32(nsid, 1, kMaxNsid);
  ns.nsid_at = nsid.value_at;

  const Field& backend = m.require("backend", "file, ram, null or rbd");
  ns.backend = one_of<BackendKind>(backend, "backend",
                                   {{"file", BackendKind::file},
                                    {"ram", BackendKind::ram},
                                    {"null", BackendKind::null},
                                    {"rbd", BackendKind::rbd}});

  const Field* path_field = m.find("path");
  if (ns.backend == BackendKind::file) {
    const Field& p = m.require("path", "the file or block device that holds the namespace");
    ns.path = string_value(p);
    ns.path_at = p.value_at;
  } else if (path_field) {
    fail(path_field->key_at, path_field->path,
         std::string("path applies only to backend: file (a ") + backend_kind_name(ns.backend) +
             (ns.backend == BackendKind::rbd ? " namespace names its image with pool and image)"
                                             : " namespace keeps no data on disk)"));
  }
  parse_rbd_keys(m, ns);

  if (const Field* f = m.find("block_size")) {
    uint64_t bs = integer(*f, 0, UINT64_MAX);
    if (bs < 512 || bs > 65536 || (bs & (bs - 1)) != 0) {
      fail(f->value_at, f->path, "block size " + std::to_string(bs) + " is not a power of two in [512, 65536]");
    }
    if (ns.backend == BackendKind::rbd && bs != 512 && bs != 4096) {
      fail(f->value_at, f->path, "block size " + std::to_string(bs) + " is not 512 or 4096 (backend: rbd)");
    }
    ns.block_size = static_cast<uint32_t>(bs);
  } else if (ns.backend != BackendKind::file) {
    ns.block_size = 512;
  }

  const Field* size = m.find("size");
  if (size && ns.backend == BackendKind::rbd) {
    fail(size->key_at, size->path, "size does not apply to backend: rbd (the image's size is used)");
  }
  if (size) {
    ns.size = size_value(*size, 0, UINT64_MAX);
    ns.size_at = size->value_at;
    if (ns.size == 0) fail(size->value_at, size->path, "size must be greater than 0 (omit it to use the file's size)");
    uint32_t bs = ns.block_size ? ns.block_size : 512;
    if (ns.size % bs != 0) {
      fail(size->value_at, size->path,
           "size " + std::to_string(ns.size) + " is not a multiple of the block size " + std::to_string(bs));
    }
  } else if (ns.backend == BackendKind::ram || ns.backend == BackendKind::null) {
    fail(at, path + ".size", std::string("missing (required for backend: ") + backend_kind_name(ns.backend) + ")");
  }

  if (const Field* f = m.find("direct")) {
    ns.direct = boolean(*f);
    if (ns.backend != BackendKind::file) {
      warn(f->key_at, f->path, std::string("has no effect with backend: ") + backend_kind_name(ns.backend));
    }
  }
  if (const Field* f = m.find("read_only")) ns.read_only = boolean(*f);
  if (const Field* f = m.find("ana_group")) ns.ana_group = integer32(*f, 1, kAnaGroupMax);

  if (const Field* f = m.find("uuid")) {
    std::string text = scalar(*f, "a UUID such as 3f2504e0-4f89-11d3-9a0c-0305e82c3301");
    auto id = is_canonical_uuid(text) ? parse_hex_id(text) : std::nullopt;
    if (!id) fail(f->value_at, f->path, in_quotes(text) + " is not a UUID (8-4-4-4-12 hex digits)");
    if (all_zero(*id)) fail(f->value_at, f->path, "the nil UUID is not a namespace identifier");
    ns.uuid = *id;
    ns.uuid_configured = true;
  }
  if (const Field* f = m.find("nguid")) {
    std::string text = scalar(*f, "32 hex digits");
    auto id = parse_hex_id(text);
    if (!id) fail(f->value_at, f->path, in_quotes(text) + " is not an NGUID (32 hex digits, dashes allowed)");
    if (all_zero(*id)) fail(f->value_at, f->path, "an all-zero NGUID means 'none'; omit the key instead");
    ns.nguid = *id;
    ns.nguid_configured = true;
  }
  return ns;
}

void Parser::check_namespaces_across_subsystems(const TargetConfig& config) const {
  struct Seen {
    std::string where;  // "subsystems[0].namespaces[1] at line 12"
    bool read_only;
  };
  std::map<std::string, Seen> paths;
  std::map<std::array<uint8_t, 16>, std::string> uuids, nguids;
  for (std::size_t s = 0; s < config.subsystems.size(); ++s) {
    const auto& sub = config.subsystems[s];
    for (std::size_t n = 0; n < sub.namespaces.size(); ++n) {
      const auto& ns = sub.namespaces[n];
      std::string path = "subsystems[" + std::to_string(s) + "].namespaces[" + std::to_string(n) + "]";
      std::string where = path + " at line " + std::to_string(ns.at.line);
      if (ns.backend == BackendKind::file) {
        std::string key = std::filesystem::path(ns.path).lexically_normal().string();
        auto [it, inserted] = paths.emplace(key, Seen{where, ns.read_only});
        if (!inserted && !(ns.read_only && it->second.read_only)) {
          fail(ns.path_at, path + ".path",
               in_quotes(ns.path) + " already backs " + it->second.where +
                   " (two writable namespaces on one file would corrupt each other)");
        }
      }
      if (ns.backend == BackendKind::rbd) {
        // Same conf file = same cluster (relative conf paths are not resolved yet: compared as written).
        std::string key = std::string("rbd\0") + ns.ceph_conf + '\0' + ns.pool + '/' + ns.rados_namespace + '/' + ns.image;
        auto [it, inserted] = paths.emplace(key, Seen{where, ns.read_only});
        if (!inserted && !(ns.read_only && it->second.read_only)) {
          fail(ns.image_at, path + ".image",
               "image " + ns.pool + "/" + (ns.rados_namespace.empty() ? "" : ns.rados_namespace + "/") + ns.image +
                   " already backs " + it->second.where +
                   " (one image is one namespace; other targets may export it under the same NSID)");
        }
      }
      auto [u, u_new] = uuids.emplace(ns.uuid, where);
      if (!u_new) fail(ns.at, path + ".uuid", "UUID " + format_uuid(ns.uuid) + " is also used by " + u->second);
      auto [g, g_new] = nguids.emplace(ns.nguid, where);
      if (!g_new) fail(ns.at, path + ".nguid", "NGUID " + hex_id(ns.nguid) + " is also used by " + g->second);
    }
  }
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
    // The Linux NVMe/TCP host sends the 1 KiB Connect data in-capsule and sizes it for 8 KiB.
    limits.admin_inline_data = inline_size(*x, 8192);
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

std::string errno_text(int err) { return std::strerror(err); }

// Reads a secret's file (see load_config()): a regular file, no symlink, not readable or writable by other
// users, short. Errors never quote the content; the caller wipes the returned text after parsing it.
Result<std::string> read_secret_file(const std::string& path, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP) return make_error(path + ": a symbolic link (name the key file itself)", e);
    return make_error("cannot read " + path + ": " + errno_text(e), e);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    return make_error("cannot read " + path + ": " + errno_text(e), e);
  }
  if (!S_ISREG(st.st_mode)) return make_error(path + ": not a regular file", EINVAL);
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if ((st.st_mode & (S_IRWXO | S_IWGRP)) != 0) {
    return make_error(path + ": mode " + mode +
                          " lets other users read or change the secret (chmod 600 it; a group may only read it)",
                      EPERM);
  }
  // A secret is at most "DHHC-1:03:" + base64 of 68 bytes + ":" and a newline; anything much longer is not one.
  std::string text(4096, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      return make_error("cannot read " + path + ": " + errno_text(e), e);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got == text.size()) {
    std::fill(text.begin(), text.end(), '\0');
    return make_error(path + ": too long for " + what, EINVAL);
  }
  text.resize(got);
  return text;
}

// One DH-HMAC-CHAP key file.
Result<security::dhchap::DhchapKey> read_key_file(const std::string& path) {
  auto text = read_secret_file(path, "a DHHC-1 secret");
  if (!text) return tl::unexpected(text.error());
  auto key = security::dhchap::DhchapKey::parse(*text);
  std::fill(text->begin(), text->end(), '\0');
  if (!key) return make_error(path + ": " + key.error().message, EINVAL);
  return key;
}

// One TLS PSK file (NVMeTLSkey-1 interchange format, as `nvme gen-tls-key` prints it).
Result<security::ConfiguredPsk> read_psk_file(const std::string& path) {
  auto text = read_secret_file(path, "an NVMeTLSkey-1 PSK");
  if (!text) return tl::unexpected(text.error());
  auto key = security::parse_psk_interchange(*text);
  std::fill(text->begin(), text->end(), '\0');
  if (!key) return make_error(path + ": " + key.error().message, EINVAL);
  return key;
}

Result<void> check_namespace_file(const TargetConfig& config, const NamespaceConfig& ns, const std::string& field) {
  auto error = [&](SourceLocation at, const std::string& f, const std::string& problem, int err = 0) {
    return make_error(format_message(config.source, at, f, problem), err);
  };
  const std::string& p = ns.path;
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    int err = errno;
    if (err != ENOENT) return error(ns.path_at, field + ".path", "cannot access " + p + ": " + errno_text(err), err);
    if (ns.size == 0) {
      return error(ns.path_at, field + ".path", p + " does not exist and no size is given to create it", ENOENT);
    }
    if (ns.read_only) {
      return error(ns.path_at, field + ".path", p + " does not exist (a read-only namespace is never created)", ENOENT);
    }
    std::filesystem::path parent = std::filesystem::path(p).parent_path();
    if (parent.empty()) parent = ".";
    struct stat dir {};
    if (::stat(parent.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode)) {
      return error(ns.path_at, field + ".path",
                   "cannot create " + p + ": directory " + parent.string() + " does not exist", ENOENT);
    }
    if (::access(parent.c_str(), W_OK | X_OK) != 0) {
      int e = errno;
      return error(ns.path_at, field + ".path", "cannot create " + p + ": " + parent.string() + ": " + errno_text(e),
                   e);
    }
    return {};
  }
  if (S_ISDIR(st.st_mode)) return error(ns.path_at, field + ".path", p + " is a directory", EISDIR);
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return error(ns.path_at, field + ".path", p + " is neither a regular file nor a block device", EINVAL);
  }
  if (::access(p.c_str(), ns.read_only ? R_OK : R_OK | W_OK) != 0) {
    int e = errno;
    return error(ns.path_at, field + ".path",
                 std::string("cannot open ") + p + (ns.read_only ? " for reading: " : " for reading and writing: ") +
                     errno_text(e),
                 e);
  }
  uint64_t existing = static_cast<uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    uint64_t bytes = 0;
    if (fd >= 0 && ::ioctl(fd, BLKGETSIZE64, &bytes) == 0) existing = bytes;
    if (fd >= 0) ::close(fd);
    if (ns.size > existing && existing != 0) {
      return error(ns.size_at, field + ".size",
                   "size " + format_size(ns.size) + " exceeds the device " + p + " (" + format_size(existing) + ")",
                   EINVAL);
    }
    return {};
  }
  if (ns.size == 0) {
    uint32_t bs = ns.block_size ? ns.block_size : 512;
    if (existing == 0) return error(ns.path_at, field + ".path", p + " is empty and no size is given", EINVAL);
    if (existing % bs != 0) {
      return error(
          ns.path_at, field + ".path",
          p + " is " + std::to_string(existing) + " bytes, not a multiple of the block size " + std::to_string(bs),
          EINVAL);
    }
  } else if (ns.read_only && ns.size > existing) {
    return error(ns.size_at, field + ".size",
                 "size " + format_size(ns.size) + " exceeds " + p + " (" + format_size(existing) +
                     ") and a read-only namespace cannot grow it",
                 EINVAL);
  }
  return {};
}

// A TCP address:port from the file that must be free: a listener's or the metrics endpoint's.
struct BindCheck {
  const std::string& address;
  uint16_t port;
  SourceLocation address_at;
  SourceLocation port_at;
  std::string field;  // "listeners[1]", "metrics"
  std::string shown;  // "tcp 127.0.0.1:4420"
};

Result<void> check_port(const TargetConfig& config, const BindCheck& l) {
  const std::string& field = l.field;
  auto ip = parse_ip(l.address);
  if (!ip) return make_error(format_message(config.source, l.address_at, field + ".address", "not an IP address"));
  int fd = ::socket(ip->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    return make_error(format_message(config.source, l.address_at, field + ".address",
                                     "cannot open a socket for " + l.shown + ": " + errno_text(e)),
                      e);
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (ip->family == AF_INET) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(l.port);
    std::memcpy(&sa.sin_addr, ip->bytes.data(), 4);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  } else {
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(l.port);
    std::memcpy(&sa.sin6_addr, ip->bytes.data(), 16);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  }
  int e = rc == 0 ? 0 : errno;
  ::close(fd);
  switch (e) {
    case 0:
      return {};
    case EADDRINUSE:
      return make_error(format_message(config.source, l.port_at, field + ".port", l.shown + " is already in use"), e);
    case EADDRNOTAVAIL:
      return make_error(format_message(config.source, l.address_at, field + ".address",
                                       l.address + " is not an address of this host"),
                        e);
    case EACCES:
      return make_error(
          format_message(config.source, l.port_at, field + ".port",
                         "port " + std::to_string(l.port) + " is below 1024 and needs CAP_NET_BIND_SERVICE"),
          e);
    default:
      return make_error(
          format_message(config.source, l.port_at, field + ".port", "cannot bind " + l.shown + ": " + errno_text(e)),
          e);
  }
}

// Each reactor CPU online and allowed, else an error at the entry that named it.
Result<void> check_reactor_cpus(const TargetConfig& config, const CpuAvailability& cpus) {
  for (std::size_t i = 0; i < config.reactor_cpus.size(); ++i) {
    int cpu = config.reactor_cpus[i];
    SourceLocation at = i < config.reactor_cpus_at.size() ? config.reactor_cpus_at[i] : SourceLocation{};
    if (!std::binary_search(cpus.online.begin(), cpus.online.end(), cpu)) {
      return make_error(format_message(config.source, at, "reactors",
                                       "CPU " + std::to_string(cpu) + " is not online on this machine (online: " +
                                           format_cpu_list(cpus.online) + ")"),
                        EINVAL);
    }
    if (!std::binary_search(cpus.allowed.begin(), cpus.allowed.end(), cpu)) {
      return make_error(format_message(config.source, at, "reactors",
                                       "CPU " + std::to_string(cpu) + " is outside the CPUs this process may run on (" +
                                           format_cpu_list(cpus.allowed) +
                                           ": see taskset, systemd's CPUAffinity= or the cgroup's cpuset)"),
                        EINVAL);
    }
  }
  return {};
}

std::vector<int> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  if (in && std::getline(in, text)) {
    if (auto cpus = parse_cpu_list(text); cpus && !cpus->empty()) {
      std::sort(cpus->begin(), cpus->end());
      return *cpus;
    }
  }
  long n = ::sysconf(_SC_NPROCESSORS_CONF);
  std::vector<int> out;
  for (long i = 0; i < std::max(n, 1L); ++i) out.push_back(static_cast<int>(i));
  return out;
}

// The main thread's affinity mask (what taskset and systemd's CPUAffinity= set); empty if unreadable.
std::vector<int> allowed_cpus() {
  for (int size = 1024; size <= (1 << 20); size *= 2) {
    cpu_set_t* set = CPU_ALLOC(size);
    if (!set) return {};
    std::size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(::getpid(), bytes, set) == 0) {
      std::vector<int> out;
      for (int cpu = 0; cpu < size; ++cpu) {
        if (CPU_ISSET_S(cpu, bytes, set)) out.push_back(cpu);
      }
      CPU_FREE(set);
      return out;
    }
    int e = errno;
    CPU_FREE(set);
    if (e != EINVAL) return {};  // EINVAL: the kernel's mask is larger than ours
  }
  return {};
}

}  // namespace

// --- public API ------------------------------------------------------------------------------------

Result<TargetConfig> parse_config(std::string_view yaml_text, const std::string& name_for_messages) {
  Parser parser(name_for_messages, yaml_text);
  return config::catch_failures<Result<TargetConfig>>(
      name_for_messages, [&] { return parser.parse(); }, [](const std::string& m) { return make_error(m, EINVAL); });
}

Result<TargetConfig> load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno;
    return make_error(path + ": cannot read the configuration: " + errno_text(e), e);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    int e = errno;
    return make_error(path + ": cannot read the configuration: " + errno_text(e), e);
  }
  auto config = parse_config(text.str(), path);
  if (!config) return config;
  std::error_code ec;
  std::filesystem::path base = std::filesystem::absolute(path, ec).parent_path();
  for (std::size_t s = 0; s < config->subsystems.size(); ++s) {
    auto& sub = config->subsystems[s];
    for (auto& ns : sub.namespaces) {
      if (ns.backend == BackendKind::file && std::filesystem::path(ns.path).is_relative()) {
        ns.path = (base / ns.path).lexically_normal().string();
      }
      if (ns.backend == BackendKind::rbd) {
        for (std::string* p : {&ns.ceph_conf, &ns.keyring}) {
          if (!p->empty() && std::filesystem::path(*p).is_relative()) *p = (base / *p).lexically_normal().string();
        }
      }
    }
    for (std::size_t h = 0; h < sub.host_configs.size(); ++h) {
      HostConfig& host = sub.host_configs[h];
      const std::string field = "subsystems[" + std::to_string(s) + "].hosts[" + std::to_string(h) + "].";
      for (auto [secret, name] : {std::pair{&host.dhchap_key, "dhchap_key_file"},
                                  std::pair{&host.dhchap_ctrl_key, "dhchap_ctrl_key_file"}}) {
        if (secret->file.empty()) continue;
        if (std::filesystem::path(secret->file).is_relative()) {
          secret->file = (base / secret->file).lexically_normal().string();
        }
        auto key = read_key_file(secret->file);
        if (!key) {
          return make_error(format_message(config->source, secret->at, field + name, key.error().message),
                            key.error().errno_value);
        }
        secret->key = std::make_shared<const security::dhchap::DhchapKey>(std::move(*key));
      }
      if (!host.tls_psk.file.empty()) {
        if (std::filesystem::path(host.tls_psk.file).is_relative()) {
          host.tls_psk.file = (base / host.tls_psk.file).lexically_normal().string();
        }
        auto key = read_psk_file(host.tls_psk.file);
        if (!key) {
          return make_error(format_message(config->source, host.tls_psk.at, field + "tls_psk_file", key.error().message),
                            key.error().errno_value);
        }
        host.tls_psk.key = std::make_shared<const security::ConfiguredPsk>(std::move(*key));
      }
    }
  }
  return config;
}

Result<void> validate_environment(const TargetConfig& config, EnvironmentChecks checks) {
  for (std::size_t s = 0; s < config.subsystems.size(); ++s) {
    const auto& sub = config.subsystems[s];
    for (std::size_t n = 0; n < sub.namespaces.size(); ++n) {
      const auto& ns = sub.namespaces[n];
      const std::string field = "subsystems[" + std::to_string(s) + "].namespaces[" + std::to_string(n) + "]";
      if (ns.backend == BackendKind::rbd) {
        if (!checks.rbd) continue;
        // Connect and open the image read-only (no exclusive lock taken): the cluster answers, the
        // user may read the image, its size fits the block size. The connection is dropped again.
        backend::RbdOptions o = rbd_options(ns);
        o.read_only = true;
        auto b = backend::open_rbd_backend(o);
        if (!b) return make_error(format_message(config.source, ns.image_at, field, b.error().message), b.error().errno_value);
        continue;
      }
      if (ns.backend != BackendKind::file) continue;
      auto ok = check_namespace_file(config, ns, field);
      if (!ok) return ok;
    }
  }
  if (!config.reactor_cpus.empty()) {
    auto ok = check_reactor_cpus(config, checks.cpus ? *checks.cpus : machine_cpus());
    if (!ok) return ok;
  }
  for (std::size_t i = 0; checks.ports && i < config.listeners.size(); ++i) {
    const auto& l = config.listeners[i];
    if (l.transport != transport::TransportType::tcp) continue;  // rdma_cm is checked when it binds
    auto ok = check_port(config, BindCheck{l.address, l.port, l.address_at, l.port_at,
                                           "listeners[" + std::to_string(i) + "]", endpoint(l)});
    if (!ok) return ok;
  }
  if (checks.ports && config.metrics.enabled) {
    const auto& m = config.metrics;
    auto ok = check_port(config, BindCheck{m.address, m.port, m.address_at, m.port_at, "metrics",
                                           "metrics " + host_port(m.address, m.port)});
    if (!ok) return ok;
  }
  return {};
}

CpuAvailability machine_cpus() {
  CpuAvailability cpus;
  cpus.online = online_cpus();
  cpus.allowed = allowed_cpus();
  if (cpus.allowed.empty()) cpus.allowed = cpus.online;
  return cpus;
}

std::vector<std::string> restart_only_changes(const TargetConfig& running, const TargetConfig& reread) {
  auto same_listener = [](const ListenerConfig& a, const ListenerConfig& b) {
    return a.transport == b.transport && a.address == b.address && a.port == b.port && a.role == b.role &&
           a.tls == b.tls;
  };
  std::vector<std::string> keys;
  if (!std::equal(running.listeners.begin(), running.listeners.end(), reread.listeners.begin(), reread.listeners.end(),
                  same_listener)) {
    keys.emplace_back("listeners");
  }
  if (running.reactors != reread.reactors || running.reactor_cpus != reread.reactor_cpus) keys.emplace_back("reactors");
  if (running.busy_poll_us != reread.busy_poll_us) keys.emplace_back("busy_poll_us");
  const auto& c = running.control;
  const auto& c2 = reread.control;
  if (c.enabled != c2.enabled || (c.enabled && c.socket_path != c2.socket_path)) keys.emplace_back("control");
  const auto& m = running.metrics;
  const auto& m2 = reread.metrics;
  if (m.enabled != m2.enabled || (m.enabled && (m.address != m2.address || m.port != m2.port))) {
    keys.emplace_back("metrics");
  }
  if (running.tls_psk_derivation != reread.tls_psk_derivation) keys.emplace_back("tls_psk_derivation");
  return keys;
}

std::string TlsPskConfig::describe() const {
  if (!file.empty()) return "file " + file;
  return key ? "set" : "none";
}

std::string DhchapSecretConfig::describe() const {
  if (!file.empty()) return "file " + file;
  return key ? "set" : "none";
}

const HostConfig* SubsystemConfig::find_host(std::string_view hostnqn) const noexcept {
  for (const auto& h : host_configs) {
    if (h.nqn == hostnqn) return &h;
  }
  return nullptr;
}

std::size_t namespace_count(const TargetConfig& config) noexcept {
  std::size_t n = 0;
  for (const auto& sub : config.subsystems) n += sub.namespaces.size();
  return n;
}

std::string describe(const TargetConfig& config) {
  std::string out =
      std::to_string(config.listeners.size()) + (config.listeners.size() == 1 ? " listener (" : " listeners (");
  for (std::size_t i = 0; i < config.listeners.size(); ++i) {
    const auto& l = config.listeners[i];
    out += (i ? ", " : "") + endpoint(l) + (l.role == ListenerRole::discovery ? " discovery" : "");
    if (l.tls != transport::tcp::TlsPolicy::none) out += std::string(" tls ") + transport::tcp::to_string(l.tls);
  }
  out +=
      "), " + std::to_string(config.subsystems.size()) + (config.subsystems.size() == 1 ? " subsystem" : " subsystems");
  std::size_t n = namespace_count(config);
  out += ", " + std::to_string(n) + (n == 1 ? " namespace" : " namespaces");
  std::size_t secrets = 0;
  for (const auto& sub : config.subsystems) {
    for (const auto& h : sub.host_configs) secrets += h.dhchap_key.configured() ? 1 : 0;
  }
  if (secrets != 0) {
    out += ", DH-HMAC-CHAP for " + std::to_string(secrets) + (secrets == 1 ? " host" : " hosts");
  }
  std::size_t psks = 0;
  for (const auto& sub : config.subsystems) {
    for (const auto& h : sub.host_configs) psks += h.tls_psk.configured() ? 1 : 0;
  }
  if (psks != 0) out += ", TLS PSKs for " + std::to_string(psks) + (psks == 1 ? " host" : " hosts");
  out += ", reactors " + (config.reactors ? std::to_string(config.reactors) : std::string("auto"));
  if (!config.reactor_cpus.empty()) out += " on CPUs " + format_cpu_list(config.reactor_cpus);
  out += ", log " + std::string(spdlog::level::to_string_view(config.log_level).data(),
                                spdlog::level::to_string_view(config.log_level).size());
  const auto& q = config.limits;
  out += ", queues " + std::to_string(q.max_io_queues) + "x" + std::to_string(q.io_queue_depth) + ", max I/O " +
         format_size(q.max_io_size) + ", inline " + format_size(q.admin_inline_data) + "/" +
         format_size(q.io_inline_data);
  auto limit = [](uint32_t count) { return count == 0 ? std::string("unlimited") : std::to_string(count); };
  out += ", connections " + limit(q.connections.per_listener) + "/listener " + limit(q.connections.per_host) +
         "/host, Connect within " + std::to_string(q.connections.connect_timeout_ms) + " ms, queue buffers " +
         format_size(q.queue_buffer_bytes);
  out += ", control " + (config.control.enabled ? config.control.socket_path : std::string("off"));
  out += ", metrics " + (config.metrics.enabled
                             ? "http://" + host_port(config.metrics.address, config.metrics.port) + "/metrics"
                             : std::string("off"));
  return out;
}

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
  o.block_size = ns.block_size ? ns.block_size : 512;
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
  o.block_size = ns.block_size ? ns.block_size : 512;
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

std::string format_uuid(const std::array<uint8_t, 16>& uuid) {
  std::string hex = hex_id(uuid);
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20);
}

}  // namespace rdmablk::target

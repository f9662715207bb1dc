// Internal to target/config/: the YAML parser of the target's configuration, shared by the files that
// parse its sections (config.cpp dispatches the top level; parse_*.cpp each a section; values.cpp and
// environment.cpp the public helpers of config.h). Not for use outside target/config/.
#pragma once

#include <sys/un.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/yaml_diagnostics.h"
#include "protocol/uuid.h"
#include "security/dhchap_key.h"
#include "target/config/config.h"

namespace rdmablk::target::config_impl {

constexpr uint32_t kMaxNsid = 0xFFFFFFFEu;
constexpr uint32_t kMaxInlineData = 128 * 1024;
constexpr unsigned kMaxReactors = 1024;
constexpr unsigned kMaxBusyPollUs = 1000000;
constexpr int kMaxCpu = 65535;  // a bound on CPU numbers in a list; the machine's are checked later
// sockaddr_un::sun_path less the terminating NUL.
constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;

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

std::optional<IpAddress> parse_ip(const std::string& text);
// "10.0.0.1:4420", "[::1]:4420": config.h's host_port.
using rdmablk::target::host_port;
// "tcp 10.0.0.1:4420".
std::string endpoint(const ListenerConfig& l);
// Two TCP sockets that could not both bind: the same port, and the same address or a wildcard that
// covers the other (Linux's default bindv6only=0 makes "::" cover IPv4 too).
bool sockets_overlap(const std::string& a, uint16_t a_port, const std::string& b, uint16_t b_port);

// One entry of a CPU list: a CPU, or an inclusive range of them.
struct CpuEntry {
  int first = 0;
  int last = 0;
};

// "N" or "A-B" (decimal, no spaces); nullopt and `problem` set when it is not one.
std::optional<CpuEntry> parse_cpu_entry(std::string_view text, std::string& problem);
// Splits "2, 3,6-7" at commas into entries with their offsets; spaces around an entry are dropped.
std::vector<std::pair<std::string_view, std::size_t>> split_cpu_list(std::string_view text);

// UUIDs and NGUIDs as text: protocol/uuid.h.
using protocol::all_zero;
using protocol::format_hex_id;
using protocol::parse_hex_id;
using protocol::parse_uuid;

inline std::string errno_text(int err) { return std::strerror(err); }

// A namespace's block size, 512 bytes where the config leaves it open (a file backend before its file is
// looked at; the parser sets it for every other backend).
constexpr uint32_t kDefaultBlockSize = 512;
inline uint32_t block_size_or_default(const NamespaceConfig& ns) {
  return ns.block_size ? ns.block_size : kDefaultBlockSize;
}

// One DH-HMAC-CHAP key file / one TLS PSK file (NVMeTLSkey-1 interchange format), read as load_config() does.
Result<security::dhchap::DhchapKey> read_key_file(const std::string& path);
Result<security::ConfiguredPsk> read_psk_file(const std::string& path);

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

  // A non-empty list of distinct names from `choices` (e.g. the DH-HMAC-CHAP hash functions); an empty
  // list is an error (the key is left out for all of them), and so is a name listed twice.
  template <typename T>
  std::vector<T> distinct_list(const Field& f, std::string_view what,
                               std::initializer_list<std::pair<std::string_view, T>> choices) const {
    std::vector<T> out;
    auto items = sequence(f);
    if (items.empty()) fail(f.value_at, f.path, "an empty list (leave the key out for all of them)");
    for (std::size_t i = 0; i < items.size(); ++i) {
      SourceLocation item_at = missing(items[i]) ? f.value_at : location_of(items[i].Mark());
      Field item{f.path + "[" + std::to_string(i) + "]", "", items[i], item_at, item_at};
      T id = one_of<T>(item, what, choices);
      if (std::find(out.begin(), out.end(), id) != out.end()) fail(item_at, item.path, "listed twice");
      out.push_back(id);
    }
    return out;
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

  void check_nqn(SourceLocation at, const std::string& field, const std::string& nqn) const;

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
  GroupConfig parse_group(const Field& f) const;  // parse_group.cpp
  void check_group(const TargetConfig& config) const;
  void check_metrics(const TargetConfig& config) const;
  void parse_subsystems(const Mapping& top, TargetConfig& config);
  SubsystemConfig parse_subsystem(const YAML::Node& node, const std::string& path);
  void parse_hosts(const Field& hosts, SubsystemConfig& sub);
  void parse_namespaces(const Mapping& m, const std::string& path, SourceLocation at, SubsystemConfig& sub);
  void parse_ids(const Mapping& m, NamespaceConfig& ns) const;
  void parse_namespace_hosts(const Field& f, NamespaceConfig& ns) const;
  void check_namespace_hosts(const SubsystemConfig& sub, const NamespaceConfig& ns, const std::string& path) const;
  void parse_namespace_qos(const Field& f, NamespaceConfig& ns) const;  // parse_qos.cpp
  QosLimits parse_qos_limits(const Mapping& m) const;
  void check_namespace_qos(const SubsystemConfig& sub, const NamespaceConfig& ns, const std::string& path) const;
  void warn_unused_psks(const TargetConfig& config);
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

}  // namespace rdmablk::target::config_impl

#include "initiator/cli/attach_config.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/yaml_diagnostics.h"
#include "initiator/host/controller.h"
#include "protocol/fabrics.h"
#include "security/dhchap_key.h"
#include "security/secret_file.h"
#include "security/tls_psk.h"

namespace rdmablk::initiator {

const char* attach_mode_name(AttachConfig::Mode m) noexcept {
  switch (m) {
    case AttachConfig::Mode::userspace:
      return "userspace";
    case AttachConfig::Mode::kernel:
      return "kernel";
  }
  return "unknown";
}

namespace {

// The message rules and key checks are the target configuration's (config/yaml_diagnostics.h).
using config::Field;
using config::in_quotes;
using config::location_of;
using config::Mapping;

constexpr std::array<std::string_view, 21> kKeys = {
    "transport",          "address",      "paths",         "port",          "nqn",
    "nsid",               "mode",         "hostnqn",       "hostid",
    "nr_io_queues",       "queue_size",   "ctrl_loss_tmo", "reconnect_delay",
    "keep_alive_tmo",     "dhchap_secret", "dhchap_secret_file", "dhchap_ctrl_secret",
    "dhchap_ctrl_secret_file", "tls", "tls_key", "tls_key_file",
};

// An IPv4/IPv6 literal (brackets allowed around IPv6) or a DNS host name (RFC 1123), which the
// transports resolve with getaddrinfo when they connect.
std::optional<std::string> address_problem(const std::string& a) {
  std::array<unsigned char, 16> bytes{};
  if (inet_pton(AF_INET, a.c_str(), bytes.data()) == 1 || inet_pton(AF_INET6, a.c_str(), bytes.data()) == 1) {
    return std::nullopt;
  }
  const char* expected = " (expected an IPv4 or IPv6 address, or a host name)";
  if (a.find(':') != std::string::npos) return in_quotes(a) + " is not a valid IPv6 address";
  bool numeric = std::all_of(a.begin(), a.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; });
  if (numeric) return in_quotes(a) + " is not a valid IPv4 address";
  if (a.size() > 253) return "host name too long (" + std::to_string(a.size()) + " characters, at most 253)";
  std::size_t start = 0;
  while (start <= a.size()) {
    std::size_t end = std::min(a.find('.', start), a.size());
    std::string_view label(a.data() + start, end - start);
    bool ok = !label.empty() && label.size() <= 63 && label.front() != '-' && label.back() != '-' &&
              std::all_of(label.begin(), label.end(), [](unsigned char c) { return std::isalnum(c) || c == '-'; });
    if (!ok) return in_quotes(a) + " is not a valid host name" + expected;
    start = end + 1;
  }
  return std::nullopt;
}

// --- the parser ------------------------------------------------------------------------------------

// The default config::Dialect: no key here takes null, so `key:`, `key: ~` and `key: null` are all a
// missing value; unknown keys are compared with the known ones as written.
class Parser : public config::Reader {
 public:
  Parser(std::string_view file, std::string_view text) : Reader(std::string(file), text) {}

  AttachConfig parse();

 private:
  // `key: value` read into `out` when the key is present.
  template <typename T>
  void optional_integer(const Mapping& m, std::string_view name, T& out, int64_t min, int64_t max) const {
    if (const Field* f = m.find(name)) out = static_cast<T>(integer(*f, min, max));
  }

  // `key` (the secret itself) or `key`_file (a file holding it): at most one; "" when neither. The
  // secret is checked as a DHHC-1 key and never quoted.
  std::string secret(const Mapping& m, std::string_view key) const;

  // An address value: brackets around IPv6 dropped, checked.
  std::string traddr(const Field& f) const {
    std::string a = string_value(f, "an address");
    if (a.size() > 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
    if (auto problem = address_problem(a)) fail(f.value_at, f.path, *problem);
    return a;
  }

  void read_path_list(const Field& f, transport::TransportType default_type, uint16_t default_port,
                      std::vector<transport::TransportAddress>& out) const;

  // parse(), key group by key group.
  void read_paths(const Mapping& top, AttachConfig& config) const;
  void read_target(const Mapping& top, AttachConfig& config) const;
  void read_tuning(const Mapping& top, AttachConfig& config) const;
  void read_secrets(const Mapping& top, AttachConfig& config) const;
  void check_mode(const Mapping& top, const AttachConfig& config) const;

  void check_nqn(const Field& f, const std::string& nqn) const {
    auto form = protocol::decode_nqn(nqn);
    if (!form) {
      fail(f.value_at, f.path,
           "invalid NQN " + in_quotes(nqn) + ": " + form.error().what + " (at character " +
               std::to_string(form.error().offset + 1) + ")");
    }
  }
};

std::string Parser::secret(const Mapping& m, std::string_view key) const {
  const std::string file_key = std::string(key) + "_file";
  const Field* inline_value = m.find(key);
  const Field* file = m.find(file_key);
  if (inline_value && file) {
    fail(file->key_at, file->path, fmt::format("give {} or {}, not both", key, file_key));
  }
  std::string text;
  const Field* where = inline_value ? inline_value : file;
  const bool tls = key == "tls_key";
  if (inline_value) text = string_value(*inline_value, tls ? "an NVMeTLSkey-1 PSK" : "a DHHC-1 secret");
  if (file) {
    std::string path =
        string_value(*file, tls ? "the path of a file holding an NVMeTLSkey-1 PSK" : "the path of a file holding a DHHC-1 secret");
    if (path.front() != '/') fail(file->value_at, file->path, in_quotes(path) + " is not an absolute path");
    // One policy for every secret's file (security/secret_file.h); the key is the file's first line.
    auto content = security::read_secret_file(path, tls ? "an NVMeTLSkey-1 PSK" : "a DHHC-1 secret");
    if (!content) fail(file->value_at, file->path, content.error().message);
    text = security::first_line(*content);
    security::wipe_secret(*content);
  }
  if (where && tls) {
    if (auto k = security::parse_psk_interchange(text); !k) fail(where->value_at, where->path, k.error().message);
  } else if (where) {
    if (auto k = security::dhchap::DhchapKey::parse(text); !k) {
      fail(where->value_at, where->path, k.error().message);
    }
  }
  return text;
}

void Parser::read_path_list(const Field& f, transport::TransportType default_type, uint16_t default_port,
                            std::vector<transport::TransportAddress>& out) const {
  if (missing(f.value)) fail(f.key_at, f.path, "missing value (expected a list of paths: - address: ...)");
  if (!f.value.IsSequence()) {
    fail(f.value_at, f.path, std::string("expected a list of paths (- address: ...), got ") +
                                 (f.value.IsMap() ? "a mapping" : in_quotes(f.value.Scalar())));
  }
  if (f.value.size() == 0) fail(f.value_at, f.path, "empty list (at least one path: - address: ...)");
  static constexpr std::array<std::string_view, 3> kPathKeys = {"address", "port", "transport"};
  std::size_t i = 0;
  for (const auto& node : f.value) {
    const std::string path = fmt::format("{}[{}]", f.path, i);
    const auto at = missing(node) ? f.value_at : location_of(node.Mark());
    if (!missing(node) && !node.IsMap()) fail(at, path, "expected a mapping (address, port, transport)");
    Mapping m(*this, node, path, at, kPathKeys);
    transport::TransportAddress a;
    a.type = default_type;
    if (const Field* t = m.find("transport")) {
      auto type = transport::parse_transport_type(scalar(*t, "tcp or rdma"));
      if (!type) fail(t->value_at, t->path, type.error().message);
      a.type = *type;
    }
    a.traddr = traddr(m.require("address", "the target's IPv4 or IPv6 address, or host name"));
    a.trsvcid = default_port;
    if (const Field* port = m.find("port")) a.trsvcid = static_cast<uint16_t>(integer(*port, int64_t{1}, int64_t{65535}));
    for (std::size_t j = 0; j < out.size(); ++j) {
      if (same_path(out[j], a)) fail(at, path, fmt::format("the same path as {}[{}]", f.path, j));
    }
    out.push_back(std::move(a));
    ++i;
  }
}

constexpr int64_t kMaxNsid = 0xFFFFFFFE;
constexpr int64_t kMaxKeepAlive = UINT32_MAX / 1000;  // seconds: KATO is a 32-bit count of milliseconds

AttachConfig Parser::parse() {
  YAML::Node root = load_mapping("the configuration is empty (at least `address` and `nqn` are required)");
  Mapping top(*this, root, "", location_of(root.Mark()), kKeys);

  AttachConfig config;
  config.source = file();
  // In the order the keys' errors are reported.
  read_paths(top, config);
  read_target(top, config);
  read_tuning(top, config);
  read_secrets(top, config);
  check_mode(top, config);
  return config;
}

// transport, and address (one path) or paths (several), with port as every path's default.
void Parser::read_paths(const Mapping& top, AttachConfig& config) const {
  if (const Field* f = top.find("transport")) {
    auto type = transport::parse_transport_type(scalar(*f, "tcp or rdma"));
    if (!type) fail(f->value_at, f->path, type.error().message);
    config.address.type = *type;
  }
  const Field* address = top.find("address");
  const Field* paths = top.find("paths");
  if (address && paths) fail(paths->key_at, paths->path, "give address (one path) or paths (several), not both");
  if (!address && !paths) {
    top.require("address", "the target's IPv4 or IPv6 address, or host name; or a `paths` list");
  }
  uint16_t default_port = transport::kDefaultIoPort;
  optional_integer(top, "port", default_port, 1, 65535);
  if (address) {
    config.address.traddr = traddr(*address);
    config.address.trsvcid = default_port;
    config.paths.push_back(config.address);
  } else {
    read_path_list(*paths, config.address.type, default_port, config.paths);
    config.address = config.paths.front();
  }
}

// The namespace (nqn, nsid), how it is attached (mode) and who asks (hostnqn, hostid).
void Parser::read_target(const Mapping& top, AttachConfig& config) const {
  const Field& nqn = top.require("nqn", "the subsystem's NQN, e.g. nqn.2024-11.io.rdmablk:vol1");
  config.subnqn = string_value(nqn, "an NQN");
  check_nqn(nqn, config.subnqn);
  if (config.subnqn == protocol::kDiscoveryNqn) {
    fail(nqn.value_at, nqn.path, "the discovery NQN has no namespaces to attach");
  }
  optional_integer(top, "nsid", config.nsid, 1, kMaxNsid);

  if (const Field* f = top.find("mode")) {
    config.mode = one_of<AttachConfig::Mode>(
        *f, "mode", {{"userspace", AttachConfig::Mode::userspace}, {"kernel", AttachConfig::Mode::kernel}});
  }
  if (const Field* f = top.find("hostnqn")) {
    config.hostnqn = string_value(*f, "an NQN");
    check_nqn(*f, *config.hostnqn);
  }
  if (const Field* f = top.find("hostid")) {
    config.hostid = string_value(*f, "a UUID");
    if (auto id = parse_uuid(*config.hostid); !id) fail(f->value_at, f->path, id.error().message);
  }
}

void Parser::read_tuning(const Mapping& top, AttachConfig& config) const {
  optional_integer(top, "nr_io_queues", config.nr_io_queues, 0, kAttachMaxIoQueues);
  optional_integer(top, "queue_size", config.queue_size, kAttachMinQueueSize, kAttachMaxQueueSize);
  optional_integer(top, "ctrl_loss_tmo", config.ctrl_loss_tmo_s, -1, INT_MAX);
  optional_integer(top, "reconnect_delay", config.reconnect_delay_s, 1, kAttachMaxReconnectDelay);
  optional_integer(top, "keep_alive_tmo", config.keep_alive_tmo_s, 0, kMaxKeepAlive);
}

// DH-HMAC-CHAP secrets, tls and the TLS key.
void Parser::read_secrets(const Mapping& top, AttachConfig& config) const {
  config.dhchap_secret = secret(top, "dhchap_secret");
  config.dhchap_ctrl_secret = secret(top, "dhchap_ctrl_secret");
  if (!config.dhchap_ctrl_secret.empty() && config.dhchap_secret.empty()) {
    const Field* f = top.find("dhchap_ctrl_secret");
    if (!f) f = top.find("dhchap_ctrl_secret_file");
    fail(f->key_at, f->path, "needs dhchap_secret (or dhchap_secret_file): bidirectional authentication proves the host first");
  }
  if (const Field* f = top.find("tls")) config.tls = one_of<bool>(*f, "tls", {{"true", true}, {"false", false}});
  config.tls_key = secret(top, "tls_key");
  if (!config.tls_key.empty()) {
    const Field* f = top.find("tls_key");
    if (!f) f = top.find("tls_key_file");
    if (top.find("tls") && !config.tls) fail(f->key_at, f->path, "a TLS key with tls: false");
    for (const auto& p : config.paths) {
      if (p.type != transport::TransportType::tcp) fail(f->key_at, f->path, "TLS is for transport tcp only");
    }
    if (config.mode == AttachConfig::Mode::kernel) {
      fail(f->key_at, f->path,
           "mode kernel takes the PSK from the kernel's .nvme keyring (nvme tls-key --import); give tls: true alone");
    }
    config.tls = true;
  }
}

// What the chosen mode cannot do: several paths (kernel), TLS without a key (userspace).
void Parser::check_mode(const Mapping& top, const AttachConfig& config) const {
  if (config.paths.size() > 1 && config.mode == AttachConfig::Mode::kernel) {
    const Field* paths = top.find("paths");
    fail(paths->key_at, paths->path,
         "mode kernel takes one address (the kernel's native multipath joins controllers connected one by one)");
  }
  if (config.tls && config.mode == AttachConfig::Mode::userspace && config.tls_key.empty()) {
    const Field* f = top.find("tls");
    fail(f->value_at, f->path, "mode userspace needs tls_key or tls_key_file (there is no kernel keyring to ask)");
  }
}

}  // namespace

bool same_path(const transport::TransportAddress& a, const transport::TransportAddress& b) noexcept {
  return a.type == b.type && a.traddr == b.traddr && a.trsvcid == b.trsvcid;
}

Result<transport::TransportAddress> parse_path_value(std::string_view value, transport::TransportType type,
                                                     uint16_t default_port) {
  transport::TransportAddress a;
  a.type = type;
  a.trsvcid = default_port;
  std::string_view host = value;
  std::string_view port;
  const auto bad = [&](const std::string& why) {
    return make_error(fmt::format("-a {}: {} (expected ADDR, ADDR:PORT or [IPv6]:PORT)", in_quotes(std::string(value)), why),
                      EINVAL);
  };
  if (value.empty()) return bad("empty");
  if (value.front() == '[') {
    const auto close = value.find(']');
    if (close == std::string_view::npos) return bad("no ']' after the IPv6 address");
    host = value.substr(1, close - 1);
    std::string_view rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("expected ':PORT' after ']'");
      port = rest.substr(1);
      if (port.empty()) return bad("empty port");
    }
  } else if (std::count(value.begin(), value.end(), ':') == 1) {
    const auto colon = value.find(':');
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (port.empty()) return bad("empty port");
  }
  if (host.empty()) return bad("empty address");
  if (auto problem = address_problem(std::string(host))) return bad(*problem);
  a.traddr = std::string(host);
  if (!port.empty()) {
    unsigned v = 0;
    bool digits = std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); });
    if (!digits || port.size() > 5 || (v = static_cast<unsigned>(std::stoul(std::string(port)))) == 0 || v > 65535) {
      return bad(fmt::format("port {} is not a number in 1..65535", in_quotes(std::string(port))));
    }
    a.trsvcid = static_cast<uint16_t>(v);
  }
  return a;
}

Result<AttachConfig> parse_attach_config(std::string_view yaml_text, std::string_view name_for_messages) {
  Parser parser(name_for_messages, yaml_text);
  return config::catch_failures<Result<AttachConfig>>(
      name_for_messages, [&] { return parser.parse(); }, [](const std::string& m) { return make_error(m, EINVAL); });
}

Result<AttachConfig> load_attach_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {  // ifstream would read a directory as an empty file
    return make_error(path + ": cannot read the configuration: " + std::strerror(EISDIR), EISDIR);
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    int e = errno;
    return make_error(path + ": cannot read the configuration: " + std::strerror(e), e);
  }
  return parse_attach_config(text.str(), path);
}

}  // namespace rdmablk::initiator

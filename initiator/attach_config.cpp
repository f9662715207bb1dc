#include "initiator/attach_config.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <sys/stat.h>
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
#include "initiator/controller.h"
#include "protocol/fabrics.h"
#include "security/dhchap_key.h"
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

constexpr std::array<std::string_view, 20> kKeys = {
    "transport",          "address",      "port",          "nqn",
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
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      fail(file->value_at, file->path, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    }
    if (!S_ISREG(st.st_mode)) fail(file->value_at, file->path, path + " is not a regular file");
    // The secret authenticates this host: a file every user can read gives it away.
    if (st.st_mode & S_IROTH) {
      fail(file->value_at, file->path,
           fmt::format("{} is readable by every user (mode {:04o}): chmod o-rwx (e.g. 0600)", path, st.st_mode & 07777));
    }
    std::ifstream in(path, std::ios::binary);
    std::ostringstream content;
    if (in) content << in.rdbuf();
    if (!in || in.bad()) fail(file->value_at, file->path, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    text = content.str();
    // A file usually ends with a newline: the key is its first line.
    text = text.substr(0, text.find_first_of("\r\n"));
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

constexpr int64_t kMaxNsid = 0xFFFFFFFE;
constexpr int64_t kMaxKeepAlive = UINT32_MAX / 1000;  // seconds: KATO is a 32-bit count of milliseconds

AttachConfig Parser::parse() {
  YAML::Node root = load_mapping("the configuration is empty (at least `address` and `nqn` are required)");
  Mapping top(*this, root, "", location_of(root.Mark()), kKeys);

  AttachConfig config;
  config.source = file();

  if (const Field* f = top.find("transport")) {
    auto type = transport::parse_transport_type(scalar(*f, "tcp or rdma"));
    if (!type) fail(f->value_at, f->path, type.error().message);
    config.address.type = *type;
  }
  const Field& address = top.require("address", "the target's IPv4 or IPv6 address, or host name");
  std::string traddr = string_value(address, "an address");
  if (traddr.size() > 2 && traddr.front() == '[' && traddr.back() == ']') traddr = traddr.substr(1, traddr.size() - 2);
  if (auto problem = address_problem(traddr)) fail(address.value_at, address.path, *problem);
  config.address.traddr = traddr;
  config.address.trsvcid = transport::kDefaultIoPort;
  optional_integer(top, "port", config.address.trsvcid, 1, 65535);

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

  optional_integer(top, "nr_io_queues", config.nr_io_queues, 0, kAttachMaxIoQueues);
  optional_integer(top, "queue_size", config.queue_size, kAttachMinQueueSize, kAttachMaxQueueSize);
  optional_integer(top, "ctrl_loss_tmo", config.ctrl_loss_tmo_s, -1, INT_MAX);
  optional_integer(top, "reconnect_delay", config.reconnect_delay_s, 1, kAttachMaxReconnectDelay);
  optional_integer(top, "keep_alive_tmo", config.keep_alive_tmo_s, 0, kMaxKeepAlive);

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
    if (config.address.type != transport::TransportType::tcp) fail(f->key_at, f->path, "TLS is for transport tcp only");
    if (config.mode == AttachConfig::Mode::kernel) {
      fail(f->key_at, f->path,
           "mode kernel takes the PSK from the kernel's .nvme keyring (nvme tls-key --import); give tls: true alone");
    }
    config.tls = true;
  }
  if (config.tls && config.mode == AttachConfig::Mode::userspace && config.tls_key.empty()) {
    const Field* f = top.find("tls");
    fail(f->value_at, f->path, "mode userspace needs tls_key or tls_key_file (there is no kernel keyring to ask)");
  }

  return config;
}

}  // namespace

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

#include "initiator/attach_config.h"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "initiator/controller.h"
#include "protocol/fabrics.h"

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

// The same message rules as the target's configuration (target/config.cpp); the few helpers are kept
// here rather than shared because the target's sit inside its parser and the layers must not point
// sideways (initiator -> target).

struct Location {  // 1-based
  int line = 1;
  int column = 1;
};

Location location_of(const YAML::Mark& m) {
  if (m.line < 0 || m.column < 0) return {};  // yaml-cpp's null mark (an empty document)
  return {m.line + 1, m.column + 1};
}

// Messages are one line: control characters from the file (a multi-line scalar) are escaped.
void append_escaped(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
}

std::string format_message(std::string_view file, Location at, std::string_view field, std::string_view problem) {
  std::string out = std::string(file) + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": ";
  if (!field.empty()) {
    append_escaped(out, field);
    out += ": ";
  }
  append_escaped(out, problem);
  return out;
}

// A value from the file as shown in a message: quoted, and cut short when it is long.
std::string in_quotes(std::string_view s) {
  constexpr std::size_t kMax = 80;
  if (s.size() > kMax) return "'" + std::string(s.substr(0, kMax)) + "...'";
  return "'" + std::string(s) + "'";
}

const char* node_kind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence:
      return "list";
    case YAML::NodeType::Map:
      return "mapping";
    case YAML::NodeType::Scalar:
      return "scalar";
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

constexpr std::array<std::string_view, 13> kKeys = {
    "transport", "address",      "port",       "nqn",           "nsid",            "mode",          "hostnqn",
    "hostid",    "nr_io_queues", "queue_size", "ctrl_loss_tmo", "reconnect_delay", "keep_alive_tmo",
};

std::string unknown_key_problem(std::string_view name) {
  std::string_view best;
  std::size_t best_distance = std::string::npos;
  for (std::string_view k : kKeys) {
    std::size_t d = edit_distance(name, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  if (best_distance <= std::max<std::size_t>(2, name.size() / 3)) {
    return "unknown key (did you mean " + in_quotes(best) + "?)";
  }
  std::string list;
  for (std::string_view k : kKeys) list += (list.empty() ? "" : ", ") + std::string(k);
  return "unknown key (expected one of: " + list + ")";
}

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

struct ParseFailure {  // thrown inside the parser only; parse_attach_config() turns it into an Error
  std::string message;
};

struct Field {
  std::string name;
  YAML::Node value;
  Location key_at;
  Location value_at;  // the key's location when the value is missing (yaml-cpp marks the next line)
};

class Parser {
 public:
  explicit Parser(std::string_view file) : file_(file) {}

  [[noreturn]] void fail(Location at, std::string_view field, std::string_view problem) const {
    throw ParseFailure{format_message(file_, at, field, problem)};
  }

  AttachConfig parse(std::string_view text);

 private:
  void read_keys(const YAML::Node& root) {
    for (auto it = root.begin(); it != root.end(); ++it) {
      const YAML::Node key = it->first;  // copies: the iterator hands out a temporary pair
      const YAML::Node value = it->second;
      Location key_at = location_of(key.Mark());
      if (!key.IsScalar()) fail(key_at, "", "keys must be plain names");
      std::string name = key.Scalar();
      if (std::find(kKeys.begin(), kKeys.end(), name) == kKeys.end()) {
        fail(key_at, name.size() > 40 ? name.substr(0, 40) + "..." : name, unknown_key_problem(name));
      }
      if (const Field* seen = find(name)) {
        fail(key_at, name, "duplicate key (first at line " + std::to_string(seen->key_at.line) + ")");
      }
      Location value_at = value.IsNull() ? key_at : location_of(value.Mark());
      fields_.push_back(Field{name, value, key_at, value_at});
    }
  }

  const Field* find(std::string_view name) const {
    for (const Field& f : fields_) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }

  const Field& require(std::string_view name, std::string_view what) const {
    if (const Field* f = find(name)) return *f;
    fail(top_at_, name, "missing (required: " + std::string(what) + ")");
  }

  // No key here takes null, so `key:`, `key: ~` and `key: null` are all a missing value.
  std::string scalar(const Field& f, std::string_view expected) const {
    if (f.value.IsNull()) fail(f.key_at, f.name, "missing value (expected " + std::string(expected) + ")");
    if (!f.value.IsScalar()) {
      fail(f.value_at, f.name, "expected " + std::string(expected) + ", got a " + node_kind(f.value));
    }
    return f.value.Scalar();
  }

  std::string string_value(const Field& f, std::string_view expected) const {
    std::string s = scalar(f, expected);
    if (s.empty()) fail(f.value_at, f.name, "must not be empty");
    return s;
  }

  // Decimal (optionally negative) or 0x hexadecimal, within [min, max].
  int64_t integer(const Field& f, int64_t min, int64_t max) const {
    std::string text = scalar(f, "an integer");
    std::string_view digits = text;
    if (!digits.empty() && digits.front() == '-' && min >= 0) {
      fail(f.value_at, f.name, "must not be negative (got " + in_quotes(text) + ")");
    }
    int base = 10;
    if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
      digits.remove_prefix(2);
      base = 16;
    }
    int64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (digits.empty() || end != digits.data() + digits.size() || ec == std::errc::invalid_argument) {
      fail(f.value_at, f.name, "expected an integer, got " + in_quotes(text));
    }
    if (ec == std::errc::result_out_of_range || value < min || value > max) {
      fail(f.value_at, f.name,
           (text.size() > 24 ? in_quotes(text) : text) + " is out of range (expected " + std::to_string(min) + ".." +
               std::to_string(max) + ")");
    }
    return value;
  }

  // `key: value` read into `out` when the key is present.
  template <typename T>
  void optional_integer(std::string_view name, T& out, int64_t min, int64_t max) const {
    if (const Field* f = find(name)) out = static_cast<T>(integer(*f, min, max));
  }

  void check_nqn(const Field& f, const std::string& nqn) const {
    auto form = protocol::decode_nqn(nqn);
    if (!form) {
      fail(f.value_at, f.name,
           "invalid NQN " + in_quotes(nqn) + ": " + form.error().what + " (at character " +
               std::to_string(form.error().offset + 1) + ")");
    }
  }

  std::string file_;
  Location top_at_;
  std::vector<Field> fields_;
};

constexpr int64_t kMaxNsid = 0xFFFFFFFE;
constexpr int64_t kMaxKeepAlive = UINT32_MAX / 1000;  // seconds: KATO is a 32-bit count of milliseconds

AttachConfig Parser::parse(std::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    fail(location_of(e.mark), "", "invalid YAML: " + e.msg);
  }
  if (root.IsNull()) fail({}, "", "the configuration is empty (at least `address` and `nqn` are required)");
  if (!root.IsMap()) {
    fail(location_of(root.Mark()), "",
         std::string("expected a mapping of settings at the top level, got a ") + node_kind(root));
  }
  top_at_ = location_of(root.Mark());
  read_keys(root);

  AttachConfig config;
  config.source = file_;

  if (const Field* f = find("transport")) {
    auto type = transport::parse_transport_type(scalar(*f, "tcp or rdma"));
    if (!type) fail(f->value_at, f->name, type.error().message);
    config.address.type = *type;
  }
  const Field& address = require("address", "the target's IPv4 or IPv6 address, or host name");
  std::string traddr = string_value(address, "an address");
  if (traddr.size() > 2 && traddr.front() == '[' && traddr.back() == ']') traddr = traddr.substr(1, traddr.size() - 2);
  if (auto problem = address_problem(traddr)) fail(address.value_at, address.name, *problem);
  config.address.traddr = traddr;
  config.address.trsvcid = transport::kDefaultIoPort;
  optional_integer("port", config.address.trsvcid, 1, 65535);

  const Field& nqn = require("nqn", "the subsystem's NQN, e.g. nqn.2024-11.io.rdmablk:vol1");
  config.subnqn = string_value(nqn, "an NQN");
  check_nqn(nqn, config.subnqn);
  if (config.subnqn == protocol::kDiscoveryNqn) {
    fail(nqn.value_at, nqn.name, "the discovery NQN has no namespaces to attach");
  }
  optional_integer("nsid", config.nsid, 1, kMaxNsid);

  if (const Field* f = find("mode")) {
    std::string mode = scalar(*f, "userspace or kernel");
    if (mode == "userspace") {
      config.mode = AttachConfig::Mode::userspace;
    } else if (mode == "kernel") {
      config.mode = AttachConfig::Mode::kernel;
    } else {
      fail(f->value_at, f->name, "unknown mode " + in_quotes(mode) + " (expected userspace or kernel)");
    }
  }
  if (const Field* f = find("hostnqn")) {
    config.hostnqn = string_value(*f, "an NQN");
    check_nqn(*f, *config.hostnqn);
  }
  if (const Field* f = find("hostid")) {
    config.hostid = string_value(*f, "a UUID");
    if (auto id = parse_uuid(*config.hostid); !id) fail(f->value_at, f->name, id.error().message);
  }

  optional_integer("nr_io_queues", config.nr_io_queues, 0, kAttachMaxIoQueues);
  optional_integer("queue_size", config.queue_size, kAttachMinQueueSize, kAttachMaxQueueSize);
  optional_integer("ctrl_loss_tmo", config.ctrl_loss_tmo_s, -1, INT_MAX);
  optional_integer("reconnect_delay", config.reconnect_delay_s, 1, kAttachMaxReconnectDelay);
  optional_integer("keep_alive_tmo", config.keep_alive_tmo_s, 0, kMaxKeepAlive);

  return config;
}

}  // namespace

Result<AttachConfig> parse_attach_config(std::string_view yaml_text, std::string_view name_for_messages) {
  Parser parser(name_for_messages);
  try {
    return parser.parse(yaml_text);
  } catch (const ParseFailure& failure) {
    return make_error(failure.message, EINVAL);
  } catch (const YAML::Exception& e) {  // a yaml-cpp surprise: still one line naming the file
    return make_error(format_message(name_for_messages, location_of(e.mark), "", e.msg), EINVAL);
  }
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

#include "fio_engine/target_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "initiator/host/namespace_uri.h"

namespace rdmablk::fio_engine {

namespace {

Result<uint32_t> parse_nsid(std::string_view s, std::string_view what) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v == 0 || v == 0xFFFFFFFFu) {
    return make_error(fmt::format("{}: invalid namespace id '{}' (1..4294967294)", what, s), EINVAL);
  }
  return v;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The address, port and subsystem the options give (the name may override each).
struct Fields {
  std::optional<std::string> transport, traddr, trsvcid, subnqn, hostnqn, hostid;
  std::optional<uint32_t> nsid;
};

Result<void> parse_key_values(std::string_view name, Fields& f) {
  std::size_t i = 0;
  while (i < name.size()) {
    while (i < name.size() && std::isspace(static_cast<unsigned char>(name[i]))) ++i;
    if (i >= name.size()) break;
    std::size_t end = i;
    while (end < name.size() && !std::isspace(static_cast<unsigned char>(name[end]))) ++end;
    std::string_view token = name.substr(i, end - i);
    i = end;
    auto eq = token.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return make_error(fmt::format("filename '{}': '{}' is not KEY=VALUE", name, token), EINVAL);
    }
    const std::string key = lower(token.substr(0, eq));
    std::string value(token.substr(eq + 1));
    if (value.empty()) return make_error(fmt::format("filename '{}': {} has no value", name, key), EINVAL);
    if (key == "trtype") {
      f.transport = value;
    } else if (key == "adrfam") {
      // SPDK names the address family; the address itself decides here.
      std::string fam = lower(value);
      if (fam != "ipv4" && fam != "ipv6") {
        return make_error(fmt::format("filename '{}': adrfam={} (expected IPv4 or IPv6)", name, value), EINVAL);
      }
    } else if (key == "traddr") {
      f.traddr = value;
    } else if (key == "trsvcid") {
      f.trsvcid = value;
    } else if (key == "subnqn") {
      f.subnqn = value;
    } else if (key == "ns" || key == "nsid") {
      auto n = parse_nsid(value, fmt::format("filename '{}'", name));
      if (!n) return tl::unexpected(n.error());
      f.nsid = *n;
    } else if (key == "hostnqn") {
      f.hostnqn = value;
    } else if (key == "hostid") {
      f.hostid = value;
    } else {
      return make_error(fmt::format("filename '{}': unknown key '{}' (known: trtype, adrfam, traddr, trsvcid, subnqn, "
                                    "ns, nsid, hostnqn, hostid)",
                                    name, key),
                        EINVAL);
    }
  }
  return {};
}

}  // namespace

std::string TargetSpec::controller_key() const {
  return fmt::format("{}|{}|{}|{}", transport::to_uri(address), subnqn, hostnqn.value_or(""), hostid.value_or(""));
}

std::string TargetSpec::describe() const { return fmt::format("{}/{}/{}", transport::to_uri(address), subnqn, nsid); }

std::string unescape_option(std::string_view value) {
  std::string v(value);
  for (std::size_t at = v.find("\\:"); at != std::string::npos; at = v.find("\\:", at)) v.erase(at, 1);
  return v;
}

Result<TargetSpec> resolve_target(const EngineOptions& options, std::string_view filename) {
  Fields f;
  const auto scheme = filename.find("://");
  if (scheme != std::string_view::npos && filename.find_first_of(" \t=") == std::string_view::npos) {
    auto uri = initiator::parse_namespace_uri(filename);
    if (!uri) return make_error(fmt::format("filename '{}': {}", filename, uri.error().message), EINVAL);
    f.transport = transport::transport_name(uri->address.type);
    f.traddr = uri->address.traddr;
    f.trsvcid = std::to_string(uri->address.trsvcid);
    f.subnqn = uri->subnqn;
    // parse_namespace_uri defaults a missing NSID to 1: only an explicit one overrides the option.
    const auto last = filename.rfind('/');
    const std::string_view tail = filename.substr(last + 1);
    if (!tail.empty() && std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        filename.substr(scheme + 3).find('/') < last - scheme - 3) {
      f.nsid = uri->nsid;
    }
  } else if (filename.find('=') != std::string_view::npos) {
    if (auto r = parse_key_values(filename, f); !r) return tl::unexpected(r.error());
  }
  // else: a label; the options say everything.

  TargetSpec t;
  const std::string transport = f.transport ? *f.transport : options.transport.value_or("tcp");
  auto type = transport::parse_transport_type(transport);
  if (!type) return make_error(fmt::format("transport '{}': expected tcp or rdma", transport), EINVAL);
  t.address.type = *type;
  const auto traddr = f.traddr ? f.traddr : options.traddr;
  if (!traddr || traddr->empty()) {
    return make_error(fmt::format("no target address for file '{}': give traddr= (engine option) or a filename "
                                  "'trtype=tcp traddr=ADDR trsvcid=4420 subnqn=NQN ns=1' or "
                                  "'tcp://ADDR:PORT/NQN/NSID' (escape ':' as '\\:' in fio's filename=)",
                                  filename),
                      EINVAL);
  }
  t.address.traddr = *traddr;
  const auto trsvcid = f.trsvcid ? f.trsvcid : options.trsvcid;
  t.address.trsvcid = transport::kDefaultIoPort;
  if (trsvcid) {
    auto port = transport::parse_port(*trsvcid);
    if (!port) return make_error(fmt::format("trsvcid '{}': {}", *trsvcid, port.error().message), EINVAL);
    t.address.trsvcid = *port;
  }
  const auto subnqn = f.subnqn ? f.subnqn : options.subnqn;
  if (!subnqn || subnqn->empty()) {
    return make_error(fmt::format("no subsystem NQN for file '{}': give subnqn= (engine option or in the filename)",
                                  filename),
                      EINVAL);
  }
  t.subnqn = *subnqn;
  t.nsid = f.nsid ? *f.nsid : (options.nsid ? options.nsid : 1);
  t.hostnqn = f.hostnqn ? f.hostnqn : options.hostnqn;
  t.hostid = f.hostid ? f.hostid : options.hostid;
  return t;
}

}  // namespace rdmablk::fio_engine

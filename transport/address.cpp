#include "transport/address.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

namespace rdmablk::transport {

const char* transport_name(TransportType t) noexcept {
  switch (t) {
    case TransportType::rdma: return "rdma";
    case TransportType::tcp: return "tcp";
  }
  return "unknown";
}

Result<TransportType> parse_transport_type(std::string_view s) {
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "tcp") return TransportType::tcp;
  if (lower == "rdma") return TransportType::rdma;
  return make_error("unknown transport '" + std::string(s) + "' (expected tcp or rdma)");
}

Result<uint16_t> parse_port(std::string_view s) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || value == 0 || value > 65535) {
    return make_error("invalid port '" + std::string(s) + "' (expected 1-65535)");
  }
  return static_cast<uint16_t>(value);
}

Result<TransportAddress> parse_transport_uri(std::string_view uri) {
  auto sep = uri.find("://");
  if (sep == std::string_view::npos) {
    return make_error("invalid address '" + std::string(uri) + "' (expected tcp://ADDR[:PORT] or rdma://ADDR[:PORT])");
  }
  auto type = parse_transport_type(uri.substr(0, sep));
  if (!type) return tl::unexpected(type.error());
  TransportAddress out;
  out.type = *type;
  std::string_view rest = uri.substr(sep + 3);
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    auto close = rest.find(']');
    if (close == std::string_view::npos) return make_error("unterminated '[' in address '" + std::string(uri) + "'");
    out.traddr = std::string(rest.substr(1, close - 1));
    rest = rest.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return make_error("unexpected text after ']' in '" + std::string(uri) + "'");
      port = rest.substr(1);
    }
  } else {
    auto colon = rest.rfind(':');
    if (colon != std::string_view::npos && rest.find(':') != colon) {
      return make_error("IPv6 address must be written in brackets in '" + std::string(uri) + "'");
    }
    out.traddr = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port = rest.substr(colon + 1);
  }
  if (out.traddr.empty()) return make_error("missing address in '" + std::string(uri) + "'");
  out.trsvcid = kDefaultIoPort;
  if (!port.empty() || (rest.size() && rest.back() == ':')) {
    auto p = parse_port(port);
    if (!p) return tl::unexpected(p.error());
    out.trsvcid = *p;
  }
  return out;
}

std::string to_uri(const TransportAddress& a) {
  bool v6 = a.traddr.find(':') != std::string::npos;
  return std::string(transport_name(a.type)) + "://" + (v6 ? "[" + a.traddr + "]" : a.traddr) + ":" +
         std::to_string(a.trsvcid);
}

}  // namespace rdmablk::transport

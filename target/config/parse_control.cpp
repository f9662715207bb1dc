#include "target/config/parser.h"


namespace rdmablk::target::config_impl {

void Parser::expect_mapping(const Field& f, std::string_view keys, std::string_view hint) const {
  if (missing(f.value) || f.value.IsMap()) return;
  fail(f.value_at, f.path,
       "expected a mapping (" + std::string(keys) + "), got a " + node_kind(f.value) + " (" + std::string(hint) + ")");
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

}  // namespace rdmablk::target::config_impl

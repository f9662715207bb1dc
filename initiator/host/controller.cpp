#include "initiator/host/controller.h"

#include <fmt/format.h>
#include <systemd/sd-id128.h>

#include "protocol/ana.h"
#include "security/dhchap_session.h"
#include "security/tls_session.h"
#include "transport/tcp/tcp_tls.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

namespace rdmablk::initiator {

using namespace std::chrono_literals;
using protocol::Cqe;
using protocol::Sqe;
using protocol::Status;
using transport::DataDirection;
using transport::HostCommand;
using transport::HostQueue;

// ---------------------------------------------------------------------------------------------------------
// Host identity
// ---------------------------------------------------------------------------------------------------------

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> read_first_line(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
  if (line.empty()) return std::nullopt;
  return line;
}

HostId random_uuid() {
  std::random_device rd;
  HostId id{};
  for (auto& b : id) b = static_cast<uint8_t>(rd());
  id[6] = static_cast<uint8_t>((id[6] & 0x0F) | 0x40);  // version 4
  id[8] = static_cast<uint8_t>((id[8] & 0x3F) | 0x80);  // RFC 4122 variant
  return id;
}

// Stable per machine: systemd's HMAC of the machine id with our application id, so the machine id itself
// never leaves the host.
std::optional<HostId> machine_uuid() {
  // SD_ID128_ARRAY, not SD_ID128_MAKE: the latter is a C compound literal, which clang refuses in C++.
  constexpr sd_id128_t kApp = SD_ID128_ARRAY(5c, 0a, 7d, 2e, 91, 3b, 4f, 6a, 8e, 17, c4, 52, 09, d3, e8, 71);
  sd_id128_t out;
  if (sd_id128_get_machine_app_specific(kApp, &out) < 0) return std::nullopt;
  HostId id{};
  std::memcpy(id.data(), out.bytes, id.size());
  return id;
}

}  // namespace

Result<HostId> parse_uuid(std::string_view s) {
  HostId id{};
  std::size_t nibble = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '-') {
      if (i != 8 && i != 13 && i != 18 && i != 23) break;
      continue;
    }
    int v = hex_value(c);
    if (v < 0 || nibble >= 32) {
      nibble = 99;
      break;
    }
    id[nibble / 2] = static_cast<uint8_t>(id[nibble / 2] | v << (nibble % 2 ? 0 : 4));
    ++nibble;
  }
  bool dashed = s.size() == 36, plain = s.size() == 32;
  if (nibble != 32 || !(dashed || plain)) {
    return make_error("invalid host id '" + std::string(s) + "' (expected a UUID like 3fa85f64-5717-4562-b3fc-2c963f66afa6)");
  }
  return id;
}

std::string format_uuid(const HostId& id) {
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < id.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += fmt::format("{:02x}", id[i]);
  }
  return out;
}

Result<HostIdentity> resolve_host_identity(std::optional<std::string> hostnqn, std::optional<std::string> hostid,
                                           const HostIdentitySources& sources) {
  HostIdentity out;
  if (!hostnqn) hostnqn = read_first_line(sources.hostnqn_file);
  if (!hostid) hostid = read_first_line(sources.hostid_file);

  if (hostid) {
    auto id = parse_uuid(*hostid);
    if (!id) return tl::unexpected(id.error());
    out.hostid = *id;
  } else if (hostnqn && hostnqn->starts_with(protocol::kUuidNqnPrefix)) {
    auto id = parse_uuid(std::string_view(*hostnqn).substr(protocol::kUuidNqnPrefix.size()));
    out.hostid = id ? *id : random_uuid();
  } else if (auto m = machine_uuid()) {
    out.hostid = *m;
  } else {
    out.hostid = random_uuid();
  }

  out.hostnqn = hostnqn ? *hostnqn : std::string(protocol::kUuidNqnPrefix) + format_uuid(out.hostid);
  if (auto v = protocol::decode_nqn(out.hostnqn); !v) {
    return make_error(fmt::format("invalid host NQN '{}': {} at byte {}", out.hostnqn, v.error().what, v.error().offset));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// DH-HMAC-CHAP settings
// ---------------------------------------------------------------------------------------------------------

Result<std::shared_ptr<const security::dhchap::DhchapKey>> parse_dhchap_secret(std::string_view text,
                                                                                std::string_view what) {
  auto key = security::dhchap::DhchapKey::parse(text);
  if (!key) return make_error(fmt::format("invalid {}: {}", what, key.error().message), EINVAL);
  return std::make_shared<const security::dhchap::DhchapKey>(std::move(*key));
}

Result<DhchapSettings> make_dhchap_settings(std::string_view secret, std::string_view ctrl_secret,
                                            std::string_view secret_what, std::string_view ctrl_secret_what) {
  DhchapSettings s;
  if (!ctrl_secret.empty() && secret.empty()) {
    return make_error(fmt::format("{} needs {} (bidirectional authentication proves the host first)",
                                  ctrl_secret_what, secret_what),
                      EINVAL);
  }
  if (!secret.empty()) {
    auto k = parse_dhchap_secret(secret, secret_what);
    if (!k) return tl::unexpected(k.error());
    s.secret = std::move(*k);
  }
  if (!ctrl_secret.empty()) {
    auto k = parse_dhchap_secret(ctrl_secret, ctrl_secret_what);
    if (!k) return tl::unexpected(k.error());
    s.ctrl_secret = std::move(*k);
  }
  return s;
}

Result<std::shared_ptr<const security::ConfiguredPsk>> parse_tls_key(std::string_view text, std::string_view what) {
  auto key = security::parse_psk_interchange(text);
  if (!key) return make_error(fmt::format("invalid {}: {}", what, key.error().message), EINVAL);
  return std::make_shared<const security::ConfiguredPsk>(std::move(*key));
}

// ---------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------

std::string describe_status(Status s) {
  return fmt::format("{} (SCT {:#x} SC {:#04x}{})", protocol::status_name(s), static_cast<unsigned>(s.sct()), s.sc(),
                     s.dnr() ? ", DNR" : "");
}

namespace {

// Connect response DW0 AUTHREQ (include/linux/nvme.h NVME_CONNECT_AUTHREQ_*): authentication required,
// and secure channel concatenation required.
constexpr uint32_t kAuthreqAtr = 1u << 17;
constexpr uint32_t kAuthreqAscr = 1u << 18;

std::string command_name(const Sqe& sqe, bool admin) {
  if (sqe.hdr.opcode == protocol::kFabricsOpcode) {
    auto f = protocol::as<protocol::FabricsCommand>(sqe);
    switch (f.type()) {
      case protocol::FabricsType::connect: return "Connect";
      case protocol::FabricsType::property_get: return "Property Get";
      case protocol::FabricsType::property_set: return "Property Set";
      case protocol::FabricsType::disconnect: return "Disconnect";
      case protocol::FabricsType::authentication_send: return "Authentication Send";
      case protocol::FabricsType::authentication_receive: return "Authentication Receive";
      default: return fmt::format("fabrics command {:#04x}", f.fctype);
    }
  }
  if (admin) {
    switch (static_cast<protocol::AdminOpcode>(sqe.hdr.opcode)) {
      case protocol::AdminOpcode::identify: return "Identify";
      case protocol::AdminOpcode::get_log_page: return "Get Log Page";
      case protocol::AdminOpcode::set_features: return "Set Features";
      case protocol::AdminOpcode::get_features: return "Get Features";
      case protocol::AdminOpcode::keep_alive: return "Keep Alive";
      default: break;
    }
    return fmt::format("admin command {:#04x}", sqe.hdr.opcode);
  }
  return fmt::format("I/O command {:#04x}", sqe.hdr.opcode);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Synchronous execution
// ---------------------------------------------------------------------------------------------------------

namespace detail {
struct SyncSlot {
  HostCommand cmd{};
  Cqe cqe{};
  bool done = false;
};
}  // namespace detail
using detail::SyncSlot;

namespace {

void sync_complete(HostCommand& cmd, const Cqe& cqe) noexcept {
  auto* slot = static_cast<SyncSlot*>(cmd.context);
  slot->cqe = cqe;
  slot->done = true;
}

enum class SyncFailure { none, submit, timeout, connection };

struct SyncOutcome {
  SyncFailure failure = SyncFailure::none;
  Cqe cqe{};
  std::string message;
};

// Runs one command to completion on `q`. Closes the queue on timeout or connection loss.
SyncOutcome run_sync(HostQueue& q, SyncSlot& slot, const Sqe& sqe, std::span<uint8_t> data,
                     DataDirection dir, std::chrono::milliseconds timeout) {
  slot.done = false;
  slot.cmd = HostCommand{};
  slot.cmd.sqe = sqe;
  slot.cmd.direction = dir;
  slot.cmd.data = data;
  slot.cmd.on_complete = &sync_complete;
  slot.cmd.context = &slot;
  SyncOutcome out;
  Status st = q.submit(slot.cmd);
  if (!st.ok()) {
    out.failure = SyncFailure::submit;
    out.message = "could not be queued: " + describe_status(st);
    return out;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!slot.done) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) {
      q.close();
      out.failure = SyncFailure::timeout;
      out.message = fmt::format("timed out after {} ms", timeout.count());
      return out;
    }
    int rc = q.poll(1, std::min<std::chrono::milliseconds>(left, 100ms));
    if (rc < 0) {
      if (slot.done && slot.cqe.get_status().ok()) break;
      q.close();
      out.failure = SyncFailure::connection;
      out.message = fmt::format("connection lost ({})", std::strerror(-rc));
      return out;
    }
  }
  out.cqe = slot.cqe;
  return out;
}

}  // namespace

Controller::Controller(ControllerOptions opts) : opts_(std::move(opts)), sync_(std::make_unique<detail::SyncSlot>()) {}

Controller::~Controller() {
  if (admin_) admin_->close();
}

std::string Controller::where() const {
  return fmt::format("{} {}", transport::to_uri(opts_.address), opts_.subnqn);
}

tl::unexpected<Error> Controller::fail(std::string message, int errno_value) {
  failed_ = true;
  failure_ = message;
  return make_error(std::move(message), errno_value);
}

Result<Cqe> Controller::execute(HostQueue& queue, const Sqe& sqe, std::span<uint8_t> data, DataDirection dir,
                                std::chrono::milliseconds timeout) {
  const bool is_admin = &queue == admin_.get();
  if (failed_ && is_admin) return make_error(where() + ": controller unusable: " + failure_, EIO);
  auto out = run_sync(queue, *sync_, sqe, data, dir, timeout);
  std::string name = command_name(sqe, is_admin);
  switch (out.failure) {
    case SyncFailure::none: break;
    case SyncFailure::submit: return make_error(fmt::format("{}: {} {}", where(), name, out.message), EAGAIN);
    case SyncFailure::timeout:
      if (is_admin) return fail(fmt::format("{}: {} {}", where(), name, out.message), ETIMEDOUT);
      return make_error(fmt::format("{}: {} {}", where(), name, out.message), ETIMEDOUT);
    case SyncFailure::connection:
      if (is_admin) return fail(fmt::format("{}: {}: {}", where(), name, out.message), ECONNRESET);
      return make_error(fmt::format("{}: {}: {}", where(), name, out.message), ECONNRESET);
  }
  Status st = out.cqe.get_status();
  if (!st.ok()) return make_error(fmt::format("{}: {} failed: {}", where(), name, describe_status(st)), EIO);
  return out.cqe;
}

Result<Cqe> Controller::admin(const Sqe& sqe, std::span<uint8_t> data, DataDirection dir) {
  if (!admin_) return make_error(where() + ": not connected", ENOTCONN);
  return execute(*admin_, sqe, data, dir, opts_.command_timeout);
}

// ---------------------------------------------------------------------------------------------------------
// Bring-up
// ---------------------------------------------------------------------------------------------------------

Result<void> Controller::do_connect(HostQueue& queue, SyncSlot& slot, uint16_t qid, uint16_t entries,
                                    uint32_t kato_ms) {
  uint8_t cattr = opts_.disable_sq_flow_control ? protocol::kConnectDisableSqFlow : 0;
  auto cmd = protocol::make_connect(0, qid, static_cast<uint16_t>(entries - 1), kato_ms, cattr, protocol::SglDescriptor{});
  auto data = protocol::make_connect_data(opts_.host.hostid, qid == 0 ? protocol::kCntlidDynamic : cntlid_,
                                          opts_.subnqn, opts_.host.hostnqn);
  std::array<uint8_t, protocol::kConnectDataSize> buf{};
  protocol::store(buf.data(), data);
  auto out = run_sync(queue, slot, protocol::to_sqe(cmd), buf, DataDirection::host_to_controller,
                      opts_.command_timeout);
  std::string what = fmt::format("{}: Connect (qid {}, hostnqn {})", where(), qid, opts_.host.hostnqn);
  if (out.failure != SyncFailure::none) return make_error(what + " " + out.message, ECONNREFUSED);
  Status st = out.cqe.get_status();
  if (!st.ok()) {
    std::string msg = fmt::format("{} rejected: {}", what, describe_status(st));
    if (st.is(protocol::status::connect_invalid_parameters)) {
      uint32_t dw0 = out.cqe.dw0.get();
      msg += fmt::format(" at byte {} of the {}", dw0 >> 16, (dw0 & 1) ? "connect data" : "command");
    } else if (st.is(protocol::status::connect_invalid_host)) {
      msg += " (this host NQN is not allowed by the subsystem)";
    }
    return make_error(std::move(msg), ECONNREFUSED);
  }
  if (qid == 0) cntlid_ = protocol::connect_result_cntlid(out.cqe.dw0.get());
  const uint32_t dw0 = out.cqe.dw0.get();
  if (dw0 & kAuthreqAscr) {
    // The kernel host refuses it too unless asked for TLS concatenation (opts->concat).
    return make_error(what + ": the controller requires secure channel concatenation (TLS set up by the "
                             "authentication), which rdmablk does not support",
                      EOPNOTSUPP);
  }
  if (dw0 & kAuthreqAtr) return authenticate(queue, slot, qid);
  return {};
}

Result<void> Controller::authenticate(HostQueue& queue, SyncSlot& slot, uint16_t qid) {
  namespace auth = protocol::auth;
  namespace dh = security::dhchap;
  const std::string what = fmt::format("{}: qid {}", where(), qid);
  if (!opts_.dhchap.secret) {
    return make_error(what + ": controller requires authentication: pass --dhchap-secret", EACCES);
  }
  dh::HostAuthParams params;
  params.host_key = opts_.dhchap.secret.get();
  params.ctrl_key = opts_.dhchap.ctrl_secret.get();
  params.host_nqn = opts_.host.hostnqn;
  params.subsys_nqn = opts_.subnqn;
  if (!opts_.dhchap.hashes.empty()) params.hashes = opts_.dhchap.hashes;
  if (!opts_.dhchap.dh_groups.empty()) params.dh_groups = opts_.dhchap.dh_groups;
  params.t_id = qid;  // as the kernel host
  auto session = dh::HostAuthSession::create(params);
  if (!session) return make_error(what + ": " + session.error().message, EINVAL);

  std::vector<uint8_t> buffer;
  std::optional<auth::MessageId> last_received;  // tells a wrong controller response from other failures
  // Negotiate, Reply, Success2/Failure2 sent and Challenge, Success1/Failure1 received: a bound on the loop
  // against a session that would never finish.
  for (int round = 0; round < 16; ++round) {
    dh::HostStep step = session->step();
    switch (step.kind) {
      case dh::HostStep::Kind::succeeded:
        return {};
      case dh::HostStep::Kind::failed: {
        const dh::AuthFailure& f = step.failure;
        if (f.by_peer) {
          return make_error(fmt::format("{}: authentication failed: the controller answered AUTH_Failure1 ({})", what,
                                        auth::to_string(f.explanation)),
                            EACCES);
        }
        if (session->bidirectional() && last_received == auth::MessageId::success1 &&
            f.explanation == auth::FailureExplanation::failed) {
          return make_error(fmt::format("{}: controller authentication failed: {} (AUTH_Failure2 sent)", what, f.what),
                            EACCES);
        }
        return make_error(fmt::format("{}: authentication failed: {} ({})", what, f.what, auth::to_string(f.explanation)),
                          EACCES);
      }
      case dh::HostStep::Kind::send: {
        // The session's message stays valid until the next call on it; the transport may read it until
        // the command completes, so it goes out from our own copy.
        buffer.assign(step.message.begin(), step.message.end());
        const bool failure2 = buffer.size() > 1 && buffer[1] == static_cast<uint8_t>(auth::MessageId::failure2);
        auto cmd = auth::make_authentication_send(0, static_cast<uint32_t>(buffer.size()), protocol::SglDescriptor{});
        auto out = run_sync(queue, slot, protocol::to_sqe(cmd), buffer, DataDirection::host_to_controller,
                            opts_.command_timeout);
        bool ok = out.failure == SyncFailure::none && out.cqe.get_status().ok();
        // Failure2 is a courtesy to the controller: the reason that made us send it is what matters.
        if (ok || failure2) {
          session->sent();
          continue;
        }
        return make_error(fmt::format("{}: Authentication Send {}", what,
                                      out.failure != SyncFailure::none ? out.message
                                                                       : "failed: " + describe_status(out.cqe.get_status())),
                          out.failure != SyncFailure::none ? ECONNRESET : EACCES);
      }
      case dh::HostStep::Kind::receive: {
        buffer.assign(std::min<uint32_t>(step.receive_length, auth::kMaxTransferLength), 0);
        auto cmd = auth::make_authentication_receive(0, static_cast<uint32_t>(buffer.size()), protocol::SglDescriptor{});
        auto out = run_sync(queue, slot, protocol::to_sqe(cmd), buffer, DataDirection::controller_to_host,
                            opts_.command_timeout);
        if (out.failure != SyncFailure::none) {
          return make_error(fmt::format("{}: Authentication Receive {}", what, out.message), ECONNRESET);
        }
        if (!out.cqe.get_status().ok()) {
          return make_error(fmt::format("{}: Authentication Receive failed: {}", what, describe_status(out.cqe.get_status())),
                            EACCES);
        }
        if (auto h = auth::decode_header(buffer); h) last_received = h->auth_id;
        session->received(buffer);
        continue;
      }
    }
  }
  return make_error(what + ": authentication did not finish", EPROTO);
}

Result<uint64_t> Controller::property_get(uint32_t offset, bool eight_bytes) {
  auto r = admin(protocol::to_sqe(protocol::make_property_get(0, offset, eight_bytes)));
  if (!r) return tl::unexpected(r.error());
  return eight_bytes ? r->result64() : r->dw0.get();
}

Result<void> Controller::property_set(uint32_t offset, uint64_t value, bool eight_bytes) {
  auto r = admin(protocol::to_sqe(protocol::make_property_set(0, offset, value, eight_bytes)));
  if (!r) return tl::unexpected(r.error());
  return {};
}

Result<void> Controller::wait_ready(bool ready, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = 1ms;
  for (;;) {
    auto v = property_get(protocol::property::csts, false);
    if (!v) return tl::unexpected(v.error());
    protocol::Csts csts{static_cast<uint32_t>(*v)};
    if (csts.cfs()) return fail(where() + ": controller reports fatal status (CSTS.CFS) during enable", EIO);
    if (csts.rdy() == ready) return {};
    if (std::chrono::steady_clock::now() >= deadline) {
      return fail(fmt::format("{}: controller not ready (CSTS.RDY={}) after {} ms (CAP.TO)", where(), ready ? 0 : 1,
                              timeout.count()),
                  ETIMEDOUT);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, 50ms);
  }
}

Result<std::unique_ptr<Controller>> Controller::connect(const ControllerOptions& opts) {
  if (!opts.connector) return make_error("no transport available to connect to " + transport::to_uri(opts.address));
  std::unique_ptr<Controller> ctrl(new Controller(opts));
  auto r = ctrl->bring_up();
  if (!r) return tl::unexpected(r.error());
  return ctrl;
}

Result<std::unique_ptr<Controller>> Controller::connect_discovery(ControllerOptions opts) {
  opts.subnqn = std::string(protocol::kDiscoveryNqn);
  opts.scan_namespaces = false;
  return connect(opts);
}

Result<void> Controller::bring_up() {
  const bool discovery = opts_.subnqn == protocol::kDiscoveryNqn;
  if (opts_.subnqn.empty()) return make_error("no subsystem NQN given (-n/--nqn)", EINVAL);
  if (auto v = protocol::decode_nqn(opts_.subnqn); !v) {
    return make_error(fmt::format("invalid subsystem NQN '{}': {} at byte {}", opts_.subnqn, v.error().what,
                                  v.error().offset),
                      EINVAL);
  }
  if (opts_.tls.psk) {
    if (opts_.address.type != transport::TransportType::tcp) {
      return make_error("TLS (--tls) is for NVMe/TCP only", EINVAL);
    }
    auto context = security::TlsContext::client();
    if (!context) return tl::unexpected(context.error());
    auto tls = std::make_shared<transport::tcp::TcpTlsClientOptions>();
    tls->config.hostnqn = opts_.host.hostnqn;
    tls->config.subnqn = opts_.subnqn;
    tls->config.psk = *opts_.tls.psk;
    tls->config.identity_version = opts_.tls.identity_version;
    tls->config.derivation = opts_.tls.derivation;
    tls->context = std::move(*context);
    tls->allow_ktls = opts_.tls.allow_ktls;
    tls_ = std::move(tls);
  }
  transport::HostQueueOptions qo;
  qo.address = opts_.address;
  qo.tls = tls_;
  qo.qid = 0;
  qo.entries = opts_.admin_entries;
  qo.header_digest = opts_.header_digest;
  qo.data_digest = opts_.data_digest;
  // NVMe/TCP admin capsules carry 8 KiB of in-capsule data (the Connect data goes in-capsule);
  // NVMe/RDMA admin capsules are 64 bytes (nvmet-rdma posts 64-byte receives there): Connect data by RDMA READ.
  qo.in_capsule_limit = opts_.address.type == transport::TransportType::rdma ? 0 : 8192;
  qo.connect_timeout = opts_.connect_timeout;
  auto q = opts_.connector(qo);
  if (!q) {
    std::string uri = transport::to_uri(opts_.address);
    std::string msg = q.error().message.find(uri) != std::string::npos ? q.error().message
                                                                       : fmt::format("cannot connect to {}: {}", uri, q.error().message);
    return make_error(std::move(msg), q.error().errno_value ? q.error().errno_value : ECONNREFUSED);
  }
  admin_ = std::move(*q);

  if (auto r = do_connect(*admin_, *sync_, 0, opts_.admin_entries, opts_.kato_ms); !r) return r;

  auto cap = property_get(protocol::property::cap, true);
  if (!cap) return tl::unexpected(cap.error());
  cap_ = protocol::Cap{*cap};
  auto vs = property_get(protocol::property::vs, false);
  if (!vs) return tl::unexpected(vs.error());
  vs_ = protocol::Vs{static_cast<uint32_t>(*vs)};

  protocol::Cc cc;
  cc.set_iosqes(6).set_iocqes(4).set_css(0).set_mps(cap_.mpsmin()).set_ams(0).set_en(true);
  if (auto r = property_set(protocol::property::cc, cc.value, false); !r) return r;
  auto to = std::chrono::milliseconds(std::max<unsigned>(cap_.to(), 1) * 500u);
  if (auto r = wait_ready(true, to); !r) return r;

  auto id = identify_controller();
  if (!id) return tl::unexpected(id.error());
  id_ = *id;
  if (id_.cntlid.get() != cntlid_) {
    return fail(fmt::format("{}: Identify Controller reports CNTLID {:#06x}, Connect returned {:#06x}", where(),
                            id_.cntlid.get(), cntlid_),
                EPROTO);
  }
  const uint64_t page = uint64_t{1} << (12 + cap_.mpsmin());
  uint64_t limit = id_.mdts ? page << std::min<unsigned>(id_.mdts, 20) : 0;
  uint32_t qlimit = admin_->max_transfer();
  if (qlimit && (limit == 0 || qlimit < limit)) limit = qlimit;
  max_transfer_ = static_cast<uint32_t>(std::min<uint64_t>(limit, 0x80000000u));

  if (opts_.kato_ms) next_keep_alive_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.kato_ms / 2);
  if (discovery) return {};

  if (opts_.io_queues) {
    auto granted = set_number_of_queues(opts_.io_queues);
    if (!granted) return tl::unexpected(granted.error());
    granted_queues_ = *granted;
  }
  if (opts_.scan_namespaces) {
    auto list = active_namespaces();
    if (!list) return tl::unexpected(list.error());
    for (uint32_t nsid : *list) {
      auto ns = identify_namespace(nsid);
      if (!ns) return tl::unexpected(ns.error());
      if (ns->capacity_blocks == 0) continue;  // not active (NCAP 0)
      namespaces_.push_back(std::move(*ns));
    }
  }
  return {};
}

Result<protocol::IdentifyController> Controller::identify_controller() {
  std::array<uint8_t, protocol::kIdentifyDataSize> buf{};
  auto cmd = protocol::make_identify(0, protocol::Cns::controller, 0, protocol::SglDescriptor{});
  auto r = admin(protocol::to_sqe(cmd), buf, DataDirection::controller_to_host);
  if (!r) return tl::unexpected(r.error());
  return protocol::load<protocol::IdentifyController>(buf.data());
}

Result<std::vector<uint32_t>> Controller::active_namespaces() {
  std::vector<uint32_t> out;
  uint32_t after = 0;
  for (;;) {
    std::array<uint8_t, protocol::kIdentifyDataSize> buf{};
    auto cmd = protocol::make_identify(0, protocol::Cns::active_namespace_list, after, protocol::SglDescriptor{});
    auto r = admin(protocol::to_sqe(cmd), buf, DataDirection::controller_to_host);
    if (!r) return tl::unexpected(r.error());
    auto list = protocol::load<protocol::NamespaceList>(buf.data());
    std::size_t n = 0;
    for (const auto& e : list.nsid) {
      uint32_t nsid = e.get();
      if (nsid == 0) break;
      if (nsid <= after) return fail(fmt::format("{}: active namespace list is not increasing", where()), EPROTO);
      out.push_back(nsid);
      after = nsid;
      ++n;
    }
    if (n < list.nsid.size() || after >= 0xFFFFFFFEu) break;
  }
  return out;
}

Result<NamespaceInfo> Controller::identify_namespace(uint32_t nsid) {
  std::array<uint8_t, protocol::kIdentifyDataSize> buf{};
  auto cmd = protocol::make_identify(0, protocol::Cns::namespace_, nsid, protocol::SglDescriptor{});
  auto r = admin(protocol::to_sqe(cmd), buf, DataDirection::controller_to_host);
  if (!r) return tl::unexpected(r.error());
  NamespaceInfo ns;
  ns.nsid = nsid;
  ns.id = protocol::load<protocol::IdentifyNamespace>(buf.data());
  ns.size_blocks = ns.id.nsze.get();
  ns.capacity_blocks = ns.id.ncap.get();
  ns.utilization_blocks = ns.id.nuse.get();
  uint8_t fmt_index = ns.id.format_index();
  uint8_t lbads = fmt_index < ns.id.lbaf.size() ? ns.id.lbaf[fmt_index].lbads : 0;
  if (ns.capacity_blocks != 0 && (lbads < 9 || lbads > 31)) {
    return fail(fmt::format("{}: namespace {} reports an invalid LBA data size (LBADS {})", where(), nsid, lbads),
                EPROTO);
  }
  ns.block_size = lbads >= 9 && lbads <= 31 ? uint32_t{1} << lbads : 0;  // any LBADS of an inactive namespace
  static constexpr std::array<uint8_t, 16> kZero16{};
  if (ns.id.nguid != kZero16) ns.nguid = ns.id.nguid;
  if (ns.id.eui64 != std::array<uint8_t, 8>{}) ns.eui64 = ns.id.eui64;

  // Namespace identification descriptors (UUID, NGUID): optional, a failure is not fatal.
  std::array<uint8_t, protocol::kIdentifyDataSize> desc{};
  auto dcmd = protocol::make_identify(0, protocol::Cns::ns_id_descriptor_list, nsid, protocol::SglDescriptor{});
  if (!failed_ && admin(protocol::to_sqe(dcmd), desc, DataDirection::controller_to_host)) {
    if (auto ids = protocol::parse_ns_id_descriptor_list(desc)) {
      if (ids->uuid) ns.uuid = ids->uuid;
      if (ids->nguid && !ns.nguid) ns.nguid = ids->nguid;
      if (ids->eui64 && !ns.eui64) ns.eui64 = ids->eui64;
    }
  }
  if (failed_) return make_error(failure_, EIO);
  return ns;
}

Result<uint16_t> Controller::set_number_of_queues(uint16_t count) {
  if (count == 0) return make_error("number of queues must be at least 1", EINVAL);
  uint16_t n0 = static_cast<uint16_t>(count - 1);
  auto cmd = protocol::make_set_features(0, protocol::FeatureId::number_of_queues,
                                         protocol::number_of_queues_value(n0, n0));
  auto r = admin(protocol::to_sqe(cmd));
  if (!r) return tl::unexpected(r.error());
  uint32_t dw0 = r->dw0.get();
  uint32_t nsq = (dw0 & 0xFFFF) + 1, ncq = (dw0 >> 16) + 1;
  return static_cast<uint16_t>(std::min<uint32_t>({nsq, ncq, count}));
}

Result<std::vector<uint8_t>> Controller::get_log_page(protocol::LogPageId lid, uint64_t offset, uint32_t bytes,
                                                      uint32_t nsid) {
  if (bytes == 0 || bytes % 4 || offset % 4) return make_error("log page reads must be dword sized and aligned", EINVAL);
  std::vector<uint8_t> buf(bytes);
  auto cmd = protocol::make_get_log_page(0, lid, nsid, offset, bytes, protocol::SglDescriptor{});
  auto r = admin(protocol::to_sqe(cmd), buf, DataDirection::controller_to_host);
  if (!r) return tl::unexpected(r.error());
  return buf;
}

Result<DiscoveryLog> Controller::discovery_log(uint32_t chunk_bytes, unsigned max_passes) {
  using protocol::DiscoveryLogEntry;
  using protocol::DiscoveryLogHeader;
  constexpr uint64_t kMaxRecords = 1024;  // 1 MiB of log: far beyond any sane discovery service
  uint32_t chunk = chunk_bytes;
  if (max_transfer_ && chunk > max_transfer_) chunk = max_transfer_;
  chunk &= ~3u;
  if (chunk < 4) chunk = 4;

  auto read_range = [&](uint64_t offset, uint64_t length, uint8_t* dst) -> Result<void> {
    while (length) {
      uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(length, chunk));
      auto part = get_log_page(protocol::LogPageId::discovery, offset, n);
      if (!part) return tl::unexpected(part.error());
      std::memcpy(dst, part->data(), n);
      dst += n;
      offset += n;
      length -= n;
    }
    return {};
  };

  DiscoveryLog log;
  for (unsigned pass = 1; pass <= max_passes; ++pass) {
    log.reads = pass;
    std::array<uint8_t, sizeof(DiscoveryLogHeader)> hbuf{};
    if (auto r = read_range(0, hbuf.size(), hbuf.data()); !r) return tl::unexpected(r.error());
    auto hdr = protocol::load<DiscoveryLogHeader>(hbuf.data());
    uint64_t numrec = hdr.numrec.get();
    if (numrec > kMaxRecords) {
      return make_error(fmt::format("{}: discovery log claims {} records (more than {})", where(), numrec, kMaxRecords),
                        EPROTO);
    }
    log.genctr = hdr.genctr.get();
    log.recfmt = hdr.recfmt.get();
    log.entries.assign(numrec, DiscoveryLogEntry{});
    if (numrec == 0) return log;
    std::vector<uint8_t> ebuf(numrec * sizeof(DiscoveryLogEntry));
    if (auto r = read_range(sizeof(DiscoveryLogHeader), ebuf.size(), ebuf.data()); !r) return tl::unexpected(r.error());
    for (uint64_t i = 0; i < numrec; ++i) {
      log.entries[i] = protocol::load<DiscoveryLogEntry>(ebuf.data() + i * sizeof(DiscoveryLogEntry));
    }
    // The log may have changed while we read it in pieces: the header again decides.
    if (auto r = read_range(0, hbuf.size(), hbuf.data()); !r) return tl::unexpected(r.error());
    auto again = protocol::load<DiscoveryLogHeader>(hbuf.data());
    if (again.genctr.get() == log.genctr && again.numrec.get() == numrec) return log;
  }
  return make_error(fmt::format("{}: discovery log kept changing (generation counter) over {} reads", where(),
                                max_passes),
                    EAGAIN);
}

const NamespaceInfo* Controller::find_namespace(uint32_t nsid) const noexcept {
  for (const auto& ns : namespaces_) {
    if (ns.nsid == nsid) return &ns;
  }
  return nullptr;
}

uint32_t Controller::io_in_capsule_bytes() const noexcept {
  uint32_t ioccsz = id_.ioccsz.get();
  return ioccsz > 4 ? (ioccsz - 4) * 16 : 0;
}

// ---------------------------------------------------------------------------------------------------------
// I/O queues
// ---------------------------------------------------------------------------------------------------------

Result<std::unique_ptr<IoQueue>> Controller::connect_io_queue(uint16_t qid, uint16_t entries) {
  if (failed_) return make_error(where() + ": controller unusable: " + failure_, EIO);
  if (qid == 0 || (granted_queues_ && qid > granted_queues_)) {
    return make_error(fmt::format("{}: I/O queue {} out of range (the controller granted {})", where(), qid,
                                  granted_queues_),
                      EINVAL);
  }
  uint32_t max_entries = uint32_t{cap_.mqes()} + 1;
  if (entries < 2) entries = 2;
  if (entries > max_entries) entries = static_cast<uint16_t>(max_entries);
  transport::HostQueueOptions qo;
  qo.address = opts_.address;
  qo.qid = qid;
  qo.tls = tls_;
  qo.entries = entries;
  qo.header_digest = opts_.header_digest;
  qo.data_digest = opts_.data_digest;
  qo.in_capsule_limit = io_in_capsule_bytes();
  qo.connect_timeout = opts_.connect_timeout;
  qo.busy_poll = opts_.io_busy_poll;
  auto q = opts_.connector(qo);
  if (!q) {
    return make_error(fmt::format("cannot connect I/O queue {} to {}: {}", qid, transport::to_uri(opts_.address),
                                  q.error().message),
                      q.error().errno_value ? q.error().errno_value : ECONNREFUSED);
  }
  auto ioq = std::make_unique<IoQueue>(*this, std::move(*q), qid);
  if (auto r = do_connect(*ioq->queue_, *ioq->sync_, qid, entries, 0); !r) return tl::unexpected(r.error());
  return ioq;
}

IoQueue::IoQueue(Controller& ctrl, std::unique_ptr<HostQueue> queue, uint16_t qid) noexcept
    : ctrl_(ctrl), queue_(std::move(queue)), qid_(qid), sync_(std::make_unique<detail::SyncSlot>()) {
  uint32_t a = ctrl_.max_transfer_bytes(), b = queue_->max_transfer();
  max_transfer_ = (a && b) ? std::min(a, b) : (a ? a : b);
}

IoQueue::~IoQueue() {
  if (queue_) queue_->close();
}

namespace {
constexpr Status kTooLarge = protocol::status::invalid_field;
}

Status IoQueue::submit_read(HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks, std::span<uint8_t> buffer,
                            bool fua) noexcept {
  if (blocks == 0 || blocks > 65536 || (max_transfer_ && buffer.size() > max_transfer_)) return kTooLarge;
  cmd.sqe = protocol::to_sqe(protocol::make_read(0, nsid, slba, blocks, protocol::SglDescriptor{}, fua));
  cmd.direction = DataDirection::controller_to_host;
  cmd.data = buffer;
  return queue_->submit(cmd);
}

Status IoQueue::submit_write(HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks,
                             std::span<uint8_t> buffer, bool fua) noexcept {
  if (blocks == 0 || blocks > 65536 || (max_transfer_ && buffer.size() > max_transfer_)) return kTooLarge;
  cmd.sqe = protocol::to_sqe(protocol::make_write(0, nsid, slba, blocks, protocol::SglDescriptor{}, fua));
  cmd.direction = DataDirection::host_to_controller;
  cmd.data = buffer;
  return queue_->submit(cmd);
}

Status IoQueue::submit_flush(HostCommand& cmd, uint32_t nsid) noexcept {
  cmd.sqe = protocol::make_flush(0, nsid);
  cmd.direction = DataDirection::none;
  cmd.data = {};
  return queue_->submit(cmd);
}

Status IoQueue::submit_write_zeroes(HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks,
                                    bool deallocate) noexcept {
  if (blocks == 0 || blocks > 65536) return kTooLarge;
  cmd.sqe = protocol::to_sqe(protocol::make_write_zeroes(0, nsid, slba, blocks, deallocate));
  cmd.direction = DataDirection::none;
  cmd.data = {};
  return queue_->submit(cmd);
}

Status IoQueue::submit_dsm(HostCommand& cmd, uint32_t nsid, std::span<uint8_t> ranges, uint32_t attributes) noexcept {
  std::size_t n = ranges.size() / sizeof(protocol::DsmRange);
  if (n == 0 || n > protocol::kDsmMaxRanges || ranges.size() % sizeof(protocol::DsmRange)) return kTooLarge;
  cmd.sqe = protocol::to_sqe(
      protocol::make_dsm(0, nsid, static_cast<uint32_t>(n), attributes, protocol::SglDescriptor{}));
  cmd.direction = DataDirection::host_to_controller;
  cmd.data = ranges;
  return queue_->submit(cmd);
}

Result<Cqe> IoQueue::execute(const Sqe& sqe, std::span<uint8_t> data, DataDirection dir) {
  auto out = run_sync(*queue_, *sync_, sqe, data, dir, ctrl_.opts_.command_timeout);
  std::string name = command_name(sqe, false);
  if (out.failure != SyncFailure::none) {
    return make_error(fmt::format("{}: queue {}: {} {}", ctrl_.where(), qid_, name, out.message), EIO);
  }
  if (!out.cqe.get_status().ok()) {
    return make_error(fmt::format("{}: queue {}: {} failed: {}", ctrl_.where(), qid_, name,
                                  describe_status(out.cqe.get_status())),
                      EIO);
  }
  return out.cqe;
}

void IoQueue::disconnect() noexcept {
  if (!queue_) return;
  if (queue_->outstanding() == 0) {
    // Best effort: a target that does not support Disconnect answers with an error; either way we close.
    auto out = run_sync(*queue_, *sync_, protocol::to_sqe(protocol::make_disconnect(0)), {}, DataDirection::none,
                        std::chrono::milliseconds(1000));
    (void)out;
  }
  queue_->close();
}

// ---------------------------------------------------------------------------------------------------------
// Keep-alive, shutdown
// ---------------------------------------------------------------------------------------------------------

void Controller::on_keep_alive(HostCommand& cmd, const Cqe& cqe) noexcept {
  auto* self = static_cast<Controller*>(cmd.context);
  self->keep_alive_outstanding_ = false;
  if (!cqe.get_status().ok() && !self->failed_) {
    self->failed_ = true;
    try {
      self->failure_ = self->where() + ": Keep Alive failed: " + describe_status(cqe.get_status());
    } catch (...) {
    }
  }
}

void Controller::on_async_event(HostCommand& cmd, const Cqe& cqe) noexcept {
  auto* self = static_cast<Controller*>(cmd.context);
  self->aer_outstanding_ = false;
  const protocol::Status st = cqe.get_status();
  if (!st.ok()) {
    // Refused (Asynchronous Event Request Limit Exceeded, or unsupported) or the connection closing:
    // re-arming would only repeat it. Keep-alive decides whether the controller is alive.
    self->aer_enabled_ = false;
    return;
  }
  const uint32_t dw0 = cqe.dw0.get();
  if (protocol::async_event_type(dw0) == protocol::AsyncEventType::notice &&
      protocol::async_event_info(dw0) == static_cast<uint8_t>(protocol::AsyncEventNotice::ana_change)) {
    self->ana_changed_ = true;
  }
}

void Controller::arm_async_event() noexcept {
  if (!aer_enabled_ || aer_outstanding_ || !admin_ || failed_) return;
  aer_cmd_ = HostCommand{};
  aer_cmd_.sqe = protocol::make_async_event_request(0);
  aer_cmd_.on_complete = &on_async_event;
  aer_cmd_.context = this;
  if (admin_->submit(aer_cmd_).ok()) aer_outstanding_ = true;
}

Result<void> Controller::enable_ana_events() {
  auto cmd = protocol::make_set_features(0, protocol::FeatureId::async_event_configuration, protocol::kAecAnaChange);
  auto r = admin(protocol::to_sqe(cmd));
  if (!r) return tl::unexpected(r.error());
  aer_enabled_ = true;
  arm_async_event();
  return {};
}

Result<std::vector<uint8_t>> Controller::read_ana_log() {
  const uint32_t nsids = id_.mnan.get() != 0 ? id_.mnan.get() : id_.nn.get();
  uint64_t bytes = protocol::ana_log_max_size(std::min<uint32_t>(id_.nanagrpid.get(), 1024), std::min<uint32_t>(nsids, 1024));
  if (max_transfer_ != 0) bytes = std::min<uint64_t>(bytes, max_transfer_);
  bytes = std::max<uint64_t>(bytes, sizeof(protocol::AnaLogHeader)) & ~uint64_t{3};
  return get_log_page(protocol::LogPageId::ana, 0, static_cast<uint32_t>(bytes));
}

void Controller::service() noexcept {
  if (!admin_ || failed_) return;
  if (opts_.kato_ms == 0 && !aer_enabled_ && !aer_outstanding_) return;
  if (keep_alive_outstanding_ || aer_outstanding_) {
    int rc = admin_->poll(0, 0ms);
    if (rc < 0) {
      failed_ = true;
      try {
        failure_ = fmt::format("{}: admin queue lost ({})", where(), std::strerror(-rc));
      } catch (...) {
      }
      return;
    }
  }
  auto now = std::chrono::steady_clock::now();
  if (opts_.kato_ms != 0 && keep_alive_outstanding_ && now - keep_alive_sent_ >= std::chrono::milliseconds(opts_.kato_ms)) {
    // A target that stopped answering (frozen, or a black-holed path with the TCP connection still up)
    // must not hold the host forever: the Linux host gives up after one KATO too.
    failed_ = true;
    try {
      failure_ = fmt::format("{}: Keep Alive unanswered for {} ms", where(), opts_.kato_ms);
    } catch (...) {
    }
    return;
  }
  arm_async_event();
  if (opts_.kato_ms == 0 || keep_alive_outstanding_ || now < next_keep_alive_) return;
  keep_alive_cmd_ = HostCommand{};
  keep_alive_cmd_.sqe = protocol::make_keep_alive(0);
  keep_alive_cmd_.on_complete = &on_keep_alive;
  keep_alive_cmd_.context = this;
  if (admin_->submit(keep_alive_cmd_).ok()) {
    keep_alive_outstanding_ = true;
    keep_alive_sent_ = now;
  }
  next_keep_alive_ = now + std::chrono::milliseconds(opts_.kato_ms / 2);
}

Result<void> Controller::shutdown(std::chrono::milliseconds timeout) {
  if (!admin_) return {};
  if (failed_) {
    disconnect();
    return {};
  }
  auto cc = property_get(protocol::property::cc, false);
  if (!cc) return tl::unexpected(cc.error());
  protocol::Cc value{static_cast<uint32_t>(*cc)};
  value.set_shn(protocol::Cc::Shn::normal);
  if (auto r = property_set(protocol::property::cc, value.value, false); !r) return r;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto csts = property_get(protocol::property::csts, false);
    if (!csts) return tl::unexpected(csts.error());
    if (protocol::Csts{static_cast<uint32_t>(*csts)}.shst() == static_cast<uint8_t>(protocol::Csts::Shst::complete)) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      disconnect();
      return make_error(fmt::format("{}: shutdown did not complete within {} ms", where(), timeout.count()), ETIMEDOUT);
    }
    std::this_thread::sleep_for(5ms);
  }
  disconnect();
  return {};
}

void Controller::disconnect() noexcept {
  if (admin_) {
    admin_->close();
    admin_.reset();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Discovery log strings (libnvme's tables)
// ---------------------------------------------------------------------------------------------------------

const char* trtype_str(uint8_t trtype) noexcept {
  switch (trtype) {
    case 1: return "rdma";
    case 2: return "fc";
    case 3: return "tcp";
    case 254: return "loop";
    default: return "unrecognized";
  }
}

const char* adrfam_str(uint8_t adrfam) noexcept {
  switch (adrfam) {
    case 0: return "pci";
    case 1: return "ipv4";
    case 2: return "ipv6";
    case 3: return "infiniband";
    case 4: return "fibre-channel";
    default: return "unrecognized";
  }
}

const char* subtype_str(uint8_t subtype) noexcept {
  switch (subtype) {
    case 1: return "discovery subsystem referral";
    case 2: return "nvme subsystem";
    case 3: return "current discovery subsystem";
    default: return "unrecognized";
  }
}

const char* treq_str(uint8_t treq) noexcept {
  switch (treq) {
    case 0: return "not specified";
    case 1: return "required";
    case 2: return "not required";
    case 4: return "not specified, sq flow control disable supported";
    case 5: return "required, sq flow control disable supported";
    case 6: return "not required, sq flow control disable supported";
    default: return "unrecognized";
  }
}

const char* eflags_str(uint16_t eflags) noexcept {
  switch (eflags) {
    case 0: return "none";
    case 1: return "explicit discovery connections";
    case 2: return "duplicate discovery information";
    case 3: return "explicit discovery connections, duplicate discovery information";
    case 4: return "no cdc connectivity";
    default: return "unrecognized";
  }
}

const char* sectype_str(uint8_t sectype) noexcept {
  switch (sectype) {
    case 0: return "none";
    case 1: return "tls";
    case 2: return "tls13";
    default: return "unrecognized";
  }
}

std::string field_string(const char* data, std::size_t size) {
  std::size_t n = 0;
  while (n < size && data[n] != '\0') ++n;
  while (n > 0 && data[n - 1] == ' ') --n;
  return std::string(data, n);
}

}  // namespace rdmablk::initiator

#include "protocol/command_names.h"
#include "initiator/host/controller.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "initiator/host/sync_command.h"
#include "protocol/defaults.h"
#include "security/tls_session.h"
#include "transport/tcp/tcp_tls.h"

namespace rdmablk::initiator {

using namespace std::chrono_literals;
using detail::run_sync;
using detail::SyncFailure;
using detail::SyncSlot;
using protocol::Cqe;
using protocol::Sqe;
using protocol::Status;
using transport::DataDirection;
using transport::HostQueue;

namespace {

// Connect response DW0 AUTHREQ (include/linux/nvme.h NVME_CONNECT_AUTHREQ_*): authentication required,
// and secure channel concatenation required.
constexpr uint32_t kAuthreqAtr = 1u << 17;
constexpr uint32_t kAuthreqAscr = 1u << 18;

}  // namespace

std::string describe_status(Status s) {
  return fmt::format("{} (SCT {:#x} SC {:#04x}{})", protocol::status_name(s), static_cast<unsigned>(s.sct()), s.sc(),
                     s.dnr() ? ", DNR" : "");
}

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

// ---------------------------------------------------------------------------------------------------------
// Synchronous execution
// ---------------------------------------------------------------------------------------------------------

Result<Cqe> Controller::execute(HostQueue& queue, const Sqe& sqe, std::span<uint8_t> data, DataDirection dir,
                                std::chrono::milliseconds timeout) {
  const bool is_admin = &queue == admin_.get();
  if (failed_ && is_admin) return make_error(where() + ": controller unusable: " + failure_, EIO);
  auto out = run_sync(queue, *sync_, sqe, data, dir, timeout);
  std::string name = protocol::describe_command(sqe, is_admin);
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
  if (auto r = prepare_tls(); !r) return r;
  if (auto r = open_admin_queue(); !r) return r;
  if (auto r = do_connect(*admin_, *sync_, 0, opts_.admin_entries, opts_.kato_ms); !r) return r;
  if (auto r = enable(); !r) return r;
  if (auto r = identify(); !r) return r;

  if (opts_.kato_ms) next_keep_alive_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.kato_ms / 2);
  if (discovery) return {};
  return scan_io_resources();
}

Result<void> Controller::prepare_tls() {
  if (!opts_.tls.psk) return {};
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
  return {};
}

Result<void> Controller::open_admin_queue() {
  transport::HostQueueOptions qo;
  qo.address = opts_.address;
  qo.tls = tls_;
  qo.qid = 0;
  qo.entries = opts_.admin_entries;
  qo.header_digest = opts_.header_digest;
  qo.data_digest = opts_.data_digest;
  // NVMe/TCP admin capsules carry 8 KiB of in-capsule data (the Connect data goes in-capsule; protocol/defaults.h);
  // NVMe/RDMA admin capsules are 64 bytes (nvmet-rdma posts 64-byte receives there): Connect data by RDMA READ.
  qo.in_capsule_limit =
      opts_.address.type == transport::TransportType::rdma ? 0 : protocol::defaults::kAdminInCapsule;
  qo.connect_timeout = opts_.connect_timeout;
  auto q = opts_.connector(qo);
  if (!q) {
    std::string uri = transport::to_uri(opts_.address);
    std::string msg = q.error().message.find(uri) != std::string::npos ? q.error().message
                                                                       : fmt::format("cannot connect to {}: {}", uri, q.error().message);
    return make_error(std::move(msg), q.error().errno_value ? q.error().errno_value : ECONNREFUSED);
  }
  admin_ = std::move(*q);
  return {};
}

Result<void> Controller::enable() {
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
  return wait_ready(true, to);
}

Result<void> Controller::identify() {
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
  return {};
}

Result<void> Controller::scan_io_resources() {
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

// ---------------------------------------------------------------------------------------------------------
// Teardown
// ---------------------------------------------------------------------------------------------------------

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

}  // namespace rdmablk::initiator

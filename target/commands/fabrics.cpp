// Fabrics commands: Connect (admin and I/O queues), Property Get / Set (NVMe-oF 1.1, 3.3-3.5), with the
// checks and statuses of the Linux kernel target (drivers/nvme/target/fabrics-cmd.c).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "protocol/fabrics.h"
#include "protocol/properties.h"
#include "target/core/core_internal.h"

namespace rdmablk::target {

namespace {

using protocol::ConnectCommand;
using protocol::FabricsType;

constexpr uint16_t kIpoCntlid = offsetof(protocol::ConnectData, cntlid);
constexpr uint16_t kIpoSubnqn = offsetof(protocol::ConnectData, subnqn);
constexpr uint16_t kIpoHostnqn = offsetof(protocol::ConnectData, hostnqn);
constexpr uint16_t kIpoQid = offsetof(ConnectCommand, qid);
constexpr uint16_t kIpoSqsize = offsetof(ConnectCommand, sqsize);

// The version both VS and Identify VER report: 1.3, like nvmet (no CSI command sets, no CNS 0x06 probing).
constexpr protocol::Vs kVersion = protocol::kNvme1_3;

uint64_t cap_value(const QueueLimits& limits) noexcept {
  protocol::Cap cap;
  cap.set_mqes(static_cast<uint16_t>(limits.io_queue_depth - 1))
      .set_cqr(true)
      .set_to(15)  // 7.5 s to become ready (500 ms units)
      .set_css(protocol::Cap::kCssNvm)
      .set_mpsmin(0)
      .set_mpsmax(0);
  return cap.value;
}

bool cc_valid_for_enable(protocol::Cc cc) noexcept {
  return cc.iosqes() == 6 && cc.iocqes() == 4 && cc.mps() == 0 && cc.ams() == 0 && cc.css() == 0;
}

}  // namespace

uint32_t target_version() noexcept { return kVersion.value; }

bool TargetCore::serves_subsystems_locked(const transport::TransportAddress& local) const noexcept {
  // A connection on no configured listener (cannot happen in the daemon, whose listeners are the core's)
  // is not restricted.
  const int i = find_listener(listeners_, local);
  return i < 0 || listeners_[static_cast<std::size_t>(i)].role != ListenerRole::discovery;
}

void TargetCore::connect(CoreQueue& q, TargetRequest& req) noexcept {
  if (Status s = check_common_flags(req.sqe.hdr); !s.ok()) {
    finish(req, s);
    return;
  }
  if (Status s = check_data(req, transport::DataDirection::host_to_controller, protocol::kConnectDataSize); !s.ok()) {
    finish(req, s);
    return;
  }
  if (data_in_capsule_or_fetch(req, Stage::connect)) connect_with_data(q, req);
}

void TargetCore::connect_with_data(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<ConnectCommand>(req.sqe);
  if (cmd.recfmt.get() != 0) {
    spdlog::warn("connect from {}: record format {} not supported", q.tq->peer_name(), cmd.recfmt.get());
    finish(req, st::connect_incompatible_format);
    return;
  }
  auto data = protocol::decode_connect_data({req.data, req.data_length});
  if (!data) {
    spdlog::warn("connect from {}: bad connect data at byte {}: {}", q.tq->peer_name(), data.error().offset,
                 data.error().what);
    finish(req, st::connect_invalid_parameters,
           protocol::connect_invalid_param_result(true, static_cast<uint16_t>(data.error().offset)));
    return;
  }
  // Over TLS the PSK identity names the host and the subsystem the key was made for (TP 8011): a Connect
  // for another host or subsystem would borrow that key's trust, so it is refused as an invalid host. A plain
  // connection on a `tls: optional` listener is served even for a host with a PSK, as nvmet does when TREQ
  // says "not required"; `tls: required` is what enforces TLS.
  if (auto tls = q.tq->tls_identity(); tls && (tls->hostnqn != data->hostnqn || tls->subnqn != data->subnqn)) {
    spdlog::warn("connect from {}: host {} for {} over TLS identity {} (for host {}, subsystem {}): refused",
                 q.tq->peer_name(), data->hostnqn, data->subnqn, tls->identity, tls->hostnqn, tls->subnqn);
    const bool host_differs = tls->hostnqn != data->hostnqn;
    finish(req, st::connect_invalid_host, protocol::connect_invalid_param_result(true, host_differs ? kIpoHostnqn : kIpoSubnqn));
    return;
  }
  if (cmd.qid.get() == 0) {
    admin_connect(q, req, cmd, *data);
  } else {
    io_connect(q, req, cmd, *data);
  }
}

std::shared_ptr<Subsystem> TargetCore::connect_subsystem_locked(CoreQueue& q, TargetRequest& req,
                                                                const protocol::ConnectDataView& data, bool admin,
                                                                std::shared_ptr<const HostAuth>& auth) noexcept {
  const auto peer = q.tq->peer_name();
  const std::string who =
      admin ? fmt::format("connect from {} ({})", peer, data.hostnqn) : fmt::format("I/O queue connect from {}", peer);
  if (!serves_subsystems_locked(q.tq->local_address())) {
    // nvmet: a subsystem not linked to the port is an invalid SUBNQN (the same answer as an unknown one).
    spdlog::warn("{}: subsystem {} is not served on the discovery listener {}", who, data.subnqn,
                 transport::to_uri(q.tq->local_address()));
    finish(req, st::connect_invalid_parameters, protocol::connect_invalid_param_result(true, kIpoSubnqn));
    return nullptr;
  }
  auto it = subsystems_.find(data.subnqn);
  if (it == subsystems_.end()) {
    spdlog::warn("{}: unknown subsystem {}", who, data.subnqn);
    finish(req, st::connect_invalid_parameters, protocol::connect_invalid_param_result(true, kIpoSubnqn));
    return nullptr;
  }
  AdmissionDecision admission = gate_.admit(*it->second, data.hostnqn, admin);
  switch (admission.refusal) {
    case AdmissionRefusal::none:
      auth = std::move(admission.auth);
      return it->second;
    case AdmissionRefusal::host_not_allowed:
      if (admin) spdlog::warn("connect from {}: host {} is not allowed on {}", peer, data.hostnqn, data.subnqn);
      break;
    case AdmissionRefusal::no_secret:
      spdlog::warn("connect from {}: host {} has no DH-HMAC-CHAP secret and {} requires authentication", peer,
                   data.hostnqn, data.subnqn);
      break;
    case AdmissionRefusal::blocked:  // the gate logged it
      break;
  }
  finish(req, st::connect_invalid_host, protocol::connect_invalid_param_result(true, kIpoHostnqn));
  return nullptr;
}

std::shared_ptr<Controller> TargetCore::new_controller(CoreQueue& q, const ConnectCommand& cmd,
                                                       const protocol::ConnectDataView& data, uint16_t cntlid,
                                                       std::shared_ptr<Subsystem> sub,
                                                       std::shared_ptr<const HostAuth> auth) const {
  const bool discovery = !sub;
  auto ctrl = std::make_shared<Controller>();
  ctrl->cntlid = cntlid;
  ctrl->discovery = discovery;
  ctrl->subsys = std::move(sub);
  ctrl->hostnqn = std::string(data.hostnqn);
  ctrl->hostid = data.hostid;
  ctrl->trtype = q.tq->transport_type();
  ctrl->local_address = q.tq->local_address();
  ctrl->ana_port = q.ana_port;
  ctrl->peer = q.tq->peer_name();
  ctrl->connected_unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  ctrl->admin_reactor = &q.rs->reactor();
  uint32_t kato = cmd.kato.get();
  if (discovery && kato == 0) kato = limits_.keep_alive.discovery_timeout_ms;  // nvmet: 120 s
  ctrl->kato_ms = std::min(kato, limits_.keep_alive.max_timeout_ms);
  ctrl->traffic_based_keep_alive = limits_.keep_alive.traffic_based;
  ctrl->io_queues = discovery ? 0 : static_cast<uint16_t>(limits_.max_io_queues);
  ctrl->io_queue_table.resize(discovery ? 1 : limits_.max_io_queues + 1);
  ctrl->admin_queue = q.self;
  ctrl->aer_requests.reserve(kAsyncEventSlots);
  ctrl->auth = std::move(auth);
  return ctrl;
}

void TargetCore::admin_connect(CoreQueue& q, TargetRequest& req, const ConnectCommand& cmd,
                               const protocol::ConnectDataView& data) noexcept {
  const auto peer = q.tq->peer_name();
  if (data.cntlid != protocol::kCntlidDynamic) {
    spdlog::warn("connect from {}: admin queue for controller {} (only the dynamic model, 0xFFFF)", peer, data.cntlid);
    finish(req, st::connect_invalid_parameters, protocol::connect_invalid_param_result(true, kIpoCntlid));
    return;
  }
  const bool discovery = data.subnqn == protocol::kDiscoveryNqn;
  const uint32_t entries = cmd.queue_entries();  // 1..65536
  const auto sq_entries = static_cast<uint16_t>(entries);
  std::shared_ptr<Controller> ctrl;
  std::shared_ptr<const HostAuth> auth;
  {
    std::lock_guard lock(mu_);
    std::shared_ptr<Subsystem> sub;
    if (!discovery) {
      sub = connect_subsystem_locked(q, req, data, true, auth);
      if (!sub) return;
    }
    if (cmd.sqsize.get() == 0 || entries > limits_.admin_queue_depth) {
      finish(req, st::connect_invalid_parameters, protocol::connect_invalid_param_result(false, kIpoSqsize));
      return;
    }
    const uint16_t cntlid = sub ? controllers_.allocate(sub->cntlid_min, sub->cntlid_max, sub->next_cntlid)
                                : controllers_.allocate_discovery();
    if (cntlid == 0) {
      finish(req, st::connect_controller_busy);
      return;
    }
    ctrl = new_controller(q, cmd, data, cntlid, sub, auth);
    controllers_.add(ctrl);
    start_keep_alive_locked(ctrl);
    q.state = QueueState::admin;
    q.qid = 0;
    q.sq_entries = sq_entries;
    q.ctrl = ctrl;
    q.auth = auth;
  }
  q.tq->set_connected(0, sq_entries, cmd.sq_flow_control_disabled());
  if (!auth) cancel_connect_timer(q);  // else it also bounds the authentication
  spdlog::info("controller {} created for {} on {} from {} (kato {} ms{}{})", ctrl->cntlid, ctrl->hostnqn,
               discovery ? std::string(protocol::kDiscoveryNqn) : ctrl->subsys->nqn, peer, ctrl->kato_ms,
               auth ? ", DH-HMAC-CHAP required" : "", cmd.sq_flow_control_disabled() ? ", SQ flow control off" : "");
  // AUTHREQ.ATR: the host must authenticate before anything but fabrics commands runs (nvmet_connect_result).
  finish(req, st::success, protocol::connect_success_result(ctrl->cntlid, auth ? kAuthreqAtr : 0));
}

void TargetCore::io_connect(CoreQueue& q, TargetRequest& req, const ConnectCommand& cmd,
                            const protocol::ConnectDataView& data) noexcept {
  const auto peer = q.tq->peer_name();
  const uint16_t qid = cmd.qid.get();
  const uint32_t entries = cmd.queue_entries();  // 1..65536
  const auto sq_entries = static_cast<uint16_t>(entries);
  std::shared_ptr<Controller> ctrl;
  {
    std::lock_guard lock(mu_);
    std::shared_ptr<const HostAuth> unused;  // an I/O queue authenticates with its controller's settings
    auto sub = connect_subsystem_locked(q, req, data, false, unused);
    if (!sub) return;
    ctrl = controllers_.find(data.cntlid);
    if (!ctrl || ctrl->dead || ctrl->discovery || ctrl->subsys != sub || ctrl->hostnqn != data.hostnqn ||
        ctrl->hostid != data.hostid) {
      spdlog::warn("I/O queue connect from {}: no controller {} on {} for host {}", peer, data.cntlid, data.subnqn,
                   data.hostnqn);
      finish(req, st::connect_invalid_parameters, protocol::connect_invalid_param_result(true, kIpoCntlid));
      return;
    }
    if (!ctrl->ready.load(std::memory_order_relaxed)) {
      finish(req, st::command_sequence_error);  // the controller is not enabled
      return;
    }
    if (qid > ctrl->io_queues) {
      finish(req, st::connect_invalid_parameters, protocol::connect_invalid_param_result(false, kIpoQid));
      return;
    }
    if (cmd.sqsize.get() == 0 || entries > limits_.io_queue_depth) {
      finish(req, st::connect_invalid_parameters, protocol::connect_invalid_param_result(false, kIpoSqsize));
      return;
    }
    if (!ctrl->io_queue_table[qid].expired()) {
      spdlog::warn("controller {}: I/O queue {} connected twice (from {})", ctrl->cntlid, qid, peer);
      finish(req, st::command_sequence_error);
      return;
    }
    ctrl->io_queue_table[qid] = q.self;
    q.state = QueueState::io;
    q.qid = qid;
    q.sq_entries = sq_entries;
    q.ctrl = ctrl;
    q.view = q.rs->view(sub, sub->table);
    q.auth = ctrl->auth;  // every I/O queue authenticates too, with the controller's settings
  }
  q.tq->set_connected(qid, sq_entries, cmd.sq_flow_control_disabled());
  if (!q.auth) cancel_connect_timer(q);  // else it also bounds the authentication
  ctrl->touch_if_traffic_based();
  spdlog::debug("controller {}: I/O queue {} ({} entries) from {}", ctrl->cntlid, qid, sq_entries, peer);
  finish(req, st::success, protocol::connect_success_result(ctrl->cntlid, q.auth ? kAuthreqAtr : 0));
}

void TargetCore::property_get(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<protocol::PropertyGetCommand>(req.sqe);
  const uint32_t offset = cmd.offset.get();
  uint64_t value = 0;
  {
    std::lock_guard lock(mu_);
    const Controller& ctrl = *q.ctrl;
    if (cmd.is_8byte()) {
      if (offset != protocol::property::cap) {
        finish(req, st::invalid_field);
        return;
      }
      value = cap_value(limits_);
    } else {
      switch (offset) {
        case protocol::property::vs:
          value = kVersion.value;
          break;
        case protocol::property::cc:
          value = ctrl.cc.value;
          break;
        case protocol::property::csts:
          value = ctrl.csts.value;
          break;
        default:
          finish(req, st::invalid_field);
          return;
      }
    }
  }
  finish(req, st::success, static_cast<uint32_t>(value), false, static_cast<uint32_t>(value >> 32));
}

void TargetCore::property_set(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<protocol::PropertySetCommand>(req.sqe);
  if (cmd.is_8byte() || cmd.offset.get() != protocol::property::cc) {
    finish(req, st::invalid_field);  // CC is the only writable property
    return;
  }
  {
    std::lock_guard lock(mu_);
    Controller& ctrl = *q.ctrl;
    const protocol::Cc old = ctrl.cc;
    const protocol::Cc cc{static_cast<uint32_t>(cmd.value.get())};
    ctrl.cc = cc;
    if (cc.en() && !old.en()) {
      if (cc_valid_for_enable(cc)) {
        ctrl.csts = protocol::Csts{}.set_rdy(true);
        ctrl.ready.store(true, std::memory_order_relaxed);
      } else {
        spdlog::warn("controller {}: CC 0x{:08x} has unsupported IOSQES/IOCQES/MPS/AMS/CSS: fatal status",
                     ctrl.cntlid, cc.value);
        ctrl.csts = protocol::Csts{}.set_cfs(true);
        ctrl.ready.store(false, std::memory_order_relaxed);
      }
    }
    if (!cc.en() && old.en()) {
      ctrl.csts = protocol::Csts{};
      ctrl.ready.store(false, std::memory_order_relaxed);
    }
    if (cc.shn() != 0 && old.shn() == 0) {
      ctrl.csts = protocol::Csts{}.set_shst(protocol::Csts::Shst::complete);
      ctrl.ready.store(false, std::memory_order_relaxed);
    }
    if (cc.shn() == 0 && old.shn() != 0) {
      ctrl.csts.set_shst(protocol::Csts::Shst::normal);
    }
  }
  finish(req, st::success);
}

}  // namespace rdmablk::target

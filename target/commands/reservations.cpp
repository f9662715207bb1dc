// The reservation commands (NVMe Base 2.0, 7.2-7.5: Register 0Dh, Report 0Eh, Acquire 11h, Release 15h),
// the Reservation Notification log page (80h) with its asynchronous event, and the Reservation Notification
// Mask (82h) and Reservation Persistence (83h) features. The rules are the model's (reservations/); this is
// where they meet the controllers: whose host a command comes from (Connect's HOSTID, shared by every
// controller of that host), which controllers a notice goes to, and Preempt and Abort.
//
// Preempt and Abort waits the preempted hosts' writes out rather than aborting them (the spec allows either):
// once the state changed, the Acquire takes a lock over the whole namespace in its RangeLocks, which is
// granted when every write that started before it has ended, then lets it go and completes. A write of a
// preempted host that had not started yet (its data still on the way, or waiting on a range lock) is checked
// again when it goes on and fails with Reservation Conflict. Reads already running may still complete: they
// change nothing.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "protocol/reservation.h"
#include "target/commands/command_table.h"
#include "target/commands/io_commands.h"

namespace rdmablk::target {

namespace {

using protocol::IoOpcode;
using transport::DataDirection;
namespace rv = reservations;

constexpr uint32_t kChangeable = 1u << 2;         // Get Features SEL 3: changeable
constexpr uint32_t kNamespaceSpecific = 1u << 1;  // Get Features SEL 3: namespace specific

uint32_t mask_bit(rv::ReservationNotice type) noexcept {
  switch (type) {
    case rv::ReservationNotice::registration_preempted: return protocol::resv_mask::kRegistrationPreempted;
    case rv::ReservationNotice::reservation_released: return protocol::resv_mask::kReservationReleased;
    case rv::ReservationNotice::reservation_preempted: return protocol::resv_mask::kReservationPreempted;
    case rv::ReservationNotice::empty: break;
  }
  return 0;
}

uint32_t notice_mask(const Controller& ctrl, uint32_t nsid) noexcept {
  const auto it = ctrl.reservation_masks.find(nsid);
  return it != ctrl.reservation_masks.end() ? it->second : ctrl.reservation_mask_default;
}

// Queues one notice on `ctrl` (mu_ held) unless its mask hides it; true when queued.
bool queue_notice(Controller& ctrl, uint32_t nsid, rv::ReservationNotice type) {
  if ((notice_mask(ctrl, nsid) & mask_bit(type)) != 0) return false;
  if (++ctrl.reservation_log_count == 0) ctrl.reservation_log_count = 1;  // 0 is never used after a wrap
  if (ctrl.reservation_log.size() == kReservationLogEntries) ctrl.reservation_log.pop_front();
  ctrl.reservation_log.push_back({ctrl.reservation_log_count, static_cast<uint8_t>(type), nsid});
  ControllerRegistry::queue_event(ctrl,
                                  protocol::async_event_result(protocol::AsyncEventType::io_command_specific,
                                                               protocol::kAenInfoReservationLogAvailable,
                                                               static_cast<uint8_t>(
                                                                   protocol::LogPageId::reservation_notification)),
                                  kAenMaskReservation, 0);
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// The commands
// ---------------------------------------------------------------------------------------------------------

// Register, Acquire, Release: their data (the keys) comes next. A longer transfer is accepted and its tail
// ignored (the Linux host sends 16 bytes with a Release, whose data is 8).
Status prepare_reservation(IoPrep& p) noexcept {
  const std::size_t needed = static_cast<IoOpcode>(p.req.sqe.hdr.opcode) == IoOpcode::reservation_release
                                 ? sizeof(protocol::ReservationReleaseData)
                                 : sizeof(protocol::ReservationRegisterData);
  if (p.req.data_length < needed) return st::data_sgl_length_invalid;
  p.rs.stage = Stage::reservation;
  return st::success;
}

Status prepare_reservation_report(IoPrep& p) noexcept {
  const uint64_t bytes = protocol::as<protocol::ReservationReportCommand>(p.req.sqe).data_length();
  if (bytes > p.limits.max_io_size) return st::invalid_field;  // above MDTS
  if (Status s = check_data(p.req, DataDirection::controller_to_host, static_cast<uint32_t>(bytes)); !s.ok()) return s;
  p.rs.stage = Stage::reservation_report;
  return st::success;
}

void TargetCore::reservation_data_ready(CoreQueue& q, TargetRequest& req) noexcept {
  NsSlot* const slot = find_slot(q, req.sqe.hdr.nsid.get());
  if (slot == nullptr) {
    finish(req, st::invalid_namespace);  // removed by a reload while the data moved
    return;
  }
  rv::NamespaceReservations& resv = *slot->ns->reservations;
  const rv::HostId& host = q.ctrl->hostid;
  rv::Outcome out;
  switch (static_cast<IoOpcode>(req.sqe.hdr.opcode)) {
    case IoOpcode::reservation_register:
      out = resv.register_key(host,
                              rv::RegisterRequest::from(protocol::as<protocol::ReservationRegisterCommand>(req.sqe),
                                                        protocol::load<protocol::ReservationRegisterData>(req.data)));
      break;
    case IoOpcode::reservation_acquire:
      out = resv.acquire(host, rv::AcquireRequest::from(protocol::as<protocol::ReservationAcquireCommand>(req.sqe),
                                                        protocol::load<protocol::ReservationAcquireData>(req.data)));
      break;
    case IoOpcode::reservation_release:
      out = resv.release(host, rv::ReleaseRequest::from(protocol::as<protocol::ReservationReleaseCommand>(req.sqe),
                                                        protocol::load<protocol::ReservationReleaseData>(req.data)));
      break;
    default: out.status = st::internal_error; break;
  }
  if (!out.ok()) {
    finish(req, out.status);
    return;
  }
  if (!out.notices.empty()) send_reservation_notices(q.ctrl->subsys->nqn, slot->nsid, out.notices);
  if (out.abort_hosts.empty()) {
    finish(req, st::success);
    return;
  }
  wait_out_writes(q, req, *slot);
}

void TargetCore::reservation_report(CoreQueue& q, TargetRequest& req) noexcept {
  NsSlot* const slot = find_slot(q, req.sqe.hdr.nsid.get());  // prepare_io found it this turn
  std::vector<rv::ControllerOfHost> controllers;
  {
    std::lock_guard lock(mu_);
    for (const auto& [cntlid, c] : controllers_)
      if (!c->dead && c->subsys == q.ctrl->subsys) controllers.push_back({c->hostid, cntlid});
  }
  const auto cmd = protocol::as<protocol::ReservationReportCommand>(req.sqe);
  auto page = slot->ns->reservations->report(controllers, cmd.extended(), req.data_length);
  if (!page) {
    finish(req, page.error());
    return;
  }
  finish_with_data(req, *page);
}

void TargetCore::send_reservation_notices(std::string_view subnqn, uint32_t nsid, std::span<const rv::Notice> notices) {
  EventReleases notify;
  {
    std::lock_guard lock(mu_);
    for (const auto& [cntlid, c] : controllers_) {
      if (c->dead || c->subsys == nullptr || c->subsys->nqn != subnqn) continue;
      bool queued = false;
      for (const rv::Notice& n : notices)
        if (n.host == c->hostid && queue_notice(*c, nsid, n.type)) queued = true;
      if (queued) notify.push_back(ControllerRegistry::release_of(c));
    }
  }
  for (const EventRelease& r : notify) post_deliver_events(r);
}

void TargetCore::take_group_reservation_events(std::string_view subnqn, uint32_t nsid, RangeLocks& locks,
                                               std::span<const rv::GroupEvent> events) {
  std::vector<rv::Notice> notices;
  std::vector<rv::HostId> preempted;
  for (const rv::GroupEvent& e : events) {
    if (e.notice == rv::ReservationNotice::empty) {
      preempted.push_back(e.host);
    } else {
      notices.push_back({e.host, e.notice});
    }
  }
  if (!notices.empty()) send_reservation_notices(subnqn, nsid, notices);
  bool connected = false;  // a preempted host has a controller here: its writes may be running
  {
    std::lock_guard lock(mu_);
    for (const auto& [cntlid, c] : controllers_) {
      connected |= !c->dead && c->subsys != nullptr && c->subsys->nqn == subnqn &&
                   std::find(preempted.begin(), preempted.end(), c->hostid) != preempted.end();
    }
  }
  // Under the member's notify timeout (namespace_reservations.cpp), so that it hears this member's answer.
  constexpr std::chrono::seconds kWaitLimit{5};
  if (!connected) return;
  const auto started = std::chrono::steady_clock::now();
  if (!locks.wait_out_writes(kWaitLimit)) {
    spdlog::warn(
        "{} namespace {}: a Preempt and Abort through another gateway group member: writes of the "
        "preempted hosts were still running after {} s",
        subnqn, nsid, kWaitLimit.count());
    return;
  }
  spdlog::info(
      "{} namespace {}: a Preempt and Abort through another gateway group member: the writes here "
      "ended in {} ms",
      subnqn, nsid,
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
}

// Preempt and Abort: a lock over the whole namespace, granted once every write started before it ended.
void TargetCore::wait_out_writes(CoreQueue& q, TargetRequest& req, NsSlot& slot) noexcept {
  RequestState& rs = request_state(req);
  if (!open_io_channel(q, rs, slot).ok()) {
    spdlog::warn("{} namespace {}: Preempt and Abort could not wait for the preempted hosts' writes",
                 q.ctrl->subsys->nqn, slot.nsid);
    finish(req, st::success);  // the state changed and was saved: the command did what it says
    return;
  }
  rs.range = RangeWaiter{};
  rs.range.nlb = std::max<uint64_t>(1, slot.ns->geometry.num_blocks);
  rs.range.context = &req;
  rs.range.resume = &resume_request;
  RangeLocks& locks = *slot.ns->range_locks;
  if (locks.lock(rs.range)) {
    locks.unlock(rs.range);
    finish(req, st::success);
  } else if (rs.range.tracked) {
    rs.range_registered = true;
    ++q.parked;  // until range_granted -> reservation_lock_granted
  } else {
    spdlog::warn("{} namespace {}: Preempt and Abort: no memory to wait for the preempted hosts' writes",
                 q.ctrl->subsys->nqn, slot.nsid);
    finish(req, st::success);
  }
}

void TargetCore::reservation_lock_granted(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  rs.range_registered = false;
  rs.channel->ns->range_locks->unlock(rs.range);
  finish(req, q.closed ? st::aborted_sq_deletion : st::success);
  release_queue_if_drained(q);
}

// ---------------------------------------------------------------------------------------------------------
// Log page 80h, features 82h and 83h
// ---------------------------------------------------------------------------------------------------------

// One notice per read, the oldest; an empty page (type 0) when there is none.
std::vector<uint8_t> TargetCore::reservation_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                                        Status& /*status*/) {
  protocol::ReservationNotificationLog log{};
  if (!ctrl.reservation_log.empty()) {
    const Controller::ReservationNotice e = ctrl.reservation_log.front();
    ctrl.reservation_log.pop_front();
    log.count.set(e.count);
    log.type = e.type;
    log.nsid.set(e.nsid);
    log.available = static_cast<uint8_t>(std::min<std::size_t>(ctrl.reservation_log.size(), 255));
  }
  if (!cmd.rae()) ctrl.aen_masked &= ~kAenMaskReservation;
  std::vector<uint8_t> out(sizeof(log));
  std::memcpy(out.data(), &log, sizeof(log));
  return out;
}

std::shared_ptr<Namespace> TargetCore::active_namespace(const Controller& ctrl, uint32_t nsid) const {
  std::shared_ptr<const NamespaceTable> table;
  {
    std::lock_guard lock(mu_);
    table = ctrl.subsys->table;
  }
  const auto* ns = table->find(nsid);
  return ns != nullptr && (*ns)->config.visible_to(ctrl.hostnqn) ? *ns : nullptr;
}

void TargetCore::set_reservation_feature(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<protocol::FeaturesCommand>(req.sqe);
  Controller& ctrl = *q.ctrl;
  const uint32_t nsid = req.sqe.hdr.nsid.get();
  const uint32_t value = cmd.value();
  if (cmd.fid() == protocol::FeatureId::reservation_notification_mask) {
    if ((value & ~protocol::resv_mask::kAll) != 0) return finish(req, st::invalid_field);
    if (nsid != protocol::kNsidAll && active_namespace(ctrl, nsid) == nullptr)
      return finish(req, st::invalid_namespace);
    std::lock_guard lock(mu_);
    if (nsid == protocol::kNsidAll) {  // every namespace, now and later
      ctrl.reservation_masks.clear();
      ctrl.reservation_mask_default = value;
    } else {
      ctrl.reservation_masks[nsid] = value;
    }
    return finish(req, st::success);
  }
  // Reservation Persistence: of one namespace, shared by every host.
  auto ns = nsid == protocol::kNsidAll ? nullptr : active_namespace(ctrl, nsid);
  if (ns == nullptr) return finish(req, nsid == protocol::kNsidAll ? st::invalid_field : st::invalid_namespace);
  finish(req, ns->reservations->set_ptpl((value & 1u) != 0).status);
}

void TargetCore::get_reservation_feature(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<protocol::FeaturesCommand>(req.sqe);
  const uint32_t nsid = req.sqe.hdr.nsid.get();
  if (cmd.sel() == protocol::FeatureSelect::supported_capabilities) {
    return finish(req, st::success, kChangeable | kNamespaceSpecific);
  }
  auto ns = nsid == protocol::kNsidAll ? nullptr : active_namespace(*q.ctrl, nsid);
  if (ns == nullptr) return finish(req, nsid == protocol::kNsidAll ? st::invalid_field : st::invalid_namespace);
  if (cmd.sel() != protocol::FeatureSelect::current) return finish(req, st::success, 0);  // default, saved: 0
  uint32_t dw0 = 0;
  if (cmd.fid() == protocol::FeatureId::reservation_notification_mask) {
    std::lock_guard lock(mu_);
    dw0 = notice_mask(*q.ctrl, nsid);
  } else {
    dw0 = ns->reservations->ptpl() ? 1u : 0u;
  }
  finish(req, st::success, dw0);
}

}  // namespace rdmablk::target

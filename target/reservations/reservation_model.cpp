// The reservation model (reservation_model.h). Section names are those of NVMe Base 2.0 8.19 (the same in
// 2.1/2.2 8.1.22); quotes are from the 2.1/2.2 text.
#include "target/reservations/reservation_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "protocol/command.h"
#include "protocol/endian.h"
#include "protocol/uuid.h"

namespace rdmablk::target::reservations {

namespace {

namespace st = protocol::status;
using protocol::AcquireAction;
using protocol::ChangePtpl;
using protocol::RegisterAction;
using protocol::ReleaseAction;

constexpr HostId kNoHost{};

Outcome failure(protocol::Status s) {
  Outcome o;
  o.status = s;
  return o;
}

Registrant* find_mutable(ReservationState& state, const HostId& host) noexcept {
  for (auto& r : state.registrants)
    if (r.host == host) return &r;
  return nullptr;
}

// The command's issuer is a registrant and CRKEY is its key: the first check of Acquire, Release and Clear
// ("If the CRKEY value does not match, then the command is aborted with a status code of Reservation
// Conflict. If the host is not a registrant, then the command is aborted with ... Reservation Conflict").
bool issuer_key_matches(const ReservationState& state, const HostId& host, uint64_t crkey) noexcept {
  const Registrant* r = find_registrant(state, host);
  return r != nullptr && r->key == crkey;
}

void release_reservation(ReservationState& state) noexcept {
  state.type = ReservationType::none;
  state.holder = kNoHost;
}

// A new reservation of type `t` held by `host` (by every registrant for types 5-6).
void create_reservation(ReservationState& state, const HostId& host, ReservationType t) noexcept {
  state.type = t;
  state.holder = all_registrants_type(t) ? kNoHost : host;
}

// Removes `host`'s registration. A reservation it held alone, or held as the last registrant of a type 5-6
// reservation, is released with it ("Unregistering": "If a host is the last remaining reservation holder ...
// or is the only reservation holder, then the reservation is released when the host unregisters").
void remove_registrant(ReservationState& state, const HostId& host) {
  std::erase_if(state.registrants, [&](const Registrant& r) { return r.host == host; });
  if (state.type == ReservationType::none) return;
  if (all_registrants_type(state.type) ? state.registrants.empty() : state.holder == host) release_reservation(state);
}

// Unregisters every registrant whose key is `key`, but `keep`; returns the hosts removed.
std::vector<HostId> remove_registrants_with_key(ReservationState& state, uint64_t key, const HostId* keep) {
  std::vector<HostId> removed;
  for (const auto& r : state.registrants)
    if (r.key == key && (keep == nullptr || r.host != *keep)) removed.push_back(r.host);
  for (const auto& h : removed) remove_registrant(state, h);
  return removed;
}

std::vector<HostId> remove_registrants_but(ReservationState& state, const HostId& keep) {
  std::vector<HostId> removed;
  for (const auto& r : state.registrants)
    if (r.host != keep) removed.push_back(r.host);
  for (const auto& h : removed) remove_registrant(state, h);
  return removed;
}

// `type` to every registrant but `except`.
void notify_registrants(const ReservationState& state, const HostId& except, ReservationNotice type,
                        std::vector<Notice>& out) {
  for (const auto& r : state.registrants)
    if (r.host != except) out.push_back({r.host, type});
}

// Write Exclusive and Exclusive Access are the two types whose release notifies nobody ("Releasing a
// Reservation": "and the reservation type is not Write Exclusive or Exclusive Access").
bool release_notifies(ReservationType t) noexcept {
  return t != ReservationType::none && t != ReservationType::write_exclusive && t != ReservationType::exclusive_access;
}

// Registrants Only (3, 4): the types whose release by an unregister notifies ("Unregistering": "If a
// reservation is released and the type of the released reservation was Write Exclusive - Registrants Only or
// Exclusive Access - Registrants Only").
bool unregister_release_notifies(ReservationType t) noexcept {
  return t == ReservationType::write_exclusive_registrants_only ||
         t == ReservationType::exclusive_access_registrants_only;
}

// Every successful Register, Clear, Preempt and Preempt and Abort counts once (the Report's GEN: "incremented
// any time any one of the following occur: a Reservation Register command completes successfully ...; a
// Reservation Release command with RRELA set to 001b (i.e., Clear) completes successfully ...; and a
// Reservation Acquire command with RACQA set to 001b (Preempt) or 010b (Preempt and Abort) completes
// successfully"), whatever it changed: not per registrant changed. Unsigned overflow is GEN's "rolls over to 0h".
void count_generation(ReservationState& state, Outcome& out) noexcept {
  ++state.generation;
  out.changed = true;
}

}  // namespace

const Registrant* find_registrant(const ReservationState& state, const HostId& host) noexcept {
  for (const auto& r : state.registrants)
    if (r.host == host) return &r;
  return nullptr;
}

bool holds_reservation(const ReservationState& state, const HostId& host) noexcept {
  if (state.type == ReservationType::none) return false;
  if (all_registrants_type(state.type)) return find_registrant(state, host) != nullptr;
  return state.holder == host && find_registrant(state, host) != nullptr;
}

std::optional<std::string> inconsistency(const ReservationState& state) {
  const auto t = static_cast<uint8_t>(state.type);
  if (t != 0 && !protocol::valid_reservation_type(t)) return fmt::format("unknown reservation type {}", t);
  if (state.registrants.size() > kMaxRegistrants)
    return fmt::format("{} registrants, more than {}", state.registrants.size(), kMaxRegistrants);
  std::set<HostId> hosts;
  for (const auto& r : state.registrants)
    if (!hosts.insert(r.host).second) return "host " + protocol::format_uuid(r.host) + " is registered twice";
  if (state.type == ReservationType::none || all_registrants_type(state.type)) {
    if (state.holder != kNoHost) return "a holder without a single-holder reservation";
    if (state.type != ReservationType::none && state.registrants.empty())
      return "an all-registrants reservation without registrants";
    return std::nullopt;
  }
  if (find_registrant(state, state.holder) == nullptr)
    return "reservation holder " + protocol::format_uuid(state.holder) + " is not a registrant";
  return std::nullopt;
}

Access io_access(uint8_t io_opcode) noexcept {
  using protocol::IoOpcode;
  switch (static_cast<IoOpcode>(io_opcode)) {
    case IoOpcode::read:
    case IoOpcode::compare:
    case IoOpcode::verify: return Access::read;
    case IoOpcode::flush:
    case IoOpcode::write:
    case IoOpcode::write_uncorrectable:
    case IoOpcode::write_zeroes:
    case IoOpcode::dataset_management:
    case IoOpcode::copy: return Access::write;
    default: return Access::none;
  }
}

protocol::Status check_access(const ReservationState& state, const HostId& host, Access access) noexcept {
  if (access == Access::none || state.type == ReservationType::none) return st::success;
  if (holds_reservation(state, host)) return st::success;
  const bool registrant = find_registrant(state, host) != nullptr;
  bool allowed = false;
  switch (state.type) {
    case ReservationType::write_exclusive: allowed = access == Access::read; break;
    case ReservationType::exclusive_access: allowed = false; break;
    case ReservationType::write_exclusive_registrants_only:
    case ReservationType::write_exclusive_all_registrants: allowed = registrant || access == Access::read; break;
    case ReservationType::exclusive_access_registrants_only:
    case ReservationType::exclusive_access_all_registrants: allowed = registrant; break;
    case ReservationType::none: allowed = true; break;
  }
  return allowed ? st::success : st::reservation_conflict;
}

// ---- requests -----------------------------------------------------------------------------------------------

RegisterRequest RegisterRequest::from(const protocol::ReservationRegisterCommand& cmd,
                                      const protocol::ReservationRegisterData& data) noexcept {
  return {cmd.action(), cmd.ignore_existing_key(), cmd.cptpl(), data.crkey.get(), data.nrkey.get()};
}

AcquireRequest AcquireRequest::from(const protocol::ReservationAcquireCommand& cmd,
                                    const protocol::ReservationAcquireData& data) noexcept {
  return {cmd.action(), cmd.ignore_existing_key(), cmd.rtype(), data.crkey.get(), data.prkey.get()};
}

ReleaseRequest ReleaseRequest::from(const protocol::ReservationReleaseCommand& cmd,
                                    const protocol::ReservationReleaseData& data) noexcept {
  return {cmd.action(), cmd.ignore_existing_key(), cmd.rtype(), data.crkey.get()};
}

// ---- Reservation Register ("Registering", "Unregistering") -------------------------------------------------

namespace {

// RREGA 000b. IEKEY is ignored ("For a Reservation Register command with the RREGA field cleared to 000b: a)
// the IEKEY field shall be ignored; and b) if a host that is already a registrant ... attempts to register ...
// using a different reservation key value, then the command shall be aborted with ... Reservation Conflict").
protocol::Status register_key(ReservationState& state, const HostId& host, uint64_t nrkey) {
  if (const Registrant* r = find_registrant(state, host))
    return r->key == nrkey ? st::success : st::reservation_conflict;
  // "a Reservation Register command shall never fail due to lack of resources": only REGSTRNT's 16 bits bound it.
  if (state.registrants.size() >= kMaxRegistrants) return st::internal_error;
  state.registrants.push_back({host, nrkey});
  return st::success;
}

// RREGA 001b. A non-registrant is a conflict even with IEKEY: IEKEY lifts the key check only ("A host may
// unregister without regard to its current reservation key value by setting the IEKEY bit"), where Replace
// also lifts the registration check.
protocol::Status unregister_key(ReservationState& state, const HostId& host, const RegisterRequest& req,
                                std::vector<Notice>& notices) {
  const Registrant* r = find_registrant(state, host);
  if (r == nullptr || (!req.iekey && r->key != req.crkey)) return st::reservation_conflict;
  const ReservationType before = state.type;
  remove_registrant(state, host);
  // The reservation went with the registration: other registrants learn of it for types 3-4 only.
  if (state.type == ReservationType::none && unregister_release_notifies(before))
    notify_registrants(state, host, ReservationNotice::reservation_released, notices);
  return st::success;
}

// RREGA 010b. With IEKEY a host replaces its key "without regard to its registration status or current
// reservation key value": a host not yet registered is registered with NRKEY. A holder stays the holder
// ("Replacing a reservation key has no effect on any reservation that may be held on the namespace").
protocol::Status replace_key(ReservationState& state, const HostId& host, const RegisterRequest& req) {
  Registrant* r = find_mutable(state, host);
  if (r == nullptr) return req.iekey ? register_key(state, host, req.nrkey) : st::reservation_conflict;
  if (!req.iekey && r->key != req.crkey) return st::reservation_conflict;
  r->key = req.nrkey;
  return st::success;
}

}  // namespace

Outcome reservation_register(ReservationState& state, const HostId& host, const RegisterRequest& req,
                             bool ptpl_supported) {
  // Reserved RREGA and CPTPL values, and a PTPL the namespace cannot keep, are rejected before any change.
  if (req.action > static_cast<uint8_t>(RegisterAction::replace_key)) return failure(st::invalid_field);
  const auto cptpl = static_cast<ChangePtpl>(req.cptpl);
  if (cptpl == ChangePtpl::reserved || (cptpl == ChangePtpl::set && !ptpl_supported)) return failure(st::invalid_field);
  Outcome out;
  switch (static_cast<RegisterAction>(req.action)) {
    case RegisterAction::register_key: out.status = register_key(state, host, req.nrkey); break;
    case RegisterAction::unregister_key: out.status = unregister_key(state, host, req, out.notices); break;
    case RegisterAction::replace_key: out.status = replace_key(state, host, req); break;
  }
  if (!out.ok()) return out;  // each action changes nothing before its last check
  // CPTPL is "a side effect of processing this command": applied only when it succeeds.
  if (cptpl == ChangePtpl::set) state.ptpl = true;
  if (cptpl == ChangePtpl::clear) state.ptpl = false;
  count_generation(state, out);
  return out;
}

Outcome set_ptpl(ReservationState& state, bool ptpl, bool ptpl_supported) {
  if (ptpl && !ptpl_supported) return failure(st::invalid_field);
  Outcome out;
  out.changed = state.ptpl != ptpl;
  state.ptpl = ptpl;
  return out;
}

// ---- Reservation Acquire ("Acquiring a Reservation", "Preempting a Reservation or Registration") -----------

namespace {

// RACQA 000b. One reservation at a time: a holder asking again for the same type is processed (nothing
// changes), for another type is a conflict, like any other registrant while a reservation is held. With type
// 5-6 held every registrant is a holder, so each may "acquire" that same type again.
Outcome acquire(ReservationState& state, const HostId& host, ReservationType t) {
  Outcome out;
  if (state.type == ReservationType::none) {
    create_reservation(state, host, t);
    out.changed = true;
  } else if (!holds_reservation(state, host) || state.type != t) {
    out.status = st::reservation_conflict;
  }
  return out;
}

// The registrations and reservation a preempt leaves, computed on a copy: nullopt with `status` set when the
// command fails. `removed`: the hosts it unregistered.
std::optional<ReservationState> preempted_state(const ReservationState& state, const HostId& host, ReservationType t,
                                                uint64_t prkey, std::vector<HostId>& removed,
                                                protocol::Status& status) {
  ReservationState next = state;
  if (state.type == ReservationType::none) {
    // "If there is no reservation held on the namespace, then execution of the command causes registrants whose
    // reservation key match the value of the PRKEY field to be unregistered" (none matching: nothing happens).
    removed = remove_registrants_with_key(next, prkey, nullptr);
  } else if (all_registrants_type(state.type)) {
    if (prkey == 0) {  // all others unregistered; a new reservation of RTYPE for the issuer, atomically
      removed = remove_registrants_but(next, host);
      create_reservation(next, host, t);
    } else {
      removed = remove_registrants_with_key(next, prkey, nullptr);
      // "If the PRKEY value is non zero and there are no registrants whose reservation key matches ... the
      // controller shall abort the command with a status code of Reservation Conflict."
      if (removed.empty()) status = st::reservation_conflict;
    }
  } else {
    const Registrant* holder = find_registrant(state, state.holder);
    if (holder != nullptr && holder->key == prkey) {
      // The holder's key (the issuer's own when it preempts itself): every other registrant with that key is
      // unregistered, the reservation released and one of RTYPE created for the issuer, atomically.
      removed = remove_registrants_with_key(next, prkey, &host);
      create_reservation(next, host, t);
    } else if (prkey == 0) {
      status = st::invalid_field;  // "does not match that of the current reservation holder and is equal to 0h"
    } else {
      removed = remove_registrants_with_key(next, prkey, nullptr);
    }
  }
  if (!status.ok()) return std::nullopt;
  return next;
}

Outcome preempt(ReservationState& state, const HostId& host, ReservationType t, uint64_t prkey, bool abort) {
  Outcome out;
  std::vector<HostId> removed;
  auto next = preempted_state(state, host, t, prkey, removed, out.status);
  if (!next) return out;
  for (const auto& h : removed) {
    if (h == host) continue;  // "other than the host that issued the Reservation Acquire command"
    out.notices.push_back({h, ReservationNotice::registration_preempted});
    if (abort) out.abort_hosts.push_back(h);
  }
  // "When the type of reservation held on a namespace changes ..., then a reservation released notification
  // occurs on all controllers associated with hosts that remain registrants ... except the host that issued".
  if (next->type != state.type) notify_registrants(*next, host, ReservationNotice::reservation_released, out.notices);
  state = std::move(*next);
  count_generation(state, out);
  return out;
}

}  // namespace

Outcome reservation_acquire(ReservationState& state, const HostId& host, const AcquireRequest& req) {
  // IEKEY: "If this bit is set to a '1', then the controller shall return an error of Invalid Field in Command"
  // (the Acquire definition since 1.3). RTYPE 0 and 7h-FFh are reserved: never a reservation to create.
  if (req.iekey || req.action > static_cast<uint8_t>(AcquireAction::preempt_and_abort) ||
      !protocol::valid_reservation_type(req.rtype))
    return failure(st::invalid_field);
  if (!issuer_key_matches(state, host, req.crkey)) return failure(st::reservation_conflict);
  const auto t = static_cast<ReservationType>(req.rtype);
  switch (static_cast<AcquireAction>(req.action)) {
    case AcquireAction::acquire: return acquire(state, host, t);
    case AcquireAction::preempt: return preempt(state, host, t, req.prkey, false);
    case AcquireAction::preempt_and_abort: return preempt(state, host, t, req.prkey, true);
  }
  return failure(st::invalid_field);
}

// ---- Reservation Release ("Releasing a Reservation", "Clearing a Reservation") -----------------------------

namespace {

// RRELA 000b. Only a holder releases: from a registrant that holds nothing, or with no reservation, the
// command "shall ... complete successfully, but shall have no effect" whatever its RTYPE. A holder naming
// another type (a reserved one included) gets Invalid Field. With type 5-6 any registrant is a holder and
// releases the reservation for all.
Outcome release(ReservationState& state, const HostId& host, uint8_t rtype) {
  Outcome out;
  if (!holds_reservation(state, host)) return out;
  if (rtype != static_cast<uint8_t>(state.type)) return failure(st::invalid_field);
  const ReservationType before = state.type;
  release_reservation(state);
  out.changed = true;
  if (release_notifies(before)) notify_registrants(state, host, ReservationNotice::reservation_released, out.notices);
  return out;
}

// RRELA 001b: the reservation released and every registrant unregistered, atomically; the others get
// Reservation Preempted ("Clearing a Reservation").
Outcome clear(ReservationState& state, const HostId& host) {
  Outcome out;
  notify_registrants(state, host, ReservationNotice::reservation_preempted, out.notices);
  release_reservation(state);
  state.registrants.clear();
  count_generation(state, out);
  return out;
}

}  // namespace

Outcome reservation_release(ReservationState& state, const HostId& host, const ReleaseRequest& req) {
  if (req.iekey || req.action > static_cast<uint8_t>(ReleaseAction::clear)) return failure(st::invalid_field);
  if (!issuer_key_matches(state, host, req.crkey)) return failure(st::reservation_conflict);
  if (static_cast<ReleaseAction>(req.action) == ReleaseAction::clear) return clear(state, host);
  return release(state, host, req.rtype);
}

// ---- Reservation Report -------------------------------------------------------------------------------------

namespace {

uint16_t controller_of(const HostId& host, std::span<const ControllerOfHost> controllers) noexcept {
  uint16_t best = protocol::kCntlidNone;
  for (const auto& c : controllers)
    if (c.host == host && (best == protocol::kCntlidNone || c.cntlid < best)) best = c.cntlid;
  return best;
}

}  // namespace

tl::expected<std::vector<uint8_t>, protocol::Status> build_report(const ReservationState& state,
                                                                  std::span<const ControllerOfHost> controllers,
                                                                  bool extended, uint64_t max_bytes) {
  if (!extended) return tl::unexpected(st::host_id_inconsistent_format);
  const std::size_t n = std::min(state.registrants.size(), kMaxRegistrants);
  std::vector<uint8_t> data(sizeof(protocol::ReservationStatusExtHeader) +
                            n * sizeof(protocol::RegisteredControllerExt));
  protocol::ReservationStatusExtHeader hdr{};
  hdr.h.gen.set(state.generation);
  hdr.h.rtype = static_cast<uint8_t>(state.type);
  hdr.h.regctl = {static_cast<uint8_t>(n & 0xFF), static_cast<uint8_t>(n >> 8)};
  hdr.h.ptpls = static_cast<uint8_t>(state.ptpl);
  protocol::store(data.data(), hdr);
  uint8_t* entry = data.data() + sizeof(hdr);
  for (std::size_t i = 0; i < n; ++i, entry += sizeof(protocol::RegisteredControllerExt)) {
    const Registrant& r = state.registrants[i];
    protocol::RegisteredControllerExt e{};
    e.cntlid.set(controller_of(r.host, controllers));
    e.rcsts = holds_reservation(state, r.host) ? protocol::kRcstsHoldsReservation : 0;
    e.rkey.set(r.key);
    e.hostid = r.host;
    protocol::store(entry, e);
  }
  if (max_bytes < data.size()) data.resize(static_cast<std::size_t>(max_bytes));
  return data;
}

}  // namespace rdmablk::target::reservations

// Admin commands of I/O and discovery controllers: Identify, Get Log Page, Set/Get Features, Asynchronous
// Event Request, Keep Alive, Abort (NVMe Base 2.0, 5; values as the Linux kernel target reports them).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "protocol/ana.h"
#include "protocol/identify.h"
#include "protocol/log_pages.h"
#include "target/commands/command_table.h"
#include "target/commands/io_commands.h"
#include "target/core/core_internal.h"

namespace rdmablk::target {

namespace {

using transport::DataDirection;

template <typename T>
std::vector<uint8_t> to_bytes(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

template <std::size_t N>
void pad(std::array<char, N>& field, std::string_view s, char fill = ' ') noexcept {
  protocol::set_padded(field, s.data(), s.size(), fill);
}

std::vector<uint8_t> identify_namespace_data(const Namespace& ns, const QueueLimits& limits) {
  protocol::IdentifyNamespace id{};
  const auto& geo = ns.geometry;
  id.nsze.set(geo.num_blocks);
  id.ncap.set(geo.num_blocks);
  id.nuse.set(geo.num_blocks);
  if (geo.caps.deallocate) id.nsfeat |= protocol::idns::kNsfeatThinProvisioning;
  id.nlbaf = 0;
  id.flbas = 0;
  id.lbaf[0].lbads = ns.lbads;
  id.nmic = protocol::idns::kNmicShared;
  id.rescap = ns.reservations->rescap();
  if (geo.caps.deallocate && geo.caps.deallocated_reads_zeroes)
    id.dlfeat = protocol::idns::kDlfeatReadZeroes | protocol::idns::kDlfeatWriteZeroesDeallocate;
  id.nvmcap.set(geo.num_blocks * geo.block_size);
  if (ns.read_only) id.nsattr |= protocol::idns::kNsattrWriteProtected;
  id.nguid = ns.config.nguid;
  id.anagrpid.set(ns.ana_group.load(std::memory_order_relaxed));
  // Copy: what one Copy may do (commands/compare_copy.cpp stages it in one buffer of at most MDTS).
  const CopyLimits copy = copy_limits(ns, limits);
  id.mssrl.set(static_cast<uint16_t>(std::min<uint32_t>(copy.max_range_blocks, 0xFFFF)));
  id.mcl.set(static_cast<uint32_t>(std::min<uint64_t>(copy.max_blocks, UINT32_MAX)));
  id.msrc = static_cast<uint8_t>(copy.max_ranges - 1);
  return to_bytes(id);
}

// I/O Command Set Independent Identify Namespace (CNS 0x08, Base 2.0 Figure 280).
std::vector<uint8_t> identify_cs_independent_data(const Namespace& ns) {
  std::vector<uint8_t> out(protocol::kIdentifyDataSize, 0);
  if (ns.geometry.caps.deallocate) out[0] |= protocol::idns::kNsfeatThinProvisioning;  // NSFEAT
  out[1] = protocol::idns::kNmicShared;                                                 // NMIC
  const uint32_t anagrpid = ns.ana_group.load(std::memory_order_relaxed);               // ANAGRPID, bytes 7:4
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<uint8_t>(anagrpid >> (8 * i));
  out[8] = ns.read_only ? protocol::idns::kNsattrWriteProtected : 0;                    // NSATTR
  out[14] = 1;                                                                         // NSTAT: ready
  return out;
}

uint32_t supported_aec(const Controller& ctrl) noexcept {
  return ctrl.discovery ? protocol::kAecDiscoveryLogChange
                        : protocol::kAecSmartMask | protocol::kAecNamespaceAttribute | protocol::kAecAnaChange;
}

}  // namespace

void TargetCore::keep_alive(CoreQueue& q, TargetRequest& req) noexcept {
  q.ctrl->touch();
  finish(req, st::success);
}

void TargetCore::abort_command(CoreQueue& /*q*/, TargetRequest& req) noexcept {
  finish(req, st::success, 1);  // DW0 bit 0: command not aborted (like nvmet)
}

// ---------------------------------------------------------------------------------------------------------
// Identify
// ---------------------------------------------------------------------------------------------------------

std::vector<uint8_t> TargetCore::identify_controller_data(const Controller& ctrl) const {
  protocol::IdentifyController id{};
  namespace ic = protocol::idctl;
  const bool io = !ctrl.discovery;
  pad(id.sn, io ? std::string_view(ctrl.subsys->serial) : std::string_view(discovery_serial_));
  pad(id.mn, io ? std::string_view(ctrl.subsys->model) : std::string_view("rdmablk discovery"));
  pad(id.fr, options_.firmware_revision);
  id.rab = 6;
  if (io) id.cmic = ic::kCmicMultiPort | ic::kCmicMultiController | ic::kCmicAna;
  // MDTS in units of CAP.MPSMIN (4 KiB), as a power of two.
  if (io) id.mdts = static_cast<uint8_t>(std::countr_zero(limits_.max_io_size / 4096u));
  id.cntlid.set(ctrl.cntlid);
  id.ver.set(target_version());
  id.oaes.set(io ? ic::kOaesNamespaceAttribute | ic::kOaesAnaChange : ic::kOaesDiscoveryLogChange);
  id.ctratt.set(ic::kCtrattHostId128 | (ctrl.traffic_based_keep_alive ? ic::kCtrattTbkas : 0u));
  id.cntrltype = io ? ic::kCntrltypeIo : ic::kCntrltypeDiscovery;
  id.acl = 3;
  id.aerl = kAsyncEventSlots - 1;
  id.frmw = ic::kFrmwSlot1ReadOnly | (1u << 1);  // one slot, read only
  // Extended data (NUMDU, LPO) is Get Log Page's own; the other bits say which log pages there are.
  id.lpa = static_cast<uint8_t>(ic::kLpaExtendedData | log_page_attributes(ctrl.discovery));
  id.elpe = kErrorLogEntries - 1;
  id.npss = 0;
  id.kas.set(10);  // keep alive granularity: 100 ms units -> 1 s
  id.sqes = ic::kSqes64;
  id.cqes = ic::kCqes16;
  id.maxcmd.set(static_cast<uint16_t>(limits_.io_queue_depth));
  if (io) {
    const NamespaceTable& table = *ctrl.subsys->table;
    const uint32_t nn = std::max<uint32_t>(1024, table.max_nsid());
    id.nn.set(nn);
    // MNAN sizes the host's ANA log buffer (NANAGRPID descriptors + MNAN NSIDs, checked against MDTS): the
    // namespaces there can be, not the largest NSID, and never above NN (nvme_mpath_init_identify).
    id.mnan.set(static_cast<uint32_t>(std::max<std::size_t>(1024, table.namespaces.size())));
    // ANA (nvmet's values): every state reportable; ANAGRPID may change while attached (a reload moves a
    // namespace), so ANACAP bit 6 stays clear; no Namespace Management, so bit 7 too.
    id.anatt = kAnaTransitionTime;
    id.anacap = ic::kAnacapOptimized | ic::kAnacapNonOptimized | ic::kAnacapInaccessible |
                ic::kAnacapPersistentLoss | ic::kAnacapChange;
    id.anagrpmax.set(kAnaGroupMax);
    id.nanagrpid.set(kAnaGroupMax);
    id.oacs.set(capability_bits(CapabilityField::oacs));
    id.oncs.set(capability_bits(CapabilityField::oncs));
    id.fuses.set(capability_bits(CapabilityField::fuses));
    id.ocfs.set(1);  // Copy descriptor format 0
    id.acwu.set(0);  // a fused Compare and Write is atomic over its whole range; 0 (one block) is what is promised
    if (table.any_volatile_cache()) id.vwc = ic::kVwcPresent | ic::kVwcFlushAllNotSupported;
  }
  uint32_t sgls = ic::kSglsSupported | ic::kSglsOffset;
  sgls |= ctrl.trtype == transport::TransportType::rdma ? ic::kSglsKeyed : ic::kSglsTransport;
  id.sgls.set(sgls);
  const std::string_view subnqn = io ? std::string_view(ctrl.subsys->nqn) : protocol::kDiscoveryNqn;
  pad(id.subnqn, subnqn, '\0');
  id.ioccsz.set((64 + limits_.io_inline_data) / 16);
  id.iorcsz.set(1);
  id.icdoff.set(0);
  id.fcatt = 0;  // dynamic controller model
  id.msdbd = 1;
  id.psd[0].mp.set(0x9c4);
  id.psd[0].enlat.set(0x10);
  id.psd[0].exlat.set(0x4);
  return to_bytes(id);
}

void TargetCore::identify(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<protocol::IdentifyCommand>(req.sqe);
  if (Status s = check_data(req, DataDirection::controller_to_host, protocol::kIdentifyDataSize); !s.ok()) {
    finish(req, s);
    return;
  }
  const Controller& ctrl = *q.ctrl;
  const uint32_t nsid = cmd.hdr.nsid.get();
  if (ctrl.discovery && cmd.cns() != protocol::Cns::controller) {
    finish(req, st::invalid_field);
    return;
  }
  std::vector<uint8_t> data;
  Status status = st::success;
  {
    std::lock_guard lock(mu_);
    std::shared_ptr<const NamespaceTable> table = ctrl.discovery ? nullptr : ctrl.subsys->table;
    auto find = [&](uint32_t id) -> const Namespace* {  // masked from this host: inactive
      const auto* p = table->find(id);
      return p && (*p)->config.visible_to(ctrl.hostnqn) ? p->get() : nullptr;
    };
    switch (cmd.cns()) {
      case protocol::Cns::controller:
        data = identify_controller_data(ctrl);
        break;
      case protocol::Cns::namespace_:
        if (nsid == 0 || nsid == protocol::kNsidAll) {
          status = st::invalid_namespace;
        } else if (const Namespace* ns = find(nsid)) {
          data = identify_namespace_data(*ns, limits_);
        }  // an inactive NSID: all zeroes (nvmet), so the host sees NCAP 0 and drops it
        break;
      case protocol::Cns::active_namespace_list:
        if (nsid >= 0xFFFFFFFEu) {
          status = st::invalid_namespace;
        } else {
          auto ids = table->nsids();
          std::erase_if(ids, [&](uint32_t id) { return find(id) == nullptr; });
          data = to_bytes(protocol::make_active_namespace_list(ids, nsid));
        }
        break;
      case protocol::Cns::ns_id_descriptor_list:
        if (const Namespace* ns = find(nsid)) {
          protocol::NamespaceIds ids;
          ids.nguid = ns->config.nguid;
          ids.uuid = ns->config.uuid;
          ids.csi = static_cast<uint8_t>(protocol::Csi::nvm);
          auto list = protocol::make_ns_id_descriptor_list(ids);
          data.assign(list.begin(), list.end());
        } else {
          status = st::invalid_namespace;
        }
        break;
      case protocol::Cns::io_independent_namespace:
        if (nsid == 0 || nsid == protocol::kNsidAll) {
          status = st::invalid_namespace;
        } else if (const Namespace* ns = find(nsid)) {
          data = identify_cs_independent_data(*ns);
        }
        break;
      default:
        status = st::invalid_field;
        break;
    }
  }
  if (!status.ok()) {
    finish(req, status);
    return;
  }
  finish_with_data(req, data);
}

// ---------------------------------------------------------------------------------------------------------
// Get Log Page
// ---------------------------------------------------------------------------------------------------------

void TargetCore::get_log_page(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<protocol::GetLogPageCommand>(req.sqe);
  const uint64_t length = cmd.length_bytes();
  if (length > UINT32_MAX) {
    finish(req, st::data_sgl_length_invalid);
    return;
  }
  if (Status s = check_data(req, DataDirection::controller_to_host, static_cast<uint32_t>(length)); !s.ok()) {
    finish(req, s);
    return;
  }
  const uint64_t offset = cmd.offset();
  if (cmd.offset_is_index() || (offset & 3) != 0) {
    finish(req, st::invalid_field);
    return;
  }
  Controller& ctrl = *q.ctrl;
  const LogPageEntry* const entry = find_log_page(cmd.lid(), ctrl.discovery);
  std::vector<uint8_t> page;
  Status status = entry != nullptr ? st::success : st::invalid_field;
  if (entry != nullptr) {
    std::lock_guard lock(mu_);
    page = (this->*entry->build)(ctrl, cmd, status);
  }
  if (!status.ok()) {
    finish(req, status);
    return;
  }
  if (offset > page.size()) {
    finish(req, st::invalid_field);
    return;
  }
  finish_with_data(req, std::span<const uint8_t>(page).subspan(static_cast<std::size_t>(offset)));
}

// The log pages (the command table's log page entries); mu_ held.

std::vector<uint8_t> TargetCore::error_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& /*cmd*/,
                                                  Status& /*status*/) {
  std::vector<uint8_t> page(kErrorLogEntries * sizeof(protocol::ErrorLogEntry), 0);
  std::lock_guard elock(ctrl.error_mu);
  const uint64_t n = std::min<uint64_t>(ctrl.error_count, kErrorLogEntries);
  for (uint64_t i = 0; i < n; ++i) {  // newest first
    const auto& e = ctrl.errors[(ctrl.error_count - 1 - i) % kErrorLogEntries];
    std::memcpy(page.data() + i * sizeof(e), &e, sizeof(e));
  }
  return page;
}

std::vector<uint8_t> TargetCore::smart_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                                  Status& status) {
  // NSID FFFFFFFFh (or 0): this controller's commands; an active NSID: that namespace's, from every host (as
  // nvmet reports the backing device's counters). Counted when they complete.
  const uint32_t nsid = cmd.hdr.nsid.get();
  stats::IoStatsSnapshot io;
  if (nsid == 0 || nsid == protocol::kNsidAll) {
    io = controller_io_locked(ctrl);
  } else if (const auto* ns = ctrl.subsys->table->find(nsid); ns != nullptr && (*ns)->config.visible_to(ctrl.hostnqn)) {
    io = namespace_io(ctrl.subsys->nqn, nsid);
  } else {
    status = st::invalid_namespace;
    return {};
  }
  const auto& reads = io.op(stats::OpClass::read);
  const auto& writes = io.op(stats::OpClass::write);
  // Data units: thousands of 512-byte units, rounded up.
  auto data_units = [](uint64_t bytes) { return (bytes / 512 + 999) / 1000; };
  protocol::SmartLog log{};
  log.available_spare = 100;
  log.available_spare_threshold = 10;
  log.composite_temperature.set(273 + 40);
  log.data_units_read.set(data_units(reads.bytes));
  log.data_units_written.set(data_units(writes.bytes));
  log.host_read_commands.set(reads.commands);
  log.host_write_commands.set(writes.commands);
  {
    std::lock_guard elock(ctrl.error_mu);
    log.num_error_log_entries.set(ctrl.error_count);
  }
  return to_bytes(log);
}

std::vector<uint8_t> TargetCore::firmware_log_locked(Controller& /*ctrl*/, const protocol::GetLogPageCommand& /*cmd*/,
                                                     Status& /*status*/) {
  protocol::FirmwareSlotLog log{};
  log.afi = 1;
  pad(log.frs[0], options_.firmware_revision);
  return to_bytes(log);
}

std::vector<uint8_t> TargetCore::changed_namespaces_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                                               Status& /*status*/) {
  protocol::ChangedNamespaceList log{};
  if (ctrl.changed_overflow) {
    log.nsid[0].set(protocol::kChangedNsOverflow);
  } else {
    auto list = ctrl.changed_namespaces;
    std::sort(list.begin(), list.end());
    for (std::size_t i = 0; i < list.size() && i < log.nsid.size(); ++i) log.nsid[i].set(list[i]);
  }
  if (!cmd.rae()) {
    ctrl.changed_namespaces.clear();
    ctrl.changed_overflow = false;
    ctrl.aen_masked &= ~kAenMaskNamespace;
  }
  return to_bytes(log);
}

std::vector<uint8_t> TargetCore::ana_log_page_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                                     Status& /*status*/) {
  auto page = ana_.log_page(ctrl.ana_port.get(), *ctrl.subsys->table, ctrl.hostnqn,
                            (cmd.lsp() & protocol::kAnaLspRgo) != 0);
  if (!cmd.rae()) ctrl.aen_masked &= ~kAenMaskAna;
  return page;
}

std::vector<uint8_t> TargetCore::effects_log_locked(Controller& /*ctrl*/, const protocol::GetLogPageCommand& /*cmd*/,
                                                    Status& /*status*/) {
  return to_bytes(command_effects_log());
}

std::vector<uint8_t> TargetCore::discovery_log_page_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                                           Status& /*status*/) {
  auto page = discovery_log_locked(ctrl);
  if (!cmd.rae()) ctrl.aen_masked &= ~kAenMaskDiscovery;
  return page;
}

// ---------------------------------------------------------------------------------------------------------
// Features
// ---------------------------------------------------------------------------------------------------------

namespace {
// Reservation Notification Mask and Reservation Persistence: of a namespace (commands/reservations.cpp).
bool is_reservation_feature(const Controller& ctrl, protocol::FeatureId fid) noexcept {
  return !ctrl.discovery && (fid == protocol::FeatureId::reservation_notification_mask ||
                             fid == protocol::FeatureId::reservation_persistence);
}
}  // namespace

void TargetCore::set_features(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<protocol::FeaturesCommand>(req.sqe);
  Controller& ctrl = *q.ctrl;
  if (cmd.save()) {
    finish(req, st::feature_id_not_saveable);
    return;
  }
  const auto fid = cmd.fid();
  if (is_reservation_feature(ctrl, fid)) {
    set_reservation_feature(q, req);
    return;
  }
  const uint32_t value = cmd.value();
  uint32_t dw0 = 0;
  Status status = st::success;
  {
    std::lock_guard lock(mu_);
    if (ctrl.discovery && fid != protocol::FeatureId::keep_alive_timer &&
        fid != protocol::FeatureId::async_event_configuration) {
      status = st::invalid_field;
    } else {
      switch (fid) {
        case protocol::FeatureId::number_of_queues: {
          if (cmd.nsqr() == 0xFFFF || cmd.ncqr() == 0xFFFF) {
            status = st::invalid_field;
          } else if (ctrl.live_io_queue_count() > 0) {
            status = st::command_sequence_error;  // only before I/O queues exist
          } else {
            const uint32_t max = limits_.max_io_queues;
            const uint32_t nsq = std::min<uint32_t>(uint32_t{cmd.nsqr()} + 1, max);
            const uint32_t ncq = std::min<uint32_t>(uint32_t{cmd.ncqr()} + 1, max);
            ctrl.io_queues = static_cast<uint16_t>(std::min(nsq, ncq));
            dw0 = protocol::number_of_queues_value(static_cast<uint16_t>(nsq - 1), static_cast<uint16_t>(ncq - 1));
          }
          break;
        }
        case protocol::FeatureId::async_event_configuration:
          if ((value & ~supported_aec(ctrl)) != 0) {
            status = st::invalid_field;
          } else {
            ctrl.aec = value;
          }
          break;
        case protocol::FeatureId::keep_alive_timer: {
          const uint32_t kato = std::min(value, limits_.keep_alive.max_timeout_ms);
          ctrl.kato_ms = kato;
          ctrl.touch();
          start_keep_alive_locked(q.ctrl);  // no-op when already armed or kato is 0
          break;
        }
        case protocol::FeatureId::volatile_write_cache:
          ctrl.write_cache.store((value & 1u) != 0, std::memory_order_relaxed);
          break;
        case protocol::FeatureId::host_identifier:
          status = st::command_sequence_error;  // fixed by Connect (nvmet likewise)
          break;
        default:
          status = st::invalid_field;
          break;
      }
    }
  }
  finish(req, status, dw0);
}

void TargetCore::get_features(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<protocol::FeaturesCommand>(req.sqe);
  Controller& ctrl = *q.ctrl;
  const auto fid = cmd.fid();
  const auto sel = cmd.sel();
  if (static_cast<uint8_t>(sel) > 3) {
    finish(req, st::invalid_field);
    return;
  }
  const bool current = sel == protocol::FeatureSelect::current;
  if (is_reservation_feature(ctrl, fid)) {
    get_reservation_feature(q, req);
    return;
  }
  if (ctrl.discovery && fid != protocol::FeatureId::keep_alive_timer &&
      fid != protocol::FeatureId::async_event_configuration) {
    finish(req, st::invalid_field);
    return;
  }
  constexpr uint32_t kChangeable = 1u << 2;  // supported capabilities: changeable
  uint32_t dw0 = 0;
  {
    std::lock_guard lock(mu_);
    const bool caps = sel == protocol::FeatureSelect::supported_capabilities;
    switch (fid) {
      case protocol::FeatureId::number_of_queues: {
        const uint32_t n = (current ? ctrl.io_queues : limits_.max_io_queues) - 1;
        dw0 = caps ? kChangeable : protocol::number_of_queues_value(static_cast<uint16_t>(n), static_cast<uint16_t>(n));
        break;
      }
      case protocol::FeatureId::async_event_configuration:
        dw0 = caps ? kChangeable : current ? ctrl.aec : 0;
        break;
      case protocol::FeatureId::keep_alive_timer:
        dw0 = caps ? kChangeable : current ? ctrl.kato_ms : 0;
        break;
      case protocol::FeatureId::volatile_write_cache:
        dw0 = caps ? kChangeable : (!current || ctrl.write_cache.load(std::memory_order_relaxed)) ? 1u : 0u;
        break;
      case protocol::FeatureId::arbitration:
      case protocol::FeatureId::power_management:
      case protocol::FeatureId::error_recovery:
      case protocol::FeatureId::interrupt_coalescing:
        dw0 = 0;
        break;
      case protocol::FeatureId::host_identifier:
        break;
      default:
        finish(req, st::invalid_field);
        return;
    }
  }
  if (fid == protocol::FeatureId::host_identifier && sel != protocol::FeatureSelect::supported_capabilities) {
    if ((cmd.cdw11.get() & 1u) == 0) {  // EXHID: we only have the 128-bit identifier
      finish(req, st::invalid_field);
      return;
    }
    if (Status s = check_data(req, DataDirection::controller_to_host, 16); !s.ok()) {
      finish(req, s);
      return;
    }
    finish_with_data(req, ctrl.hostid);
    return;
  }
  finish(req, st::success, dw0);
}

// ---------------------------------------------------------------------------------------------------------
// Asynchronous Event Request
// ---------------------------------------------------------------------------------------------------------

void TargetCore::async_event_request(CoreQueue& q, TargetRequest& req) noexcept {
  Controller& ctrl = *q.ctrl;
  bool held = false;
  {
    std::lock_guard lock(mu_);
    if (ctrl.aer_requests.size() < kAsyncEventSlots) {
      ctrl.aer_requests.push_back(&req);  // capacity reserved at Connect
      held = true;
    }
  }
  if (!held) {
    finish(req, st::async_event_request_limit_exceeded);
    return;
  }
  deliver_events(ctrl);
}

}  // namespace rdmablk::target

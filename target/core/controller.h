// A controller of the dynamic controller model: created by an admin-queue Connect, joined by I/O-queue
// Connects naming its CNTLID, destroyed when its admin queue goes away or its keep-alive timer expires.
//
// Threading: fields marked (mu) are guarded by the core's control-path mutex; the atomics are read by the
// I/O path without a lock; the error log has its own mutex (errors only).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "protocol/ana.h"
#include "protocol/completion.h"
#include "protocol/log_pages.h"
#include "protocol/properties.h"
#include "target/core/stats.h"
#include "target/core/subsystem.h"
#include "transport/address.h"
#include "transport/target_queue.h"

namespace rdmablk::target {

class CoreReactor;
struct CoreQueue;

inline constexpr uint16_t kMinCntlid = 1;
inline constexpr uint16_t kMaxCntlid = 0xFFEF;
inline constexpr uint32_t kAsyncEventSlots = 4;  // AERL = 3 (0-based), like nvmet
inline constexpr uint32_t kErrorLogEntries = 64;  // ELPE = 63
inline constexpr uint32_t kMaxChangedNamespaces = 1024;

// Bits of Controller::aen_masked: an event type already reported and not yet acknowledged by reading its
// log page (without RAE); further changes of that type are folded into the log until then (like nvmet).
inline constexpr uint32_t kAenMaskNamespace = 1u << 0;
inline constexpr uint32_t kAenMaskDiscovery = 1u << 1;
inline constexpr uint32_t kAenMaskAna = 1u << 2;
inline constexpr uint32_t kAenMaskReservation = 1u << 3;

// Reservation notices a controller keeps until the host reads them (LID 80h, one per read); older ones are
// dropped beyond this, which the host sees as a gap in their Log Page Counts (Base 2.0 5.16.1.25).
inline constexpr std::size_t kReservationLogEntries = 64;

// ANA transition time (Identify ANATT, seconds): how long a group stays in the change state at most (nvmet's).
inline constexpr uint8_t kAnaTransitionTime = 10;

// The ANA state of every group on one listener (nvmet's per-port ana_state[]): written by the control path
// (config, reload, control socket), read by the I/O queues that came in on that listener without a lock.
struct AnaPort {
  std::array<std::atomic<uint8_t>, kAnaGroupMax + 1> state;  // index: group ID; [0] unused

  AnaPort() noexcept {
    for (auto& s : state) s.store(static_cast<uint8_t>(protocol::AnaState::optimized), std::memory_order_relaxed);
  }
  protocol::AnaState get(uint32_t group) const noexcept {
    if (group == 0 || group > kAnaGroupMax) return protocol::AnaState::inaccessible;  // no such group here
    return static_cast<protocol::AnaState>(state[group].load(std::memory_order_relaxed));
  }
  // Returns true when the state changed.
  bool set(uint32_t group, protocol::AnaState s) noexcept {
    if (group == 0 || group > kAnaGroupMax) return false;
    return state[group].exchange(static_cast<uint8_t>(s), std::memory_order_relaxed) != static_cast<uint8_t>(s);
  }
};

struct Controller {
  uint16_t cntlid = 0;
  bool discovery = false;
  std::shared_ptr<Subsystem> subsys;  // null for the discovery controller
  std::string hostnqn;
  std::array<uint8_t, 16> hostid{};
  transport::TransportType trtype = transport::TransportType::tcp;
  transport::TransportAddress local_address;  // where the admin queue came in (discovery log traddr)
  // The ANA states of the admin queue's listener: what its ANA log page reports.
  std::shared_ptr<const AnaPort> ana_port;
  CoreReactor* admin_reactor = nullptr;

  // (mu) control state
  protocol::Cc cc;
  protocol::Csts csts;
  uint32_t kato_ms = 0;
  bool traffic_based_keep_alive = true;
  bool keep_alive_armed = false;  // a keep-alive check is scheduled  // CTRATT.TBKAS: any command counts as keep-alive
  // That check's timer on admin_reactor, cancelled at teardown: its weak_ptr would otherwise keep this whole
  // allocation (make_shared: the error log alone is 4 KiB) until KATO expires, long after the host left.
  uint64_t keep_alive_timer = 0;
  uint32_t aec = 0;             // Asynchronous Event Configuration
  uint16_t io_queues = 0;       // allocated by Set Features Number of Queues (1-based)
  bool dead = false;
  std::weak_ptr<CoreQueue> admin_queue;
  std::vector<std::weak_ptr<CoreQueue>> io_queue_table;  // index qid; [0] unused
  std::vector<transport::TargetRequest*> aer_requests;  // outstanding AERs (held on the admin queue)
  // Events for the AERs: DW0 values, each numbered when queued. An event is delivered only once released
  // (released_seq >= its number): a reload releases its events after every reactor applied its new tables.
  struct PendingEvent {
    uint32_t dw0 = 0;
    uint64_t seq = 0;
  };
  std::deque<PendingEvent> pending_events;
  uint64_t event_seq = 0;
  uint64_t released_seq = 0;
  uint32_t aen_masked = 0;
  std::vector<uint32_t> changed_namespaces;             // for LID 0x04
  bool changed_overflow = false;
  // Reservation notices for LID 80h, oldest first, each with its Log Page Count; the count of the last one.
  struct ReservationNotice {
    uint64_t count = 0;
    uint8_t type = 0;  // protocol::ReservationNotice
    uint32_t nsid = 0;
  };
  std::deque<ReservationNotice> reservation_log;
  uint64_t reservation_log_count = 0;
  // Reservation Notification Mask (FID 82h, protocol::resv_mask bits): by NSID, else the default (what
  // NSID FFFFFFFFh set last).
  std::map<uint32_t, uint32_t> reservation_masks;
  uint32_t reservation_mask_default = 0;
  // What its I/O queues that are gone completed (their live statistics are in CoreQueue::io_stats).
  stats::IoStatsSnapshot closed_io;
  // The host's DH-HMAC-CHAP settings when it must authenticate (set at the admin Connect, then immutable):
  // every queue of this controller authenticates with them. Null: no authentication required.
  std::shared_ptr<const HostAuth> auth;
  std::string peer;                 // the admin queue's peer address ("10.0.0.2:53211")
  int64_t connected_unix_ms = 0;    // when the admin Connect succeeded (wall clock)

  // Lock-free state read by the data path.
  std::atomic<bool> ready{false};          // CC.EN = 1 and CSTS.RDY = 1
  std::atomic<bool> ka_activity{false};    // a command arrived since the last keep-alive check
  std::atomic<bool> write_cache{true};     // Volatile Write Cache feature; off -> writes go FUA

  // Error information log (LID 0x01): a ring, newest last.
  std::mutex error_mu;
  std::array<protocol::ErrorLogEntry, kErrorLogEntries> errors{};  // slot = (error_count - 1) % size
  uint64_t error_count = 0;

  uint16_t live_io_queue_count() const noexcept;  // (mu)
  void record_error(uint16_t sqid, uint16_t cid, protocol::Status st, uint32_t nsid, uint8_t opcode,
                    uint64_t lba = 0) noexcept;
  void touch_if_traffic_based() noexcept {
    if (traffic_based_keep_alive) touch();
  }
  void touch() noexcept {
    if (!ka_activity.load(std::memory_order_relaxed)) ka_activity.store(true, std::memory_order_relaxed);
  }
};

}  // namespace rdmablk::target

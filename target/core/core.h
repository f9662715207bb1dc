// The target core: everything NVMe between the transports and the backends (NVMe over Fabrics 1.1 and
// NVMe Base 2.0, behaving like the Linux kernel target where the specs leave room).
//
// It implements transport::TargetQueueHandler: the transports call it on their reactor threads. Fabrics
// (Connect, Property Get/Set), admin and discovery commands run on the thread of the admin queue and take
// the control-path mutex; I/O commands never lock: each I/O queue caches its controller, its reactor's
// view of the subsystem's namespaces and that reactor's backend queues.
//
// Daemon wiring:
//
//     std::vector<std::unique_ptr<ReactorAdapter>> adapters;   // one per reactor thread (+ buffer pool)
//     auto core = TargetCore::create(config, {adapter pointers...});
//     ... start the transports with *core as their TargetQueueHandler ...
//     on SIGHUP (control thread): auto summary = core->reload(new_config);  // error: nothing changed
//     on SIGTERM: core->shutdown("target shutting down"); drain the reactors; stop them; destroy the core.
//
// The core must outlive every reactor callback (timers and messages it posted hold a pointer to it):
// stop the reactors before destroying it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "protocol/fabrics.h"
#include "protocol/result.h"
#include "target/config/config.h"
#include "target/core/admission.h"
#include "target/core/ana_registry.h"
#include "target/core/controller_registry.h"
#include "target/core/core_reactor.h"
#include "target/core/reload_plan.h"
#include "target/core/stats.h"
#include "target/core/status.h"
#include "target/core/subsystem.h"
#include "transport/target_queue.h"

namespace rdmablk::security::dhchap {
class ControllerAuthSession;
}

namespace rdmablk::target {

struct AnaPort;
struct Controller;
struct CoreQueue;

struct NsChannel;
struct NsSlot;
class ReactorState;

// An io listener of another gateway group member (target/daemon/daemon_group.h): this target's discovery
// controller lists it for every subsystem, so that a host that knows one member finds them all.
struct PeerListener {
  transport::TransportType transport = transport::TransportType::tcp;
  std::string address;
  uint16_t port = 0;
  transport::tcp::TlsPolicy tls = transport::tcp::TlsPolicy::none;
  friend bool operator==(const PeerListener&, const PeerListener&) = default;
};

struct CoreOptions {
  std::string firmware_revision = "0.1.0";  // Identify FR and the firmware slot log, <= 8 characters
  AuthFailureLimits auth_failures;
  // A backend's store may have been resized (rbd: the image header changed). Runs on a library thread and
  // must only wake the control thread, which then calls refresh_namespace_sizes(). Empty: nobody listens.
  std::function<void()> on_namespace_resize;
};

class TargetCore final : public transport::TargetQueueHandler {
 public:
  // Opens every namespace's backend. `reactors` are the threads the transports call the core from; the
  // core finds a new queue's reactor with CoreReactor::on_thread().
  static Result<std::unique_ptr<TargetCore>> create(const TargetConfig& config, std::vector<CoreReactor*> reactors,
                                                    CoreOptions options = {});
  ~TargetCore() override;
  TargetCore(const TargetCore&) = delete;
  TargetCore& operator=(const TargetCore&) = delete;

  // A gateway group member's periodic check (DaemonGroup's thread): every namespace whose reservations the
  // group shares rereads them (NamespaceReservations::recheck_shared). Blocks on RADOS; takes mu_ only to
  // list the namespaces.
  void recheck_shared_reservations();

  // SIGHUP: apply a new configuration from the control thread (not a reactor thread: opening file backends
  // may block). Adds/removes subsystems, namespaces and allowed hosts; connected controllers get a
  // Namespace Attribute Changed event (changed namespace list = the NSIDs added, removed or replaced),
  // discovery controllers a Discovery Log Change event when what they list changed; controllers of a
  // removed subsystem or of a host no longer allowed are disconnected, nothing else is. Listeners are
  // taken over for the discovery log and for the listener roles (binding them is the daemon's job): a
  // controller with a queue on a listener that was removed, or of an NVM subsystem on one that became
  // discovery-only, is disconnected.
  // Queue limits and reactor count are not reloadable. On error nothing changed.
  // It is apply_changes(plan_changes(running_config(), config)), plus the log line.
  Result<ReloadSummary> reload(const TargetConfig& config);
  // The configuration in effect (what the core was created with, plus the change lists applied since), its
  // listeners with the ANA states they have now (set_ana_state moves them): what plan_changes compares with.
  TargetConfig running_config() const;
  // Carries out a change list planned against running_config(), from the control thread (the thread that
  // reloads: one list at a time). Opens the backends it needs first, outside the lock; on error nothing changed.
  Result<ReloadSummary> apply_changes(const ChangeList& changes);

  // Reads every namespace's size again (Backend::refresh_size; control thread, it may wait on the store)
  // and publishes the namespaces whose size changed: Identify Namespace reports the new size, I/O is checked
  // against it, and their controllers get a Namespace Attribute Changed event listing them (as nvmet does
  // when a backing device grows). Returns how many changed.
  unsigned refresh_namespace_sizes();

  // Closes every queue (each on its own reactor, by message). The transports then report them closed.
  void shutdown(const char* reason);

  std::size_t controller_count() const;

  // For the control socket and /metrics (control thread): the subsystems, namespaces and controllers, and the
  // statistics of every namespace and I/O controller. Fills those fields of `out`, nothing else.
  void fill_status(TargetStatus& out) const;
  // Disconnects every controller of a host / one controller (the host may connect again if still allowed).
  // Returns how many were disconnected.
  unsigned disconnect_host(std::string_view hostnqn);
  unsigned disconnect_controller(uint16_t cntlid);
  uint64_t discovery_generation() const;
  // Sets the ANA state of `group` on the listener whose address is `listener` ("ADDR:PORT" as in the config,
  // "[v6]:PORT" for IPv6), until the next reload re-applies the file. Bumps the ANA change count and sends
  // ANA Change events to the controllers on that listener when the state changed. Error: no such io listener,
  // group out of 1..kAnaGroupMax. Returns whether the state changed.
  Result<bool> set_ana_state(std::string_view listener, uint32_t group, protocol::AnaState state);
  uint64_t ana_change_count() const;
  // The other group members' listeners (discovery.cpp); a change is a Discovery Log Change event to the
  // discovery controllers. Returns whether they changed.
  bool set_peer_listeners(std::vector<PeerListener> peers);

  // transport::TargetQueueHandler
  void on_queue_created(transport::TargetQueue& queue) noexcept override;
  void on_command(transport::TargetRequest& req) noexcept override;
  void on_data_ready(transport::TargetRequest& req, protocol::Status status) noexcept override;
  void on_queue_closed(transport::TargetQueue& queue) noexcept override;

  // --- internal (used by the command handlers in the other target/*.cpp files) ---------------------------
  const QueueLimits& limits() const noexcept { return limits_; }
  void backend_completed(transport::TargetRequest& req, protocol::Status status) noexcept;

 private:
  TargetCore(const TargetConfig& config, std::vector<CoreReactor*> reactors, CoreOptions options);

  // core.cpp
  ReactorState& reactor_state_for_current_thread() noexcept;
  void finish(transport::TargetRequest& req, protocol::Status status, uint32_t dw0 = 0, bool with_data = false,
              uint32_t dw1 = 0) noexcept;
  void finish_with_data(transport::TargetRequest& req, std::span<const uint8_t> bytes) noexcept;
  // Statistics merged from the live blocks: a controller's I/O queues (mu_ held), a namespace's per-reactor
  // blocks (any thread).
  stats::IoStatsSnapshot controller_io_locked(const Controller& ctrl) const;
  stats::IoStatsSnapshot namespace_io(const std::string& nqn, uint32_t nsid) const;
  // Counts a completing command in its queue's and its namespace's statistics.
  void account(CoreQueue& q, const transport::TargetRequest& req, protocol::Status status) noexcept;
  void start_keep_alive_locked(const std::shared_ptr<Controller>& ctrl);
  void start_connect_timer(CoreQueue& q) noexcept;
  void cancel_connect_timer(CoreQueue& q) noexcept;
  void keep_alive_check(const std::weak_ptr<Controller>& weak);
  // Marks the controller dead, takes it out of the table and closes its queues (by message). Called with
  // mu_ held; returns the closures to run after unlocking.
  void teardown_locked(const std::shared_ptr<Controller>& ctrl, const char* reason,
                       std::vector<std::function<void()>>& after);
  // Releases queued events (controller_registry.h: EventRelease) to the controller's admin queue thread.
  void post_deliver_events(const EventRelease& release);
  void deliver_events(Controller& ctrl) noexcept;  // on the admin queue's thread
  // New namespace tables to every reactor, and once every reactor has applied them the events of `notify`
  // to their admin queues (a host told that a namespace changed must not still reach the old one through
  // an I/O queue on another reactor). Without tables the events go at once.
  using TableUpdates = std::vector<std::pair<std::shared_ptr<Subsystem>, std::shared_ptr<const NamespaceTable>>>;
  void publish_tables(const TableUpdates& tables, EventReleases notify);
  // ANA (ana.cpp): the ANA Change event to the I/O controllers whose admin queue is on one of `ports` or
  // whose subsystem is one of `subsystems` (mu_ held).
  void queue_ana_events_locked(const std::vector<const AnaPort*>& ports, const std::vector<const Subsystem*>& subsystems,
                               EventReleases& notify);

  // core/reload_apply.cpp: the applier of apply_changes, by kind of change (mu_ held but open_backends).
  struct OpenedBackends;
  struct Applying;
  Result<OpenedBackends> open_backends(const ChangeList& changes, uint64_t generation) const;
  void apply_locked(const ChangeList& changes, OpenedBackends& opened, Applying& st);
  void edit_subsystem_locked(const std::string& nqn, const std::vector<const Change*>& edits, OpenedBackends& opened,
                             Applying& st);
  // What an edit did to a subsystem's namespaces, for the Changed Namespace List of each host.
  struct NamespaceChanges {
    const NamespaceTable& before;
    const NamespaceTable& after;
    const std::vector<uint32_t>& changed;  // added, removed, replaced (sorted)
    const std::vector<uint32_t>& masked;   // seen by other hosts now (sorted)
    // The NSIDs whose change `hostnqn` can tell: those it sees before or after, and the masked ones it
    // now sees or no longer sees.
    std::vector<uint32_t> seen_by(std::string_view hostnqn) const;
  };
  // Disconnects the controllers of hosts no longer allowed; tells the others what changed for them.
  void notify_subsystem_locked(Subsystem& sub, const NamespaceChanges& changes, Applying& st);
  void remove_subsystem_locked(const std::string& nqn, Applying& st);
  void take_listeners_locked(const change::ListenersChanged& c, Applying& st);
  void apply_ana_state_locked(const change::AnaStateChanged& c, Applying& st);
  void drop_controllers_off_their_listener_locked(Applying& st);
  void finish_apply_locked(Applying& st);

  // core/dispatch.cpp: a command to its handler in the command table (commands/command_table.h). The
  // handlers below that take (CoreQueue&, TargetRequest&) are the table's.
  void handle_fabrics(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void handle_admin(CoreQueue& q, transport::TargetRequest& req) noexcept;

  // commands/fabrics.cpp
  // False when `local` (a queue's local address) is on a discovery-role listener, which serves the discovery
  // controller only.
  bool serves_subsystems_locked(const transport::TransportAddress& local) const noexcept;
  void connect(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void connect_with_data(CoreQueue& q, transport::TargetRequest& req) noexcept;
  // The subsystem a Connect names when this queue's listener serves it and `gate_` admits the host (`admin`:
  // an admin queue's Connect; `auth` gets the host's DH-HMAC-CHAP settings). Else completes `req` with the
  // Connect's answer and returns null. mu_ held.
  std::shared_ptr<Subsystem> connect_subsystem_locked(CoreQueue& q, transport::TargetRequest& req,
                                                      const protocol::ConnectDataView& data, bool admin,
                                                      std::shared_ptr<const HostAuth>& auth) noexcept;
  // A controller for an admin queue's Connect, not yet registered.
  std::shared_ptr<Controller> new_controller(CoreQueue& q, const protocol::ConnectCommand& cmd,
                                             const protocol::ConnectDataView& data, uint16_t cntlid,
                                             std::shared_ptr<Subsystem> sub, std::shared_ptr<const HostAuth> auth) const;
  void admin_connect(CoreQueue& q, transport::TargetRequest& req, const protocol::ConnectCommand& cmd,
                     const protocol::ConnectDataView& data) noexcept;
  void io_connect(CoreQueue& q, transport::TargetRequest& req, const protocol::ConnectCommand& cmd,
                  const protocol::ConnectDataView& data) noexcept;
  void property_get(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void property_set(CoreQueue& q, transport::TargetRequest& req) noexcept;

  // commands/auth.cpp (DH-HMAC-CHAP)
  void auth_send(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void auth_send_with_data(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void auth_receive(CoreQueue& q, transport::TargetRequest& req) noexcept;
  security::dhchap::ControllerAuthSession* auth_session(CoreQueue& q) noexcept;
  // One DH-HMAC-CHAP step (`step(session)`) on the queue's session, then auth_step_done; false once `req`
  // is finished with an internal error (no session, or the step could not allocate).
  template <typename Step>
  bool auth_step(CoreQueue& q, transport::TargetRequest& req, Step&& step) noexcept;
  // After a session step: marks the queue (un)authenticated, logs and counts a new failure.
  void auth_step_done(CoreQueue& q, uint32_t transactions_before, bool failed_before) noexcept;

  // commands/admin.cpp
  void keep_alive(CoreQueue& q, transport::TargetRequest& req) noexcept;
  // The log pages of the command table's log page entries (LogPageBuilder); mu_ held.
  std::vector<uint8_t> error_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd, protocol::Status& status);
  std::vector<uint8_t> smart_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd, protocol::Status& status);
  std::vector<uint8_t> firmware_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                           protocol::Status& status);
  std::vector<uint8_t> changed_namespaces_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                                     protocol::Status& status);
  std::vector<uint8_t> ana_log_page_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                           protocol::Status& status);
  std::vector<uint8_t> effects_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                          protocol::Status& status);
  std::vector<uint8_t> discovery_log_page_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                                 protocol::Status& status);
  void abort_command(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void identify(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void get_log_page(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void set_features(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void get_features(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void async_event_request(CoreQueue& q, transport::TargetRequest& req) noexcept;
  std::vector<uint8_t> identify_controller_data(const Controller& ctrl) const;  // mu_ held

  // commands/discovery.cpp
  std::vector<uint8_t> discovery_log_locked(const Controller& ctrl) const;
  // The discovery log changed: a new generation and a Discovery Log Change event to every discovery controller.
  void discovery_changed_locked(EventReleases& notify);

  // commands/io.cpp
  void handle_io(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void start_io(CoreQueue& q, transport::TargetRequest& req) noexcept;  // a command that is not fused
  void io_data_ready(CoreQueue& q, transport::TargetRequest& req, protocol::Status status) noexcept;
  // Runs a prepared command's backend requests; a write-class one first enters its namespace's RangeLocks,
  // and waits there while its blocks are locked (range_granted goes on).
  // A Read or Write of a namespace with QoS limits first waits for its budget (qos_gate.cpp), then goes on
  // in submit_admitted.
  void submit_io(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void submit_admitted(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void range_granted(transport::TargetRequest& req) noexcept;  // on the request's reactor
  void io_request_done(CoreQueue& q, transport::TargetRequest& req) noexcept;

  // commands/compare_copy.cpp
  void compare_data_ready(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void copy_data_ready(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void io_phase_done(CoreQueue& q, transport::TargetRequest& req) noexcept;

  // commands/fused.cpp: fused Compare and Write
  void handle_fused(CoreQueue& q, transport::TargetRequest& req) noexcept;
  void start_fused_pair(CoreQueue& q, transport::TargetRequest& first, transport::TargetRequest& second) noexcept;
  void fused_data_ready(CoreQueue& q, transport::TargetRequest& req, protocol::Status status) noexcept;
  void start_compare_and_write(CoreQueue& q, transport::TargetRequest& cmp, transport::TargetRequest& wr) noexcept;
  void fused_lock_granted(CoreQueue& q, transport::TargetRequest& cmp) noexcept;
  void fused_phase_done(CoreQueue& q, transport::TargetRequest& cmp) noexcept;
  // Completes both halves: each with its own failure, else Failed Fused Command if the other failed.
  void finish_fused(CoreQueue& q, transport::TargetRequest& cmp, transport::TargetRequest& wr, protocol::Status sc,
                    protocol::Status sw) noexcept;

  // commands/reservations.cpp: the reservation commands, their log page and features
  void reservation_data_ready(CoreQueue& q, transport::TargetRequest& req) noexcept;  // Register, Acquire, Release
  void reservation_report(CoreQueue& q, transport::TargetRequest& req) noexcept;
  // Queues reservation notices on the controllers of subsystem `subnqn` of the hosts they name.
  void send_reservation_notices(std::string_view subnqn, uint32_t nsid, std::span<const reservations::Notice> notices);
  // Another gateway group member's reservation command (NamespaceHooks::on_group_reservation_events): its
  // notices for this target's controllers; the writes here of the hosts it preempted end before it returns.
  void take_group_reservation_events(std::string_view subnqn, uint32_t nsid, RangeLocks& locks,
                                     std::span<const reservations::GroupEvent> events);
  void wait_out_writes(CoreQueue& q, transport::TargetRequest& req, NsSlot& slot) noexcept;  // Preempt and Abort
  void reservation_lock_granted(CoreQueue& q, transport::TargetRequest& req) noexcept;
  std::vector<uint8_t> reservation_log_locked(Controller& ctrl, const protocol::GetLogPageCommand& cmd,
                                              protocol::Status& status);
  // The namespace `nsid` of the controller's subsystem as it is now, or null: none, or masked from its host
  // (takes mu_).
  std::shared_ptr<Namespace> active_namespace(const Controller& ctrl, uint32_t nsid) const;
  void set_reservation_feature(CoreQueue& q, transport::TargetRequest& req) noexcept;  // FID 82h, 83h
  void get_reservation_feature(CoreQueue& q, transport::TargetRequest& req) noexcept;

  void release_queue_if_drained(CoreQueue& q) noexcept;

  QueueLimits limits_;
  CoreOptions options_;
  std::vector<CoreReactor*> reactors_;
  std::vector<std::unique_ptr<ReactorState>> reactor_states_;
  // Lock order: mu_ -> gate_, mu_ -> ana_. Each of those two has its own small lock and is a leaf (takes no
  // other lock, calls nothing of the core). The ControllerRegistry has no lock: mu_ guards it, like
  // subsystems_. The I/O path takes none of them (AnaPort states are atomics).
  AdmissionGate gate_{options_.auth_failures};  // host admission and DH-HMAC-CHAP failure limits
  AnaRegistry ana_;                              // ANA ports per listener (a copy of listeners_), change count
  // What a namespace's group reservation listener reaches the core by; cut (under its lock) when the core
  // goes, so that a listener that outlives the core does nothing.
  struct GroupEventLink {
    std::mutex mu;
    TargetCore* core = nullptr;
  };
  const std::shared_ptr<GroupEventLink> group_event_link_ = std::make_shared<GroupEventLink>();
  const NamespaceHooks namespace_hooks_;  // for every namespace it opens (state_dir is restart-only)

  mutable std::mutex mu_;  // control path: everything below
  std::vector<ListenerConfig> listeners_;
  std::vector<SubsystemConfig> subsystem_configs_;  // as applied: running_config()'s subsystems
  std::map<std::string, std::shared_ptr<Subsystem>, std::less<>> subsystems_;
  ControllerRegistry controllers_;
  std::vector<std::weak_ptr<CoreQueue>> queues_;  // every queue (shutdown, destruction)
  uint64_t discovery_genctr_ = 0;
  std::vector<PeerListener> peer_listeners_;  // under mu_
  uint64_t table_generation_ = 1;
  std::string discovery_serial_;

  friend class ReactorState;
  friend struct CommandTableAccess;  // the command table names the handlers
};

}  // namespace rdmablk::target

// The ANA registry: the ANA states of every listener (one AnaPort per listener of the running config, kept
// across reloads for a listener at the same endpoint, and a fallback for a queue on no listener, all
// optimized), the target-wide change count, and the ANA log page built from them (NVMe Base 2.0, 8.20, as
// nvmet does it: see ana.cpp).
//
// Locking: its own mutex guards the port list, its copy of the listeners and the change count; it calls
// nothing outside itself with it held. The ports' states are atomics the I/O queues read without a lock.
// The NamespaceTable given to log_page() is the caller's to guard (the core's control lock).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "protocol/ana.h"
#include "target/config/config.h"
#include "target/core/controller.h"
#include "target/core/reload_plan.h"
#include "target/core/subsystem.h"
#include "transport/address.h"

namespace rdmablk::target {

class AnaRegistry {
 public:
  // One port per listener, with its configured states.
  explicit AnaRegistry(const std::vector<ListenerConfig>& listeners);

  // The port of the listener a queue with local address `local` came in on (find_listener); the fallback
  // port on none. Never null.
  std::shared_ptr<AnaPort> port_for(const transport::TransportAddress& local) const;

  // A reload's new listener list: a listener with the key of a current one keeps its port (and states), a
  // new one gets a port with its configured states.
  void take_listeners(const std::vector<ListenerConfig>& listeners);

  // The control socket's set_ana_state: `group` to `state` on every io listener at `address`:`port`. The
  // ports whose state changed (the change count went up when there are any); nullopt: no such io listener.
  std::optional<std::vector<const AnaPort*>> set_state(std::string_view address, uint16_t port, uint32_t group,
                                                       protocol::AnaState state);
  // A reload's AnaStateChanged: the port of the listener `key` when its state changed, else null. The
  // caller counts the change (bump_change_count), once per reload.
  const AnaPort* set_listener_state(const ListenerKey& key, uint32_t group, protocol::AnaState state);
  void bump_change_count();
  uint64_t change_count() const;

  // Writes the live states of each port into the listener at the same index of `listeners` (the list this
  // registry was given last): set_state moves them away from the config until the next reload.
  void overlay_live_states(std::vector<ListenerConfig>& listeners) const;

  // The ANA log page of a controller whose admin queue is on `port` (null: the fallback) and whose
  // subsystem has `table`: group 1 (always there, as nvmet's default group), the groups of the table's
  // namespaces and the groups any listener names; ascending, each with its namespaces unless `groups_only`.
  // `hostnqn`: the namespaces masked from that host are left out.
  std::vector<uint8_t> log_page(const AnaPort* port, const NamespaceTable& table, std::string_view hostnqn,
                                bool groups_only) const;

  // Sets every group of `port` to the listener's configured state; returns how many changed.
  static unsigned apply_config(AnaPort& port, const ListenerConfig& listener) noexcept;

 private:
  mutable std::mutex mu_;  // everything below
  std::vector<ListenerConfig> listeners_;        // the core's listeners, in its order
  std::vector<std::shared_ptr<AnaPort>> ports_;  // one per entry of listeners_
  std::shared_ptr<AnaPort> default_port_ = std::make_shared<AnaPort>();
  uint64_t chgcnt_ = 0;
};

}  // namespace rdmablk::target

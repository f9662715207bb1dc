// The QoS limits of one namespace as the reactors enforce them (docs/configuration.md#qos): a shared budget
// per namespace and per limited host on it (NamespaceQos, one per namespace, shared by every reactor), and
// each reactor's allowances from them (ReactorQos). admit() is all a command costs while it is within its
// limits: a few subtractions from the reactor's allowances, and one atomic grab from the shared budget per
// millisecond of the rate. Commands it refuses wait in the core (target/core/qos_gate.cpp).
//
// The core library's; it knows nothing of queues or requests.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "target/config/config.h"
#include "target/qos/token_bucket.h"

namespace rdmablk::target::qos {

// The four limits, in the order of QosLimits.
enum class Kind : uint8_t { iops = 0, bytes = 1, read_bytes = 2, write_bytes = 3 };
inline constexpr unsigned kKinds = 4;
inline constexpr uint64_t kBytesPerMb = 1'000'000;

// What a command costs: one command, and its data.
struct Cost {
  bool write = false;
  uint64_t bytes = 0;
};

// One set of limits: a shared bucket per kind (rate 0 = that kind is unlimited).
struct Budget {
  std::array<SharedBucket, kKinds> buckets;
  void set(const QosLimits& limits) noexcept;
};

// A reactor's allowances from one Budget.
struct Allowances {
  std::array<Allowance, kKinds> kinds;
};

// A host's throttling on a namespace, across reactors (written on the throttled path only).
struct HostThrottle {
  std::atomic<uint64_t> commands{0};
  std::atomic<uint64_t> ns{0};
};

class NamespaceQos {
 public:
  explicit NamespaceQos(const NamespaceQosConfig& config);

  // False while nothing is limited: the I/O path's one check.
  bool active() const noexcept { return active_.load(std::memory_order_relaxed); }
  // The same hosts in the same order: set() may change the limits in place (reactors index hosts by position).
  bool same_hosts(const NamespaceQosConfig& config) const noexcept;
  // New limits for the same hosts (same_hosts(config)); thread-safe, live.
  void set(const NamespaceQosConfig& config) noexcept;

  // The position of a host with its own limits, or -1.
  int host_index(std::string_view hostnqn) const noexcept;
  std::size_t host_count() const noexcept { return hosts_.size(); }
  bool has_hosts() const noexcept { return !hosts_.empty(); }
  const std::string& host(std::size_t i) const noexcept { return hosts_[i].nqn; }
  Budget& budget() noexcept { return budget_; }
  Budget& host_budget(std::size_t i) noexcept { return hosts_[i].budget; }
  HostThrottle& host_throttle(std::size_t i) noexcept { return hosts_[i].throttle; }
  const HostThrottle& host_throttle(std::size_t i) const noexcept { return hosts_[i].throttle; }

 private:
  struct Host {
    std::string nqn;
    Budget budget;
    HostThrottle throttle;
  };
  Budget budget_;
  std::vector<Host> hosts_;  // fixed at construction (their count and order)
  std::atomic<bool> active_{false};
};

// One reactor's state for one namespace's limits.
struct ReactorQos {
  Allowances ns;
  std::vector<Allowances> hosts;  // by NamespaceQos host index
};

// Whether a command of `host` (NamespaceQos::host_index) may go now: spends its cost from the host's
// allowances and the namespace's, or from neither (what a refused call took from the shared budgets stays
// in the reactor's allowances for the next try).
bool admit(NamespaceQos& qos, ReactorQos& local, int host, Cost cost, uint64_t now_ns) noexcept;

}  // namespace rdmablk::target::qos

// The gateway group tests' fixture (tests/ceph/group_*_test.cpp): three rdmablk-target processes in one
// group on the throw-away cluster, each exporting the same three RBD images as namespaces 1-3 in ANA
// groups 1-3 and the home of one group; the helpers read a member's `ctl group status` and the host's ANA log.
//
// The waits poll the member's state or the host's ANA log until the event, with bounds far above the
// documented ones (lease + lease/3): they bound a hang, the figures printed are what happened.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ceph/ceph_cluster.h"
#include "e2e_common.h"
#include "initiator/ublk/multipath.h"
#include "support/target_process.h"

namespace group_test {

using namespace e2e;
using nlohmann::json;
using rdmablk::protocol::AnaState;
using Clock = std::chrono::steady_clock;

constexpr unsigned kLeaseSeconds = 3;
constexpr uint32_t kBlock = 512;
// Members that serve the groups they do not own as non_optimized: a host reaches every namespace through
// every member.
inline const std::string kActiveActive = "  standby_state: non_optimized\n";

// Host `host` on member `m`: its controller and I/O queue (both null after a failure, reported).
struct Session {
  std::unique_ptr<rdmablk::initiator::Controller> ctrl;
  std::unique_ptr<rdmablk::initiator::IoQueue> q;
};
inline Session session(const TargetProcess& m, const char* host) {
  Session s;
  s.ctrl = connect_or_fail(controller_options(m.io_port(), kSubnqn, host), m);
  if (s.ctrl) s.q = io_queue_or_fail(*s.ctrl, 1);
  if (!s.q) s.ctrl.reset();
  return s;
}

inline int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Group {
  std::string name;
  std::vector<std::string> images;  // namespace i+1 in ANA group i+1
};

inline std::string member_config(const ceph_test::Cluster& c, const Group& g, const std::string& member, uint32_t home,
                                 uint16_t cntlid_min, const std::string& group_extra) {
  std::string namespaces;
  for (std::size_t i = 0; i < g.images.size(); ++i) {
    namespaces += "      - {nsid: " + std::to_string(i + 1) + ", backend: rbd, pool: rbd, image: " + g.images[i] +
                  ", ceph_conf: " + c.conf() + ", client: rdmablk, keyring: " + c.rdmablk_keyring() +
                  ", ana_group: " + std::to_string(i + 1) + "}\n";
  }
  const std::string subsystem = "    allow_any_host: true\n    cntlid_min: " + std::to_string(cntlid_min) +
                                "\n    cntlid_max: " + std::to_string(cntlid_min + 999) + "\n";
  const std::string group = "group:\n  name: " + g.name + "\n  pool: rbd\n  member: " + member +
                            "\n  ceph_conf: " + c.conf() + "\n  client: rdmablk\n  keyring: " + c.rdmablk_keyring() +
                            "\n  lease_seconds: " + std::to_string(kLeaseSeconds) + "\n  ana_groups: [" +
                            std::to_string(home) + "]\n" + group_extra;
  return config_with_namespaces(namespaces, subsystem, group);
}

inline json group_status(const TargetProcess& t) {
  auto r = ctl(t, {"group", "status"});
  if (r.exit_status != 0) return json();
  auto j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json() : j;
}

inline std::vector<uint32_t> owned(const TargetProcess& t) {
  const json s = group_status(t);
  return s.is_object() ? s["owned"].get<std::vector<uint32_t>>() : std::vector<uint32_t>{99};
}

// Polls `done` every 50 ms until it holds or `limit` passes.
// The bound only ends a hang: under the sanitizers, beside the VM lab, a failback took 14 s where it takes 1.4.
inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(180)) {
  for (auto until = Clock::now() + limit; Clock::now() < until;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// The state of namespace `nsid` in the host's ANA log read through `c`.
inline std::optional<AnaState> ana_of(rdmablk::initiator::Controller& c, uint32_t nsid) {
  auto page = c.read_ana_log();
  if (!page) return std::nullopt;
  auto log = rdmablk::initiator::ublk::parse_ana_log(*page);
  if (!log) return std::nullopt;
  return rdmablk::initiator::ublk::ana_state_of(*log, nsid, nsid);
}

class GroupE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    CEPH_CLUSTER_OR_SKIP(c);
    cluster = c;
    static int counter = 0;
    group.name = "e2e-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    for (int i = 0; i < 3; ++i) group.images.push_back(cluster->create_image("group", "16M"));
  }
  ::testing::AssertionResult start(TargetProcess& t, const std::string& member, uint32_t home,
                                   const std::string& group_extra = "") {
    return t.start(member_config(*cluster, group, member, home, static_cast<uint16_t>(home * 1000), group_extra));
  }
  // Starts members gw-a, gw-b, ... with homes 1, 2, ... and waits until they settled.
  ::testing::AssertionResult start_members(std::vector<TargetProcess*> members, const std::string& group_extra = "") {
    for (std::size_t i = 0; i < members.size(); ++i) {
      const std::string name = std::string("gw-") + static_cast<char>('a' + i);
      if (auto r = start(*members[i], name, static_cast<uint32_t>(i + 1), group_extra); !r) return r;
    }
    return settled(members);
  }
  // Every member serves its own group, and only it, and knows every member.
  ::testing::AssertionResult settled(std::vector<TargetProcess*> members) {
    bool ok = wait_until([&] {
      for (std::size_t i = 0; i < members.size(); ++i) {
        const json s = group_status(*members[i]);
        if (!s.is_object() || s["members"].size() != members.size()) return false;
        if (s["owned"].get<std::vector<uint32_t>>() != std::vector<uint32_t>{static_cast<uint32_t>(i + 1)})
          return false;
      }
      return true;
    });
    if (ok) return ::testing::AssertionSuccess();
    auto f = ::testing::AssertionFailure() << "the members did not settle:";
    for (auto* m : members) f << "\n" << group_status(*m).dump(2) << "\n--- log ---\n" << m->log();
    return f;
  }
  const ceph_test::Cluster* cluster = nullptr;
  Group group;
};

}  // namespace group_test

// Faults of a gateway group beyond a member's clean death (docs/gateway-groups.md), on the fixture of
// group_fixture.h. A member cut off from the cluster at the network level (its own cgroup v2, whose packets
// an nftables table drops but those of its listeners: hosts still reach it) stops serving its group by its
// own clock, a survivor takes it over only after that, and once the cut heals the member finds itself
// blocklisted. A member SIGKILLed while a host's reservation commands, or management verbs, are in flight
// through it leaves a state that is one of the consistent ones: the others agree on it, keep changing it,
// and the member finds it again when it restarts.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ceph/group_fixture.h"
#include "initiator/host/shared_volume.h"

namespace {

using namespace group_test;
namespace p = rdmablk::protocol;
namespace ini = rdmablk::initiator;

class GroupFaults : public GroupE2e {};

long long ms(Clock::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

bool has_event(const json& status, const std::string& what) {
  if (!status.is_object()) return false;
  for (const auto& e : status["events"]) {
    if (e["what"].get<std::string>().find(what) != std::string::npos) return true;
  }
  return false;
}

// A member that may be cut off or blocklisted cannot stop cleanly (its last RADOS steps fail): SIGKILL at
// the end of the test, before the cut is undone (declared after the TargetProcess, so destroyed first).
struct KilledAtExit {
  TargetProcess& t;
  ~KilledAtExit() { t.kill_now(); }
};

// ---- 1. A member partitioned from the cluster ------------------------------------------------------------

// A member's network cut off from the cluster. The member runs in a cgroup v2 of its own: a socket belongs
// to the cgroup of the process that creates it, so the launcher enters the cgroup before it execs the
// target. An nftables table then drops every packet of that cgroup's sockets but those to and from the
// member's listeners (their accepted sockets inherit the cgroup; hosts must still reach the member). The
// table and the cgroup go at the end, whatever happened (a process still in the cgroup is killed first).
class NetworkCut {
 public:
  // Creates the cgroup and proves that nft loads the rules for it; false with the reason when this machine
  // cannot (no cgroup2 mount, not root, no nft or no nf_tables socket expression).
  bool prepare(std::string* why);
  // For TargetProcess::set_launcher: a shell that moves itself into the cgroup, then execs the target.
  std::vector<std::string> launcher() const {
    return {"/bin/sh", "-c", "echo $$ > " + dir_ + "/cgroup.procs && exec \"$@\"", "sh"};
  }
  bool holds(pid_t pid) const {  // /proc/PID/cgroup names this cgroup
    return read_file("/proc/" + std::to_string(pid) + "/cgroup").find("0::/" + name_ + "\n") != std::string::npos;
  }
  ::testing::AssertionResult cut(const std::vector<uint16_t>& open_ports) {
    const std::string file = ruleset_file(open_ports);
    std::string out;
    const int rc = ceph_test::shell("nft -f " + file, &out);
    std::filesystem::remove(file);
    if (rc != 0) return ::testing::AssertionFailure() << "nft -f: " << out;
    loaded_ = true;
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult heal() {
    std::string out;
    if (ceph_test::shell("nft delete table inet " + table_, &out) != 0)
      return ::testing::AssertionFailure() << "nft delete table: " << out;
    loaded_ = false;
    return ::testing::AssertionSuccess();
  }
  // Packets the drop rules matched.
  uint64_t dropped() const {
    std::string out;
    ceph_test::shell("nft list table inet " + table_, &out);
    uint64_t n = 0;
    for (std::size_t at = out.find("packets "); at != std::string::npos; at = out.find("packets ", at + 8))
      n += std::strtoull(out.c_str() + at + 8, nullptr, 10);
    return n;
  }
  ~NetworkCut();

 private:
  std::string ruleset_file(const std::vector<uint16_t>& open_ports) const;

  std::string name_;  // the cgroup, relative to the cgroup2 root (one level down)
  std::string dir_;   // its directory
  std::string nft_path_;  // as nft names it: relative to /sys/fs/cgroup, where nft looks it up
  std::string table_ = "rdmablk_cut_" + std::to_string(::getpid());
  bool loaded_ = false;
};

bool NetworkCut::prepare(std::string* why) {
  std::string root;  // the cgroup2 mount: /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid)
  std::istringstream mounts(read_file("/proc/self/mounts"));
  for (std::string dev, at, type, rest; mounts >> dev >> at >> type && std::getline(mounts, rest);) {
    if (type == "cgroup2" && root.empty()) root = at;
  }
  if (root.empty()) return *why = "no cgroup2 file system is mounted (/proc/self/mounts)", false;
  if (root != "/sys/fs/cgroup" && root.rfind("/sys/fs/cgroup/", 0) != 0)
    return *why = "cgroup2 is mounted at " + root + ", outside /sys/fs/cgroup where nft looks socket cgroups up", false;
  static int counter = 0;
  name_ = "rdmablk-cut-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  if (::mkdir((root + "/" + name_).c_str(), 0755) != 0)
    return *why = "cannot create the cgroup " + root + "/" + name_ + ": " + std::strerror(errno), false;
  dir_ = root + "/" + name_;
  nft_path_ = dir_.substr(std::strlen("/sys/fs/cgroup/"));
  std::string out;
  if (ceph_test::shell("echo $$ > " + dir_ + "/cgroup.procs", &out) != 0)
    return *why = "cannot move a process into the cgroup " + dir_ + ": " + out, false;
  if (ceph_test::shell("command -v nft", &out) != 0)
    return *why = "no nft command (Debian package nftables; scripts/setup installs it)", false;
  if (auto loaded = cut({1}); !loaded)
    return *why = std::string("nft cannot load a socket cgroupv2 rule on this kernel: ") + loaded.message(), false;
  if (auto removed = heal(); !removed) return *why = removed.message(), false;
  return true;
}

std::string NetworkCut::ruleset_file(const std::vector<uint16_t>& open_ports) const {
  std::string ports;
  for (uint16_t port : open_ports) ports += (ports.empty() ? "" : ", ") + std::to_string(port);
  const std::string match = "socket cgroupv2 level 1 \"" + nft_path_ + "\"";
  const std::string text = "table inet " + table_ + " {\n  chain out {\n    type filter hook output priority 0;\n    " +
                           match + " tcp sport { " + ports + " } accept\n    " + match +
                           " counter drop\n  }\n  chain in {\n    type filter hook input priority 0;\n    " + match +
                           " tcp dport { " + ports + " } accept\n    " + match + " counter drop\n  }\n}\n";
  const std::string file = (std::filesystem::temp_directory_path() / (table_ + ".nft")).string();
  write_file(file, text);
  return file;
}

NetworkCut::~NetworkCut() {
  if (loaded_) {
    if (auto r = heal(); !r) ADD_FAILURE() << "the nft table " << table_ << " is left behind: " << r.message();
  }
  if (dir_.empty()) return;
  // Only processes this test's launcher put there: the cut member, if the test ended before it was killed.
  for (int tries = 0; tries < 200; ++tries) {
    std::istringstream procs(read_file(dir_ + "/cgroup.procs"));
    bool any = false;
    for (pid_t pid; procs >> pid; any = true) ::kill(pid, SIGKILL);
    if (!any && ::rmdir(dir_.c_str()) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "the cgroup " << dir_ << " is left behind: " << std::strerror(errno);
}

// The host's view of group 1 through B and through A after the cut, sampled until A stopped serving it and
// B serves it. B is read first: once B serves the group it keeps serving it (A does not come back), so an
// optimized A read after an optimized B means both served it at one moment.
struct HostView {
  std::optional<Clock::time_point> a_stopped, b_serving;
  bool both = false;            // A and B optimized at once
  bool a_unreachable = false;   // the host could not read A's ANA log
};

bool watch_group_move(ini::Controller& ca, ini::Controller& cb, HostView* v) {
  return wait_until([&] {
    ca.service();
    cb.service();
    const auto via_b = ana_of(cb, 1);
    const auto via_a = ana_of(ca, 1);
    const auto now = Clock::now();
    v->a_unreachable |= !via_a;
    v->both |= via_a == AnaState::optimized && via_b == AnaState::optimized;
    if (via_a && *via_a != AnaState::optimized && !v->a_stopped) v->a_stopped = now;
    if (via_b == AnaState::optimized && !v->b_serving) v->b_serving = now;
    return v->a_stopped && v->b_serving;
  });
}

// A member whose Ceph traffic is dropped at the network level (a partition; hosts still reach it): by its
// own clock it stops serving its group as optimized within the lease, a survivor takes the group over
// after that (never both at once in the host's view), its renewals fail; once the cut heals it finds itself
// blocklisted and does not serve the group again.
TEST_F(GroupFaults, AMemberPartitionedFromTheClusterFencesItself) {
  NetworkCut net;
  std::string why;
  if (!net.prepare(&why)) GTEST_SKIP() << why;
  TargetProcess a, b;
  KilledAtExit a_killed{a};
  a.set_launcher(net.launcher());
  ASSERT_TRUE(start(a, "gw-a", 1));
  ASSERT_TRUE(net.holds(a.pid())) << read_file("/proc/" + std::to_string(a.pid()) + "/cgroup");
  ASSERT_TRUE(start(b, "gw-b", 2));
  ASSERT_TRUE(settled({&a, &b}));
  auto ca = connect_or_fail(controller_options(a.io_port(), kSubnqn), a);
  auto cb = connect_or_fail(controller_options(b.io_port(), kSubnqn), b);
  ASSERT_TRUE(ca && cb);
  ASSERT_EQ(ana_of(*ca, 1), AnaState::optimized);

  const auto cut = Clock::now();
  ASSERT_TRUE(net.cut({a.io_port(), a.discovery_port()}));
  HostView v;
  ASSERT_TRUE(watch_group_move(*ca, *cb, &v)) << group_status(a).dump(2) << group_status(b).dump(2);
  EXPECT_FALSE(v.both) << "A and B both served group 1 as optimized at one moment";
  EXPECT_LE(*v.a_stopped, *v.b_serving) << "B served group 1 before A stopped serving it";
  EXPECT_FALSE(v.a_unreachable) << "the host lost A: the cut must leave A's listeners alone";
  EXPECT_TRUE(owned(a).empty()) << group_status(a).dump(2);
  EXPECT_EQ(owned(b), (std::vector<uint32_t>{1, 2}));
  EXPECT_TRUE(has_event(group_status(a), "the lease of gw-a was not renewed in time")) << group_status(a).dump(2);
  EXPECT_TRUE(has_event(group_status(b), "took over the lease of gw-a (not alive; blocklisted"))
      << group_status(b).dump(2);
  EXPECT_GT(net.dropped(), 0u) << "no packet of A's was dropped";
  // Its renewal calls fail (after the op timeout, 30 s): the error A reports.
  std::string error;  // null while the last tick went through
  ASSERT_TRUE(wait_until([&] {
    const json s = group_status(a);
    if (s.is_object() && s["last_error"].is_string()) error = s["last_error"].get<std::string>();
    return !error.empty();
  })) << group_status(a).dump(2);
  const auto renewal_failed = Clock::now();
  std::printf(
      "partition (lease %u s): the host saw A stop serving group 1 after %lld ms and B serve it after %lld ms; "
      "A's renewal failed after %lld ms: %s\n",
      kLeaseSeconds, ms(*v.a_stopped - cut), ms(*v.b_serving - cut), ms(renewal_failed - cut), error.c_str());

  ASSERT_TRUE(net.heal());
  const auto healed = Clock::now();
  ASSERT_TRUE(wait_until([&] { return has_event(group_status(a), "its Ceph client is blocklisted"); }))
      << group_status(a).dump(2) << a.log();
  std::printf("partition healed: A said it is blocklisted after %lld ms\n", ms(Clock::now() - healed));
  EXPECT_TRUE(owned(a).empty()) << group_status(a).dump(2);
  EXPECT_EQ(owned(b), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(ana_of(*ca, 1), AnaState::inaccessible) << "the fenced member does not serve group 1";
  EXPECT_EQ(ana_of(*cb, 1), AnaState::optimized);
}

// ---- 2. A kill -9 during reservation commands ------------------------------------------------------------

constexpr uint32_t kNs = 1;
constexpr uint64_t kKeyA = 0xA1, kKeyB = 0xB2, kKeyC = 0xC3;
constexpr const char* kHostC = "nqn.2024-11.io.rdmablk:host-c";

// Host A's cycle through member A: register, acquire Write Exclusive, release, unregister; host B stays
// registered. A reservation command sent without waiting, so that the test picks the moment A dies.
struct InFlight {
  rdmablk::transport::HostCommand cmd;
  std::array<uint8_t, 16> data{};
  bool done = false;
  p::Cqe cqe{};
};

const char* step_name(uint64_t i) {
  static const char* const names[] = {"register", "acquire", "release", "unregister"};
  return names[i % 4];
}

p::Status send_step(ini::IoQueue& q, InFlight& f, uint64_t i) {
  f.done = false;
  f.data.fill(0);
  uint32_t bytes = 16;
  const auto put = [&](const auto& d) {
    bytes = sizeof d;
    std::memcpy(f.data.data(), &d, sizeof d);
  };
  if (i % 4 == 0 || i % 4 == 3) {
    const bool reg = i % 4 == 0;
    p::ReservationRegisterData d{};
    (reg ? d.nrkey : d.crkey).set(kKeyA);
    put(d);
    f.cmd.sqe =
        ini::make_reservation_register(kNs, reg ? p::RegisterAction::register_key : p::RegisterAction::unregister_key,
                                       false, p::ChangePtpl::no_change);
  } else if (i % 4 == 1) {
    p::ReservationAcquireData d{};
    d.crkey.set(kKeyA);
    put(d);
    f.cmd.sqe =
        ini::make_reservation_acquire(kNs, p::AcquireAction::acquire, false, p::ReservationType::write_exclusive);
  } else {
    p::ReservationReleaseData d{};
    d.crkey.set(kKeyA);
    put(d);
    f.cmd.sqe =
        ini::make_reservation_release(kNs, p::ReleaseAction::release, false, p::ReservationType::write_exclusive);
  }
  f.cmd.direction = rdmablk::transport::DataDirection::host_to_controller;
  f.cmd.data = std::span<uint8_t>(f.data.data(), bytes);
  f.cmd.context = &f;
  f.cmd.on_complete = [](rdmablk::transport::HostCommand& c, const p::Cqe& cqe) noexcept {
    auto* self = static_cast<InFlight*>(c.context);
    self->cqe = cqe;
    self->done = true;
  };
  return q.queue().submit(f.cmd);
}

// The reservation state after `n` steps of the cycle, as state_text() words it.
std::string expected_state(uint64_t n) {
  static const char* const states[] = {"B=b2", "A=a1 B=b2", "A=a1 B=b2, type 1 held by A", "A=a1 B=b2"};
  return states[n % 4];
}

// A Reservation Report in words: the registrants by host and key (sorted), the type and its holders.
std::string state_text(const ini::ReservationStatus& s) {
  std::map<std::string, std::string> keys;
  std::string holders;
  for (const auto& r : s.registrants) {
    std::string name = "?";
    for (auto [host, letter] : {std::pair{kHostA, "A"}, std::pair{kHostB, "B"}, std::pair{kHostC, "C"}}) {
      if (r.hostid == host_identity(host).hostid) name = letter;
    }
    std::ostringstream key;
    key << std::hex << r.rkey;
    keys[name] = key.str();
    if (r.holds_reservation()) holders += name;
  }
  std::string text;
  for (const auto& [name, key] : keys) text += (text.empty() ? "" : " ") + name + "=" + key;
  if (s.rtype != 0 || !holders.empty())
    text += ", type " + std::to_string(s.rtype) + " held by " + (holders.empty() ? "nobody" : holders);
  return text;
}

// The state through member `m` in words, then ", generation N" (or the error).
std::string report_through(const TargetProcess& m) {
  Session s = session(m, kHostB);
  if (!s.q) return "no connection";
  auto r = ini::reservation_report(*s.q, kNs, true);
  if (!r) return "Reservation Report failed: " + r.error().message;
  return state_text(*r) + ", generation " + std::to_string(r->generation);
}

std::string state_of(const std::string& report) { return report.substr(0, report.rfind(", generation")); }

// Host A's steps through `q` until A is killed with one in flight: 8 steps complete first (their median
// time is the span to draw from), then each step is sent and A is SIGKILLed a random part of that span
// after it, unless it completed by then. Returns the steps completed (the one in flight is the next one);
// *delay: from the send to the kill.
uint64_t steps_until_killed(ini::IoQueue& q, InFlight& f, TargetProcess& a, Clock::duration* delay) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<Clock::duration> warm_up;
  for (uint64_t i = 0; i < 60; ++i) {
    const auto fail = [&](const std::string& what) {
      ADD_FAILURE() << step_name(i) << " (step " << i << "): " << what;
      return i;
    };
    Clock::duration kill_after = Clock::duration::max();
    if (warm_up.size() == 8) {
      std::sort(warm_up.begin(), warm_up.end());
      kill_after =
          std::chrono::duration_cast<Clock::duration>(warm_up[4] * std::uniform_real_distribution<double>(0, 1)(rng));
    }
    const auto sent = Clock::now();
    if (!send_step(q, f, i).ok()) return fail("not sent");
    while (!f.done && Clock::now() - sent < kill_after) {
      // Sent at the first poll; then polled without sleeping until the moment to kill.
      if (q.poll(warm_up.size() < 8 ? 1 : 0, std::chrono::milliseconds(warm_up.size() < 8 ? 5 : 0)) < 0)
        return fail("the queue to A was lost");
      if (Clock::now() - sent > std::chrono::seconds(60)) return fail("no answer in 60 s");
    }
    if (!f.done) {
      a.kill_now();
      *delay = Clock::now() - sent;
      return i;
    }
    if (!f.cqe.get_status().ok()) return fail("failed before the kill");
    if (warm_up.size() < 8) warm_up.push_back(Clock::now() - sent);
  }
  ADD_FAILURE() << "60 steps completed before their kill moment";
  return 0;
}

// Host B's write through `m`: refused (Reservation Conflict) while another host holds Write Exclusive
// (`state` as state_text() words it), done otherwise.
void expect_writes_follow(const TargetProcess& m, const std::string& state) {
  Session hb = session(m, kHostB);
  ASSERT_TRUE(hb.q);
  std::vector<uint8_t> block = pattern(kBlock, 5);
  auto w = write_blocks(*hb.q, kNs, 0, kBlock, block);
  if (state.find("held by") != std::string::npos && state.find("held by B") == std::string::npos) {
    ASSERT_FALSE(w) << "host B wrote through a member while " << state;
    EXPECT_NE(w.error().message.find("Reservation Conflict"), std::string::npos) << w.error().message;
  } else {
    EXPECT_TRUE(w) << "host B's write refused while " << state << ": " << w.error().message;
  }
}

// Through B after the kill: host A's leftovers undone with its key (if the state has them, the key works),
// then a new host registers, takes Write Exclusive and releases it; C reports each step and enforces it.
void further_commands_through_b(const TargetProcess& b, const TargetProcess& c, const std::string& state) {
  {
    Session ha = session(b, kHostA);
    ASSERT_TRUE(ha.q);
    if (state.find("held by A") != std::string::npos) {
      auto r = ini::reservation_release(*ha.q, kNs, p::ReleaseAction::release, false,
                                        p::ReservationType::write_exclusive, kKeyA);
      EXPECT_TRUE(r) << r.error().message;
    }
    if (state.find("A=a1") != std::string::npos) {
      auto r = ini::reservation_register(*ha.q, kNs, p::RegisterAction::unregister_key, false, p::ChangePtpl::no_change,
                                         kKeyA, 0);
      EXPECT_TRUE(r) << r.error().message;
    }
  }
  EXPECT_EQ(state_of(report_through(c)), "B=b2");
  Session hc = session(b, kHostC);
  ASSERT_TRUE(hc.q);
  auto reg =
      ini::reservation_register(*hc.q, kNs, p::RegisterAction::register_key, false, p::ChangePtpl::no_change, 0, kKeyC);
  ASSERT_TRUE(reg) << reg.error().message;
  auto acq = ini::reservation_acquire(*hc.q, kNs, p::AcquireAction::acquire, false, p::ReservationType::write_exclusive,
                                      kKeyC, 0);
  ASSERT_TRUE(acq) << acq.error().message;
  EXPECT_EQ(state_of(report_through(c)), "B=b2 C=c3, type 1 held by C");
  expect_writes_follow(c, "type 1 held by C");
  auto rel = ini::reservation_release(*hc.q, kNs, p::ReleaseAction::release, false, p::ReservationType::write_exclusive,
                                      kKeyC);
  ASSERT_TRUE(rel) << rel.error().message;
  EXPECT_EQ(state_of(report_through(c)), "B=b2 C=c3");
  expect_writes_follow(c, "B=b2 C=c3");
}

// After the kill the group holds the state before or after the command in flight, and A reads it from RADOS
// when it restarts; B and C come to report the same (at once by A's notify, or by their recheck when A died
// before it); the writes they allow follow it; a new host registers, reserves and releases through B, and C
// and A see each step.
TEST_F(GroupFaults, AKillDuringReservationCommandsLeavesAConsistentState) {
  TargetProcess a, b, c;
  ASSERT_TRUE(start_members({&a, &b, &c}, kActiveActive));
  {
    Session hb = session(a, kHostB);
    ASSERT_TRUE(hb.q);
    auto r = ini::reservation_register(*hb.q, kNs, p::RegisterAction::register_key, false, p::ChangePtpl::no_change, 0,
                                       kKeyB);
    ASSERT_TRUE(r) << r.error().message;
  }
  InFlight f;  // outlives host A's queue, which may still complete it while it closes
  uint64_t completed = 0;
  Clock::duration delay{};
  {
    Session ha = session(a, kHostA);
    ASSERT_TRUE(ha.q);
    completed = steps_until_killed(*ha.q, f, a, &delay);
    ASSERT_FALSE(a.running());
  }
  const auto killed = Clock::now();
  const std::string before = expected_state(completed), after = expected_state(completed + 1);
  for (const TargetProcess* m : {&b, &c}) {
    const std::string now = report_through(*m);
    EXPECT_TRUE(state_of(now) == before || state_of(now) == after)
        << now << "; expected \"" << before << "\" or \"" << after << "\"";
  }
  // A restarted reads the state from RADOS. B and C learn of it from A's notify, or, when A died between
  // its write and its notify, from their recheck of the stored state (every 5 s): until then they may
  // still enforce the state before the step, which is one of the two a host may see.
  ASSERT_TRUE(a.restart());
  const std::string stored = report_through(a);
  EXPECT_TRUE(state_of(stored) == before || state_of(stored) == after)
      << "the group holds " << stored << "; expected \"" << before << "\" or \"" << after << "\"";
  std::string via_b, via_c;
  EXPECT_TRUE(wait_until([&] {
    via_b = report_through(b);
    via_c = report_through(c);
    return via_b == stored && via_c == stored;
  })) << "the group holds "
      << stored << "; B reports " << via_b << "; C reports " << via_c;
  std::printf(
      "A killed %lld us after it was sent step %llu (%s): the group holds \"%s\" (%s the step); B and C "
      "report it %lld ms after the kill\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(delay).count()),
      static_cast<unsigned long long>(completed), step_name(completed), stored.c_str(),
      state_of(stored) == after ? "with" : "without",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count()));
  for (const TargetProcess* m : {&b, &c}) expect_writes_follow(*m, state_of(stored));
  further_commands_through_b(b, c, state_of(stored));
  EXPECT_EQ(report_through(a), report_through(c)) << "the restarted member follows the group's changes";
}

// ---- 3. A kill -9 during management verbs ---------------------------------------------------------------

using Namespaces = std::map<uint32_t, std::string>;  // nsid -> RBD image

// "rbd/IMAGE (client rdmablk)" as `ctl namespaces` shows it, or IMAGE: IMAGE.
std::string image_name(std::string s) {
  s = s.substr(0, s.find(" ("));
  return s.substr(s.rfind('/') + 1);
}

std::string text(const Namespaces& n) {
  std::string out;
  for (const auto& [nsid, image] : n) out += (out.empty() ? "" : " ") + std::to_string(nsid) + "=" + image;
  return out;
}

// What `t` serves (empty when its control socket does not answer).
Namespaces served(const TargetProcess& t) {
  Namespaces out;
  auto r = ctl(t, {"namespaces"});
  auto j = json::parse(r.out, nullptr, false);
  if (r.exit_status != 0 || !j.is_array()) return out;
  for (const auto& n : j) out[n["nsid"].get<uint32_t>()] = image_name(n.value("image", std::string()));
  return out;
}

// What the group's state object holds: the members' YAML (the fixture's images as namespaces 1-3), then its
// edits replayed (empty when the object cannot be read).
Namespaces stored(const ceph_test::Cluster& cluster, const Group& g, const std::filesystem::path& scratch) {
  Namespaces out;
  for (std::size_t i = 0; i < g.images.size(); ++i) out[static_cast<uint32_t>(i + 1)] = g.images[i];
  const std::string file = (scratch / "group-state.json").string();
  std::string err;
  const auto failed = [](const std::string& why) {
    ADD_FAILURE() << why;
    return Namespaces{};
  };
  if (ceph_test::shell("env -u CEPH_ARGS CEPH_CONF=" + cluster.conf() + " timeout 60 rados -p rbd get rdmablk.group." +
                           g.name + " " + file,
                       &err) != 0)
    return failed("rados get: " + err);
  const std::string bytes = read_file(file);
  if (bytes.empty()) return out;  // created empty by the first member: no edits yet
  const json j = json::parse(bytes, nullptr, false);
  if (j.is_discarded()) return failed("the group's state is not JSON: " + bytes);
  for (const auto& e : j["edits"]) {
    const json& nsid = e["params"]["nsid"];
    const auto id =
        static_cast<uint32_t>(nsid.is_string() ? std::stoul(nsid.get<std::string>()) : nsid.get<uint32_t>());
    if (e["verb"] == "namespace_add") out[id] = image_name(e["params"].value("image", std::string()));
    if (e["verb"] == "namespace_remove") out.erase(id);
  }
  return out;
}

struct Verb {
  std::vector<std::string> args;
  Namespaces after;
};

// The verb that toggles namespace `nsid`: removes it when `now` has it, else adds it on `image` (ANA group 1).
Verb toggle(const ceph_test::Cluster& c, const Namespaces& now, uint32_t nsid, const std::string& image) {
  Verb v{{}, now};
  const std::string sub = "subsystem=" + std::string(kSubnqn), id = "nsid=" + std::to_string(nsid);
  if (now.count(nsid) != 0) {
    v.args = {"namespace_remove", sub, id};
    v.after.erase(nsid);
  } else {
    v.args = {"namespace_add",
              sub,
              id,
              "backend=rbd",
              "pool=rbd",
              "image=" + image,
              "ceph_conf=" + c.conf(),
              "client=rdmablk",
              "keyring=" + c.rdmablk_keyring(),
              "ana_group=1"};
    v.after[nsid] = image;
  }
  return v;
}

struct Killed {
  Namespaces before;  // what the verbs A confirmed made
  Verb in_flight;
  ProcessResult answer;  // what ctl said of the verb in flight
  Clock::duration after{};  // from the ctl's start to the kill
};

// Verbs through A's control socket (namespace 4 added on one spare image, removed, added on the other ...)
// until A is SIGKILLed a random time into one: between when ctl answers a read (its process is up) and when
// it answers a verb, as measured first. A verb done by then is confirmed and the next one is tried.
Killed verbs_until_killed(TargetProcess& a, const ceph_test::Cluster& c, Namespaces now,
                          const std::vector<std::string>& spares, std::mt19937_64& rng) {
  auto t0 = Clock::now();
  ctl(a, {"group", "status"});
  const auto read_time = Clock::now() - t0;
  Clock::duration verb_time{0};
  for (int i = 0;; ++i) {
    Killed k{now, toggle(c, now, 4, spares[static_cast<std::size_t>(i) % 2]), {}, {}};
    Clock::duration kill_after = Clock::duration::max();
    if (i >= 2) {
      const auto lo = std::min(read_time, verb_time), hi = std::max(verb_time, lo + std::chrono::milliseconds(1));
      kill_after = lo + std::chrono::duration_cast<Clock::duration>((hi - lo) *
                                                                    std::uniform_real_distribution<double>(0, 1)(rng));
    }
    std::atomic<bool> done{false};
    t0 = Clock::now();
    std::thread verb([&] {
      k.answer = ctl(a, k.in_flight.args, false);
      done = true;
    });
    while (!done && Clock::now() - t0 < kill_after) std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (!done) {
      a.kill_now();
      k.after = Clock::now() - t0;
    }
    verb.join();
    if (k.after != Clock::duration{}) return k;
    if (k.answer.exit_status != 0 || i == 40) {
      ADD_FAILURE() << (i == 40 ? "40 verbs done before their kill moment" : "a verb failed: " + k.answer.err);
      return k;
    }
    verb_time = std::max(verb_time, Clock::now() - t0);
    now = k.in_flight.after;
  }
}

// After the kill: the group's object holds the confirmed verbs and maybe the one in flight, nothing else; B
// and C come to serve what it holds; a further verb through B reaches C; A restarted serves it too.
// Returns the group's namespaces in the end.
Namespaces check_after_kill(const std::array<TargetProcess*, 3>& m, const ceph_test::Cluster& cluster, const Group& g,
                            const Killed& k, const std::string& spare) {
  TargetProcess &a = *m[0], &b = *m[1], &c = *m[2];
  const auto killed = Clock::now();
  const Namespaces held = stored(cluster, g, b.dir());
  const bool with = held == k.in_flight.after;
  EXPECT_TRUE(held == k.before || with) << "the group holds " << text(held) << "; expected " << text(k.before) << " or "
                                        << text(k.in_flight.after);
  EXPECT_TRUE(with || k.answer.exit_status != 0) << "A confirmed " << k.in_flight.args[0] << " before it died";
  EXPECT_TRUE(wait_until([&] { return served(b) == held && served(c) == held; }))
      << "the group holds " << text(held) << "; B serves " << text(served(b)) << "; C serves " << text(served(c));
  std::printf("A killed %lld ms into a %s (ctl: %s): the group %s it; B and C served that after %lld ms\n", ms(k.after),
              k.in_flight.args[0].c_str(),
              k.answer.exit_status == 0 ? "done" : k.answer.err.substr(0, k.answer.err.find('\n')).c_str(),
              with ? "holds" : "does not hold", ms(Clock::now() - killed));
  const Verb more = toggle(cluster, held, 5, spare);
  auto r = ctl(b, more.args, false);
  EXPECT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_TRUE(wait_until([&] { return served(c) == more.after; })) << "C serves " << text(served(c));
  EXPECT_EQ(stored(cluster, g, b.dir()), more.after);
  const auto restarted = Clock::now();
  EXPECT_TRUE(a.restart());
  EXPECT_TRUE(wait_until([&] { return served(a) == more.after; })) << "A serves " << text(served(a));
  std::printf("A restarted serves the group's namespaces after %lld ms\n", ms(Clock::now() - restarted));
  return more.after;
}

// Three rounds: A is SIGKILLed during a management verb, the group stays consistent, A comes back.
TEST_F(GroupFaults, AKillDuringManagementVerbsLeavesAConsistentGroup) {
  TargetProcess a, b, c;
  ASSERT_TRUE(start_members({&a, &b, &c}));
  const std::vector<std::string> spares = {cluster->create_image("spare", "16M"), cluster->create_image("spare", "16M"),
                                           cluster->create_image("spare", "16M")};
  Namespaces now = stored(*cluster, group, b.dir());
  ASSERT_EQ(now.size(), 3u);
  ASSERT_EQ(served(a), now);
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 3 && !HasFailure(); ++round) {
    const Killed k = verbs_until_killed(a, *cluster, now, spares, rng);
    ASSERT_FALSE(a.running());
    now = check_after_kill({&a, &b, &c}, *cluster, group, k, spares[2]);
  }
}

// A reservation change stored by a member that died before it notified (here: the object set back by hand,
// told to nobody): every member's periodic recheck (DaemonGroup, every 5 s) takes it in, with no command.
TEST_F(GroupFaults, AReservationChangeNobodyWasToldOfHoldsEverywhereByTheRecheck) {
  TargetProcess a, b;
  ASSERT_TRUE(start_members({&a, &b}, kActiveActive));
  Session host_a = session(a, kHostA), host_b = session(b, kHostB);
  ASSERT_TRUE(host_a.q && host_b.q);
  auto& qa = host_a.q;
  auto& qb = host_b.q;
  ASSERT_TRUE(
      ini::reservation_register(*qa, kNs, p::RegisterAction::register_key, false, p::ChangePtpl::no_change, 0, 0xA));
  ASSERT_TRUE(ini::reservation_acquire(*qa, kNs, p::AcquireAction::acquire, false, p::ReservationType::write_exclusive,
                                       0xA, 0));
  const std::string object = "rdmablk.reservations." + group.images[0];
  const std::string held = (a.dir() / "held.bin").string();
  const std::string rados = "env -u CEPH_ARGS CEPH_CONF=" + cluster->conf() + " timeout 60 rados -p rbd ";
  std::string out;
  ASSERT_EQ(ceph_test::shell(rados + "get " + object + " " + held, &out), 0) << out;
  ASSERT_TRUE(
      ini::reservation_release(*qa, kNs, p::ReleaseAction::release, false, p::ReservationType::write_exclusive, 0xA));
  std::vector<uint8_t> block = pattern(kBlock, 5);
  auto w = write_blocks(*qb, kNs, 0, kBlock, block);
  ASSERT_TRUE(w && w->get_status().ok()) << "released: host B writes through B";

  ASSERT_EQ(ceph_test::shell(rados + "put " + object + " " + held, &out), 0) << out;  // no notify
  const auto put = Clock::now();
  const bool refused = wait_until([&] {
    auto again = write_blocks(*qb, kNs, 0, kBlock, block);
    return !again && again.error().message.find("Reservation Conflict") != std::string::npos;
  });
  EXPECT_TRUE(refused) << "B never took in the reservation nobody told it of\n" << b.log();
  std::printf("a reservation change without a notification held on the other member after %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - put).count()));
  auto report = ini::reservation_report(*qb, kNs, true);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->rtype, static_cast<uint8_t>(p::ReservationType::write_exclusive));
}

}  // namespace

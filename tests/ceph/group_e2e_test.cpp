// Three rdmablk-target processes in one gateway group (docs/gateway-groups.md) on the throw-away cluster,
// each exporting the same three RBD images as namespaces 1-3 in ANA groups 1-3 and the home of one group.
// A host connected to every member sees each group optimized on its home member only; kill -9 a member
// and its group becomes optimized on a survivor (the host gets the ANA Change notice, data the dead member
// acknowledged reads back through the survivor), the member restarts and takes its group back; a member
// frozen past its lease comes back fenced; a clean stop hands over without waiting for the lease.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "caw_counter.h"
#include "ceph/group_fixture.h"
#include "initiator/host/shared_volume.h"
#include "protocol/reservation.h"

namespace {

using namespace group_test;

TEST_F(GroupE2e, AKilledMembersGroupMovesToASurvivorAndComesBack) {
  TargetProcess a, b, c;
  ASSERT_TRUE(start_members({&a, &b, &c}));

  const json sb = group_status(b);
  ASSERT_EQ(sb["members"].size(), 3u) << sb.dump(2);
  for (const auto& m : sb["members"]) {
    EXPECT_TRUE(m["alive"].get<bool>()) << m.dump();
    EXPECT_EQ(m["lease_holder"], m["member"]) << "each member holds its own lease: " << m.dump();
  }

  // The host's view through each member: group i+1 optimized on member i only.
  auto ca = connect_or_fail(controller_options(a.io_port(), kSubnqn), a);
  auto cb = connect_or_fail(controller_options(b.io_port(), kSubnqn), b);
  auto cc = connect_or_fail(controller_options(c.io_port(), kSubnqn), c);
  ASSERT_TRUE(ca && cb && cc);
  ASSERT_TRUE(cb->enable_ana_events());
  ASSERT_TRUE(cc->enable_ana_events());
  EXPECT_EQ(ana_of(*ca, 1), AnaState::optimized);
  EXPECT_EQ(ana_of(*cb, 1), AnaState::inaccessible);
  EXPECT_EQ(ana_of(*cc, 1), AnaState::inaccessible);
  EXPECT_EQ(ana_of(*cb, 2), AnaState::optimized);
  EXPECT_EQ(ana_of(*cc, 3), AnaState::optimized);

  // Data acknowledged through A (written, flushed) before A dies.
  std::vector<uint8_t> data = pattern(64 * 1024, 28);
  {
    auto qa = io_queue_or_fail(*ca, 1);
    ASSERT_TRUE(qa);
    auto w = write_blocks(*qa, 1, 100, kBlock, data);
    ASSERT_TRUE(w && w->get_status().ok());
    auto f = flush(*qa, 1);
    ASSERT_TRUE(f && f->get_status().ok());
  }
  auto qb = io_queue_or_fail(*cb, 1);
  auto qc = io_queue_or_fail(*cc, 1);
  ASSERT_TRUE(qb && qc);
  std::vector<uint8_t> got(data.size());
  auto refused = read_blocks(*qb, 1, 100, kBlock, got);
  ASSERT_FALSE(refused) << "group 1 is inaccessible on B while A serves it";
  EXPECT_NE(refused.error().message.find("Asymmetric Access Inaccessible"), std::string::npos)
      << refused.error().message;

  ca.reset();
  const int64_t killed_ms = unix_ms_now();
  const auto killed = Clock::now();
  a.kill_now();

  // Which survivor took it: the host reads each one's ANA log until one says optimized.
  rdmablk::initiator::Controller* survivor = nullptr;
  rdmablk::initiator::IoQueue* survivor_q = nullptr;
  ASSERT_TRUE(wait_until([&] {
    cb->service();
    cc->service();
    if (ana_of(*cb, 1) == AnaState::optimized) survivor = cb.get(), survivor_q = qb.get();
    if (ana_of(*cc, 1) == AnaState::optimized) survivor = cc.get(), survivor_q = qc.get();
    return survivor != nullptr;
  })) << group_status(b).dump(2)
      << group_status(c).dump(2);
  const auto seen = Clock::now();
  auto r = read_blocks(*survivor_q, 1, 100, kBlock, got);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->get_status().ok());
  const auto first_io = Clock::now();
  EXPECT_EQ(got, data) << "what A acknowledged reads back through the survivor";
  EXPECT_TRUE(survivor->take_ana_change()) << "the host got the ANA Change notice";

  const TargetProcess& s = survivor == cb.get() ? b : c;
  const TargetProcess& other = survivor == cb.get() ? c : b;
  const json st = group_status(s);
  EXPECT_EQ(owned(other), (std::vector<uint32_t>{survivor == cb.get() ? 3u : 2u})) << "one survivor, not both";
  int64_t took_ms = 0;
  for (const auto& e : st["events"]) {
    if (e["what"].get<std::string>().find("took over the lease of gw-a") != std::string::npos) {
      took_ms = e["unix_ms"].get<int64_t>();
      EXPECT_NE(e["what"].get<std::string>().find("blocklisted"), std::string::npos) << e.dump();
    }
  }
  EXPECT_GT(took_ms, killed_ms) << st.dump(2);
  const auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  std::printf(
      "failover (lease %u s): taken over after %lld ms, the host saw it optimized after %lld ms, "
      "first read completed after %lld ms\n",
      kLeaseSeconds, static_cast<long long>(took_ms - killed_ms), static_cast<long long>(ms(seen - killed)),
      static_cast<long long>(ms(first_io - killed)));

  // A comes back and takes its group back (failback automatic); the survivor stops serving it first.
  const auto restarted = Clock::now();
  ASSERT_TRUE(a.restart());
  ASSERT_TRUE(settled({&a, &b, &c}));
  std::printf("failback: group 1 back on the restarted member %lld ms after its start began\n",
              static_cast<long long>(ms(Clock::now() - restarted)));
  EXPECT_TRUE(wait_until([&] {
    survivor->service();
    return ana_of(*survivor, 1) == AnaState::inaccessible;
  }));
}

// A member frozen (SIGSTOP) past its lease: a survivor serves its group, and when it runs again it finds
// itself fenced (it no longer says optimized; its Ceph client is blocklisted).
TEST_F(GroupE2e, AFrozenMemberComesBackFenced) {
  TargetProcess a, b;
  ASSERT_TRUE(start_members({&a, &b}));
  ASSERT_EQ(::kill(a.pid(), SIGSTOP), 0);
  const bool moved = wait_until([&] { return owned(b) == std::vector<uint32_t>{1, 2}; });
  ASSERT_EQ(::kill(a.pid(), SIGCONT), 0);
  ASSERT_TRUE(moved) << group_status(b).dump(2);
  EXPECT_TRUE(wait_until([&] { return owned(a).empty(); })) << group_status(a).dump(2);
  auto ca = connect_or_fail(controller_options(a.io_port(), kSubnqn), a);
  ASSERT_TRUE(ca);
  EXPECT_EQ(ana_of(*ca, 1), AnaState::inaccessible) << "the fenced member does not serve group 1";
  const json sa = group_status(a);
  bool fenced_event = false;
  for (const auto& e : sa["events"]) {
    const std::string w = e["what"].get<std::string>();
    fenced_event |=
        w.find("not renewed in time") != std::string::npos || w.find("lost the lease of gw-a") != std::string::npos;
  }
  EXPECT_TRUE(fenced_event) << sa.dump(2);
  a.kill_now();
}

// A member cut off from the OSDs while it runs (its Ceph client blocklisted by hand: every operation of it
// is refused, as in a partition, while it goes on answering hosts): by its own clock it stops serving its
// group as optimized within the lease, a survivor takes the group, and the member says it is blocklisted.
TEST_F(GroupE2e, AMemberCutOffFromTheClusterFencesItself) {
  TargetProcess a, b;
  ASSERT_TRUE(start_members({&a, &b}));
  std::string address;
  const json sb = group_status(b);
  for (const auto& m : sb["members"]) {
    if (m["member"] == "gw-a") address = m["address"].get<std::string>();
  }
  ASSERT_FALSE(address.empty());
  std::string out;
  const auto cut = Clock::now();
  ASSERT_EQ(ceph_test::shell("env -u CEPH_ARGS -u CEPH_KEYRING timeout 60 ceph -c " + cluster->conf() +
                                 " -n client.admin osd blocklist add " + address,
                             &out),
            0)
      << out;
  ASSERT_TRUE(wait_until([&] { return owned(a).empty(); })) << group_status(a).dump(2);
  const auto fenced = Clock::now();
  ASSERT_TRUE(wait_until([&] { return owned(b) == std::vector<uint32_t>{1, 2}; })) << group_status(b).dump(2);
  const auto ms = [](auto d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  std::printf(
      "cut off (lease %u s): the member stopped serving its group after %lld ms, a survivor served it after %lld ms\n",
      kLeaseSeconds, ms(fenced - cut), ms(Clock::now() - cut));
  auto ca = connect_or_fail(controller_options(a.io_port(), kSubnqn), a);
  ASSERT_TRUE(ca);
  EXPECT_EQ(ana_of(*ca, 1), AnaState::inaccessible) << "the cut-off member does not serve group 1";
  // Its renewals fail (refused, not "lost"): what stopped it is its own clock, and it says it is blocklisted.
  EXPECT_TRUE(wait_until([&] {
    const json sa = group_status(a);
    bool by_clock = false, told = false;
    for (const auto& e : sa["events"]) {
      const std::string w = e["what"].get<std::string>();
      by_clock |= w.find("the lease of gw-a was not renewed in time") != std::string::npos;
      told |= w.find("blocklisted") != std::string::npos;
    }
    return by_clock && told;
  })) << group_status(a).dump(2);
  ca.reset();
  a.kill_now();  // a blocklisted client cannot close its images cleanly: not a clean stop
}

// SIGTERM: the member hands its lease over at once; a survivor serves its group well before the lease
// could have lapsed.
TEST_F(GroupE2e, ACleanStopHandsOverWithoutWaitingForTheLease) {
  TargetProcess a, b;
  ASSERT_TRUE(start_members({&a, &b}));
  const auto stopping = Clock::now();
  ASSERT_TRUE(a.stop());
  ASSERT_TRUE(wait_until([&] { return owned(b) == std::vector<uint32_t>{1, 2}; })) << group_status(b).dump(2);
  const json sb = group_status(b);
  bool took = false;
  for (const auto& e : sb["events"]) {
    const std::string w = e["what"].get<std::string>();
    if (w.find("took over the lease of gw-a") != std::string::npos) {
      took = true;
      EXPECT_NE(w.find("it stopped cleanly: nothing to fence"), std::string::npos)
          << "a member that stops cleanly is not blocklisted (its images' last flush must reach the OSDs): " << w;
    }
  }
  EXPECT_TRUE(took) << sb.dump(2);
  std::printf("clean stop: group 1 served by the survivor %lld ms after SIGTERM\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - stopping).count()));
}

// failback: manual: the returned member waits, alive, until an operator hands its groups back on the
// survivor (`ctl group handback`); a handback of a lease the member does not hold is refused.
TEST_F(GroupE2e, ManualFailbackWaitsForTheOperator) {
  TargetProcess a, b;
  ASSERT_TRUE(start_members({&a, &b}, "  failback: manual\n"));
  auto refused = ctl(b, {"group", "handback", "gw-a"}, false);
  EXPECT_EQ(refused.exit_status, 1) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("does not hold the lease of gw-a"), std::string::npos) << refused.err;

  a.kill_now();
  ASSERT_TRUE(wait_until([&] { return owned(b) == std::vector<uint32_t>{1, 2}; })) << group_status(b).dump(2);
  ASSERT_TRUE(a.restart());
  // A is up and knows it waits for its lease; B sees it alive and keeps serving its group.
  ASSERT_TRUE(wait_until([&] {
    const json sa = group_status(a);
    for (const auto& e : sa["events"]) {
      if (e["what"].get<std::string>().find("waiting for its own lease") != std::string::npos) return true;
    }
    return false;
  })) << group_status(a).dump(2);
  ASSERT_TRUE(wait_until([&] {
    const json sb = group_status(b);
    for (const auto& m : sb["members"]) {
      if (m["member"] == "gw-a" && m["alive"].get<bool>()) return true;
    }
    return false;
  })) << group_status(b).dump(2);
  EXPECT_EQ(owned(b), (std::vector<uint32_t>{1, 2})) << "no automatic failback";
  EXPECT_TRUE(owned(a).empty());

  auto handback = ctl(b, {"group", "handback", "gw-a"}, false);
  ASSERT_EQ(handback.exit_status, 0) << handback.out << handback.err;
  EXPECT_NE(handback.out.find("handed back the groups of gw-a"), std::string::npos) << handback.out;
  EXPECT_TRUE(settled({&a, &b}));
}

// The group's cluster does not answer at start: the target refuses to start with a message that says so
// (and leaves nothing behind; systemd's Restart= tries again).
TEST_F(GroupE2e, AnUnreachableClusterStopsTheStartWithAClearError) {
  TempDir dir(kE2eDir);
  const std::string dead = (dir.path() / "dead.conf").string();
  cluster->write_dead_conf(dead, "client_mount_timeout = 3\n");
  std::string yaml = "listeners: [{address: 127.0.0.1, port: " + std::to_string(pick_free_port()) +
                     "}]\ncontrol: {enabled: false}\nsubsystems:\n  - nqn: " + std::string(kSubnqn) +
                     "\n    allow_any_host: true\n    namespaces: [{nsid: 1, backend: ram, size: 1MiB}]\n"
                     "group: {name: g, pool: rbd, member: gw-a, ceph_conf: " +
                     dead + ", ana_groups: [1]}\n";
  write_file(dir.path() / "t.yaml", yaml);
  auto r = run_target({"--config", (dir.path() / "t.yaml").string()}, dir.path(), std::chrono::seconds(120));
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_status, 0);
  EXPECT_NE((r.out + r.err).find("group: cannot reach the Ceph cluster"), std::string::npos) << r.out << r.err;
}

std::string namespaces_of(const TargetProcess& t) {
  auto r = ctl(t, {"namespaces"});
  return r.exit_status == 0 ? r.out : "";
}

// The group's shared definition: a namespace added through one member's API appears on the others and on
// a member that starts later; listener verbs and inline secrets are refused in a group; a state object
// overwritten with garbage is refused by every member, which keeps serving what it had.
TEST_F(GroupE2e, AChangeThroughOneMemberReachesEveryMember) {
  TargetProcess a, b;
  ASSERT_TRUE(start_members({&a, &b}));
  const std::string image = cluster->create_image("group-added", "16M");
  const auto asked = Clock::now();
  auto add =
      ctl(a,
          {"namespace_add", "subsystem=" + std::string(kSubnqn), "nsid=4", "backend=rbd", "pool=rbd", "image=" + image,
           "ceph_conf=" + cluster->conf(), "client=rdmablk", "keyring=" + cluster->rdmablk_keyring(), "ana_group=2"},
          false);
  ASSERT_EQ(add.exit_status, 0) << add.out << add.err << a.log();
  ASSERT_TRUE(wait_until([&] { return namespaces_of(b).find(image) != std::string::npos; })) << b.log();
  std::printf("a namespace added through one member was served by the other after %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - asked).count()));
  EXPECT_NE(namespaces_of(a).find(image), std::string::npos);

  auto listener = ctl(a, {"listener_add", "address=127.0.0.1", "port=" + std::to_string(pick_free_port())}, false);
  EXPECT_NE(listener.exit_status, 0);
  EXPECT_NE(listener.err.find("local to a member of a gateway group"), std::string::npos) << listener.err;
  auto secret = ctl(a,
                    {"host_add", "subsystem=" + std::string(kSubnqn), "host=" + std::string(kHostB),
                     "dhchap_key=DHHC-1:00:MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDEyMzQ1A8vz1Q==:"},
                    false);
  EXPECT_NE(secret.exit_status, 0);
  EXPECT_NE(secret.err.find("give secrets as files"), std::string::npos) << secret.err;

  // Two members adding namespace 5 at once, each with its own size: one wins; the other is told, either
  // by the version check (the state changed under it) or, if it read after the winner wrote, that the
  // namespace exists with other settings.
  ProcessResult r1, r2;
  auto add5 = [&](const TargetProcess& t, const char* size, ProcessResult* r) {
    *r = ctl(t,
             {"namespace_add", "subsystem=" + std::string(kSubnqn), "nsid=5", "backend=ram",
              std::string("size=") + size},
             false);
  };
  std::thread t1(add5, std::cref(a), "1MiB", &r1);
  std::thread t2(add5, std::cref(b), "2MiB", &r2);
  t1.join();
  t2.join();
  EXPECT_EQ((r1.exit_status == 0) + (r2.exit_status == 0), 1) << r1.err << "\n" << r2.err;
  const std::string lost = r1.exit_status == 0 ? r2.err : r1.err;
  EXPECT_TRUE(lost.find("conflict: another member changed the group") != std::string::npos ||
              lost.find("exists already, with other settings") != std::string::npos)
      << lost;

  // A member that starts now reads the whole state.
  TargetProcess c;
  ASSERT_TRUE(start(c, "gw-c", 3));
  EXPECT_NE(namespaces_of(c).find(image), std::string::npos) << c.log();

  // Garbage in the state object (a hand edit gone wrong), and the members told: refused, nothing lost.
  const std::string object = "rdmablk.group." + group.name;
  const auto garbage = a.dir() / "garbage.json";
  write_file(garbage, "{\"version\": 1, \"edits\": [{\"verb\": \"namespace_add\"}]}");
  const std::size_t b_log = b.log_size();
  std::string out;
  const std::string rados = "env -u CEPH_ARGS CEPH_CONF=" + cluster->conf() + " timeout 60 rados -p rbd ";
  ASSERT_EQ(ceph_test::shell(rados + "put " + object + " " + garbage.string(), &out), 0) << out;
  ASSERT_EQ(ceph_test::shell(rados + "notify " + object + " changed", &out), 0) << out;
  EXPECT_TRUE(b.wait_for_log("is refused, this member keeps the state it runs", std::chrono::seconds(180), b_log))
      << b.log();
  EXPECT_NE(namespaces_of(b).find(image), std::string::npos) << "still served";
  auto after = ctl(b, {"namespace_remove", "subsystem=" + std::string(kSubnqn), "nsid=4"}, false);
  EXPECT_NE(after.exit_status, 0) << "a change on top of garbage is refused";
  EXPECT_NE(after.err.find("entry 1"), std::string::npos) << after.err;
}

// What `rdmablk discover` lists through `t`'s discovery listener: "ADDR:PORT" of every record for kSubnqn.
std::vector<std::string> discovered(const TargetProcess& t) {
  auto r = run_process({RDMABLK_CLI_BINARY, "discover", "-t", "tcp", "-a", "127.0.0.1", "-s",
                        std::to_string(t.discovery_port()), "-q", kHostA, "-o", "json"},
                       t.dir(), std::chrono::seconds(60));
  std::vector<std::string> out;
  auto j = json::parse(r.out, nullptr, false);
  if (r.exit_status != 0 || j.is_discarded()) return out;
  for (const auto& rec : j["records"]) {
    if (rec["subnqn"] == kSubnqn)
      out.push_back(rec["traddr"].get<std::string>() + ":" + rec["trsvcid"].get<std::string>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Discovery for the group: each member's discovery controller lists every live member's io listener, and
// the list follows members coming and going.
TEST_F(GroupE2e, EveryMembersDiscoveryListsTheWholeGroup) {
  TargetProcess a, b;
  ASSERT_TRUE(start_members({&a, &b}));
  auto both =
      std::vector<std::string>{"127.0.0.1:" + std::to_string(a.io_port()), "127.0.0.1:" + std::to_string(b.io_port())};
  std::sort(both.begin(), both.end());
  EXPECT_TRUE(wait_until([&] { return discovered(a) == both && discovered(b) == both; }))
      << testing::PrintToString(discovered(a)) << testing::PrintToString(discovered(b));
  ASSERT_TRUE(b.stop());
  const std::vector<std::string> only_a{"127.0.0.1:" + std::to_string(a.io_port())};
  EXPECT_TRUE(wait_until([&] { return discovered(a) == only_a; })) << testing::PrintToString(discovered(a));
}

// Reservations hold across the group: host A registers and takes Write Exclusive through member A; host B
// gets a Reservation Conflict through member B at once (the state is the group's, not A's); A is killed
// and the reservation still holds through B and C, where host A is still the holder and writes.
TEST_F(GroupE2e, AReservationTakenThroughOneMemberHoldsOnEveryMember) {
  namespace p = rdmablk::protocol;
  TargetProcess a, b, c;
  ASSERT_TRUE(start_members({&a, &b, &c}, kActiveActive));
  constexpr uint32_t kNs = 1;
  Session host_a_via_a = session(a, kHostA), host_b_via_b = session(b, kHostB);
  ASSERT_TRUE(host_a_via_a.q && host_b_via_b.q);
  auto& qa = host_a_via_a.q;
  auto& qb = host_b_via_b.q;
  auto reg = rdmablk::initiator::reservation_register(*qa, kNs, p::RegisterAction::register_key, false,
                                                      p::ChangePtpl::no_change, 0, 0xA);
  ASSERT_TRUE(reg) << reg.error().message;
  auto acq = rdmablk::initiator::reservation_acquire(*qa, kNs, p::AcquireAction::acquire, false,
                                                     p::ReservationType::write_exclusive, 0xA, 0);
  ASSERT_TRUE(acq) << acq.error().message;

  std::vector<uint8_t> block = pattern(kBlock, 9);
  auto w = write_blocks(*qb, kNs, 0, kBlock, block);
  ASSERT_FALSE(w) << "host B wrote through member B past host A's Write Exclusive taken through member A";
  EXPECT_NE(w.error().message.find("Reservation Conflict"), std::string::npos) << w.error().message;
  // Host B registers through B: host A's reservation is seen there, with both registrants.
  auto reg_b = rdmablk::initiator::reservation_register(*qb, kNs, p::RegisterAction::register_key, false,
                                                        p::ChangePtpl::no_change, 0, 0xB);
  ASSERT_TRUE(reg_b) << reg_b.error().message;
  auto st = rdmablk::initiator::reservation_report(*qa, kNs, true);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->registrants.size(), 2u) << "host B's registration through B is seen through A";

  host_a_via_a.q.reset();  // the queue before its controller
  host_a_via_a.ctrl.reset();
  a.kill_now();
  for (TargetProcess* m : {&b, &c}) {
    Session host_b = session(*m, kHostB), host_a = session(*m, kHostA);
    ASSERT_TRUE(host_a.q && host_b.q);
    auto denied = write_blocks(*host_b.q, kNs, 0, kBlock, block);
    EXPECT_FALSE(denied) << "the reservation holds after member A died";
    auto allowed = write_blocks(*host_a.q, kNs, 0, kBlock, block);
    EXPECT_TRUE(allowed) << "host A is still the holder, through any member: "
                         << (allowed ? "" : allowed.error().message);
  }
}

// The oldest reservation notice queued on `c`'s controller (log page 80h): its type, 0 when none.
uint8_t next_notice(rdmablk::initiator::Controller& c, uint32_t* nsid) {
  auto page = c.get_log_page(rdmablk::protocol::LogPageId::reservation_notification, 0, 64);
  if (!page || page->size() < sizeof(rdmablk::protocol::ReservationNotificationLog)) return 0xFF;
  const auto log = rdmablk::protocol::load<rdmablk::protocol::ReservationNotificationLog>(page->data());
  *nsid = log.nsid.get();
  return log.type;
}

// Host A preempts and aborts host B's reservation through member A while host B writes through member B:
// host B's controllers on B and C get the Registration Preempted notice (log page 80h), B and C wait host B's
// running writes out before they acknowledge A's notification (they log it), and host B's next write through
// B is a Reservation Conflict.
TEST_F(GroupE2e, APreemptAndAbortThroughOneMemberReachesTheHostsOfTheOthers) {
  namespace p = rdmablk::protocol;
  using rdmablk::initiator::reservation_acquire;
  using rdmablk::initiator::reservation_register;
  TargetProcess a, b, c;
  ASSERT_TRUE(start_members({&a, &b, &c}, kActiveActive));
  constexpr uint32_t kNs = 1;
  auto host_a = connect_or_fail(controller_options(a.io_port(), kSubnqn, kHostA), a);
  auto host_b = connect_or_fail(controller_options(b.io_port(), kSubnqn, kHostB), b);
  auto host_b_via_c = connect_or_fail(controller_options(c.io_port(), kSubnqn, kHostB), c);
  ASSERT_TRUE(host_a && host_b && host_b_via_c);
  auto qa = io_queue_or_fail(*host_a, 1);
  auto qb = io_queue_or_fail(*host_b, 1);
  ASSERT_TRUE(qa && qb);
  ASSERT_TRUE(reservation_register(*qa, kNs, p::RegisterAction::register_key, false, p::ChangePtpl::no_change, 0, 0xA));
  ASSERT_TRUE(reservation_register(*qb, kNs, p::RegisterAction::register_key, false, p::ChangePtpl::no_change, 0, 0xB));
  ASSERT_TRUE(
      reservation_acquire(*qb, kNs, p::AcquireAction::acquire, false, p::ReservationType::write_exclusive, 0xB, 0));

  // Host B writes through B in a loop until refused.
  std::atomic<int> written{0};
  std::atomic<bool> stop{false};  // only when the preempt failed: the writes would never be refused
  std::string refusal;
  std::thread writer([&] {
    std::vector<uint8_t> block = pattern(8 * kBlock, 3);
    for (uint64_t lba = 0; !stop; lba = (lba + 8) % 4096) {
      auto w = write_blocks(*qb, kNs, lba, kBlock, block);
      if (!w || !w->get_status().ok()) {
        refusal = w ? "status" : w.error().message;
        return;
      }
      ++written;
    }
  });
  const bool flowing = wait_until([&] { return written.load() >= 20; });
  const auto before = Clock::now();
  auto preempt = reservation_acquire(*qa, kNs, p::AcquireAction::preempt_and_abort, false,
                                     p::ReservationType::write_exclusive, 0xA, 0xB);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - before).count();
  if (!preempt) stop = true;
  writer.join();
  ASSERT_TRUE(flowing) << "host B's writes did not flow through B";
  ASSERT_TRUE(preempt) << preempt.error().message;
  std::printf("preempt and abort through A with host B writing through B: %lld ms, %d writes before\n",
              static_cast<long long>(took), written.load());
  EXPECT_NE(refusal.find("Reservation Conflict"), std::string::npos) << refusal;

  for (auto* via : {host_b.get(), host_b_via_c.get()}) {
    uint32_t nsid = 0;
    EXPECT_EQ(next_notice(*via, &nsid), static_cast<uint8_t>(p::ReservationNotice::registration_preempted))
        << via->where();
    EXPECT_EQ(nsid, kNs);
    EXPECT_EQ(next_notice(*via, &nsid), static_cast<uint8_t>(p::ReservationNotice::empty)) << "one notice, once";
  }
  uint32_t nsid = 0;
  EXPECT_EQ(next_notice(*host_a, &nsid), static_cast<uint8_t>(p::ReservationNotice::empty))
      << "the preempting host is not told";
  // B and C (host B has a controller on each) waited host B's writes out; A told itself.
  for (const TargetProcess* m : {&b, &c}) {
    EXPECT_NE(m->log().find("through another gateway group member: the writes here ended in"), std::string::npos)
        << m->log();
  }
  EXPECT_EQ(a.log().find("through another gateway group member"), std::string::npos) << a.log();
}

// The CAW counter through two members of a group (every member serving namespace 1: non_optimized
// standby): 4 connections x 200 increments end exact; the OSD does each compare and write atomically.
TEST_F(GroupE2e, TheCawCounterThroughTwoMembersEndsExact) {
  TargetProcess a, b;
  ASSERT_TRUE(start_members({&a, &b}, kActiveActive));
  CawQueues q;
  ASSERT_TRUE(connect_caw_queues({&a, &b}, q));
  const CawCounterResult r = run_caw_counter(q.raw, 40, 200);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.final_value, 800u);
  std::printf("[ counter  ] through two group members, 4 connections x 200 increments: %llu, %d miscompares retried\n",
              static_cast<unsigned long long>(r.final_value), r.retries);
}

}  // namespace

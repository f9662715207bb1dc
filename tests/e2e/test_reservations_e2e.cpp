// Persistent reservations and fused Compare and Write end to end over NVMe/TCP: the initiator library
// (initiator/host/shared_volume.h) against the real rdmablk-target, with hosts that differ in host NQN and
// host ID. Every reservation type seen by a holder, a registrant and a non-registrant; preempt; clear;
// PTPL across a restart and across SIGKILL of the target; and the Compare and Write counter: four
// connections from two hosts each add 1 to a counter 200 times with fused Compare and Write, retrying on a
// miscompare, and the counter ends at exactly 800.
#include <gtest/gtest.h>

#include <cstdio>

#include "caw_counter.h"
#include "e2e_common.h"
#include "initiator/host/shared_volume.h"
#include "protocol/status.h"

namespace e2e {
namespace {

namespace p = rdmablk::protocol;
namespace in = rdmablk::initiator;
using in::IoQueue;
using p::ReservationType;

constexpr uint32_t kBs = 512;
constexpr const char* kHostC = "nqn.2024-11.io.rdmablk:host-c";

const char* const kFileNamespace = R"(      - nsid: 1
        backend: file
        path: ${DIR}/shared.img
        size: 16MiB
        direct: false
)";

// One host: a controller with one I/O queue.
struct Host {
  std::unique_ptr<in::Controller> ctrl;
  std::unique_ptr<IoQueue> q;
};

Host connect_host(const TargetProcess& t, const std::string& hostnqn) {
  Host h;
  h.ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn, hostnqn), t);
  if (h.ctrl) h.q = io_queue_or_fail(*h.ctrl, 1);
  return h;
}

bool conflict(const rdmablk::Result<void>& r) {
  return !r && r.error().message.find("Reservation Conflict") != std::string::npos;
}
template <typename T>
bool conflict(const rdmablk::Result<T>& r) {
  return !r && r.error().message.find("Reservation Conflict") != std::string::npos;
}
std::string what(const rdmablk::Result<void>& r) { return r ? "success" : r.error().message; }
template <typename T>
std::string what(const rdmablk::Result<T>& r) {
  return r ? "success" : r.error().message;
}

rdmablk::Result<void> do_register(IoQueue& q, uint64_t key, p::ChangePtpl cptpl = p::ChangePtpl::no_change) {
  return in::reservation_register(q, 1, p::RegisterAction::register_key, false, cptpl, 0, key);
}
rdmablk::Result<void> acquire(IoQueue& q, uint64_t key, ReservationType t) {
  return in::reservation_acquire(q, 1, p::AcquireAction::acquire, false, t, key, 0);
}

class ReservationsE2e : public ::testing::Test {
 protected:
  void start(const char* ns = kRamNamespace, const std::string& top = "") {
    ASSERT_TRUE(t.start(config_with_namespaces(ns, "", top)));
    connect_all();
  }
  void connect_all() {
    a = connect_host(t, kHostA);
    b = connect_host(t, kHostB);
    c = connect_host(t, kHostC);
    ASSERT_TRUE(a.q && b.q && c.q);
  }
  void disconnect_all() {
    a = Host{};
    b = Host{};
    c = Host{};
  }
  rdmablk::Result<p::Cqe> read(Host& h) {
    std::vector<uint8_t> buf(kBs);
    return read_blocks(*h.q, 1, 7, kBs, buf);
  }
  rdmablk::Result<p::Cqe> write(Host& h) {
    auto buf = pattern(kBs, 5);
    return write_blocks(*h.q, 1, 7, kBs, buf);
  }
  // Whether `h` may read and write now, as "RW", "R", "W" or "-".
  std::string rights(Host& h) {
    const auto r = read(h), w = write(h);
    EXPECT_TRUE(r || conflict(r)) << what(r);
    EXPECT_TRUE(w || conflict(w)) << what(w);
    return std::string(r ? "R" : "") + (w ? "W" : "") + (!r && !w ? "-" : "");
  }

  TargetProcess t;
  Host a, b, c;
};

// NVMe Base 2.0, "Command Behavior in the Presence of a Reservation": A holds it, B is a registrant, C is not.
TEST_F(ReservationsE2e, EveryTypeAsHolderRegistrantAndNonRegistrantSeeIt) {
  start();
  struct Row {
    ReservationType type;
    const char* registrant;
    const char* non_registrant;
  };
  const Row rows[] = {
      {ReservationType::write_exclusive, "R", "R"},
      {ReservationType::exclusive_access, "-", "-"},
      {ReservationType::write_exclusive_registrants_only, "RW", "R"},
      {ReservationType::exclusive_access_registrants_only, "RW", "-"},
      {ReservationType::write_exclusive_all_registrants, "RW", "R"},
      {ReservationType::exclusive_access_all_registrants, "RW", "-"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE("type " + std::to_string(static_cast<int>(row.type)));
    ASSERT_TRUE(do_register(*a.q, 0xA));
    ASSERT_TRUE(do_register(*b.q, 0xB));
    auto acq = acquire(*a.q, 0xA, row.type);
    ASSERT_TRUE(acq) << what(acq);
    EXPECT_EQ(rights(a), "RW");
    EXPECT_EQ(rights(b), row.registrant);
    EXPECT_EQ(rights(c), row.non_registrant);
    auto st = in::reservation_report(*c.q, 1, true);
    ASSERT_TRUE(st) << what(st);
    EXPECT_EQ(st->rtype, static_cast<uint8_t>(row.type));
    ASSERT_EQ(st->registrants.size(), 2u);
    const bool all = row.type == ReservationType::write_exclusive_all_registrants ||
                     row.type == ReservationType::exclusive_access_all_registrants;
    EXPECT_TRUE(st->registrants[0].holds_reservation());
    EXPECT_EQ(st->registrants[1].holds_reservation(), all) << "every registrant holds an all-registrants type";
    EXPECT_EQ(st->registrants[0].hostid, host_identity(kHostA).hostid);
    // Clear: every registration and the reservation go; everyone may write again.
    auto clr = in::reservation_release(*b.q, 1, p::ReleaseAction::clear, false, ReservationType::none, 0xB);
    ASSERT_TRUE(clr) << what(clr);
    EXPECT_EQ(rights(c), "RW");
  }
}

TEST_F(ReservationsE2e, PreemptTakesTheReservationAndTheLoserIsShutOut) {
  start();
  ASSERT_TRUE(do_register(*a.q, 0xA));
  ASSERT_TRUE(do_register(*b.q, 0xB));
  ASSERT_TRUE(acquire(*a.q, 0xA, ReservationType::write_exclusive));
  // A wrong key is a conflict; then B preempts A (and its registration) with A's key.
  EXPECT_TRUE(conflict(in::reservation_acquire(*b.q, 1, p::AcquireAction::preempt, false,
                                               ReservationType::exclusive_access, 0xBAD, 0xA)));
  auto pre = in::reservation_acquire(*b.q, 1, p::AcquireAction::preempt_and_abort, false,
                                     ReservationType::exclusive_access_registrants_only, 0xB, 0xA);
  ASSERT_TRUE(pre) << what(pre);
  EXPECT_EQ(rights(a), "-") << "A is no registrant of an Exclusive Access - Registrants Only reservation";
  EXPECT_EQ(rights(b), "RW");
  auto st = in::reservation_report(*a.q, 1, true);
  ASSERT_TRUE(st) << what(st);
  ASSERT_EQ(st->registrants.size(), 1u);
  EXPECT_EQ(st->registrants[0].rkey, 0xBu);
  EXPECT_TRUE(conflict(in::reservation_release(*a.q, 1, p::ReleaseAction::release, false,
                                               ReservationType::exclusive_access_registrants_only, 0xA)));
}

// With PTPL set the registrations and the reservation come back after SIGTERM and after SIGKILL; once PTPL
// is cleared they do not.
TEST_F(ReservationsE2e, PtplSurvivesARestartAndAKill) {
  start(kFileNamespace, "state_dir: ${DIR}/state\n");
  ASSERT_TRUE(do_register(*a.q, 0xA1, p::ChangePtpl::set));
  ASSERT_TRUE(acquire(*a.q, 0xA1, ReservationType::exclusive_access));
  EXPECT_TRUE(std::filesystem::exists(t.dir() / "state")) << "the state directory holds the namespace's file";
  auto check_held = [&](const char* when) {
    SCOPED_TRACE(when);
    connect_all();
    EXPECT_EQ(rights(c), "-");
    auto st = in::reservation_report(*c.q, 1, true);
    ASSERT_TRUE(st) << what(st);
    EXPECT_EQ(st->rtype, static_cast<uint8_t>(ReservationType::exclusive_access));
    EXPECT_EQ(st->ptpls, 1);
    ASSERT_EQ(st->registrants.size(), 1u);
    EXPECT_EQ(st->registrants[0].rkey, 0xA1u);
    EXPECT_EQ(st->registrants[0].hostid, host_identity(kHostA).hostid);
  };
  disconnect_all();
  ASSERT_TRUE(t.stop());
  ASSERT_TRUE(t.restart());
  check_held("after a restart");
  disconnect_all();
  t.kill_now();
  ASSERT_TRUE(t.restart());
  check_held("after SIGKILL");
  EXPECT_NE(t.log().find("reservations restored"), std::string::npos);
  // PTPL cleared (Register with CPTPL 10b): the next start has none.
  ASSERT_TRUE(in::reservation_register(*a.q, 1, p::RegisterAction::register_key, false, p::ChangePtpl::clear, 0, 0xA1));
  disconnect_all();
  t.kill_now();
  ASSERT_TRUE(t.restart());
  connect_all();
  EXPECT_EQ(rights(c), "RW");
}

// The Compare and Write counter (caw_counter.h): two controllers of each of two hosts, 200 increments each.
TEST_F(ReservationsE2e, CompareAndWriteCounterFromFourConnectionsOfTwoHosts) {
  ASSERT_TRUE(t.start(config_with_namespaces(kFileNamespace)));
  std::vector<Host> conns;
  for (const char* host : {kHostA, kHostA, kHostB, kHostB}) {
    conns.push_back(connect_host(t, host));
    ASSERT_TRUE(conns.back().q);
  }
  std::vector<IoQueue*> queues;
  for (Host& h : conns) queues.push_back(h.q.get());
  const CawCounterResult r = run_caw_counter(queues, 33, 200);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front() << "\n" << t.log();
  EXPECT_EQ(r.final_value, 800u);
  std::printf("[ counter  ] file namespace, 4 connections x 200 increments: %llu, %d miscompares retried\n",
              static_cast<unsigned long long>(r.final_value), r.retries);
}

}  // namespace
}  // namespace e2e

// End to end, the host side of ANA that the userspace multipath attach builds on (initiator/ublk/volume.cpp):
// the Controller reads the real target's ANA log, keeps an Asynchronous Event Request outstanding, sees the
// ANA Change notice `ctl ana set` sends, and an I/O command through an inaccessible path gets the path-related
// status the ublk queue holds on. The failover between two targets runs in the VM lab
// (tests/vm/attach-ublk-multipath).
#include <gtest/gtest.h>

#include <array>
#include <thread>

#include "e2e_common.h"
#include "initiator/ublk/multipath.h"
#include "protocol/ana.h"
#include "protocol/status.h"

namespace e2e {
namespace {

namespace p = rdmablk::protocol;
using rdmablk::initiator::ublk::ana_state_of;
using rdmablk::initiator::ublk::parse_ana_log;

std::string config_with_ana(const std::string& state) {
  return R"(listeners:
  - transport: tcp
    address: 127.0.0.1
    port: ${IO_PORT}
    ana: {1: )" + state + R"(}
  - transport: tcp
    address: 127.0.0.1
    port: ${DISC_PORT}
    role: discovery
subsystems:
  - nqn: ${NQN}
    allow_any_host: true
    namespaces:
)" + std::string(kRamNamespace);
}

// `rdmablk-target ctl ana set` on the io listener: what an operator moving the preferred path runs.
::testing::AssertionResult ana_set(const TargetProcess& t, const std::string& state) {
  auto r = ctl(t, {"ana", "set", "--listener", "127.0.0.1:" + std::to_string(t.io_port()), "--group", "1", "--state",
                  state},
               false);
  if (r.exit_status == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "ctl ana set " << state << ": exit " << r.exit_status << "\n" << r.out
                                       << r.err;
}

std::optional<p::AnaState> read_state(rdmablk::initiator::Controller& c) {
  auto page = c.read_ana_log();
  EXPECT_TRUE(page) << (page ? "" : page.error().message);
  if (!page) return std::nullopt;
  auto log = parse_ana_log(*page);
  EXPECT_TRUE(log) << (log ? "" : log.error().message);
  if (!log) return std::nullopt;
  return ana_state_of(*log, 1, c.find_namespace(1)->id.anagrpid.get());
}

// Runs the controller's service() (what the supervisor's loop does) until an ANA Change notice came in.
bool wait_ana_change(rdmablk::initiator::Controller& ctrl) {
  for (auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until;) {
    ctrl.service();
    if (ctrl.take_ana_change()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// One read of block 0 through `io`, polled to its completion: the status the target answered.
p::Status read_block(rdmablk::initiator::IoQueue& io) {
  struct Done {
    bool done = false;
    p::Cqe cqe{};
  } d;
  std::array<uint8_t, 512> block{};
  rdmablk::transport::HostCommand cmd{};
  cmd.context = &d;
  cmd.on_complete = [](rdmablk::transport::HostCommand& c, const p::Cqe& cqe) noexcept {
    auto* self = static_cast<Done*>(c.context);
    self->done = true;
    self->cqe = cqe;
  };
  const p::Status submitted = io.submit_read(cmd, 1, 0, 1, block);
  EXPECT_TRUE(submitted.ok()) << rdmablk::initiator::describe_status(submitted);
  if (!submitted.ok()) return submitted;
  for (auto until = std::chrono::steady_clock::now() + 30s; !d.done && std::chrono::steady_clock::now() < until;) {
    if (io.poll(1, 100ms) < 0) break;
  }
  EXPECT_TRUE(d.done) << "no completion for the read";
  return d.done ? d.cqe.get_status() : p::status::internal_error;
}

TEST(MultipathE2e, AnaLogChangeNoticeAndPathStatus) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_ana("optimized")));
  auto ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA, 30'000), t);
  ASSERT_TRUE(ctrl);
  ASSERT_TRUE(ctrl->reports_ana());
  ASSERT_TRUE(ctrl->enable_ana_events());
  EXPECT_EQ(read_state(*ctrl), p::AnaState::optimized);
  EXPECT_FALSE(ctrl->take_ana_change());
  auto io = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(io);
  EXPECT_TRUE(read_block(*io).ok());

  // The group becomes inaccessible on this listener: the outstanding AER completes with the ANA Change
  // notice, which service() (the supervisor's loop) picks up.
  ASSERT_TRUE(ana_set(t, "inaccessible"));
  ASSERT_TRUE(wait_ana_change(*ctrl)) << "no ANA Change notice within 30 s of ctl ana set\n" << t.log();
  ASSERT_FALSE(ctrl->failed()) << ctrl->failure();
  EXPECT_EQ(read_state(*ctrl), p::AnaState::inaccessible);

  // I/O through the inaccessible path: ANA Inaccessible, path-related, without DNR (retry elsewhere).
  const p::Status st = read_block(*io);
  EXPECT_TRUE(st.is(p::status::ana_inaccessible)) << rdmablk::initiator::describe_status(st);
  EXPECT_EQ(st.sct(), p::StatusCodeType::path_related);
  EXPECT_FALSE(st.dnr());

  // The notice was re-armed (service() submits a new AER): the way back is announced too.
  ASSERT_TRUE(ana_set(t, "non_optimized"));
  ASSERT_TRUE(wait_ana_change(*ctrl)) << "no second ANA Change notice\n" << t.log();
  EXPECT_EQ(read_state(*ctrl), p::AnaState::non_optimized);
  io->disconnect();
  io.reset();
  EXPECT_TRUE(ctrl->shutdown());
}

// Editing a listener's `ana` keys and reloading (SIGHUP) applies them: the listener stays bound as started,
// its group states follow the file, and the controllers on it get the ANA Change notice.
TEST(MultipathE2e, ReloadAppliesChangedAnaKeys) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_ana("optimized")));
  auto ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA, 30'000), t);
  ASSERT_TRUE(ctrl);
  ASSERT_TRUE(ctrl->enable_ana_events());
  EXPECT_EQ(read_state(*ctrl), p::AnaState::optimized);
  ASSERT_TRUE(t.reload(config_with_ana("non_optimized")));
  ASSERT_TRUE(wait_ana_change(*ctrl)) << "no ANA Change notice after the reload\n" << t.log();
  EXPECT_EQ(read_state(*ctrl), p::AnaState::non_optimized);
  EXPECT_NE(t.log().find("ANA changes 1"), std::string::npos) << t.log();
  EXPECT_EQ(t.log().find("take effect at the next restart"), std::string::npos) << t.log();
  EXPECT_TRUE(ctrl->shutdown());
}

}  // namespace
}  // namespace e2e

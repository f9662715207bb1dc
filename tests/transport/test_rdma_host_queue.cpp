// The RDMA host queue over fake verbs (fake_host_verbs.h: no device needed), a controller that answers
// every command after a delay. What it proves: poll() honours HostQueueOptions::busy_poll (a completion arriving
// within the window is reaped without arming the CQ or sleeping on the completion channel), stops spinning
// when the window has passed, and a failed completion fails every outstanding command once.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <memory>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "transport/host_queue.h"
#include "transport/fake_host_verbs.h"
#include "transport/rdma/rdma_host.h"

namespace {

using namespace rdmablk;
using namespace rdmablk::transport;
namespace p = rdmablk::protocol;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using rdmablk::transport::fakes::FakeVerbs;

struct Done {
  unsigned calls = 0;
  p::Status status{};
};

void on_done(HostCommand& cmd, const p::Cqe& cqe) noexcept {
  auto* d = static_cast<Done*>(cmd.context);
  ++d->calls;
  d->status = cqe.get_status();
}

HostQueueOptions options(std::chrono::microseconds busy_poll) {
  HostQueueOptions o;
  o.address.type = TransportType::rdma;
  o.address.traddr = "192.0.2.1";
  o.address.trsvcid = 4420;
  o.qid = 1;
  o.entries = 8;
  o.busy_poll = busy_poll;
  return o;
}

HostCommand flush_command(Done& done) {
  HostCommand cmd;
  cmd.sqe = p::make_flush(0, 1);
  cmd.on_complete = &on_done;
  cmd.context = &done;
  return cmd;
}

TEST(RdmaHostQueueFake, BusyPollReapsACompletionWithoutArmingTheCq) {
  FakeVerbs f;
  f.delay = 2ms;  // well inside the busy-poll window
  auto q = rdma::adopt_rdma_host_queue(options(500ms), f.verbs());
  ASSERT_TRUE(q) << q.error().message;
  Done done;
  HostCommand cmd = flush_command(done);
  ASSERT_TRUE((*q)->submit(cmd).ok());
  EXPECT_EQ((*q)->outstanding(), 1u);
  EXPECT_EQ((*q)->poll(1, 5s), 1);
  EXPECT_EQ(done.calls, 1u);
  EXPECT_TRUE(done.status.ok());
  EXPECT_EQ((*q)->outstanding(), 0u);
  EXPECT_EQ(f.arm_calls, 0u) << "busy_poll set: the CQ is polled, never armed, the channel never slept on";
  EXPECT_GT(f.poll_calls, 2u);
}

TEST(RdmaHostQueueFake, WithoutBusyPollTheCqIsArmedBeforeSleeping) {
  FakeVerbs f;
  f.delay = 20ms;
  auto q = rdma::adopt_rdma_host_queue(options(0us), f.verbs());
  ASSERT_TRUE(q) << q.error().message;
  Done done;
  HostCommand cmd = flush_command(done);
  ASSERT_TRUE((*q)->submit(cmd).ok());
  // The fake never signals the channel: poll() sleeps until its timeout, then reaps what is there.
  EXPECT_EQ((*q)->poll(1, 100ms), 1);
  EXPECT_EQ(done.calls, 1u);
  EXPECT_EQ(f.arm_calls, 1u);
  EXPECT_LE(f.poll_calls, 5u) << "no busy-poll: a few CQ polls around the arm and the sleep, no spinning";
}

TEST(RdmaHostQueueFake, BusyPollStopsWhenTheWindowHasPassed) {
  FakeVerbs f;
  f.delay = 50ms;  // after the window
  auto q = rdma::adopt_rdma_host_queue(options(2ms), f.verbs());
  ASSERT_TRUE(q) << q.error().message;
  Done done;
  HostCommand cmd = flush_command(done);
  ASSERT_TRUE((*q)->submit(cmd).ok());
  const auto start = Clock::now();
  EXPECT_EQ((*q)->poll(1, 150ms), 1);
  EXPECT_GE(Clock::now() - start, 100ms) << "slept on the channel until the timeout";
  EXPECT_EQ(done.calls, 1u);
  EXPECT_EQ(f.arm_calls, 1u);
}

TEST(RdmaHostQueueFake, PollWithoutMinimumDoesNotWait) {
  FakeVerbs f;
  auto q = rdma::adopt_rdma_host_queue(options(500ms), f.verbs());
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ((*q)->poll(0, 1s), 0);
  EXPECT_EQ(f.poll_calls, 1u);
  EXPECT_EQ(f.arm_calls, 0u);
}

TEST(RdmaHostQueueFake, FailedReceiveFailsEveryOutstandingCommandOnce) {
  FakeVerbs f;
  f.recv_status = IBV_WC_REM_ACCESS_ERR;
  auto q = rdma::adopt_rdma_host_queue(options(0us), f.verbs());
  ASSERT_TRUE(q) << q.error().message;
  Done a, b;
  HostCommand ca = flush_command(a), cb = flush_command(b);
  ASSERT_TRUE((*q)->submit(ca).ok());
  ASSERT_TRUE((*q)->submit(cb).ok());
  EXPECT_EQ((*q)->poll(1, 1s), -ECONNRESET);
  EXPECT_EQ(a.calls, 1u);
  EXPECT_EQ(b.calls, 1u);
  EXPECT_EQ(a.status, p::status::transient_transport_error);
  EXPECT_EQ((*q)->outstanding(), 0u);
  EXPECT_EQ((*q)->submit(ca), p::status::transient_transport_error);
  (*q)->close();
  EXPECT_EQ(a.calls, 1u);
}

// A fused pair (Compare + Write) leaves in one ibv_post_send as a chain of two SENDs, first half first,
// FUSE bits as given, and both complete.
TEST(RdmaHostQueueFake, FusedPairIsOneChainOfTwoAdjacentSends) {
  FakeVerbs f;
  f.record = true;
  auto q = rdma::adopt_rdma_host_queue(options(0us), f.verbs());
  ASSERT_TRUE(q) << q.error().message;
  Done a, b;
  HostCommand first = flush_command(a), second = flush_command(b);
  first.sqe.hdr.set_fuse(p::FusedOperation::first);
  second.sqe.hdr.set_fuse(p::FusedOperation::second);
  ASSERT_TRUE((*q)->submit_fused(first, second).ok());
  EXPECT_EQ(f.post_send_calls, 1u);
  ASSERT_EQ(f.sent.size(), 2u);
  EXPECT_EQ(f.sent[0].hdr.fuse(), p::FusedOperation::first);
  EXPECT_EQ(f.sent[1].hdr.fuse(), p::FusedOperation::second);
  EXPECT_NE(f.sent[0].hdr.cid.get(), f.sent[1].hdr.cid.get());
  EXPECT_EQ((*q)->outstanding(), 2u);
  EXPECT_EQ((*q)->poll(2, 1s), 2);
  EXPECT_EQ(a.calls, 1u);
  EXPECT_EQ(b.calls, 1u);
}

// Only one free slot: the pair is refused whole (no half goes out alone), and the queue still works.
TEST(RdmaHostQueueFake, FusedPairWithRoomForOneIsRefusedWhole) {
  FakeVerbs f;
  f.record = true;
  auto q = rdma::adopt_rdma_host_queue(options(0us), f.verbs());
  ASSERT_TRUE(q) << q.error().message;
  std::vector<Done> done(7);
  std::vector<HostCommand> fill;
  fill.reserve(7);
  for (auto& d : done) fill.push_back(flush_command(d));
  for (auto& c : fill) ASSERT_TRUE((*q)->submit(c).ok());  // 7 of 8 entries
  Done a, b;
  HostCommand first = flush_command(a), second = flush_command(b);
  EXPECT_EQ((*q)->submit_fused(first, second), p::status::command_interrupted);
  EXPECT_EQ(f.sent.size(), 7u);
  EXPECT_EQ((*q)->outstanding(), 7u);
  EXPECT_EQ((*q)->poll(7, 1s), 7);
  EXPECT_TRUE((*q)->submit_fused(first, second).ok());
  EXPECT_EQ((*q)->poll(2, 1s), 2);
  EXPECT_EQ(a.calls + b.calls, 2u);
}

}  // namespace

// The admission gate (target/core/admission.h) on its own: the allow-list and required-secret decisions,
// the failure window, the block and its end, and the throttled failure log, on a clock moved by hand.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "target/core/admission.h"
#include "target/core/subsystem.h"

namespace rdmablk::target::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kHost = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kOther = "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-555555555555";

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionTest() {
    limits_.max_failures = 3;
    limits_.window = 60s;
    limits_.block = 300s;
    limits_.log_lines_per_second = 2;
    limits_.now = [this] { return now_; };
  }

  // Records n failures of `host`; returns how many of them were logged.
  unsigned fail(AdmissionGate& gate, const std::string& host, unsigned n = 1) {
    unsigned logged = 0;
    for (unsigned i = 0; i < n; ++i) gate.record_failure(host, [&] { ++logged; });
    return logged;
  }

  AuthFailureLimits limits_;
  std::chrono::steady_clock::time_point now_ = std::chrono::steady_clock::time_point{} + 1000h;
};

TEST_F(AdmissionTest, BlocksAfterMaxFailuresWithinTheWindowUntilTheBlockEnds) {
  AdmissionGate gate(limits_);
  EXPECT_FALSE(gate.blocked(kHost));
  fail(gate, kHost, 2);
  EXPECT_FALSE(gate.blocked(kHost));
  now_ += 10s;
  fail(gate, kHost);
  EXPECT_TRUE(gate.blocked(kHost));
  EXPECT_FALSE(gate.blocked(kOther));  // per host
  now_ += 299s;
  EXPECT_TRUE(gate.blocked(kHost));
  now_ += 1s;
  EXPECT_FALSE(gate.blocked(kHost));  // the block ended
}

TEST_F(AdmissionTest, FailuresOutsideTheWindowDoNotCount) {
  AdmissionGate gate(limits_);
  fail(gate, kHost, 2);
  now_ += 60s;  // both fall out of the window
  fail(gate, kHost, 2);
  EXPECT_FALSE(gate.blocked(kHost));
  now_ += 30s;
  fail(gate, kHost);
  EXPECT_TRUE(gate.blocked(kHost));
}

TEST_F(AdmissionTest, ABlockStartsTheCountAfresh) {
  AdmissionGate gate(limits_);
  fail(gate, kHost, 3);
  ASSERT_TRUE(gate.blocked(kHost));
  now_ += 300s;
  ASSERT_FALSE(gate.blocked(kHost));
  fail(gate, kHost, 2);  // the failures before the block are forgotten
  EXPECT_FALSE(gate.blocked(kHost));
  fail(gate, kHost);
  EXPECT_TRUE(gate.blocked(kHost));
}

TEST_F(AdmissionTest, NoLimitNeverBlocks) {
  limits_.max_failures = 0;
  AdmissionGate gate(limits_);
  fail(gate, kHost, 50);
  EXPECT_FALSE(gate.blocked(kHost));
}

TEST_F(AdmissionTest, LogsAtMostLogLinesPerSecondOverAllHosts) {
  limits_.max_failures = 0;
  AdmissionGate gate(limits_);
  EXPECT_EQ(fail(gate, kHost, 2), 2u);
  EXPECT_EQ(fail(gate, kOther, 2), 0u);  // the same second: counted, not logged
  now_ += 1s;
  EXPECT_EQ(fail(gate, kOther, 3), 2u);
}

TEST_F(AdmissionTest, AdmitChecksAllowListThenSecretThenBlock) {
  AdmissionGate gate(limits_);
  Subsystem sub;
  sub.hosts = {kHost};
  EXPECT_EQ(gate.admit(sub, kOther, true).refusal, AdmissionRefusal::host_not_allowed);
  EXPECT_EQ(gate.admit(sub, kOther, false).refusal, AdmissionRefusal::host_not_allowed);

  auto admitted = gate.admit(sub, kHost, true);
  EXPECT_EQ(admitted.refusal, AdmissionRefusal::none);
  EXPECT_EQ(admitted.auth, nullptr);  // no secret, none required

  sub.require_authentication = true;
  EXPECT_EQ(gate.admit(sub, kHost, true).refusal, AdmissionRefusal::no_secret);
  EXPECT_EQ(gate.admit(sub, kHost, false).refusal, AdmissionRefusal::none);  // I/O queues: the controller's

  auto auth = std::make_shared<HostAuth>();
  sub.host_auth.emplace(kHost, auth);
  admitted = gate.admit(sub, kHost, true);
  EXPECT_EQ(admitted.refusal, AdmissionRefusal::none);
  EXPECT_EQ(admitted.auth, auth);

  fail(gate, kHost, 3);
  EXPECT_EQ(gate.admit(sub, kHost, true).refusal, AdmissionRefusal::blocked);
  EXPECT_EQ(gate.admit(sub, kHost, true).auth, nullptr);
  EXPECT_EQ(gate.admit(sub, kHost, false).refusal, AdmissionRefusal::blocked);
  sub.allow_any_host = true;
  EXPECT_EQ(gate.admit(sub, kOther, true).refusal, AdmissionRefusal::no_secret);
  sub.require_authentication = false;
  EXPECT_EQ(gate.admit(sub, kOther, true).refusal, AdmissionRefusal::none);
}

}  // namespace
}  // namespace rdmablk::target::testing

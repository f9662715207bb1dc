// End to end, the control path: keep-alive expiry, the host allow-list (Connect and discovery), SIGHUP
// reloads that add/remove namespaces (with the namespace-attribute-changed event) and hosts, and the
// discovery log's addresses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "e2e_common.h"
#include "initiator/host/discovery_strings.h"
#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/fabrics.h"
#include "protocol/log_pages.h"
#include "protocol/status.h"

namespace e2e {
namespace {

using rdmablk::initiator::Controller;
using rdmablk::initiator::field_string;
using rdmablk::transport::DataDirection;
using rdmablk::transport::HostCommand;
namespace p = rdmablk::protocol;

std::string describe(p::Status s) { return rdmablk::initiator::describe_status(s); }

// The fabrics Connect of an admin queue, by hand, to see the exact status the target answers.
p::Status raw_admin_connect(uint16_t port, const std::string& subnqn, const std::string& hostnqn) {
  rdmablk::transport::HostQueueOptions qo;
  qo.address = {rdmablk::transport::TransportType::tcp, "127.0.0.1", port};
  qo.qid = 0;
  qo.entries = 32;
  qo.in_capsule_limit = 8192;
  auto q = rdmablk::transport::connect_host_queue(qo);
  EXPECT_TRUE(q) << (q ? "" : q.error().message);
  if (!q) return p::status::internal_error;
  std::array<uint8_t, p::kConnectDataSize> data{};
  p::store(data.data(), p::make_connect_data(host_identity(hostnqn).hostid, p::kCntlidDynamic, subnqn, hostnqn));
  RawCommand c;
  c.cmd.sqe = p::to_sqe(p::make_connect(0, 0, 31, 0, p::kConnectDisableSqFlow, p::SglDescriptor{}));
  c.cmd.direction = DataDirection::host_to_controller;
  c.cmd.data = data;
  EXPECT_TRUE((*q)->submit(c.cmd).ok());
  EXPECT_TRUE(c.wait(**q, 30s)) << "no answer to Connect";
  (*q)->close();
  return c.done ? c.cqe.get_status() : p::status::internal_error;
}

std::vector<p::DiscoveryLogEntry> discovery_entries(uint16_t port, const std::string& hostnqn, const TargetProcess& t) {
  auto d = Controller::connect_discovery(controller_options(port, "", hostnqn, 0));
  EXPECT_TRUE(d) << (d ? "" : d.error().message) << "\n" << t.log();
  if (!d) return {};
  auto log = (*d)->discovery_log();
  EXPECT_TRUE(log) << (log ? "" : log.error().message);
  EXPECT_TRUE((*d)->shutdown());
  return log ? log->entries : std::vector<p::DiscoveryLogEntry>{};
}

std::vector<const p::DiscoveryLogEntry*> subsystem_entries(const std::vector<p::DiscoveryLogEntry>& entries,
                                                           const std::string& nqn) {
  std::vector<const p::DiscoveryLogEntry*> out;
  for (const auto& e : entries) {
    if (e.subtype == static_cast<uint8_t>(p::SubsystemType::nvme) &&
        field_string(e.subnqn.data(), e.subnqn.size()) == nqn)
      out.push_back(&e);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Keep-alive
// ---------------------------------------------------------------------------------------------------------

// A host that stops sending anything loses its controller after KATO..2*KATO; the target says so in its
// log and closes the connections; a host that keeps sending Keep Alive is unaffected.
TEST(ControlE2e, KeepAliveExpiryTearsDownOnlyTheSilentController) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  constexpr uint32_t kSilentKato = 1000;  // KAS is 1 s: the smallest timeout a host can ask for
  // The live host sends Keep Alive every KATO/2 from this thread. With 3 s, a Keep Alive may come 1.5 s late
  // (this thread or the target's reactor descheduled on a loaded machine) before the target would count
  // the host as gone: the test waits for the silent host's expiry, it does not race the live host's.
  constexpr uint32_t kAliveKato = 3000;
  auto silent = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA, kSilentKato), t);
  auto alive = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostB, kAliveKato), t);
  ASSERT_TRUE(silent && alive);
  // The target armed the live controller's timer before Connect returned: its first check (one KATO on)
  // sees the bring-up commands, the second (two KATO on) only Keep Alives. Run until that one is past.
  const auto alive_checked = std::chrono::steady_clock::now() + 2 * std::chrono::milliseconds(kAliveKato) + 1s;
  auto silent_q = io_queue_or_fail(*silent, 1);
  auto alive_q = io_queue_or_fail(*alive, 1);
  ASSERT_TRUE(silent_q && alive_q);
  const uint16_t silent_id = silent->cntlid();

  // Keep `alive` alive (service() sends Keep Alive every KATO/2) while `silent` sends nothing.
  const std::string expired = "controller " + std::to_string(silent_id) + " (";
  const auto deadline = std::chrono::steady_clock::now() + 60s;  // the expiry comes after 1-2 s
  bool seen = false;
  while (std::chrono::steady_clock::now() < deadline && !(seen && std::chrono::steady_clock::now() >= alive_checked)) {
    alive->service();
    std::this_thread::sleep_for(20ms);
    if (seen) continue;
    std::string log = t.log();
    for (std::size_t at = log.find(expired); at != std::string::npos; at = log.find(expired, at + 1)) {
      std::size_t eol = log.find('\n', at);
      if (log.substr(at, eol - at).find("keep-alive timeout") != std::string::npos) seen = true;
    }
  }
  ASSERT_TRUE(seen) << "no keep-alive expiry logged for controller " << silent_id << " within 60 s\n" << t.log();
  EXPECT_FALSE(alive->failed()) << alive->failure();

  // The silent host's next commands fail with a lost connection, on the admin queue and the I/O queue.
  std::vector<uint8_t> buf(4096);
  auto io = read_blocks(*silent_q, 1, 0, 512, buf);
  ASSERT_FALSE(io) << "I/O on a controller torn down by keep-alive succeeded";
  EXPECT_NE(io.error().message.find("connection lost"), std::string::npos) << io.error().message;
  auto admin = silent->identify_controller();
  ASSERT_FALSE(admin) << "admin command on a controller torn down by keep-alive succeeded";
  EXPECT_TRUE(admin.error().message.find("connection lost") != std::string::npos ||
              admin.error().errno_value == ECONNRESET)
      << admin.error().message;
  EXPECT_TRUE(silent->failed());

  // The other host goes on.
  {
    const std::string log = t.log();
    EXPECT_EQ(log.find("expired, tearing it down"), log.rfind("expired, tearing it down")) << "more than one expiry\n" << log;
  }
  auto data = pattern(8192, 3);
  std::vector<uint8_t> back(8192);
  alive->service();  // I/O is not keep-alive traffic (no TBKAS by default): a Keep Alive if one is due
  ASSERT_TRUE(write_blocks(*alive_q, 1, 64, 512, data));
  ASSERT_TRUE(read_blocks(*alive_q, 1, 64, 512, back));
  EXPECT_TRUE(back == data);
  auto id = alive->identify_controller();
  ASSERT_TRUE(id) << id.error().message;
  alive_q->disconnect();
  EXPECT_TRUE(alive->shutdown());

  // And the silent host can simply connect again.
  auto again = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA), t);
  ASSERT_TRUE(again);
  EXPECT_NE(again->cntlid(), 0);
  EXPECT_TRUE(again->shutdown());
}

// ---------------------------------------------------------------------------------------------------------
// Allow-list
// ---------------------------------------------------------------------------------------------------------

const std::string kOnlyHostA = std::string("    allow_any_host: false\n    hosts:\n      - ") + kHostA + "\n";

TEST(ControlE2e, HostNotOnTheAllowListIsRefusedAndDoesNotDiscoverTheSubsystem) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace, kOnlyHostA)));

  // Host B: Connect Invalid Host (SCT 1, SC 0x84), with DNR.
  p::Status st = raw_admin_connect(t.io_port(), kSubnqn, kHostB);
  EXPECT_TRUE(st.is(p::status::connect_invalid_host)) << describe(st);
  EXPECT_TRUE(st.dnr()) << describe(st);
  auto b = Controller::connect(controller_options(t.io_port(), kSubnqn, kHostB));
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("Connect Invalid Host"), std::string::npos) << b.error().message;
  EXPECT_TRUE(t.wait_for_log(std::string("host ") + kHostB + " is not allowed")) << t.log();

  // Host A: fine, and its I/O works.
  EXPECT_TRUE(raw_admin_connect(t.io_port(), kSubnqn, kHostA).ok());
  auto a = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA), t);
  ASSERT_TRUE(a);
  auto q = io_queue_or_fail(*a, 1);
  ASSERT_TRUE(q);
  auto data = pattern(4096, 9);
  ASSERT_TRUE(write_blocks(*q, 1, 0, 512, data));
  q->disconnect();
  EXPECT_TRUE(a->shutdown());

  // The same through `rdmablk identify`.
  auto identify = [&](const char* host) {
    return run_process({RDMABLK_CLI_BINARY, "identify", "-t", "tcp", "-a", "127.0.0.1", "-s",
                        std::to_string(t.io_port()), "-n", kSubnqn, "-q", host, "--hostid",
                        rdmablk::initiator::format_uuid(host_identity(host).hostid)},
                       t.dir(), 60s);
  };
  auto id_b = identify(kHostB);
  EXPECT_EQ(id_b.exit_status, 1) << id_b.out << id_b.err;
  EXPECT_NE(id_b.err.find("Connect Invalid Host"), std::string::npos) << id_b.err;
  auto id_a = identify(kHostA);
  EXPECT_EQ(id_a.exit_status, 0) << id_a.out << id_a.err;
  EXPECT_NE(id_a.out.find("nsid      : 1"), std::string::npos) << id_a.out;
  EXPECT_NE(id_a.out.find(kSubnqn), std::string::npos) << id_a.out;

  // Discovery (on the discovery listener and on the io listener): only host A sees the subsystem.
  for (uint16_t port : {t.discovery_port(), t.io_port()}) {
    SCOPED_TRACE("discovery on port " + std::to_string(port));
    auto as_b = discovery_entries(port, kHostB, t);
    EXPECT_TRUE(subsystem_entries(as_b, kSubnqn).empty()) << "host B discovered " << kSubnqn;
    auto as_a = discovery_entries(port, kHostA, t);
    EXPECT_EQ(subsystem_entries(as_a, kSubnqn).size(), 1u);
  }
}

// SIGHUP adding host B to `hosts`: B's persistent discovery controller gets a discovery log change event
// (notice 0xF0, LID 0x70) and its discovery log now lists the subsystem.
TEST(ControlE2e, ReloadAllowingAHostNotifiesItsDiscoveryController) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace, kOnlyHostA)));
  RecordingConnector rec;
  auto opts = controller_options(t.discovery_port(), "", kHostB, 120'000);
  opts.connector = rec.connector();
  RawCommand aer;
  auto d = Controller::connect_discovery(opts);
  ASSERT_TRUE(d) << d.error().message;
  auto before = (*d)->discovery_log();
  ASSERT_TRUE(before) << before.error().message;
  EXPECT_TRUE(subsystem_entries(before->entries, kSubnqn).empty());
  ASSERT_TRUE((*d)->admin(p::to_sqe(p::make_set_features(0, p::FeatureId::async_event_configuration,
                                                         p::kAecDiscoveryLogChange))));
  aer.cmd.sqe = p::make_async_event_request(0);
  ASSERT_TRUE(rec.admin_queue->submit(aer.cmd).ok());

  const std::string both = std::string("    allow_any_host: false\n    hosts:\n      - ") + kHostA + "\n      - " +
                           kHostB + "\n";
  ASSERT_TRUE(t.reload(config_with_namespaces(kRamNamespace, both)));
  ASSERT_TRUE(aer.wait(*rec.admin_queue, 30s)) << "no discovery log change event\n" << t.log();
  const uint32_t dw0 = aer.cqe.dw0.get();
  EXPECT_EQ(p::async_event_type(dw0), p::AsyncEventType::notice) << std::hex << dw0;
  EXPECT_EQ(p::async_event_info(dw0), static_cast<uint8_t>(p::AsyncEventNotice::discovery_log_page_change));
  EXPECT_EQ(p::async_event_lid(dw0), static_cast<uint8_t>(p::LogPageId::discovery));
  auto after = (*d)->discovery_log();
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_GT(after->genctr, before->genctr);
  EXPECT_EQ(subsystem_entries(after->entries, kSubnqn).size(), 1u);
  EXPECT_TRUE((*d)->shutdown());
}

// SIGHUP with host B removed from `hosts`: B's controller is torn down, A's connections keep working,
// and B can no longer connect.
TEST(ControlE2e, ReloadRemovingAHostDisconnectsOnlyThatHost) {
  TargetProcess t;
  const std::string both = std::string("    allow_any_host: false\n    hosts:\n      - ") + kHostA + "\n      - " +
                           kHostB + "\n";
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace, both)));
  auto a = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA), t);
  auto b = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostB), t);
  ASSERT_TRUE(a && b);
  auto qa = io_queue_or_fail(*a, 1);
  auto qb = io_queue_or_fail(*b, 1);
  ASSERT_TRUE(qa && qb);
  auto data = pattern(4096, 11);
  ASSERT_TRUE(write_blocks(*qa, 1, 8, 512, data));
  ASSERT_TRUE(write_blocks(*qb, 1, 16, 512, data));

  ASSERT_TRUE(t.reload(config_with_namespaces(kRamNamespace, kOnlyHostA)));
  EXPECT_TRUE(t.wait_for_log(std::string("host ") + kHostB + " is no longer allowed")) << t.log();
  EXPECT_EQ(t.log().find(std::string("host ") + kHostA + " is no longer allowed"), std::string::npos);

  // B's queues are closed by the target: its next command fails.
  std::vector<uint8_t> back(4096);
  auto rb = read_blocks(*qb, 1, 16, 512, back);
  EXPECT_FALSE(rb) << "host B still does I/O after being removed from hosts";
  EXPECT_FALSE(b->identify_controller());
  // A carries on, on the connections it had.
  auto ra = read_blocks(*qa, 1, 8, 512, back);
  ASSERT_TRUE(ra) << ra.error().message;
  EXPECT_TRUE(back == data);
  EXPECT_TRUE(a->identify_controller());
  // B cannot come back.
  EXPECT_TRUE(raw_admin_connect(t.io_port(), kSubnqn, kHostB).is(p::status::connect_invalid_host));
  qa->disconnect();
  EXPECT_TRUE(a->shutdown());
}

// ---------------------------------------------------------------------------------------------------------
// SIGHUP adding a namespace: Asynchronous Event (notice, namespace attribute changed, LID 4), changed
// namespace list, active namespace list; existing connections keep working.
// ---------------------------------------------------------------------------------------------------------

TEST(ControlE2e, ReloadAddingANamespaceRaisesAnEventAndTheHostSeesIt) {
  const std::string ns2 = R"(      - nsid: 2
        backend: file
        path: ns2.img
        size: 8MiB
)";
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));

  RecordingConnector rec;
  auto opts = controller_options(t.io_port(), kSubnqn);
  opts.connector = rec.connector();
  RawCommand aer;  // outlives the controller: the queue may complete it while closing
  auto ctrl = connect_or_fail(opts, t);
  ASSERT_TRUE(ctrl);
  ASSERT_NE(rec.admin_queue, nullptr);
  ASSERT_EQ(ctrl->namespaces().size(), 1u);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(q);
  auto before = pattern(4096, 21);
  ASSERT_TRUE(write_blocks(*q, 1, 0, 512, before));

  ASSERT_TRUE(request_namespace_events(*ctrl, *rec.admin_queue, aer));
  // Commands still flow on the admin queue while the AER is held.
  ASSERT_TRUE(ctrl->identify_controller());
  EXPECT_FALSE(aer.done) << "AER completed before anything changed: dw0 " << aer.cqe.dw0.get();

  ASSERT_TRUE(t.reload(config_with_namespaces(std::string(kRamNamespace) + ns2)));
  ASSERT_TRUE(aer.wait(*rec.admin_queue, 30s)) << "no asynchronous event after adding a namespace\n" << t.log();
  ASSERT_TRUE(aer.cqe.get_status().ok()) << describe(aer.cqe.get_status());
  const uint32_t dw0 = aer.cqe.dw0.get();
  EXPECT_EQ(p::async_event_type(dw0), p::AsyncEventType::notice) << std::hex << dw0;
  EXPECT_EQ(p::async_event_info(dw0), static_cast<uint8_t>(p::AsyncEventNotice::namespace_attribute_changed));
  EXPECT_EQ(p::async_event_lid(dw0), static_cast<uint8_t>(p::LogPageId::changed_namespace_list));

  // Changed Namespace List: exactly NSID 2.
  auto changed = ctrl->get_log_page(p::LogPageId::changed_namespace_list, 0, 4096);
  ASSERT_TRUE(changed) << changed.error().message;
  uint32_t first = 0, second = 0;
  std::memcpy(&first, changed->data(), 4);
  std::memcpy(&second, changed->data() + 4, 4);
  EXPECT_EQ(first, 2u);
  EXPECT_EQ(second, 0u);
  auto active = ctrl->active_namespaces();
  ASSERT_TRUE(active) << active.error().message;
  EXPECT_EQ(*active, (std::vector<uint32_t>{1, 2}));
  auto info = ctrl->identify_namespace(2);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->size_blocks * info->block_size, 8u << 20);

  // The connection from before the reload works, on both namespaces.
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(read_blocks(*q, 1, 0, 512, back));
  EXPECT_TRUE(back == before);
  auto fresh = pattern(4096, 22);
  auto w2 = write_blocks(*q, 2, 10, info->block_size, fresh);
  ASSERT_TRUE(w2) << w2.error().message;
  ASSERT_TRUE(read_blocks(*q, 2, 10, info->block_size, back));
  EXPECT_TRUE(back == fresh);

  // And removing it again: another event (the log read above re-armed it), NSID 2 gone, I/O refused.
  aer.done = false;
  aer.cmd.sqe = p::make_async_event_request(0);
  ASSERT_TRUE(rec.admin_queue->submit(aer.cmd).ok());
  ASSERT_TRUE(t.reload(config_with_namespaces(kRamNamespace)));
  ASSERT_TRUE(aer.wait(*rec.admin_queue, 30s)) << "no asynchronous event after removing a namespace\n" << t.log();
  EXPECT_EQ(p::async_event_lid(aer.cqe.dw0.get()), static_cast<uint8_t>(p::LogPageId::changed_namespace_list));
  changed = ctrl->get_log_page(p::LogPageId::changed_namespace_list, 0, 4096);
  ASSERT_TRUE(changed);
  std::memcpy(&first, changed->data(), 4);
  EXPECT_EQ(first, 2u);
  active = ctrl->active_namespaces();
  ASSERT_TRUE(active);
  EXPECT_EQ(*active, (std::vector<uint32_t>{1}));
  auto gone = read_blocks(*q, 2, 10, 512, back);
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().message.find("Invalid Namespace"), std::string::npos) << gone.error().message;
  ASSERT_TRUE(read_blocks(*q, 1, 0, 512, back));
  EXPECT_TRUE(back == before);

  q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());
}

// A file namespace without a configured size is as large as its file: grown underneath, the next reload
// (nvmet's revalidate_size) publishes the new size with a Namespace Attribute Changed event, and the blocks
// past the old end serve I/O.
TEST(ControlE2e, ReloadAnnouncesAGrownFile) {
  constexpr uint64_t kOld = 8u << 20, kNew = 12u << 20;
  const std::string ns2 = R"(      - nsid: 2
        backend: file
        path: ${DIR}/grow.img
)";
  TargetProcess t;
  const auto file = t.dir() / "grow.img";
  { std::ofstream(file).flush(); }
  std::filesystem::resize_file(file, kOld);
  ASSERT_TRUE(t.start(config_with_namespaces(std::string(kRamNamespace) + ns2)));

  RecordingConnector rec;
  auto opts = controller_options(t.io_port(), kSubnqn);
  opts.connector = rec.connector();
  RawCommand aer;  // outlives the controller
  auto ctrl = connect_or_fail(opts, t);
  ASSERT_TRUE(ctrl);
  auto info = ctrl->identify_namespace(2);
  ASSERT_TRUE(info) << info.error().message;
  ASSERT_EQ(info->size_blocks * info->block_size, kOld);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(q);
  std::vector<uint8_t> data = pattern(4096, 31), back(4096);
  const uint64_t past_old_end = kOld / 512 + 100;
  auto refused = write_blocks(*q, 2, past_old_end, 512, data);
  ASSERT_FALSE(refused) << "a write past the end was accepted";
  EXPECT_NE(refused.error().message.find("LBA Out of Range"), std::string::npos) << refused.error().message;
  ASSERT_TRUE(request_namespace_events(*ctrl, *rec.admin_queue, aer));

  // A reload with an unchanged file: no event.
  ASSERT_TRUE(t.reload(config_with_namespaces(std::string(kRamNamespace) + ns2)));
  ASSERT_TRUE(ctrl->identify_controller());  // a round trip after the reload's events would have been sent
  EXPECT_FALSE(aer.done) << "an event although nothing changed: dw0 " << aer.cqe.dw0.get();

  std::filesystem::resize_file(file, kNew);
  ASSERT_TRUE(t.reload(config_with_namespaces(std::string(kRamNamespace) + ns2)));
  std::vector<uint32_t> changed;
  ASSERT_TRUE(wait_namespace_changed(*ctrl, *rec.admin_queue, aer, 30s, &changed)) << t.log();
  EXPECT_EQ(changed, (std::vector<uint32_t>{2}));
  info = ctrl->identify_namespace(2);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->size_blocks * info->block_size, kNew);
  auto w = write_blocks(*q, 2, past_old_end, 512, data);
  ASSERT_TRUE(w) << w.error().message;
  ASSERT_TRUE(read_blocks(*q, 2, past_old_end, 512, back));
  EXPECT_TRUE(back == data);
  EXPECT_NE(t.log().find("namespace 2 resized from 16384 to 24576 blocks"), std::string::npos) << t.log();
  q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());
  EXPECT_TRUE(t.stop());
}

// A reload with a bad config changes nothing: the error is logged, hosts keep their namespaces and their
// connections, no event is raised, and a later good reload still works.
TEST(ControlE2e, FailedReloadChangesNothing) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  RecordingConnector rec;
  auto opts = controller_options(t.io_port(), kSubnqn);
  opts.connector = rec.connector();
  RawCommand aer;
  auto ctrl = connect_or_fail(opts, t);
  ASSERT_TRUE(ctrl);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(q);
  ASSERT_TRUE(ctrl->admin(p::to_sqe(p::make_set_features(0, p::FeatureId::async_event_configuration,
                                                         p::kAecNamespaceAttribute))));
  aer.cmd.sqe = p::make_async_event_request(0);
  ASSERT_TRUE(rec.admin_queue->submit(aer.cmd).ok());

  // NSID 2 twice: refused as a whole, so NSID 2 must not appear either.
  const std::string bad = std::string(kRamNamespace) +
                          "      - nsid: 2\n        backend: ram\n        size: 1MiB\n"
                          "      - nsid: 2\n        backend: ram\n        size: 1MiB\n";
  const std::size_t from = t.log_size();
  EXPECT_FALSE(t.reload(config_with_namespaces(bad)));  // ends at the "reload failed" line
  EXPECT_TRUE(t.wait_for_log("duplicate NSID 2", 30s, from)) << t.log();
  EXPECT_TRUE(t.running());

  auto active = ctrl->active_namespaces();
  ASSERT_TRUE(active) << active.error().message;
  EXPECT_EQ(*active, (std::vector<uint32_t>{1}));
  EXPECT_FALSE(aer.done) << "an event for a reload that failed: dw0 " << aer.cqe.dw0.get();
  auto data = pattern(4096, 5);
  ASSERT_TRUE(write_blocks(*q, 1, 0, 512, data));

  ASSERT_TRUE(t.reload(config_with_namespaces(std::string(kRamNamespace) +
                                              "      - nsid: 3\n        backend: null\n        size: 1MiB\n")));
  ASSERT_TRUE(aer.wait(*rec.admin_queue, 30s)) << t.log();
  active = ctrl->active_namespaces();
  ASSERT_TRUE(active);
  EXPECT_EQ(*active, (std::vector<uint32_t>{1, 3}));
  q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());
}

// ---------------------------------------------------------------------------------------------------------
// Discovery
// ---------------------------------------------------------------------------------------------------------

// Listeners bound to 0.0.0.0: the discovery log gives the address the host actually reached (127.0.0.1)
// with the io listener's port, never 0.0.0.0; a host can connect with exactly what the log says. The
// `rdmablk discover` CLI prints the same.
TEST(ControlE2e, DiscoveryLogHasTheRealAddressAndPort) {
  TargetProcess t;
  std::string cfg = config_with_namespaces(kRamNamespace);
  for (std::size_t at = cfg.find("address: 127.0.0.1"); at != std::string::npos; at = cfg.find("address: 127.0.0.1")) {
    cfg.replace(at, std::strlen("address: 127.0.0.1"), "address: 0.0.0.0");
  }
  ASSERT_TRUE(t.start(cfg));

  auto entries = discovery_entries(t.discovery_port(), kHostA, t);
  auto subs = subsystem_entries(entries, kSubnqn);
  ASSERT_EQ(subs.size(), 1u) << entries.size() << " entries";
  const auto& e = *subs[0];
  EXPECT_EQ(e.trtype, 3) << "trtype tcp";
  EXPECT_EQ(e.adrfam, 1) << "adrfam ipv4";
  EXPECT_EQ(field_string(e.traddr.data(), e.traddr.size()), "127.0.0.1");
  EXPECT_EQ(field_string(e.trsvcid.data(), e.trsvcid.size()), std::to_string(t.io_port()));
  for (const auto& any : entries) {
    EXPECT_NE(field_string(any.traddr.data(), any.traddr.size()), "0.0.0.0");
    EXPECT_NE(field_string(any.trsvcid.data(), any.trsvcid.size()), "")
        << "entry without a port (subtype " << int{any.subtype} << ")";
  }
  // No entry sends hosts to the discovery-only listener for the subsystem.
  for (const auto* s : subs) {
    EXPECT_NE(field_string(s->trsvcid.data(), s->trsvcid.size()), std::to_string(t.discovery_port()));
  }

  // The discovery-only listener does not serve the subsystem itself.
  auto via_discovery_port = Controller::connect(controller_options(t.discovery_port(), kSubnqn));
  EXPECT_FALSE(via_discovery_port) << "an I/O controller was created on the discovery-only listener";
  if (!via_discovery_port) {
    EXPECT_NE(via_discovery_port.error().message.find("Connect Invalid Parameters"), std::string::npos)
        << via_discovery_port.error().message;
  }

  // Connect with exactly what the log says.
  const uint16_t port = static_cast<uint16_t>(std::stoi(field_string(e.trsvcid.data(), e.trsvcid.size())));
  auto opts = controller_options(port, field_string(e.subnqn.data(), e.subnqn.size()));
  opts.address.traddr = field_string(e.traddr.data(), e.traddr.size());
  auto ctrl = connect_or_fail(opts, t);
  ASSERT_TRUE(ctrl);
  EXPECT_EQ(ctrl->namespaces().size(), 1u);
  EXPECT_TRUE(ctrl->shutdown());

  // The CLI, JSON output.
  auto r = run_process({RDMABLK_CLI_BINARY, "discover", "-t", "tcp", "-a", "127.0.0.1", "-s",
                        std::to_string(t.discovery_port()), "-q", kHostA, "-o", "json"},
                       t.dir(), 60s);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  bool found = false;
  for (const auto& rec : j["records"]) {
    EXPECT_NE(rec["traddr"], "0.0.0.0");
    if (rec["subnqn"] == kSubnqn) {
      found = true;
      EXPECT_EQ(rec["traddr"], "127.0.0.1");
      EXPECT_EQ(rec["trsvcid"], std::to_string(t.io_port()));
      EXPECT_EQ(rec["trtype"], "tcp");
      EXPECT_EQ(rec["subtype"], "nvme subsystem");
    }
  }
  EXPECT_TRUE(found) << r.out;
}

}  // namespace
}  // namespace e2e

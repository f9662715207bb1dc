// Target core: namespace masking (NamespaceConfig::hosts). A namespace masked to host 1 is an inactive NSID to
// host 2 everywhere: the active namespace list, Identify Namespace (zeroes), the descriptor list, I/O, the ANA
// log, the reservation features. A reload that changes a mask tells only the controllers whose view changed.
#include "protocol/ana.h"
#include "protocol/identify.h"
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

const uint32_t kNsChanged = p::async_event_result(p::AsyncEventType::notice, 0, 0x04);

TargetConfig masked_config(std::vector<std::string> ns1_hosts) {
  TargetConfig c = test_config();
  c.subsystems[0].namespaces[0].hosts = std::move(ns1_hosts);  // sub1 nsid 1
  return c;
}

std::vector<uint32_t> active_list(CoreHarness& h, FakeTargetQueue& admin) {
  const auto list = from_bytes<p::NamespaceList>(h.identify(admin, p::Cns::active_namespace_list, 0).data);
  std::vector<uint32_t> out;
  for (const auto& id : list.nsid)
    if (id.get() != 0) out.push_back(id.get());
  return out;
}

std::vector<uint32_t> changed_list(CoreHarness& h, FakeTargetQueue& admin) {
  const auto log = from_bytes<p::ChangedNamespaceList>(
      h.get_log(admin, p::LogPageId::changed_namespace_list, 0, sizeof(p::ChangedNamespaceList)).data);
  std::vector<uint32_t> out;
  for (const auto& id : log.nsid)
    if (id.get() != 0) out.push_back(id.get());
  return out;
}

class CoreMasking : public ::testing::Test {
 protected:
  CoreMasking() : h(masked_config({kHost1})) {}
  void SetUp() override {
    c1 = h.bring_up(*admin1, kSub1, kHost1, 0, kHostId1);
    c2 = h.bring_up(*admin2, kSub1, kHost2, 0, kHostId2);
    io1 = h.io_queue(c1, 1, kSub1, kHost1, kHostId1);
    io2 = h.io_queue(c2, 1, kSub1, kHost2, kHostId2);
    for (auto* q : {admin1.get(), admin2.get()})
      ASSERT_TRUE(h.set_feature(*q, p::FeatureId::async_event_configuration, p::kAecNamespaceAttribute).status().ok());
  }
  CoreHarness h;
  std::unique_ptr<FakeTargetQueue> admin1 = h.queue(), admin2 = h.queue();
  std::unique_ptr<FakeTargetQueue> io1, io2;
  uint16_t c1 = 0, c2 = 0;
};

TEST_F(CoreMasking, AMaskedNamespaceIsInactiveToEveryOtherHost) {
  EXPECT_EQ(active_list(h, *admin1), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(active_list(h, *admin2), (std::vector<uint32_t>{2}));
  EXPECT_NE(from_bytes<p::IdentifyNamespace>(h.identify(*admin1, p::Cns::namespace_, 1).data).nsze.get(), 0u);
  EXPECT_EQ(from_bytes<p::IdentifyNamespace>(h.identify(*admin2, p::Cns::namespace_, 1).data).nsze.get(), 0u)
      << "an inactive NSID: all zeroes";
  EXPECT_TRUE(h.identify(*admin2, p::Cns::ns_id_descriptor_list, 1).status().is(p::status::invalid_namespace));
  EXPECT_TRUE(h.read(*io1, 1, 0, 1, 512).status().ok());
  EXPECT_TRUE(h.read(*io2, 1, 0, 1, 512).status().is(p::status::invalid_namespace));
  EXPECT_TRUE(h.write(*io2, 1, 0, 1, pattern(512, 1)).status().is(p::status::invalid_namespace));
  EXPECT_TRUE(h.read(*io2, 2, 0, 1, 4096).status().ok());
  // The ANA log lists what the host sees.
  auto nsids_in_ana_log = [&](FakeTargetQueue& admin) {
    const auto page = h.get_log(admin, p::LogPageId::ana, 0, 4096).data;
    const auto hdr = from_bytes<p::AnaLogHeader>(page);
    const auto group = from_bytes<p::AnaGroupDescriptor>(page, sizeof(p::AnaLogHeader));
    EXPECT_EQ(hdr.ngrps.get(), 1u);
    return group.nnsids.get();
  };
  EXPECT_EQ(nsids_in_ana_log(*admin1), 2u);
  EXPECT_EQ(nsids_in_ana_log(*admin2), 1u);
  // Namespace-specific features treat it as absent too.
  auto get = sqe_of(p::make_get_features(h.next_cid(), p::FeatureId::reservation_persistence));
  get.hdr.nsid.set(1);
  EXPECT_TRUE(h.run(*admin2, get).status().is(p::status::invalid_namespace));
}

TEST_F(CoreMasking, AReloadTellsOnlyTheHostsWhoseViewChanged) {
  const uint16_t aer1 = h.post_aer(*admin1), aer2 = h.post_aer(*admin2);
  // Unmasked: host 2 gains namespace 1; host 1 saw it all along.
  auto r = h.core().reload(masked_config({}));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->masks_changed, 1u);
  h.reactor.run();
  EXPECT_FALSE(admin1->result(aer1)) << "host 1's view did not change";
  ASSERT_TRUE(admin2->result(aer2));
  EXPECT_EQ(admin2->result(aer2)->dw0(), kNsChanged);
  EXPECT_EQ(changed_list(h, *admin2), std::vector<uint32_t>{1});
  EXPECT_EQ(active_list(h, *admin2), (std::vector<uint32_t>{1, 2}));
  EXPECT_TRUE(h.read(*io2, 1, 0, 1, 512).status().ok()) << "the same backend, now visible";
  // Masked to host 2 only: host 1 loses it, host 2 keeps it.
  const uint16_t again2 = h.post_aer(*admin2);
  ASSERT_TRUE(h.core().reload(masked_config({kHost2})));
  h.reactor.run();
  ASSERT_TRUE(admin1->result(aer1));
  EXPECT_EQ(changed_list(h, *admin1), std::vector<uint32_t>{1});
  EXPECT_FALSE(admin2->result(again2));
  EXPECT_TRUE(h.read(*io1, 1, 0, 1, 512).status().is(p::status::invalid_namespace));
  EXPECT_TRUE(h.read(*io2, 1, 0, 1, 512).status().ok());
}

}  // namespace
}  // namespace rdmablk::target::testing

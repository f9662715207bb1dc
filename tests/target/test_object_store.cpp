// The reservation state kept in a volume's store (target/reservations/object_store.h), with an in-memory
// side object standing in for the RADOS object (tests/ceph/rbd_backend_test.cpp has the real one): the
// round trip, PTPL cleared removes it, the recovery rules (empty, torn: copied aside, the namespace starts
// without reservations), an unreadable object, and which store a backend gets.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "target/reservation_test_util.h"
#include "target/reservations/object_store.h"
#include "target/reservations/state_format.h"

namespace rdmablk::target::reservations::testing {
namespace {

// What a test sees of one side object.
struct ObjectBox {
  std::optional<std::vector<uint8_t>> bytes;
  bool fail_reads = false;
  int writes = 0;
};

class FakeSideObject final : public backend::SideObject {
 public:
  FakeSideObject(ObjectBox& box, std::string name) : box_(box), name_(std::move(name)) {}
  Result<std::optional<std::vector<uint8_t>>> read() override {
    if (box_.fail_reads) return make_error(name_ + ": read: Input/output error", 5);
    return box_.bytes;
  }
  Result<void> write(std::span<const uint8_t> bytes) override {
    box_.bytes.emplace(bytes.begin(), bytes.end());
    ++box_.writes;
    return {};
  }
  Result<void> remove() override {
    box_.bytes.reset();
    return {};
  }
  std::string describe() const override { return name_; }

 private:
  ObjectBox& box_;
  std::string name_;
};

class ObjectStore : public ::testing::Test {
 protected:
  ObjectReservationStore store{std::make_unique<FakeSideObject>(object, "object"),
                               std::make_unique<FakeSideObject>(aside, "aside")};
  ObjectBox object, aside;
  ReservationState ptpl_state() {
    ReservationState s = held_by_a(RT::write_exclusive);
    s.ptpl = true;
    return s;
  }
};

TEST_F(ObjectStore, SavesTheStateFileBytesAndLoadsThemBack) {
  auto none = store.load();
  ASSERT_TRUE(none && !*none) << "no object: no state";
  const ReservationState s = ptpl_state();
  ASSERT_TRUE(store.save(s));
  ASSERT_TRUE(object.bytes);
  EXPECT_EQ(*object.bytes, serialize_state(s)) << "the same bytes as the state file";
  auto back = store.load();
  ASSERT_TRUE(back && *back);
  EXPECT_EQ(**back, s);
}

TEST_F(ObjectStore, PtplClearedRemovesTheObject) {
  ASSERT_TRUE(store.save(ptpl_state()));
  ReservationState s = ptpl_state();
  s.ptpl = false;
  ASSERT_TRUE(store.save(s));
  EXPECT_FALSE(object.bytes);
}

TEST_F(ObjectStore, ATornObjectIsCopiedAsideAndIgnored) {
  auto bytes = serialize_state(ptpl_state());
  bytes.resize(bytes.size() - 3);
  object.bytes = bytes;
  auto r = store.load();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("copied to aside"), std::string::npos) << r.error().message;
  ASSERT_TRUE(aside.bytes);
  EXPECT_EQ(*aside.bytes, bytes);
}

TEST_F(ObjectStore, AnEmptyObjectIsNoState) {
  object.bytes.emplace();
  auto r = store.load();
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  EXPECT_EQ(aside.writes, 0);
}

TEST_F(ObjectStore, AnUnreadableObjectIsAnError) {
  object.fail_reads = true;
  auto r = store.load();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("Input/output error"), std::string::npos);
}

TEST(ReservationStoreFor, FileBackendsUseTheStateDirectoryAndMemoryWithoutOneNothing) {
  backend::MemoryOptions mo;
  mo.size = 1 << 20;
  auto ram = backend::make_ram_backend(mo);
  ASSERT_TRUE(ram);
  auto file_store = reservation_store_for(**ram, "/var/lib/rdmablk-test", "nqn.x", 3);
  ASSERT_NE(file_store, nullptr);
  auto* file = dynamic_cast<FileReservationStore*>(file_store.get());
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->path(), std::filesystem::path("/var/lib/rdmablk-test") / state_file_name("nqn.x", 3));
  EXPECT_EQ(reservation_store_for(**ram, "", "nqn.x", 3), nullptr);
}

}  // namespace
}  // namespace rdmablk::target::reservations::testing

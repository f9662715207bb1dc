// The saved reservation state (target/reservations/state_format.h) and its file per namespace
// (target/reservations/ptpl_store.h): the byte layout, a round trip, every torn length and every flipped bit
// detected, and the file store's recovery rules (missing, empty, torn, corrupt, unreadable, a leftover
// NAME.tmp, PTPL cleared).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "protocol/crc32c.h"
#include "protocol/endian.h"
#include "support/temp_dir.h"
#include "target/reservation_test_util.h"
#include "target/reservations/ptpl_store.h"
#include "target/reservations/state_format.h"

namespace rdmablk::target::reservations::testing {
namespace {

namespace fs = std::filesystem;
using rdmablk::testing::TempDir;

ReservationState sample() {
  ReservationState s = held_by_a(RT::exclusive_access_registrants_only);
  s.generation = 0xA0B0C0D0;
  s.ptpl = true;
  return s;
}

uint32_t le32_at(const std::vector<uint8_t>& b, std::size_t off) {
  return protocol::load<protocol::le32>(&b[off]).get();
}

// The CRC field recomputed after a test edits the bytes, so that only the edit is wrong.
void reseal(std::vector<uint8_t>& b) {
  std::vector<uint8_t> copy = b;
  for (std::size_t i = 16; i < 20; ++i) copy.at(i) = 0;
  protocol::le32 crc{};
  crc.set(protocol::crc32c(copy));
  protocol::store(&b[16], crc);
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// ---- the format ------------------------------------------------------------------------------------------------

TEST(ReservationStateFormatTest, TheLayoutIsPinned) {
  ReservationState s;
  s.generation = 0x0A0B0C0D;
  s.type = RT::write_exclusive;
  s.holder = kA;
  s.ptpl = true;
  s.registrants = {{kA, 0x1122334455667788}};
  const auto b = serialize_state(s);
  ASSERT_EQ(b.size(), 24u + 32u + 24u);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "RBLKRESV");
  EXPECT_EQ(le32_at(b, 8), 1u);   // version
  EXPECT_EQ(le32_at(b, 12), 56u);  // payload length
  std::vector<uint8_t> zeroed = b;
  for (std::size_t i = 16; i < 20; ++i) zeroed.at(i) = 0;
  EXPECT_EQ(le32_at(b, 16), protocol::crc32c(zeroed));
  EXPECT_EQ(le32_at(b, 20), 0u);
  EXPECT_EQ(le32_at(b, 24), 0x0A0B0C0Du);
  EXPECT_EQ(b[28], 1);  // type
  EXPECT_EQ(b[29], 1);  // flags: PTPL
  EXPECT_TRUE(std::equal(kA.begin(), kA.end(), b.begin() + 32));
  EXPECT_EQ(le32_at(b, 48), 1u);  // count
  EXPECT_TRUE(std::equal(kA.begin(), kA.end(), b.begin() + 56));
  EXPECT_EQ(protocol::load<protocol::le64>(&b[72]).get(), 0x1122334455667788u);
}

TEST(ReservationStateFormatTest, StatesRoundTrip) {
  ReservationState all = held_by_a(RT::write_exclusive_all_registrants);
  all.generation = 7;
  for (const ReservationState& s : {ReservationState{}, sample(), all, three_registrants()}) {
    const auto parsed = parse_state(serialize_state(s));
    ASSERT_TRUE(parsed.has_value()) << parsed.error().detail;
    EXPECT_EQ(*parsed, s);
  }
}

// A torn write leaves a prefix: every prefix of a valid state is detected, as truncated.
TEST(ReservationStateFormatTest, EveryTruncationIsDetectedAsTorn) {
  const auto b = serialize_state(sample());
  for (std::size_t len = 0; len < b.size(); ++len) {
    const auto parsed = parse_state(std::span<const uint8_t>(b.data(), len));
    ASSERT_FALSE(parsed.has_value()) << len;
    EXPECT_EQ(parsed.error().problem, StateFormatProblem::truncated) << len << ": " << parsed.error().detail;
  }
}

TEST(ReservationStateFormatTest, EveryFlippedBitIsDetected) {
  const auto good = serialize_state(sample());
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto b = good;
      b[i] = static_cast<uint8_t>(b[i] ^ (1u << bit));
      EXPECT_FALSE(parse_state(b).has_value()) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(ReservationStateFormatTest, TrailingBytesAndForeignFilesAreCorrupt) {
  auto b = serialize_state(sample());
  b.push_back(0);
  auto parsed = parse_state(b);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().problem, StateFormatProblem::corrupt);
  const std::string text = "{\"registrants\": [], \"padding\": \"...................\"}";
  parsed = parse_state(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().problem, StateFormatProblem::corrupt);
}

// Whole and intact but newer: said apart from damage.
TEST(ReservationStateFormatTest, ANewerVersionIsUnsupported) {
  auto b = serialize_state(sample());
  protocol::le32 v{};
  v.set(kStateFormatVersion + 1);
  protocol::store(&b[8], v);
  reseal(b);
  const auto parsed = parse_state(b);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().problem, StateFormatProblem::unsupported_version);
}

// Version 2: a gateway group's state with the events the other members act on (namespace_reservations.h).
std::vector<GroupEvent> sample_events() {
  return {{41, kB, ReservationNotice::registration_preempted},
          {42, kB, ReservationNotice::empty},
          {43, kC, ReservationNotice::reservation_released}};
}

TEST(ReservationStateFormatTest, EventsRoundTripAsVersionTwo) {
  const auto b = serialize_state(sample(), sample_events());
  ASSERT_EQ(b.size(), 24u + 32u + 24u * sample().registrants.size() + 8u + 3u * 24u);
  EXPECT_EQ(le32_at(b, 8), 2u);  // version
  const std::size_t events_at = 24 + 32 + 24 * sample().registrants.size();
  EXPECT_EQ(le32_at(b, events_at), 3u);       // count
  EXPECT_EQ(le32_at(b, events_at + 8), 41u);  // the first event's sequence number
  EXPECT_EQ(b[events_at + 12], 1);            // its notice type
  EXPECT_TRUE(std::equal(kB.begin(), kB.end(), b.begin() + static_cast<std::ptrdiff_t>(events_at + 16)));
  std::vector<GroupEvent> events;
  const auto parsed = parse_state(b, &events);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().detail;
  EXPECT_EQ(*parsed, sample());
  EXPECT_EQ(events, sample_events());
  // Without events the bytes stay version 1 (a PTPL file never changes format), and say so.
  events = sample_events();
  ASSERT_TRUE(parse_state(serialize_state(sample()), &events).has_value());
  EXPECT_TRUE(events.empty());
}

TEST(ReservationStateFormatTest, OnlyTheNewestEventsAreKept) {
  std::vector<GroupEvent> many;
  for (uint32_t i = 0; i < kMaxGroupEvents + 10; ++i) many.push_back({0xFFFFFFF0u + i, kA, ReservationNotice::empty});
  std::vector<GroupEvent> events;
  ASSERT_TRUE(parse_state(serialize_state(sample(), many), &events).has_value());
  ASSERT_EQ(events.size(), kMaxGroupEvents);
  EXPECT_EQ(events.front(), many[10]);
  EXPECT_EQ(events.back(), many.back());  // across the wrap of the sequence numbers
}

TEST(ReservationStateFormatTest, DamagedEventsAreDetected) {
  const auto good = serialize_state(sample(), sample_events());
  for (std::size_t len = 0; len < good.size(); ++len)
    ASSERT_FALSE(parse_state(std::span<const uint8_t>(good.data(), len)).has_value()) << len;
  const std::size_t events_at = 24 + 32 + 24 * sample().registrants.size();
  auto gap = good;
  gap[events_at + 8 + 24] = 99;  // the second event's sequence number does not follow the first's
  reseal(gap);
  auto parsed = parse_state(gap);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().problem, StateFormatProblem::corrupt);
  auto notice = good;
  notice[events_at + 12] = 7;  // no such notice type
  reseal(notice);
  EXPECT_FALSE(parse_state(notice).has_value());
  auto count = good;
  count[events_at] = 4;  // more events than the bytes hold
  reseal(count);
  EXPECT_FALSE(parse_state(count).has_value());
}

// A checksum vouches for bytes, not for sense: a state the model cannot produce is refused too.
TEST(ReservationStateFormatTest, AnImpossibleStateIsCorrupt) {
  ReservationState s = sample();
  s.holder = kD;  // not a registrant
  const auto parsed = parse_state(serialize_state(s));
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().problem, StateFormatProblem::corrupt);
  auto b = serialize_state(sample());
  b[29] = 0x81;  // an unknown flag
  reseal(b);
  EXPECT_FALSE(parse_state(b).has_value());
}

// ---- the file store --------------------------------------------------------------------------------------------

class PtplStoreTest : public ::testing::Test {
 protected:
  TempDir tmp_;
  fs::path dir_ = tmp_.path() / "state";
  FileReservationStore store_{dir_, "nqn.test-ns1.resv"};
  fs::path tmp_file() const { return store_.path().string() + ".tmp"; }
  fs::path aside() const { return store_.path().string() + ".corrupt"; }

  // load() of a file whose bytes are `b`: an error, the file moved aside with those very bytes.
  void expect_moved_aside(const std::vector<uint8_t>& b, const char* problem) {
    fs::create_directories(dir_);
    write_bytes(store_.path(), b);
    auto loaded = store_.load();
    ASSERT_FALSE(loaded.has_value());
    EXPECT_NE(loaded.error().message.find(problem), std::string::npos) << loaded.error().message;
    EXPECT_NE(loaded.error().message.find(aside().string()), std::string::npos) << loaded.error().message;
    EXPECT_FALSE(fs::exists(store_.path()));
    EXPECT_EQ(read_bytes(aside()), b);
    // The next start finds nothing and starts clean; the next save does not touch the kept copy.
    auto again = store_.load();
    ASSERT_TRUE(again.has_value());
    EXPECT_FALSE(again->has_value());
    ASSERT_TRUE(store_.save(sample()).has_value());
    EXPECT_EQ(read_bytes(aside()), b);
  }
};

TEST_F(PtplStoreTest, ASavedStateLoadsBack) {
  ASSERT_TRUE(store_.save(sample()).has_value());
  EXPECT_TRUE(fs::exists(store_.path()));
  EXPECT_FALSE(fs::exists(tmp_file()));
  EXPECT_EQ(fs::status(store_.path()).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  auto loaded = store_.load();
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(**loaded, sample());

  ReservationState next = sample();
  ASSERT_TRUE(clear(next, kB, 2).ok());
  ASSERT_TRUE(store_.save(next).has_value());
  FileReservationStore reopened(dir_, "nqn.test-ns1.resv");  // a restart: a new store on the same file
  loaded = reopened.load();
  ASSERT_TRUE(loaded.has_value() && loaded->has_value());
  EXPECT_EQ(**loaded, next);
}

// Nothing saved yet, not even the state directory: no state, and no error.
TEST_F(PtplStoreTest, AMissingFileOrDirectoryIsNoState) {
  ASSERT_FALSE(fs::exists(dir_));
  auto loaded = store_.load();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_FALSE(loaded->has_value());
  fs::create_directories(dir_);
  loaded = store_.load();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_FALSE(loaded->has_value());
}

TEST_F(PtplStoreTest, SaveCreatesTheStateDirectory) {
  FileReservationStore deep(dir_ / "a" / "b", "x.resv");
  ASSERT_TRUE(deep.save(sample()).has_value());
  auto loaded = deep.load();
  ASSERT_TRUE(loaded.has_value() && loaded->has_value());
  EXPECT_EQ(**loaded, sample());
}

// SPDK refuses to load a namespace whose persistence file is empty; here it is no state, and no error.
TEST_F(PtplStoreTest, SpdkDepartureAnEmptyFileIsNoState) {
  fs::create_directories(dir_);
  write_bytes(store_.path(), {});
  auto loaded = store_.load();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_FALSE(loaded->has_value());
  EXPECT_FALSE(fs::exists(aside()));
}

TEST_F(PtplStoreTest, ATornFileIsAnErrorAndKeptAside) {
  auto b = serialize_state(sample());
  b.resize(b.size() - 5);
  expect_moved_aside(b, "truncated");
}

TEST_F(PtplStoreTest, ACorruptFileIsAnErrorAndKeptAside) {
  auto b = serialize_state(sample());
  b[40] ^= 0x10;
  expect_moved_aside(b, "corrupt");
}

TEST_F(PtplStoreTest, ANewerVersionIsAnErrorAndKeptAside) {
  auto b = serialize_state(sample());
  b[8] = 9;
  reseal(b);
  expect_moved_aside(b, "unsupported version");
}

// A crash after writing NAME.tmp and before the rename: NAME is the last complete save; the leftover goes.
TEST_F(PtplStoreTest, ALeftoverTmpIsRemovedAndTheLastSaveLoads) {
  ASSERT_TRUE(store_.save(sample()).has_value());
  auto half = serialize_state(three_registrants());
  half.resize(30);
  write_bytes(tmp_file(), half);
  auto loaded = store_.load();
  ASSERT_TRUE(loaded.has_value() && loaded->has_value());
  EXPECT_EQ(**loaded, sample());
  EXPECT_FALSE(fs::exists(tmp_file()));
  // With no NAME at all, a leftover tmp is still only a leftover.
  fs::remove(store_.path());
  write_bytes(tmp_file(), serialize_state(sample()));
  loaded = store_.load();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_FALSE(loaded->has_value());
  EXPECT_FALSE(fs::exists(tmp_file()));
}

// With PTPL cleared the state must not survive a power loss: saving it removes the file.
TEST_F(PtplStoreTest, SavingWithPtplClearedRemovesTheSavedState) {
  ASSERT_TRUE(store_.save(sample()).has_value());
  ReservationState off = sample();
  ASSERT_TRUE(do_register(off, kA, 1, ChangePtpl::clear).ok());
  ASSERT_TRUE(store_.save(off).has_value());
  EXPECT_FALSE(fs::exists(store_.path()));
  auto loaded = store_.load();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_FALSE(loaded->has_value());
  EXPECT_TRUE(store_.save(off).has_value()) << "nothing to remove is no error";
}

// save() never writes one; should a state without PTPL be found, it does not outlive its process either.
TEST_F(PtplStoreTest, AFileWithoutPtplIsNoState) {
  fs::create_directories(dir_);
  ReservationState s = sample();
  s.ptpl = false;
  write_bytes(store_.path(), serialize_state(s));
  auto loaded = store_.load();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_FALSE(loaded->has_value());
}

// A file that cannot be read is an error, and left where it is (it may be fine once readable).
TEST_F(PtplStoreTest, AnUnreadableFileIsAnErrorLeftInPlace) {
  fs::create_directories(store_.path());  // a directory where the file should be: read() fails with EISDIR
  auto loaded = store_.load();
  ASSERT_FALSE(loaded.has_value());
  EXPECT_NE(loaded.error().errno_value, 0);
  EXPECT_TRUE(fs::is_directory(store_.path()));
  EXPECT_FALSE(fs::exists(aside()));
}

TEST_F(PtplStoreTest, SaveReportsAStateDirectoryItCannotCreate) {
  write_bytes(tmp_.path() / "file", {1});
  FileReservationStore blocked(tmp_.path() / "file" / "state", "x.resv");
  auto saved = blocked.save(sample());
  ASSERT_FALSE(saved.has_value());
  EXPECT_NE(saved.error().message.find("creating"), std::string::npos) << saved.error().message;
}

TEST(PtplStateFileNameTest, NamesAreSafeAndDistinct) {
  EXPECT_EQ(state_file_name("nqn.2024-01.io.rdmablk:vol_1", 3), "nqn.2024-01.io.rdmablk:vol_1-ns3.resv");
  EXPECT_EQ(state_file_name("../x/y", 1), "%2E.%2Fx%2Fy-ns1.resv");
  EXPECT_EQ(state_file_name("a b%", 2), "a%20b%25-ns2.resv");
  EXPECT_NE(state_file_name("a/b", 1), state_file_name("a%2Fb", 1));
}

}  // namespace
}  // namespace rdmablk::target::reservations::testing

// Target core over a file backend (io_uring): completions arrive asynchronously through the poller.
#include <unistd.h>

#include <filesystem>

#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

namespace fs = std::filesystem;

class CoreFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rdmablk-core-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  TargetConfig file_config(bool direct) {
    return test_config_with_file_ns((dir_ / "ns5.img").string(), direct);
  }
  fs::path dir_;
};

TEST_F(CoreFile, WriteReadFlushWriteZeroesDeallocateOnAFile) {
  CoreHarness h(file_config(/*direct=*/false));
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin);
  // Buffered file I/O: a volatile write cache the host must flush.
  const auto id = from_bytes<p::IdentifyController>(h.identify(*admin, p::Cns::controller, 0).data);
  EXPECT_EQ(id.vwc & p::idctl::kVwcPresent, p::idctl::kVwcPresent);
  auto io = h.io_queue(cntlid, 1);
  const auto data = pattern(64 * 1024, 17);
  ASSERT_TRUE(h.write(*io, 5, 128, 128, data).status().ok());
  EXPECT_TRUE(h.run(*io, p::make_flush(h.next_cid(), 5)).status().ok());
  EXPECT_EQ(h.read(*io, 5, 128, 128, 64 * 1024).data, data);
  ASSERT_TRUE(h.run(*io, sqe_of(p::make_write_zeroes(h.next_cid(), 5, 128, 8))).status().ok());
  auto dsm = p::make_dsm(h.next_cid(), 5, 1, p::DsmCommand::kDeallocate, p::make_transport_sgl(16));
  p::DsmRange r{};
  r.slba.set(136);
  r.nlb.set(8);
  std::vector<uint8_t> range(16);
  std::memcpy(range.data(), &r, 16);
  ASSERT_TRUE(h.run(*io, sqe_of(dsm), range).status().ok());
  auto back = h.read(*io, 5, 128, 24, 24 * 512);
  ASSERT_TRUE(back.status().ok());
  for (std::size_t i = 0; i < 16 * 512; ++i) ASSERT_EQ(back.data[i], 0) << i;
  for (std::size_t i = 16 * 512; i < 24 * 512; ++i) ASSERT_EQ(back.data[i], data[i]) << i;
  // With the write cache turned off, writes still succeed (as FUA).
  ASSERT_TRUE(h.set_feature(*admin, p::FeatureId::volatile_write_cache, 0).status().ok());
  ASSERT_TRUE(h.write(*io, 5, 0, 1, pattern(512, 3)).status().ok());
  EXPECT_EQ(h.read(*io, 5, 0, 1, 512).data, pattern(512, 3));
}

}  // namespace
}  // namespace rdmablk::target::testing

// Behaviour every backend shares, run against file (O_DIRECT), file (buffered), ram and null.
#include <algorithm>
#include <random>
#include <set>

#include "backend/backend.h"
#include "backend_test_util.h"

namespace rdmablk::backend::test {
namespace {

enum class Kind { file_direct, file_buffered, ram, null };

std::string kind_name(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::file_direct:
      return "FileDirect";
    case Kind::file_buffered:
      return "FileBuffered";
    case Kind::ram:
      return "Ram";
    case Kind::null:
      return "Null";
  }
  return "Unknown";
}

constexpr uint64_t kSize = 8 << 20;  // 8 MiB
constexpr uint32_t kBs = 4096;

class BackendTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { open_backend(false); }

  void open_backend(bool read_only) {
    queue_.reset();
    backend_.reset();
    const Kind k = GetParam();
    if (k == Kind::file_direct || k == Kind::file_buffered) {
      // O_DIRECT on /var/tmp (a disk file system); buffered under /tmp.
      if (!dir_) dir_ = std::make_unique<TempDir>(k == Kind::file_direct ? kVarTmp : kTmp);
      ASSERT_TRUE(dir_->ok());
      FileOptions o;
      o.path = dir_->file("ns.img");
      o.size = kSize;
      o.block_size = kBs;
      o.direct = k == Kind::file_direct;
      o.read_only = read_only;
      auto b = open_file_backend(o);
      ASSERT_TRUE(b) << b.error().message;
      backend_ = std::move(*b);
      if (k == Kind::file_direct) {
        ASSERT_NE(backend_->describe().find("O_DIRECT"), std::string::npos) << backend_->describe();
      }
    } else {
      MemoryOptions o{kSize, kBs, read_only};
      auto b = k == Kind::ram ? make_ram_backend(o) : make_null_backend(o);
      ASSERT_TRUE(b) << b.error().message;
      backend_ = std::move(*b);
    }
    bufs_ = std::make_unique<AlignedBuf>(1 << 20);
    iovec iov = bufs_->iov();
    QueueOptions qo;
    qo.depth = 128;
    qo.buffers = std::span<const iovec>(&iov, 1);
    auto q = backend_->open_queue(qo);
    ASSERT_TRUE(q) << q.error().message;
    queue_ = std::move(*q);
  }

  bool is_null() const { return GetParam() == Kind::null; }
  uint64_t blocks() const { return backend_->geometry().num_blocks; }

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Queue> queue_;
  std::unique_ptr<AlignedBuf> bufs_;  // registered as buffer 0
};

TEST_P(BackendTest, GeometryMatchesConfiguration) {
  const Geometry& g = backend_->geometry();
  EXPECT_EQ(g.block_size, kBs);
  EXPECT_EQ(g.num_blocks, kSize / kBs);
  EXPECT_TRUE(g.caps.flush);
  EXPECT_TRUE(g.caps.fua);
  EXPECT_TRUE(g.caps.write_zeroes);
  EXPECT_TRUE(g.caps.deallocate);
  // Deallocated blocks read back as zeroes everywhere but on null, which touches nothing.
  EXPECT_EQ(g.caps.deallocated_reads_zeroes, GetParam() != Kind::null);
  EXPECT_FALSE(g.caps.read_only);
  if (GetParam() == Kind::file_buffered || GetParam() == Kind::file_direct) {
    EXPECT_TRUE(g.caps.volatile_write_cache);  // a file's allocations need fdatasync
    EXPECT_EQ(queue_->event_fd() >= 0, true);
  } else {
    EXPECT_EQ(queue_->event_fd(), -1);
  }
  if (GetParam() == Kind::file_direct) {
    EXPECT_GE(g.buf_alignment, 512u);
  }
}

TEST_P(BackendTest, WriteThenReadBack) {
  AlignedBuf out(64 * 1024), in(64 * 1024);
  fill_pattern(out.get(), out.size, 1);
  ASSERT_TRUE(run(*queue_, rw(Op::write, 100, 16, out.get())).ok());
  std::memset(in.get(), 0x5A, in.size);
  ASSERT_TRUE(run(*queue_, rw(Op::read, 100, 16, in.get())).ok());
  if (is_null()) {
    // null never touches data: the read buffer keeps what it had.
    for (size_t i = 0; i < in.size; ++i) ASSERT_EQ(in.get()[i], 0x5A) << i;
  } else {
    EXPECT_EQ(std::memcmp(in.get(), out.get(), out.size), 0);
  }
}

TEST_P(BackendTest, NullLeavesWriteBufferAlone) {
  AlignedBuf out(kBs);
  fill_pattern(out.get(), out.size, 2);
  AlignedBuf copy(kBs);
  std::memcpy(copy.get(), out.get(), kBs);
  ASSERT_TRUE(run(*queue_, rw(Op::write, 0, 1, out.get())).ok());
  EXPECT_EQ(std::memcmp(out.get(), copy.get(), kBs), 0);
}

TEST_P(BackendTest, RegisteredBufferRoundTrip) {
  char* w = bufs_->get();
  char* r = bufs_->get() + 512 * 1024;
  fill_pattern(w, 128 * 1024, 3);
  ASSERT_TRUE(run(*queue_, rw(Op::write, 7, 32, w, 0)).ok());
  ASSERT_TRUE(run(*queue_, rw(Op::read, 7, 32, r, 0)).ok());
  if (!is_null()) {
    EXPECT_EQ(std::memcmp(w, r, 128 * 1024), 0);
  }
}

TEST_P(BackendTest, FirstAndLastLba) {
  AlignedBuf a(kBs), b(kBs), in(kBs);
  fill_pattern(a.get(), kBs, 4);
  fill_pattern(b.get(), kBs, 5);
  const uint64_t last = blocks() - 1;
  ASSERT_TRUE(run(*queue_, rw(Op::write, 0, 1, a.get())).ok());
  ASSERT_TRUE(run(*queue_, rw(Op::write, last, 1, b.get())).ok());
  if (is_null()) return;
  ASSERT_TRUE(run(*queue_, rw(Op::read, 0, 1, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), a.get(), kBs), 0);
  ASSERT_TRUE(run(*queue_, rw(Op::read, last, 1, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), b.get(), kBs), 0);
}

TEST_P(BackendTest, NeverWrittenBlocksReadZero) {
  if (is_null()) GTEST_SKIP() << "null returns no data";
  AlignedBuf in(16 * kBs);
  std::memset(in.get(), 0x77, in.size);
  ASSERT_TRUE(run(*queue_, rw(Op::read, 1000, 16, in.get())).ok());
  EXPECT_TRUE(all_zero(in.get(), in.size));
}

TEST_P(BackendTest, OutOfRangeAndOverflowingRangesRejected) {
  AlignedBuf buf(2 * kBs);
  const uint64_t n = blocks();
  for (Op op : {Op::read, Op::write, Op::write_zeroes, Op::deallocate}) {
    SCOPED_TRACE(op_name(op));
    EXPECT_EQ(queue_->submit(rw(op, n, 1, buf.get())), st::lba_out_of_range);
    EXPECT_EQ(queue_->submit(rw(op, n - 1, 2, buf.get())), st::lba_out_of_range);
    EXPECT_EQ(queue_->submit(rw(op, UINT64_MAX, 2, buf.get())), st::lba_out_of_range);  // slba + nlb wraps
    EXPECT_EQ(queue_->submit(rw(op, UINT64_MAX - 1, UINT32_MAX, buf.get())), st::lba_out_of_range);
    EXPECT_EQ(queue_->submit(rw(op, 1, UINT32_MAX, buf.get())), st::lba_out_of_range);
  }
  EXPECT_EQ(queue_->in_flight(), 0u);  // refused requests produce no completion
  Completion c[4];
  EXPECT_EQ(queue_->reap(c, 0), 0u);
  // The exact end of the namespace is fine.
  EXPECT_TRUE(run(*queue_, rw(Op::read, n - 2, 2, buf.get())).ok());
}

TEST_P(BackendTest, ZeroLengthRejected) {
  AlignedBuf buf(kBs);
  for (Op op : {Op::read, Op::write, Op::write_zeroes, Op::deallocate}) {
    EXPECT_EQ(queue_->submit(rw(op, 0, 0, buf.get())), st::invalid_field) << op_name(op);
  }
  EXPECT_EQ(queue_->submit(rw(Op::read, 0, 1, nullptr)), st::invalid_field);
  EXPECT_EQ(queue_->in_flight(), 0u);
}

TEST_P(BackendTest, UnknownOpcodeRejected) {
  Request r = range(static_cast<Op>(42), 0, 1);
  EXPECT_EQ(queue_->submit(r), st::invalid_opcode);
}

TEST_P(BackendTest, FlushAndFuaComplete) {
  AlignedBuf out(8 * kBs), in(8 * kBs);
  fill_pattern(out.get(), out.size, 6);
  EXPECT_TRUE(run(*queue_, rw(Op::write, 50, 8, out.get(), -1, /*fua=*/true)).ok());
  EXPECT_TRUE(run(*queue_, range(Op::flush, 0, 0)).ok());
  // Flush ignores its range, even one outside the namespace.
  EXPECT_TRUE(run(*queue_, range(Op::flush, UINT64_MAX, 0)).ok());
  if (is_null()) return;
  ASSERT_TRUE(run(*queue_, rw(Op::read, 50, 8, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), out.size), 0);
}

TEST_P(BackendTest, WriteZeroesReadsBackZeroes) {
  AlignedBuf out(64 * kBs), in(64 * kBs);
  fill_pattern(out.get(), out.size, 7);
  ASSERT_TRUE(run(*queue_, rw(Op::write, 200, 64, out.get())).ok());
  ASSERT_TRUE(run(*queue_, range(Op::write_zeroes, 210, 20)).ok());
  if (is_null()) return;
  ASSERT_TRUE(run(*queue_, rw(Op::read, 200, 64, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), 10 * kBs), 0);
  EXPECT_TRUE(all_zero(in.get() + 10 * kBs, 20 * kBs));
  EXPECT_EQ(std::memcmp(in.get() + 30 * kBs, out.get() + 30 * kBs, 34 * kBs), 0);
}

TEST_P(BackendTest, DeallocateReadsBackZeroes) {
  AlignedBuf out(64 * kBs), in(64 * kBs);
  fill_pattern(out.get(), out.size, 8);
  ASSERT_TRUE(run(*queue_, rw(Op::write, 300, 64, out.get())).ok());
  ASSERT_TRUE(run(*queue_, range(Op::deallocate, 301, 62)).ok());
  if (is_null()) return;
  ASSERT_TRUE(run(*queue_, rw(Op::read, 300, 64, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), kBs), 0);
  EXPECT_TRUE(all_zero(in.get() + kBs, 62 * kBs));
  EXPECT_EQ(std::memcmp(in.get() + 63 * kBs, out.get() + 63 * kBs, kBs), 0);
}

TEST_P(BackendTest, ReadOnlyRefusesWrites) {
  AlignedBuf buf(kBs);
  fill_pattern(buf.get(), kBs, 9);
  ASSERT_TRUE(run(*queue_, rw(Op::write, 5, 1, buf.get())).ok());
  open_backend(/*read_only=*/true);
  ASSERT_TRUE(backend_->geometry().caps.read_only);
  EXPECT_EQ(queue_->submit(rw(Op::write, 5, 1, buf.get())), st::namespace_write_protected);
  EXPECT_EQ(queue_->submit(range(Op::write_zeroes, 5, 1)), st::namespace_write_protected);
  EXPECT_EQ(queue_->submit(range(Op::deallocate, 5, 1)), st::namespace_write_protected);
  EXPECT_EQ(queue_->in_flight(), 0u);
  AlignedBuf in(kBs);
  EXPECT_TRUE(run(*queue_, rw(Op::read, 5, 1, in.get())).ok());
  if (GetParam() == Kind::file_direct || GetParam() == Kind::file_buffered) {
    EXPECT_EQ(std::memcmp(in.get(), buf.get(), kBs), 0);  // the same file, reopened read-only
  }
  EXPECT_TRUE(run(*queue_, range(Op::flush, 0, 0)).ok());
}

TEST_P(BackendTest, FullQueueIsTransient) {
  QueueOptions qo;
  qo.depth = 4;
  auto q = backend_->open_queue(qo);
  ASSERT_TRUE(q) << q.error().message;
  AlignedBuf buf(4 * kBs);
  for (unsigned i = 0; i < 4; ++i) ASSERT_TRUE((*q)->submit(rw(Op::read, i, 1, buf.get() + i * kBs)).ok());
  const Status full = (*q)->submit(rw(Op::read, 9, 1, buf.get()));
  EXPECT_EQ(full, queue_full);
  EXPECT_FALSE(full.dnr());  // the caller retries
  // Refusals keep their NVMe status on a full queue too: only a request that could be queued gets queue_full.
  EXPECT_EQ((*q)->submit(rw(Op::read, kSize / kBs, 1, buf.get())), st::lba_out_of_range);
  EXPECT_EQ((*q)->in_flight(), 4u);
  Completion c[8];
  unsigned got = 0;
  while (got < 4) got += (*q)->reap(std::span(c + got, 8 - got), 1);
  EXPECT_EQ((*q)->in_flight(), 0u);
  EXPECT_TRUE((*q)->submit(rw(Op::read, 9, 1, buf.get())).ok());
  EXPECT_EQ((*q)->reap(c, 1), 1u);
}

TEST_P(BackendTest, DepthOneHundredTwentyEightRandomLbasVerified) {
  constexpr unsigned kDepth = 128;
  constexpr unsigned kN = 1024;
  const uint64_t n = blocks();
  std::mt19937_64 rng(42);
  // Distinct LBAs so that the last write of each block is unambiguous.
  std::vector<uint64_t> lbas;
  std::set<uint64_t> seen;
  while (lbas.size() < kN) {
    const uint64_t l = rng() % n;
    if (seen.insert(l).second) lbas.push_back(l);
  }
  AlignedBuf data(uint64_t{kN} * kBs);
  for (unsigned i = 0; i < kN; ++i) fill_pattern(data.get() + uint64_t{i} * kBs, kBs, 1000 + lbas[i]);

  auto pump = [&](Op op, char* base) {
    unsigned next = 0, done = 0, max_in_flight = 0;
    std::vector<bool> completed(kN, false);
    Completion c[48];
    while (done < kN) {
      while (next < kN && queue_->in_flight() < kDepth) {
        Request r = rw(op, lbas[next], 1, base + uint64_t{next} * kBs);
        r.user_data = next;
        ASSERT_TRUE(queue_->submit(r).ok());
        ++next;
      }
      max_in_flight = std::max(max_in_flight, queue_->in_flight());
      const unsigned got = queue_->reap(c, 1);
      for (unsigned i = 0; i < got; ++i) {
        ASSERT_TRUE(c[i].status.ok()) << c[i].user_data;
        ASSERT_LT(c[i].user_data, kN);
        ASSERT_FALSE(completed[c[i].user_data]) << "completed twice";
        completed[c[i].user_data] = true;
        ++done;
      }
    }
    EXPECT_EQ(max_in_flight, kDepth);
  };
  pump(Op::write, data.get());
  if (is_null()) return;
  AlignedBuf back(uint64_t{kN} * kBs);
  pump(Op::read, back.get());
  for (unsigned i = 0; i < kN; ++i)
    ASSERT_EQ(std::memcmp(back.get() + uint64_t{i} * kBs, data.get() + uint64_t{i} * kBs, kBs), 0) << "lba " << lbas[i];
}

TEST_P(BackendTest, ReapInSmallBatchesReturnsEachCompletionOnce) {
  AlignedBuf buf(64 * kBs);
  for (unsigned i = 0; i < 64; ++i) {
    Request r = rw(Op::read, i * 3, 1, buf.get() + i * kBs);
    r.user_data = 500 + i;
    ASSERT_TRUE(queue_->submit(r).ok());
  }
  EXPECT_GE(queue_->flush(), 0);
  std::set<uint64_t> tags;
  Completion c[7];
  while (tags.size() < 64) {
    const unsigned got = queue_->reap(c, 7);  // wait for a full batch each time, except the last
    ASSERT_GT(got, 0u);
    ASSERT_LE(got, 7u);
    for (unsigned i = 0; i < got; ++i) {
      EXPECT_TRUE(c[i].status.ok());
      EXPECT_TRUE(tags.insert(c[i].user_data).second) << "duplicate " << c[i].user_data;
    }
  }
  EXPECT_EQ(*tags.begin(), 500u);
  EXPECT_EQ(*tags.rbegin(), 563u);
  EXPECT_EQ(queue_->in_flight(), 0u);
  EXPECT_EQ(queue_->reap(c, 0), 0u);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendTest,
                         ::testing::Values(Kind::file_direct, Kind::file_buffered, Kind::ram, Kind::null), kind_name);

// --- queue_full -------------------------------------------------------------------------------------

TEST(QueueFull, IsNotAnNvmeStatus) {
  // Its own value: never equal to, nor the same code as, any status a command completes with.
  EXPECT_FALSE(queue_full.ok());
  EXPECT_FALSE(queue_full.is(st::internal_error));
  EXPECT_NE(queue_full, st::internal_error);
  EXPECT_NE(queue_full, st::internal_error.with_dnr());
  // A reserved Status Code Type (NVMe Base 2.0 Figure 101: 4h-6h), none of the defined ones.
  const auto sct = static_cast<unsigned>(queue_full.sct());
  EXPECT_GE(sct, 4u);
  EXPECT_LE(sct, 6u);
  // The errno mapper, the other source of backend statuses, never produces it.
  for (int e = 0; e < 200; ++e) {
    EXPECT_FALSE(status_from_errno(e).is(queue_full)) << e;
    for (Op op : {Op::read, Op::write, Op::flush, Op::write_zeroes, Op::deallocate})
      EXPECT_FALSE(status_from_errno(-e, op).is(queue_full)) << e;
  }
}

// --- configuration errors of ram/null ---------------------------------------------------------------

TEST(MemoryBackendConfig, RejectsBadGeometry) {
  for (auto make : {&make_ram_backend, &make_null_backend}) {
    auto a = make(MemoryOptions{1 << 20, 1000, false});
    ASSERT_FALSE(a);
    EXPECT_NE(a.error().message.find("block size 1000"), std::string::npos) << a.error().message;
    auto b = make(MemoryOptions{(1 << 20) + 512, 4096, false});
    ASSERT_FALSE(b);
    EXPECT_NE(b.error().message.find("not a multiple"), std::string::npos) << b.error().message;
    auto c = make(MemoryOptions{0, 512, false});
    ASSERT_FALSE(c);
    EXPECT_FALSE(make(MemoryOptions{1 << 20, 256, false}));
    EXPECT_FALSE(make(MemoryOptions{1 << 20, 131072, false}));
    EXPECT_TRUE(make(MemoryOptions{1 << 20, 65536, false}));
  }
  auto r = make_ram_backend(MemoryOptions{1 << 30, 512, false});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)->describe(), "ram 1 GiB");
}

}  // namespace
}  // namespace rdmablk::backend::test

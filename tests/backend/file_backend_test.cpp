// The file backend: configuration, durability paths, error injection, resubmission, block devices.
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "backend/backend.h"
#include "backend/file_backend_testing.h"
#include "backend_test_util.h"

namespace rdmablk::backend::test {
namespace {

constexpr uint32_t kBs = 4096;

struct Opened {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Queue> queue;
};

Opened open(const FileOptions& o, unsigned depth = 32, std::span<const iovec> bufs = {}) {
  Opened r;
  auto b = open_file_backend(o);
  EXPECT_TRUE(b) << b.error().message;
  if (!b) return r;
  r.backend = std::move(*b);
  QueueOptions qo;
  qo.depth = depth;
  qo.buffers = bufs;
  auto q = r.backend->open_queue(qo);
  EXPECT_TRUE(q) << q.error().message;
  if (q) r.queue = std::move(*q);
  return r;
}

FileOptions opts(const std::string& path, uint64_t size, bool direct = true) {
  FileOptions o;
  o.path = path;
  o.size = size;
  o.block_size = kBs;
  o.direct = direct;
  return o;
}

backend::testing::FileQueueCounters counters(const Queue& q) {
  backend::testing::FileQueueCounters c;
  EXPECT_TRUE(backend::testing::file_queue_counters(q, c));
  return c;
}

// --- configuration ----------------------------------------------------------------------------------

TEST(FileBackendConfig, MissingFileWithoutSizeNamesThePath) {
  TempDir dir(kTmp);
  const std::string path = dir.file("absent.img");
  auto b = open_file_backend(opts(path, 0));
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find(path), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("no size"), std::string::npos) << b.error().message;
  EXPECT_EQ(b.error().errno_value, ENOENT);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileBackendConfig, MissingReadOnlyFileIsNotCreated) {
  TempDir dir(kTmp);
  FileOptions o = opts(dir.file("absent.img"), 1 << 20);
  o.read_only = true;
  auto b = open_file_backend(o);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find(o.path), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(o.path));
}

TEST(FileBackendConfig, BadBlockSizesNamePathAndProblem) {
  TempDir dir(kTmp);
  for (uint32_t bs : {256u, 1000u, 3072u, 131072u}) {
    FileOptions o = opts(dir.file("x.img"), 1 << 20);
    o.block_size = bs;
    auto b = open_file_backend(o);
    ASSERT_FALSE(b) << bs;
    EXPECT_NE(b.error().message.find(o.path), std::string::npos) << b.error().message;
    EXPECT_NE(b.error().message.find("power of two"), std::string::npos) << b.error().message;
    EXPECT_FALSE(std::filesystem::exists(o.path)) << "a refused configuration must not leave a file";
  }
}

TEST(FileBackendConfig, SizeNotAMultipleOfBlockSize) {
  TempDir dir(kTmp);
  auto b = open_file_backend(opts(dir.file("x.img"), (1 << 20) + 512));
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find(dir.file("x.img")), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("not a multiple of the block size 4096"), std::string::npos) << b.error().message;

  // An existing file whose own size is not a multiple, with no size configured.
  const std::string odd = dir.file("odd.img");
  std::ofstream(odd) << std::string(4096 + 100, 'x');
  auto c = open_file_backend(opts(odd, 0));
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find(odd), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("not a multiple"), std::string::npos) << c.error().message;
}

// A file sized by itself follows it (refresh_size, what a reload calls); a configured size stays.
TEST(FileBackendConfig, RefreshSizeFollowsAGrownOrShrunkFile) {
  TempDir dir(kTmp);
  const std::string path = dir.file("grow.img");
  { std::ofstream(path).flush(); }
  std::filesystem::resize_file(path, 1 << 20);
  auto b = open_file_backend(opts(path, 0));
  ASSERT_TRUE(b) << b.error().message;
  const uint32_t bs = (*b)->geometry().block_size;
  const uint64_t old_blocks = (1 << 20) / bs;
  ASSERT_EQ((*b)->num_blocks(), old_blocks);
  auto q = (*b)->open_queue({});
  ASSERT_TRUE(q) << q.error().message;
  AlignedBuf buf(bs);
  fill_pattern(buf.get(), bs, 3);
  EXPECT_TRUE(run(**q, rw(Op::write, old_blocks, 1, buf.get())).is(st::lba_out_of_range));

  std::filesystem::resize_file(path, 2 << 20);
  EXPECT_EQ((*b)->num_blocks(), old_blocks) << "the size changes only when refreshed";
  auto r = (*b)->refresh_size();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 2 * old_blocks);
  EXPECT_EQ((*b)->num_blocks(), 2 * old_blocks);
  EXPECT_EQ((*b)->geometry().num_blocks, old_blocks) << "the geometry is the size when opened";
  EXPECT_TRUE(run(**q, rw(Op::write, old_blocks, 1, buf.get())).ok()) << "an open queue checks the new size";

  std::filesystem::resize_file(path, (1 << 19) + 100);  // a partial block at the end is not served
  r = (*b)->refresh_size();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, ((1 << 19) + 100) / bs);
  EXPECT_TRUE(run(**q, rw(Op::read, *r, 1, buf.get())).is(st::lba_out_of_range));

  // With a configured size the namespace keeps it, whatever the file does.
  const std::string fixed = dir.file("fixed.img");
  auto c = open_file_backend(opts(fixed, 1 << 20));
  ASSERT_TRUE(c) << c.error().message;
  std::filesystem::resize_file(fixed, 4 << 20);
  r = (*c)->refresh_size();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (1u << 20) / (*c)->geometry().block_size);
}

TEST(FileBackendConfig, NotAFileOrDevice) {
  TempDir dir(kTmp);
  auto b = open_file_backend(opts(dir.path().string(), 0));
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find(dir.path().string()), std::string::npos);
  EXPECT_NE(b.error().message.find("not a regular file or a block device"), std::string::npos) << b.error().message;
}

TEST(FileBackendConfig, MissingFileIsCreatedSparse) {
  TempDir dir(kVarTmp);
  const std::string path = dir.file("new.img");
  auto b = open_file_backend(opts(path, 64 << 20));
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(std::filesystem::file_size(path), 64u << 20);
  EXPECT_LT(allocated_bytes(path), 1u << 20);  // sparse
  EXPECT_EQ((*b)->geometry().num_blocks, (64u << 20) / kBs);
  EXPECT_NE((*b)->describe().find(path), std::string::npos);
}

TEST(FileBackendConfig, ExistingFileSizeUsedOrExtended) {
  TempDir dir(kTmp);
  const std::string path = dir.file("e.img");
  {
    std::ofstream f(path);
    f << std::string(1 << 20, 'a');
  }
  auto same = open_file_backend(opts(path, 0));
  ASSERT_TRUE(same) << same.error().message;
  EXPECT_EQ((*same)->geometry().num_blocks, (1u << 20) / kBs);

  FileOptions ro = opts(path, 2 << 20);
  ro.read_only = true;
  auto refused = open_file_backend(ro);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find(path), std::string::npos) << refused.error().message;

  auto grown = open_file_backend(opts(path, 2 << 20));
  ASSERT_TRUE(grown) << grown.error().message;
  EXPECT_EQ(std::filesystem::file_size(path), 2u << 20);
  EXPECT_EQ((*grown)->geometry().num_blocks, (2u << 20) / kBs);

  auto smaller = open_file_backend(opts(path, 1 << 20));  // serves the first MiB, never shrinks
  ASSERT_TRUE(smaller);
  EXPECT_EQ((*smaller)->geometry().num_blocks, (1u << 20) / kBs);
  EXPECT_EQ(std::filesystem::file_size(path), 2u << 20);
}

TEST(FileBackendConfig, DefaultBlockSizeIs512ForFiles) {
  TempDir dir(kTmp);
  FileOptions o = opts(dir.file("d.img"), 1 << 20);
  o.block_size = 0;
  auto b = open_file_backend(o);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ((*b)->geometry().block_size, 512u);
  EXPECT_EQ((*b)->geometry().num_blocks, 2048u);
}

TEST(FileBackendConfig, BadQueueOptions) {
  TempDir dir(kTmp);
  auto b = open_file_backend(opts(dir.file("q.img"), 1 << 20));
  ASSERT_TRUE(b);
  QueueOptions qo;
  qo.depth = 0;
  EXPECT_FALSE((*b)->open_queue(qo));
}

// --- durability paths -------------------------------------------------------------------------------

TEST(FileBackend, FuaWritesUseRwfDsyncAndSurviveReopen) {
  TempDir dir(kVarTmp);
  const std::string path = dir.file("fua.img");
  AlignedBuf out(16 * kBs);
  fill_pattern(out.get(), out.size, 11);
  {
    Opened o = open(opts(path, 4 << 20));
    ASSERT_TRUE(o.queue);
    ASSERT_TRUE(run(*o.queue, rw(Op::write, 10, 8, out.get(), -1, /*fua=*/true)).ok());
    ASSERT_TRUE(run(*o.queue, rw(Op::write, 30, 8, out.get() + 8 * kBs, -1, /*fua=*/false)).ok());
    ASSERT_TRUE(run(*o.queue, rw(Op::write, 40, 1, out.get(), -1, /*fua=*/true)).ok());
    EXPECT_EQ(counters(*o.queue).dsync_writes, 2u);  // exactly the FUA writes carried RWF_DSYNC
    ASSERT_TRUE(run(*o.queue, range(Op::flush, 0, 0)).ok());
  }
  // Through a fresh, buffered descriptor: the data is in the file, not only in our queue.
  std::vector<char> back(8 * kBs);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pread(fd, back.data(), back.size(), 10 * kBs), static_cast<ssize_t>(back.size()));
  ::close(fd);
  EXPECT_EQ(std::memcmp(back.data(), out.get(), back.size()), 0);
}

TEST(FileBackend, DeallocatePunchesHoles) {
  TempDir dir(kVarTmp);
  const std::string path = dir.file("punch.img");
  Opened o = open(opts(path, 16 << 20));
  ASSERT_TRUE(o.queue);
  AlignedBuf out(1 << 20);
  fill_pattern(out.get(), out.size, 12);
  for (uint64_t lba = 0; lba < 1024; lba += 256) ASSERT_TRUE(run(*o.queue, rw(Op::write, lba, 256, out.get())).ok());
  ASSERT_TRUE(run(*o.queue, range(Op::flush, 0, 0)).ok());
  const uint64_t before = allocated_bytes(path);
  EXPECT_GE(before, 4u << 20);
  ASSERT_TRUE(run(*o.queue, range(Op::deallocate, 256, 512)).ok());  // 2 MiB
  const uint64_t after = allocated_bytes(path);
  EXPECT_LE(after, before - (2u << 20)) << "before " << before << " after " << after;
  AlignedBuf in(512 * kBs);
  std::memset(in.get(), 1, in.size);
  ASSERT_TRUE(run(*o.queue, rw(Op::read, 256, 512, in.get())).ok());
  EXPECT_TRUE(all_zero(in.get(), in.size));
  ASSERT_TRUE(run(*o.queue, rw(Op::read, 0, 256, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), 256 * kBs), 0);
}

TEST(FileBackend, WriteZeroesKeepsNeighboursAndSize) {
  TempDir dir(kVarTmp);
  const std::string path = dir.file("wz.img");
  Opened o = open(opts(path, 4 << 20));
  ASSERT_TRUE(o.queue);
  AlignedBuf out(8 * kBs), in(8 * kBs);
  fill_pattern(out.get(), out.size, 13);
  ASSERT_TRUE(run(*o.queue, rw(Op::write, 1016, 8, out.get())).ok());  // the last 8 blocks
  ASSERT_TRUE(run(*o.queue, range(Op::write_zeroes, 1020, 4)).ok());
  ASSERT_TRUE(run(*o.queue, rw(Op::read, 1016, 8, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), 4 * kBs), 0);
  EXPECT_TRUE(all_zero(in.get() + 4 * kBs, 4 * kBs));
  EXPECT_EQ(std::filesystem::file_size(path), 4u << 20);
  EXPECT_EQ(counters(*o.queue).zero_fallbacks, 0u);  // ext4 does ZERO_RANGE itself
}

// --- queue mechanics --------------------------------------------------------------------------------

TEST(FileBackend, RegistersFileAndBuffers) {
  TempDir dir(kVarTmp);
  AlignedBuf a(64 * kBs), b(64 * kBs);
  iovec iov[2] = {a.iov(), b.iov()};
  Opened o = open(opts(dir.file("reg.img"), 4 << 20), 16, iov);
  ASSERT_TRUE(o.queue);
  const auto c = counters(*o.queue);
  EXPECT_TRUE(c.fixed_file);
  EXPECT_EQ(c.registered_buffers, 2u);
  fill_pattern(b.get() + kBs, 4 * kBs, 14);
  ASSERT_TRUE(run(*o.queue, rw(Op::write, 3, 4, b.get() + kBs, 1)).ok());
  ASSERT_TRUE(run(*o.queue, rw(Op::read, 3, 4, a.get(), 0)).ok());
  EXPECT_EQ(std::memcmp(a.get(), b.get() + kBs, 4 * kBs), 0);
  // A buffer index that does not exist, or a transfer that leaves the registered buffer.
  EXPECT_EQ(o.queue->submit(rw(Op::read, 0, 1, a.get(), 2)), st::invalid_field);
  EXPECT_EQ(o.queue->submit(rw(Op::read, 0, 1, b.get(), 0)), st::invalid_field);
  EXPECT_EQ(o.queue->submit(rw(Op::read, 0, 2, a.get() + 63 * kBs, 0)), st::invalid_field);
  EXPECT_EQ(o.queue->in_flight(), 0u);
}

TEST(FileBackend, ShortTransfersAreResubmittedForTheRest) {
  TempDir dir(kVarTmp);
  AlignedBuf out(256 * kBs), in(256 * kBs);
  iovec iov = out.iov();
  Opened o = open(opts(dir.file("short.img"), 8 << 20), 8, std::span(&iov, 1));
  ASSERT_TRUE(o.queue);
  ASSERT_TRUE(backend::testing::inject_faults(*o.queue, {.short_every = 1, .eagain_every = 0}));
  fill_pattern(out.get(), out.size, 15);
  // Every result is cut to about half: 256 blocks take 9 round trips, each continuing where the
  // previous one stopped (a wrong offset or buffer position would scramble the data).
  ASSERT_TRUE(run(*o.queue, rw(Op::write, 100, 256, out.get(), 0)).ok());
  const auto after_write = counters(*o.queue).short_resubmits;
  EXPECT_EQ(after_write, 8u);
  ASSERT_TRUE(run(*o.queue, rw(Op::read, 100, 256, in.get())).ok());
  EXPECT_EQ(counters(*o.queue).short_resubmits - after_write, 8u);
  EXPECT_EQ(std::memcmp(in.get(), out.get(), out.size), 0);
  // A single block cannot be shortened: no resubmission.
  ASSERT_TRUE(run(*o.queue, rw(Op::read, 100, 1, in.get())).ok());
  EXPECT_EQ(counters(*o.queue).short_resubmits - after_write, 8u);
}

TEST(FileBackend, EagainIsRetriedThenReported) {
  TempDir dir(kVarTmp);
  Opened o = open(opts(dir.file("again.img"), 4 << 20));
  ASSERT_TRUE(o.queue);
  AlignedBuf out(4 * kBs), in(4 * kBs);
  fill_pattern(out.get(), out.size, 16);
  // Every other result is -EAGAIN: each request succeeds on its retry.
  ASSERT_TRUE(backend::testing::inject_faults(*o.queue, {.short_every = 0, .eagain_every = 2}));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(run(*o.queue, rw(Op::write, 8 + i, 1, out.get() + i * kBs)).ok());
  ASSERT_TRUE(run(*o.queue, rw(Op::read, 8, 4, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), out.size), 0);
  EXPECT_GE(counters(*o.queue).eagain_resubmits, 2u);
  // Every result is -EAGAIN: bounded retries, then a transient status; no hang.
  ASSERT_TRUE(backend::testing::inject_faults(*o.queue, {.short_every = 0, .eagain_every = 1}));
  const auto before = counters(*o.queue).eagain_resubmits;
  const Status s = run(*o.queue, rw(Op::read, 8, 4, in.get()));
  EXPECT_EQ(s, st::command_interrupted);
  EXPECT_FALSE(s.dnr());
  EXPECT_EQ(counters(*o.queue).eagain_resubmits - before, 8u);
  EXPECT_EQ(o.queue->in_flight(), 0u);
}

TEST(FileBackend, EventFdSignalsCompletions) {
  TempDir dir(kVarTmp);
  Opened o = open(opts(dir.file("ev.img"), 4 << 20));
  ASSERT_TRUE(o.queue);
  const int fd = o.queue->event_fd();
  ASSERT_GE(fd, 0);
  AlignedBuf in(kBs);
  ASSERT_TRUE(o.queue->submit(rw(Op::read, 1, 1, in.get())).ok());
  EXPECT_EQ(o.queue->flush(), 1);
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_TRUE(p.revents & POLLIN);
  Completion c[2];
  unsigned got = 0;
  for (int i = 0; i < 100 && got == 0; ++i) got = o.queue->reap(c, 0);  // no waiting: already there
  EXPECT_EQ(got, 1u);
}

TEST(FileBackend, PollingReapCompletesWithoutBlocking) {
  // A reactor busy-polls reap(out, 0) while work flows: with COOP/DEFER_TASKRUN rings the queue
  // must itself ask the kernel for deferred completions, or polling would never see any.
  TempDir dir(kVarTmp);
  AlignedBuf buf(64 * kBs);
  iovec iov = buf.iov();
  Opened o = open(opts(dir.file("poll.img"), 4 << 20), 64, std::span(&iov, 1));
  ASSERT_TRUE(o.queue);
  ::testing::Test::RecordProperty("ring_flags", static_cast<int>(counters(*o.queue).ring_flags));
  for (unsigned i = 0; i < 64; ++i) {
    Request r = rw(Op::read, i * 7, 1, buf.get() + i * kBs, 0);
    r.user_data = i;
    ASSERT_TRUE(o.queue->submit(r).ok());
  }
  Completion c[16];
  unsigned done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (done < 64 && std::chrono::steady_clock::now() < deadline) {
    const unsigned got = o.queue->reap(c, 0);
    for (unsigned i = 0; i < got; ++i) EXPECT_TRUE(c[i].status.ok());
    done += got;
  }
  EXPECT_EQ(done, 64u);
  EXPECT_EQ(o.queue->in_flight(), 0u);
}

TEST(FileBackend, QueueOpenedOnOneThreadServesAnother) {
  TempDir dir(kVarTmp);
  Opened o = open(opts(dir.file("thr.img"), 4 << 20));
  ASSERT_TRUE(o.queue);
  bool ok = false;
  std::thread reactor([&] {
    AlignedBuf out(kBs), in(kBs);
    fill_pattern(out.get(), kBs, 17);
    ok = run(*o.queue, rw(Op::write, 2, 1, out.get())).ok() && run(*o.queue, rw(Op::read, 2, 1, in.get())).ok() &&
         std::memcmp(in.get(), out.get(), kBs) == 0;
  });
  reactor.join();
  EXPECT_TRUE(ok);
}

TEST(FileBackend, DestroyingAQueueWaitsForInFlightRequests) {
  TempDir dir(kVarTmp);
  Opened o = open(opts(dir.file("dtor.img"), 16 << 20), 64);
  ASSERT_TRUE(o.queue);
  auto buf = std::make_unique<AlignedBuf>(64 * 64 * 1024);
  for (unsigned i = 0; i < 64; ++i)
    ASSERT_TRUE(o.queue->submit(rw(Op::read, i * 16, 16, buf->get() + i * 64 * 1024)).ok());
  o.queue->flush();
  o.queue.reset();  // must not return while the kernel still writes into buf
  buf.reset();
  SUCCEED();
}

// --- errors from the file system --------------------------------------------------------------------

TEST(FileBackendErrors, FullFileSystemIsCapacityExceeded) {
  TempDir dir(kTmp);
  ASSERT_TRUE(dir.ok());
  const std::string why = mount_on(dir, "tmpfs", "size=1m");
  if (!why.empty()) GTEST_SKIP() << "cannot mount a small tmpfs: " << why;
  Opened o = open(opts(dir.file("full.img"), 8 << 20));  // sparse: 8 MiB on a 1 MiB file system
  ASSERT_TRUE(o.queue);
  AlignedBuf out(2 << 20);
  fill_pattern(out.get(), out.size, 18);
  const Status s = run(*o.queue, rw(Op::write, 0, (2 << 20) / kBs, out.get()));
  EXPECT_EQ(s, st::capacity_exceeded) << "sct " << static_cast<int>(s.sct()) << " sc " << int{s.sc()};
  EXPECT_TRUE(s.dnr());
  EXPECT_EQ(o.queue->in_flight(), 0u);
  // The queue is still usable: a small write in the space that is left.
  AlignedBuf small(kBs);
  EXPECT_TRUE(run(*o.queue, range(Op::deallocate, 0, (2 << 20) / kBs)).ok());
  EXPECT_TRUE(run(*o.queue, rw(Op::write, 1000, 1, small.get())).ok());
}

TEST(FileBackendErrors, TmpfsWriteZeroesFallsBackToPunch) {
  TempDir dir(kTmp);
  const std::string why = mount_on(dir, "tmpfs", "size=16m");
  if (!why.empty()) GTEST_SKIP() << "cannot mount tmpfs: " << why;
  Opened o = open(opts(dir.file("wz.img"), 4 << 20));
  ASSERT_TRUE(o.queue);
  AlignedBuf out(8 * kBs), in(8 * kBs);
  fill_pattern(out.get(), out.size, 19);
  ASSERT_TRUE(run(*o.queue, rw(Op::write, 0, 8, out.get())).ok());
  ASSERT_TRUE(run(*o.queue, range(Op::write_zeroes, 2, 4)).ok());
  ASSERT_TRUE(run(*o.queue, rw(Op::read, 0, 8, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), 2 * kBs), 0);
  EXPECT_TRUE(all_zero(in.get() + 2 * kBs, 4 * kBs));
  EXPECT_EQ(std::memcmp(in.get() + 6 * kBs, out.get() + 6 * kBs, 2 * kBs), 0);
  EXPECT_EQ(counters(*o.queue).zero_fallbacks, 1u);  // tmpfs has no ZERO_RANGE
  ASSERT_TRUE(run(*o.queue, range(Op::write_zeroes, 6, 1)).ok());
  EXPECT_EQ(counters(*o.queue).zero_fallbacks, 1u);  // remembered: no second attempt
}

TEST(FileBackendErrors, NoDirectIoFallsBackToBufferedAndWritesZeroes) {
  // ramfs refuses O_DIRECT (EINVAL) and has no fallocate: buffered I/O, zeroes written by hand.
  TempDir dir(kTmp);
  const std::string why = mount_on(dir, "ramfs", nullptr);
  if (!why.empty()) GTEST_SKIP() << "cannot mount ramfs: " << why;
  Opened o = open(opts(dir.file("r.img"), 1 << 20, /*direct=*/true));
  ASSERT_TRUE(o.queue);
  EXPECT_NE(o.backend->describe().find("buffered"), std::string::npos) << o.backend->describe();
  EXPECT_TRUE(o.backend->geometry().caps.volatile_write_cache);
  AlignedBuf out(64 * kBs), in(64 * kBs);
  fill_pattern(out.get(), out.size, 20);
  ASSERT_TRUE(run(*o.queue, rw(Op::write, 0, 64, out.get())).ok());
  ASSERT_TRUE(run(*o.queue, range(Op::write_zeroes, 1, 40)).ok());  // 160 KiB: two zero-buffer writes
  ASSERT_TRUE(run(*o.queue, range(Op::deallocate, 50, 2)).ok());
  ASSERT_TRUE(run(*o.queue, rw(Op::read, 0, 64, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), kBs), 0);
  EXPECT_TRUE(all_zero(in.get() + kBs, 40 * kBs));
  EXPECT_EQ(std::memcmp(in.get() + 41 * kBs, out.get() + 41 * kBs, 9 * kBs), 0);
  EXPECT_TRUE(all_zero(in.get() + 50 * kBs, 2 * kBs));
  EXPECT_EQ(std::memcmp(in.get() + 52 * kBs, out.get() + 52 * kBs, 12 * kBs), 0);
  EXPECT_GE(counters(*o.queue).zero_fallbacks, 2u);
}

TEST(FileBackendErrors, ReadOnlyMountRefusesWritableOpenAndServesReadOnly) {
  TempDir dir(kTmp);
  const std::string why = mount_on(dir, "tmpfs", "size=4m");
  if (!why.empty()) GTEST_SKIP() << "cannot mount tmpfs: " << why;
  const std::string path = dir.file("ro.img");
  {
    auto b = open_file_backend(opts(path, 1 << 20));
    ASSERT_TRUE(b) << b.error().message;
  }
  if (::mount(nullptr, dir.path().c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0)
    GTEST_SKIP() << "cannot remount read-only: " << std::strerror(errno);
  auto rw_open = open_file_backend(opts(path, 0));
  ASSERT_FALSE(rw_open);
  EXPECT_EQ(rw_open.error().errno_value, EROFS);
  EXPECT_NE(rw_open.error().message.find(path), std::string::npos) << rw_open.error().message;
  EXPECT_NE(rw_open.error().message.find("read-only"), std::string::npos) << rw_open.error().message;
  FileOptions o = opts(path, 0);
  o.read_only = true;
  Opened r = open(o);
  ASSERT_TRUE(r.queue);
  AlignedBuf buf(kBs);
  EXPECT_EQ(r.queue->submit(rw(Op::write, 0, 1, buf.get())), st::namespace_write_protected);
  EXPECT_TRUE(run(*r.queue, rw(Op::read, 0, 1, buf.get())).ok());
}

TEST(FileBackendErrors, ImmutableFileWriteIsAccessDenied) {
  TempDir dir(kVarTmp);
  const std::string path = dir.file("imm.img");
  Opened o = open(opts(path, 1 << 20));
  ASSERT_TRUE(o.queue);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  int flags = 0;
  if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
    ::close(fd);
    GTEST_SKIP() << "no FS_IOC_GETFLAGS here";
  }
  const int immutable = flags | FS_IMMUTABLE_FL;
  if (::ioctl(fd, FS_IOC_SETFLAGS, &immutable) != 0) {
    ::close(fd);
    GTEST_SKIP() << "cannot make the file immutable: " << std::strerror(errno);
  }
  AlignedBuf buf(kBs);
  const Status w = run(*o.queue, rw(Op::write, 0, 1, buf.get()));
  const Status z = run(*o.queue, range(Op::write_zeroes, 0, 1));
  const Status r = run(*o.queue, rw(Op::read, 0, 1, buf.get()));
  ::ioctl(fd, FS_IOC_SETFLAGS, &flags);  // so that the directory can be removed
  ::close(fd);
  EXPECT_EQ(w, st::access_denied);  // EPERM
  EXPECT_EQ(z, st::access_denied);
  EXPECT_TRUE(r.ok());
}

// --- block devices (a loop device) ------------------------------------------------------------------

class LoopDevice {
 public:
  LoopDevice(const std::string& file, unsigned sector_size) {
    const std::string cmd =
        "losetup --find --show --sector-size " + std::to_string(sector_size) + " " + file + " 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return;
    char line[256] = {};
    if (std::fgets(line, sizeof(line), p) != nullptr) dev_ = line;
    ::pclose(p);
    while (!dev_.empty() && (dev_.back() == '\n' || dev_.back() == ' ')) dev_.pop_back();
  }
  ~LoopDevice() {
    if (!dev_.empty()) std::system(("losetup -d " + dev_ + " 2>/dev/null").c_str());
  }
  LoopDevice(const LoopDevice&) = delete;
  LoopDevice& operator=(const LoopDevice&) = delete;
  const std::string& dev() const { return dev_; }

 private:
  std::string dev_;
};

TEST(FileBackendBlockDevice, GeometryChecksAndIo) {
  TempDir dir(kVarTmp);
  const std::string img = dir.file("loop.img");
  {
    auto b = open_file_backend(opts(img, 8 << 20));
    ASSERT_TRUE(b);
  }
  LoopDevice loop(img, 4096);
  if (loop.dev().empty()) GTEST_SKIP() << "no loop device available (losetup failed)";

  // The device's logical block size (4096) is the default and the minimum.
  FileOptions small = opts(loop.dev(), 0);
  small.block_size = 512;
  auto refused = open_file_backend(small);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find(loop.dev()), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("smaller than the device's logical block size 4096"), std::string::npos)
      << refused.error().message;
  auto too_big = open_file_backend(opts(loop.dev(), 16 << 20));
  ASSERT_FALSE(too_big);
  EXPECT_NE(too_big.error().message.find("larger than the device"), std::string::npos) << too_big.error().message;

  FileOptions o = opts(loop.dev(), 0);
  o.block_size = 0;
  Opened d = open(o);
  ASSERT_TRUE(d.queue);
  EXPECT_EQ(d.backend->geometry().block_size, 4096u);
  EXPECT_EQ(d.backend->geometry().num_blocks, (8u << 20) / 4096);
  EXPECT_NE(d.backend->describe().find("block device"), std::string::npos);
  AlignedBuf out(16 * kBs), in(16 * kBs);
  fill_pattern(out.get(), out.size, 21);
  const uint64_t last = d.backend->geometry().num_blocks - 16;
  ASSERT_TRUE(run(*d.queue, rw(Op::write, last, 16, out.get(), -1, true)).ok());
  ASSERT_TRUE(run(*d.queue, range(Op::flush, 0, 0)).ok());
  ASSERT_TRUE(run(*d.queue, range(Op::write_zeroes, last + 2, 2)).ok());
  ASSERT_TRUE(run(*d.queue, range(Op::deallocate, last + 8, 4)).ok());
  ASSERT_TRUE(run(*d.queue, rw(Op::read, last, 16, in.get())).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), 2 * kBs), 0);
  EXPECT_TRUE(all_zero(in.get() + 2 * kBs, 2 * kBs));
  EXPECT_EQ(std::memcmp(in.get() + 4 * kBs, out.get() + 4 * kBs, 4 * kBs), 0);
  EXPECT_TRUE(all_zero(in.get() + 8 * kBs, 4 * kBs));
  EXPECT_EQ(std::memcmp(in.get() + 12 * kBs, out.get() + 12 * kBs, 4 * kBs), 0);
  EXPECT_EQ(d.queue->submit(rw(Op::read, last + 16, 1, in.get())), st::lba_out_of_range);
}

}  // namespace
}  // namespace rdmablk::backend::test

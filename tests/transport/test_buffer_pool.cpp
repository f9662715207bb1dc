#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "transport/buffer_pool.h"

using namespace rdmablk::transport;

namespace {
std::unique_ptr<BufferPool> make_pool(unsigned small_count = 4, unsigned large_count = 2) {
  BufferPoolOptions o;
  o.small_size = 16 * 1024;
  o.small_count = small_count;
  o.large_size = 256 * 1024;
  o.large_count = large_count;
  auto p = BufferPool::create(o);
  EXPECT_TRUE(p) << p.error().message;
  return std::move(*p);
}
}  // namespace

TEST(BufferPool, SizeClassesComeFromOneRegion) {
  auto pool = make_pool();
  iovec r = pool->region();
  auto* base = static_cast<uint8_t*>(r.iov_base);
  EXPECT_EQ(r.iov_len, 4u * 16 * 1024 + 2u * 256 * 1024);
  Buffer s = pool->acquire(100);
  Buffer l = pool->acquire(100 * 1024);
  ASSERT_TRUE(s);
  ASSERT_TRUE(l);
  EXPECT_EQ(s.size, 16u * 1024);
  EXPECT_EQ(l.size, 256u * 1024);
  EXPECT_GE(s.data, base);
  EXPECT_LE(l.data + l.size, base + r.iov_len);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data) % 4096, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(l.data) % 4096, 0u);
  std::memset(l.data, 0xAB, l.size);  // writable
  EXPECT_EQ(pool->free_small(), 3u);
  EXPECT_EQ(pool->free_large(), 1u);
  pool->release(s);
  pool->release(l);
  EXPECT_EQ(pool->free_small(), 4u);
  EXPECT_EQ(pool->free_large(), 2u);
}

TEST(BufferPool, ExhaustionFallsBackToLargeThenFails) {
  auto pool = make_pool(2, 1);
  std::vector<Buffer> got;
  for (int i = 0; i < 3; ++i) {
    Buffer b = pool->acquire(4096);
    ASSERT_TRUE(b) << i;
    got.push_back(b);
  }
  EXPECT_EQ(got[2].size, 256u * 1024);  // small ones gone: a large one serves
  EXPECT_FALSE(pool->acquire(1));
  EXPECT_FALSE(pool->acquire(512 * 1024));  // bigger than the large class: never
  std::set<uint8_t*> distinct;
  for (auto& b : got) distinct.insert(b.data);
  EXPECT_EQ(distinct.size(), 3u);
  for (auto& b : got) pool->release(b);
  EXPECT_EQ(pool->free_small() + pool->free_large(), 3u);
}

TEST(BufferPool, WaitersGetReleasedBuffersInOrderWhenLargeEnough) {
  auto pool = make_pool(1, 1);
  Buffer s = pool->acquire(10);
  Buffer l = pool->acquire(200 * 1024);
  ASSERT_TRUE(s && l);
  struct W {
    BufferWaiter w;
    Buffer got;
    int order = 0;
  };
  static int counter;
  counter = 0;
  W big{}, small{};
  auto fn = +[](BufferWaiter* w, Buffer b) noexcept {
    auto* x = reinterpret_cast<W*>(w);
    x->got = b;
    x->order = ++counter;
  };
  big.w.fn = fn;
  big.w.bytes = 200 * 1024;
  small.w.fn = fn;
  small.w.bytes = 100;
  pool->wait(big.w);
  pool->wait(small.w);
  EXPECT_EQ(pool->waiters(), 2u);
  pool->release(s);  // too small for `big`: goes to `small`, skipping the head
  EXPECT_EQ(small.order, 1);
  EXPECT_EQ(small.got.data, s.data);
  EXPECT_FALSE(big.got);
  pool->release(l);
  EXPECT_EQ(big.got.data, l.data);
  EXPECT_EQ(pool->waiters(), 0u);
  pool->release(small.got);
  pool->release(big.got);
  EXPECT_EQ(pool->free_small() + pool->free_large(), 2u);
}

TEST(BufferPool, CancelledWaiterIsSkippedAndDoubleReleaseIgnored) {
  auto pool = make_pool(1, 0);
  Buffer s = pool->acquire(10);
  ASSERT_TRUE(s);
  BufferWaiter w{};
  w.fn = +[](BufferWaiter*, Buffer) noexcept { ADD_FAILURE() << "cancelled waiter called"; };
  w.bytes = 10;
  pool->wait(w);
  pool->cancel_wait(w);
  pool->cancel_wait(w);  // no-op
  pool->release(s);
  pool->release(s);  // logged, ignored
  EXPECT_EQ(pool->free_small(), 1u);
}

TEST(BufferPool, RejectsBadOptions) {
  BufferPoolOptions o;
  o.small_size = 0;
  EXPECT_FALSE(BufferPool::create(o));
  o.small_size = 8192;
  o.large_size = 4096;
  EXPECT_FALSE(BufferPool::create(o));
}

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "transport/slot_fifo.h"

using namespace rdmablk::transport;

namespace {

struct Base {
  uint16_t next = 0xFFFF;
};
struct Slot : Base {
  uint16_t other = 0xFFFF;  // a second list the same slots may be on
};
using Fifo = SlotFifo<&Slot::next>;

std::vector<uint16_t> drain(Fifo& f, std::array<Slot, 8>& slots) {
  std::vector<uint16_t> out;
  while (!f.empty()) out.push_back(f.pop_front(slots));
  return out;
}

struct Waiter {
  int id = 0;
  Waiter* next = nullptr;
};
using WaitFifo = PtrFifo<Waiter, &Waiter::next>;

// A link kept outside the element.
std::array<Waiter*, 5> g_links{};
std::array<Waiter, 5> g_waiters{};
Waiter*& link_of(Waiter& w) noexcept { return g_links[static_cast<std::size_t>(&w - g_waiters.data())]; }

}  // namespace

TEST(SlotFifo, PopsInPushOrderAndUnlinks) {
  std::array<Slot, 8> slots{};
  Fifo f;
  EXPECT_TRUE(f.empty());
  EXPECT_EQ(f.front(), Fifo::kNone);
  for (uint16_t i : std::array<uint16_t, 4>{3, 1, 7, 0}) f.push_back(slots, i);
  EXPECT_EQ(f.front(), 3);
  EXPECT_EQ(f.size(slots), 4u);
  EXPECT_EQ(drain(f, slots), (std::vector<uint16_t>{3, 1, 7, 0}));
  for (const Slot& s : slots) EXPECT_EQ(s.next, Fifo::kNone);
  // Empty again: the tail was reset, a push starts a new list.
  f.push_back(slots, 5);
  EXPECT_EQ(drain(f, slots), (std::vector<uint16_t>{5}));
}

TEST(SlotFifo, InterleavedPushAndPop) {
  std::array<Slot, 8> slots{};
  Fifo f;
  f.push_back(slots, 0);
  f.push_back(slots, 1);
  EXPECT_EQ(f.pop_front(slots), 0);
  f.push_back(slots, 2);
  EXPECT_EQ(f.pop_front(slots), 1);
  EXPECT_EQ(f.pop_front(slots), 2);
  EXPECT_TRUE(f.empty());
}

TEST(SlotFifo, RemoveFromHeadMiddleTailAndAbsent) {
  std::array<Slot, 8> slots{};
  Fifo f;
  for (uint16_t i = 0; i < 5; ++i) f.push_back(slots, i);
  EXPECT_TRUE(f.remove(slots, 2));   // middle
  EXPECT_TRUE(f.remove(slots, 0));   // head
  EXPECT_TRUE(f.remove(slots, 4));   // tail
  EXPECT_FALSE(f.remove(slots, 4));  // not there any more
  EXPECT_FALSE(f.remove(slots, 6));  // never was
  EXPECT_EQ(slots[2].next, Fifo::kNone);
  f.push_back(slots, 6);  // the tail moved back to 3
  EXPECT_EQ(drain(f, slots), (std::vector<uint16_t>{1, 3, 6}));
  f.push_back(slots, 1);
  EXPECT_TRUE(f.remove(slots, 1));  // the only one
  EXPECT_TRUE(f.empty());
  f.push_back(slots, 2);
  EXPECT_EQ(drain(f, slots), (std::vector<uint16_t>{2}));
}

TEST(SlotFifo, TwoListsOverTheSameSlotsAndABaseMember) {
  std::array<Slot, 8> slots{};
  SlotFifo<&Base::next> a;  // the link in a base class of the slots
  SlotFifo<&Slot::other> b;
  a.push_back(slots, 1);
  b.push_back(slots, 2);
  b.push_back(slots, 1);
  a.push_back(slots, 2);
  EXPECT_EQ(a.pop_front(slots), 1);
  EXPECT_EQ(b.pop_front(slots), 2);
  EXPECT_EQ(a.pop_front(slots), 2);
  EXPECT_EQ(b.pop_front(slots), 1);
}

TEST(PtrFifo, PushPopTakeFirstAndRemove) {
  std::array<Waiter, 5> w{};
  for (int i = 0; i < 5; ++i) w[i].id = i;
  WaitFifo f;
  EXPECT_TRUE(f.empty());
  EXPECT_EQ(f.front(), nullptr);
  for (Waiter& x : w) f.push_back(x);
  EXPECT_EQ(f.front(), &w[0]);
  // The first that matches, wherever it is.
  EXPECT_EQ(f.take_first([](const Waiter& x) { return x.id % 2 == 1; }), &w[1]);
  EXPECT_EQ(f.take_first([](const Waiter& x) { return x.id > 10; }), nullptr);
  EXPECT_TRUE(f.remove(w[4]));  // tail
  EXPECT_FALSE(f.remove(w[4]));
  EXPECT_EQ(w[4].next, nullptr);
  f.push_back(w[1]);
  std::vector<int> order;
  while (!f.empty()) order.push_back(f.pop_front().id);
  EXPECT_EQ(order, (std::vector<int>{0, 2, 3, 1}));
  for (const Waiter& x : w) EXPECT_EQ(x.next, nullptr);
}

TEST(PtrFifo, PushFrontAndALinkOutsideTheElement) {
  PtrFifo<Waiter, &link_of> f;
  for (int i = 0; i < 3; ++i) g_waiters[i].id = i;
  f.push_back(g_waiters[1]);
  f.push_front(g_waiters[0]);
  f.push_back(g_waiters[2]);
  EXPECT_EQ(g_links[0], &g_waiters[1]);
  EXPECT_EQ(g_waiters[0].next, nullptr);  // the member is not the link
  EXPECT_EQ(&f.pop_front(), &g_waiters[0]);
  EXPECT_EQ(&f.pop_front(), &g_waiters[1]);
  f.push_front(g_waiters[1]);
  EXPECT_EQ(&f.pop_front(), &g_waiters[1]);
  EXPECT_EQ(&f.pop_front(), &g_waiters[2]);
  EXPECT_TRUE(f.empty());
  f.push_front(g_waiters[0]);  // on an empty FIFO: also the tail
  f.push_back(g_waiters[1]);
  EXPECT_EQ(&f.pop_front(), &g_waiters[0]);
  EXPECT_EQ(&f.pop_front(), &g_waiters[1]);
  for (Waiter* l : g_links) EXPECT_EQ(l, nullptr);
}

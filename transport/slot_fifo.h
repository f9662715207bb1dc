// Intrusive FIFOs for the data path: no allocation, the links live in the elements.
//
//   - SlotFifo<&Slot::next>: slots of an array (a queue's request slots), linked by a uint16_t index member;
//     the FIFO is two indexes and every call is given the array (anything with operator[]).
//   - PtrFifo<T, &T::next>: objects anywhere, linked by a T* member, or by the T*& a function returns
//     (PtrFifo<T, &link_of>: a link kept outside T).
//
// push_back / pop_front / front / empty are O(1); remove() (an element in the middle: a queue closing, a
// waiter cancelled) scans, which is fine off the hot path. An element is on at most one list per link
// member; the link of an element off the list is kNone / nullptr.
#pragma once

#include <cstdint>
#include <type_traits>

namespace rdmablk::transport {

template <auto Next>
class SlotFifo {
 public:
  static constexpr uint16_t kNone = 0xFFFF;

  bool empty() const noexcept { return head_ == kNone; }
  uint16_t front() const noexcept { return head_; }  // kNone when empty

  template <typename Slots>
  void push_back(Slots& slots, uint16_t i) noexcept {
    slots[i].*Next = kNone;
    if (tail_ == kNone) {
      head_ = i;
    } else {
      slots[tail_].*Next = i;
    }
    tail_ = i;
  }

  // The first index, unlinked. Not on an empty FIFO.
  template <typename Slots>
  uint16_t pop_front(Slots& slots) noexcept {
    const uint16_t i = head_;
    head_ = slots[i].*Next;
    if (head_ == kNone) tail_ = kNone;
    slots[i].*Next = kNone;
    return i;
  }

  // Unlinks `i` wherever it is; false when it is not on the FIFO.
  template <typename Slots>
  bool remove(Slots& slots, uint16_t i) noexcept {
    uint16_t prev = kNone;
    for (uint16_t at = head_; at != kNone; prev = at, at = slots[at].*Next) {
      if (at != i) continue;
      if (prev == kNone) {
        head_ = slots[at].*Next;
      } else {
        slots[prev].*Next = slots[at].*Next;
      }
      if (tail_ == at) tail_ = prev;
      slots[at].*Next = kNone;
      return true;
    }
    return false;
  }

  template <typename Slots>
  unsigned size(const Slots& slots) const noexcept {
    unsigned n = 0;
    for (uint16_t at = head_; at != kNone; at = slots[at].*Next) ++n;
    return n;
  }

 private:
  uint16_t head_ = kNone;
  uint16_t tail_ = kNone;
};

template <typename T, auto Link>
class PtrFifo {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  T* front() const noexcept { return head_; }  // nullptr when empty

  void push_back(T& x) noexcept {
    next(x) = nullptr;
    if (tail_ == nullptr) {
      head_ = &x;
    } else {
      next(*tail_) = &x;
    }
    tail_ = &x;
  }

  // Ahead of all the others (one taken off that must stay first).
  void push_front(T& x) noexcept {
    next(x) = head_;
    head_ = &x;
    if (tail_ == nullptr) tail_ = &x;
  }

  // The first element, unlinked. Not on an empty FIFO.
  T& pop_front() noexcept {
    T& x = *head_;
    head_ = next(x);
    if (head_ == nullptr) tail_ = nullptr;
    next(x) = nullptr;
    return x;
  }

  // Unlinks and returns the first element `pred` accepts; nullptr when none does.
  template <typename Pred>
  T* take_first(Pred&& pred) noexcept {
    T* prev = nullptr;
    for (T* at = head_; at != nullptr; prev = at, at = next(*at)) {
      if (!pred(*at)) continue;
      if (prev == nullptr) {
        head_ = next(*at);
      } else {
        next(*prev) = next(*at);
      }
      if (tail_ == at) tail_ = prev;
      next(*at) = nullptr;
      return at;
    }
    return nullptr;
  }

  // Unlinks `x` wherever it is; false when it is not on the FIFO.
  bool remove(T& x) noexcept {
    return take_first([&x](const T& e) noexcept { return &e == &x; }) != nullptr;
  }

 private:
  static T*& next(T& x) noexcept {
    if constexpr (std::is_member_object_pointer_v<decltype(Link)>) {
      return x.*Link;
    } else {
      return Link(x);
    }
  }

  T* head_ = nullptr;
  T* tail_ = nullptr;
};

}  // namespace rdmablk::transport

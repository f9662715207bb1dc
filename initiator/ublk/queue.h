// One ublk hardware queue served by one thread, over one NVMe-oF I/O queue.
//
// The thread owns an io_uring on /dev/ublkcN: it issues FETCH_REQ for every tag, and for each request
// the driver hands over (the descriptor in the mmap()ed array says op, start sector, length) it sends
// the NVMe command on its IoQueue with the tag's buffer (the driver copies write data in before
// delivering, and read data out on COMMIT), then COMMIT_AND_FETCH_REQ with the result. The driver wants
// every command of a queue from the same task: everything here runs on the queue's thread, except the
// Supervisor calls, which only leave a message and wake it.
//
// Losing the connection does not fail I/O: requests are held (the block device waits) until the
// supervisor hands over a new IoQueue, then resubmitted. After the supervisor's loss timeout it sets
// fail-fast: held and new requests complete with -EIO until a connection is back.
#pragma once

#include <liburing.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "initiator/controller.h"
#include "initiator/ublk/geometry.h"
#include "initiator/ublk/uapi.h"

namespace rdmablk::initiator::ublk {

struct QueueConfig {
  uint32_t dev_id = 0;
  uint16_t q_id = 0;
  uint16_t depth = 0;        // tags
  int cdev_fd = -1;          // /dev/ublkcN, shared by the queues
  bool ioctl_encoded = true;  // opcodes as the control device negotiated
  uint32_t nsid = 1;
  Geometry geometry;
};

class Queue {
 public:
  // Maps the descriptor array and allocates the tag buffers; the thread is started by run().
  static Result<std::unique_ptr<Queue>> create(const QueueConfig& cfg, int supervisor_event_fd);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // The thread body: fetch every tag, then serve until the driver aborts them all (device stopped).
  void run() noexcept;

  // --- Supervisor side (any thread) -------------------------------------------------------------------
  // Serve on `q` from now on (a first connection or a reconnection).
  void give_connection(std::unique_ptr<IoQueue> q);
  // Close the connection and hold requests (a reconnection follows). has_connection() turns false once
  // the thread has let go of it, which the supervisor waits for before destroying the Controller.
  void drop_connection();
  void set_fail_fast(bool on);
  // After STOP_DEV returned: leave once nothing is in flight, even if the driver has not aborted every tag.
  void finish();
  bool has_connection() const noexcept { return has_connection_.load(); }
  // The connection failed under this queue (the supervisor reconnects every queue).
  bool lost() const noexcept { return lost_.load(); }
  bool finished() const noexcept { return finished_.load(); }
  uint64_t completed() const noexcept { return completed_.load(std::memory_order_relaxed); }

 private:
  enum class TagState : uint8_t { fetching, held, in_flight, committing, dead };
  struct Tag {
    transport::HostCommand cmd{};
    Queue* queue = nullptr;
    uint16_t tag = 0;
    TagState state = TagState::fetching;
    uint8_t retries = 0;  // transport errors on a live connection
    std::chrono::steady_clock::time_point sent{};  // when it went on the wire (in_flight)
  };

  Queue(const QueueConfig& cfg, int supervisor_event_fd);
  Result<void> setup();
  void queue_fetch(uint16_t tag, bool commit, int result) noexcept;
  bool reap_ring() noexcept;  // true when something arrived
  void start(Tag& t) noexcept;
  bool submit_held() noexcept;
  void complete(Tag& t, int result) noexcept;
  void hold(Tag& t) noexcept;
  void on_lost(int error) noexcept;
  void take_mail() noexcept;
  void notify_supervisor() noexcept;
  // Applies `change` to the mailbox under its lock, then wakes the thread.
  template <typename Change>
  void post(Change&& change);
  void arm_mail_poll() noexcept;
  bool idle() const noexcept;
  void release_connection() noexcept;  // io_ is gone: tell the supervisor
  void fail_held_if_fast() noexcept;   // no connection and fail-fast: held requests complete with -EIO
  void check_timeouts() noexcept;
  std::span<uint8_t> buffer(uint16_t tag) noexcept {
    return {buffers_ + static_cast<std::size_t>(tag) * cfg_.geometry.max_io_bytes, cfg_.geometry.max_io_bytes};
  }
  static void on_complete(transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept;

  QueueConfig cfg_;
  int supervisor_efd_ = -1;
  int mail_efd_ = -1;
  io_uring ring_{};
  bool ring_ready_ = false;
  const ublksrv_io_desc* descs_ = nullptr;
  std::size_t descs_bytes_ = 0;
  uint8_t* buffers_ = nullptr;
  std::size_t buffers_bytes_ = 0;
  std::vector<Tag> tags_;
  std::vector<uint16_t> held_;  // requests waiting for a connection or a free queue slot, oldest first
  std::vector<uint16_t> scratch_;
  unsigned aborted_ = 0;
  bool mail_poll_armed_ = false;

  std::unique_ptr<IoQueue> io_;  // the thread's; changed only on the thread

  // Mailbox from the supervisor.
  std::mutex mail_mutex_;
  std::unique_ptr<IoQueue> mail_queue_;
  bool mail_drop_ = false;
  bool mail_fail_fast_ = false;
  bool mail_finish_ = false;
  std::atomic<bool> mail_{false};

  bool fail_fast_ = false;
  bool finishing_ = false;
  bool submit_failed_ = false;
  std::chrono::steady_clock::time_point next_timeout_check_{};
  std::atomic<bool> has_connection_{false};
  std::atomic<bool> lost_{false};
  std::atomic<bool> finished_{false};
  std::atomic<uint64_t> completed_{0};
};

}  // namespace rdmablk::initiator::ublk

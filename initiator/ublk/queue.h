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
// supervisor hands over a new IoQueue (the same path reconnected, or another path), then resubmitted. A
// path-related status (ANA) holds the request too and stops sending until the supervisor decides. After
// the supervisor's loss timeout it sets fail-fast: held and new requests complete with -EIO until a
// connection is back.
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

#include "initiator/host/controller.h"
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
  // Serve on `q` (a connection of path `path`) from now on: a first connection, a reconnection, or a
  // switch to another path. A switch away from a connection that still works does not abandon what is
  // on the wire there (an old write landing after a newer one sent on the new path would undo it): new
  // requests are held until the old connection has nothing outstanding, then it is closed and the held
  // requests go out on `q`.
  void give_connection(std::unique_ptr<IoQueue> q, int path = 0);
  // Close the connection(s) of `path` (lost) and hold their requests; other paths' stay. holds_path()
  // turns false once the thread has let go, which the supervisor waits for before destroying the
  // Controller.
  void drop_connection(int path = 0);
  // After a path-related status (ANA inaccessible, ...) the queue holds I/O until told: resume() sends
  // it on the same connection again (the supervisor re-read ANA and the path is still the one to use).
  void resume();
  void set_fail_fast(bool on);
  // After STOP_DEV returned: leave once nothing is in flight, even if the driver has not aborted every tag.
  void finish();
  // Whether the thread (or its mailbox) holds a connection at all / one of `path`.
  bool has_connection() const;
  bool holds_path(int path) const;
  // The path whose connection failed under this queue (the supervisor treats the path as lost), or -1;
  // reading clears it.
  int take_lost() noexcept { return lost_path_.exchange(-1); }
  // Forget a loss of `path` (handled: every queue let go of that path's connections).
  void clear_lost(int path) noexcept { lost_path_.compare_exchange_strong(path, -1); }
  bool lost() const noexcept { return lost_path_.load() >= 0; }
  // A command came back with a path-related status (SCT 3h) since the last call; the queue holds I/O.
  bool take_path_error() noexcept { return path_error_.exchange(false); }
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
  void install_next() noexcept;        // the pending switch: close io_, serve on next_io_
  void publish_paths() noexcept;       // io_path_ / next_path_ for holds_path()
  bool can_submit() const noexcept { return io_ && !next_io_ && !paused_; }
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

  std::unique_ptr<IoQueue> io_;       // the thread's; changed only on the thread
  std::unique_ptr<IoQueue> next_io_;  // a switch waiting for io_ to drain
  int cur_path_ = -1;                 // path of io_ / next_io_ (thread side)
  int pending_path_ = -1;
  bool paused_ = false;               // a path-related status: hold I/O until resume() or a switch

  // Mailbox from the supervisor.
  mutable std::mutex mail_mutex_;
  std::unique_ptr<IoQueue> mail_queue_;
  int mail_path_ = -1;
  std::vector<int> mail_drop_;        // paths whose connections to close
  bool mail_resume_ = false;
  int io_path_ = -1;                  // copies of cur_path_ / pending_path_ under the lock
  int next_path_ = -1;
  bool mail_fail_fast_ = false;
  bool mail_finish_ = false;
  std::atomic<bool> mail_{false};

  bool fail_fast_ = false;
  bool finishing_ = false;
  bool submit_failed_ = false;
  std::chrono::steady_clock::time_point next_timeout_check_{};
  std::atomic<int> lost_path_{-1};
  std::atomic<bool> path_error_{false};
  std::atomic<bool> finished_{false};
  std::atomic<uint64_t> completed_{0};
};

}  // namespace rdmablk::initiator::ublk

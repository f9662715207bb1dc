// The backend interface: where a namespace's blocks live.
//
// A Backend is one per namespace and is shared by every reactor (its methods are const and
// thread-safe). Each reactor opens its own Queue on it: the queue owns an io_uring (or nothing, for
// ram/null), its registered buffers and its in-flight requests, and is used by that thread only.
// Submitting never blocks and never allocates; completions are reaped in batches.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/result.h"
#include "protocol/status.h"

namespace rdmablk::backend {

using protocol::Status;

// compare_and_write: only where Capabilities::compare_and_write says so (rbd).
enum class Op : uint8_t { read, write, flush, write_zeroes, deallocate, compare_and_write };

const char* op_name(Op op) noexcept;

struct Capabilities {
  bool flush = false;                 // Flush reaches stable storage (fdatasync)
  bool fua = false;                   // per-write Force Unit Access (RWF_DSYNC)
  bool write_zeroes = false;          // efficient zeroing (fallocate ZERO_RANGE)
  bool deallocate = false;            // discard / hole punch
  // Deallocated blocks read back as zeroes (Identify Namespace DLFEAT): the target may then serve Write
  // Zeroes with Deallocate by deallocating. False where deallocate does not touch the data (null).
  bool deallocated_reads_zeroes = false;
  bool volatile_write_cache = false;  // completes writes before they are durable (buffered I/O, ram)
  // Op::compare_and_write for up to this many blocks (0: none), atomic in the store itself, so against
  // every writer of it, this target or another (rbd: rbd_aio_compare_and_write in the OSD, which takes
  // one 512-byte sector at most). Without it the target core locks the range.
  uint32_t compare_and_write_blocks = 0;
  bool read_only = false;
};

struct Geometry {
  uint32_t block_size = 512;  // logical block size in bytes, a power of two in [512, 65536]
  uint64_t num_blocks = 0;    // namespace size in logical blocks, when opened (Backend::num_blocks() is now)
  // Alignment that Request.buf must have (O_DIRECT: the file system's / device's DMA alignment);
  // 1 = any. Page-aligned buffers always satisfy it.
  uint32_t buf_alignment = 1;
  Capabilities caps;
};

// One I/O request. The caller owns it; the queue copies what it needs at submit time.
struct Request {
  Op op = Op::read;
  uint64_t slba = 0;   // first logical block
  uint32_t nlb = 0;    // number of logical blocks (1-based; flush ignores the range)
  void* buf = nullptr;  // read/write data, nlb * block_size bytes (compare_and_write: what to write)
  const void* cmp_buf = nullptr;  // compare_and_write: what the blocks must hold (else Compare Failure)
  int buf_index = -1;   // index of a buffer registered with the queue that contains buf, or -1
  bool fua = false;     // write: durable before completion
  uint64_t user_data = 0;  // returned in the completion (the caller's request tag)
};

struct Completion {
  uint64_t user_data = 0;
  Status status;
};

struct QueueOptions {
  unsigned depth = 128;           // maximum requests in flight on this queue
  std::span<const iovec> buffers;  // buffers to register (io_uring fixed buffers); may be empty
};

// submit()'s answer when `depth` requests are already in flight. Not an NVMe status: its Status Code Type
// is a reserved one (6h; NVMe Base 2.0 Figure 101 reserves 4h-6h), so it cannot be mistaken for a status a
// command completes with (Internal Error included) and is never sent to a host: the target core waits for a
// completion to make room and submits again.
inline constexpr Status queue_full{static_cast<protocol::StatusCodeType>(0x6), 0xFF};
static_assert(!queue_full.ok() && !queue_full.dnr());
static_assert(!queue_full.is(protocol::status::internal_error));

class Queue {
 public:
  virtual ~Queue() = default;
  Queue() = default;
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Queue a request. A request that can never succeed (range outside the namespace, a write to a
  // read-only namespace, an unsupported op) is refused here with its NVMe status and produces no
  // completion; a full queue returns `queue_full` (transient, not an NVMe status: the caller reaps and
  // retries; submit never returns it for any other reason).
  // Queued requests reach the kernel at the next flush() or reap().
  virtual Status submit(const Request& req) noexcept = 0;
  // Push queued requests to the kernel. Returns the number pushed (or -errno).
  virtual int flush() noexcept = 0;
  // Reap up to out.size() completions, waiting for at least min_complete of them. Pushes queued
  // requests first. Returns the number written to out.
  virtual unsigned reap(std::span<Completion> out, unsigned min_complete = 0) noexcept = 0;
  // Requests submitted and not yet reaped.
  virtual unsigned in_flight() const noexcept = 0;
  // A file descriptor that becomes readable when completions are ready (for the reactor's poll),
  // or -1 when completions are ready at once after submit (ram, null).
  virtual int event_fd() const noexcept = 0;
  // The watcher saw event_fd() readable: reset it before reaping (it stays readable until then; a
  // completion that comes after this call makes it readable again). Owner thread.
  virtual void clear_event() noexcept {}
};

// State kept next to a volume in its store (Backend::side_object).
class RadosObject;  // backend/rados_object.h

class SideObject {
 public:
  virtual ~SideObject() = default;
  // Its bytes; nullopt when it does not exist.
  virtual Result<std::optional<std::vector<uint8_t>>> read() = 0;
  // Replaces it whole, atomically (a reader sees the old bytes or the new ones).
  virtual Result<void> write(std::span<const uint8_t> bytes) = 0;
  virtual Result<void> remove() = 0;  // no error when it does not exist
  virtual std::string describe() const = 0;  // "rados object rbd/rdmablk.resv.vol1", for messages
  // The same object with versioned writes and watch/notify, when the store has them (RADOS), for state that
  // several targets change (a gateway group's reservations); null otherwise.
  virtual RadosObject* versioned() { return nullptr; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual const Geometry& geometry() const noexcept = 0;
  virtual std::string describe() const = 0;  // "file /var/lib/x.img (O_DIRECT)", "ram 1 GiB", ...
  virtual Result<std::unique_ptr<Queue>> open_queue(const QueueOptions& opts) const = 0;

  // Resizing underneath (an rbd image resized, a file or block device grown; nvmet's revalidate_size):
  // refresh_size() reads the store's size again and returns it in blocks; queues check ranges against the
  // size it found from then on. Backends of fixed size (ram, null, a file with a configured size) return it.
  // Control path: it may wait on the store (librbd refreshes the image header).
  virtual Result<uint64_t> refresh_size() const { return num_blocks(); }
  // The size queues check ranges against (geometry().num_blocks until refresh_size() saw another).
  virtual uint64_t num_blocks() const noexcept { return geometry().num_blocks; }
  // Calls `notify` when the store announces a change that may be a resize (rbd: the image header's watch),
  // so the owner can refresh_size() and tell hosts. It runs on a library thread: it must only wake someone
  // (write an eventfd) and never call back into the backend. Backends without such news do nothing (a
  // reload re-reads every size). At most once per backend, before any queue is opened.
  virtual void watch_size(std::function<void()> notify) const { (void)notify; }
  // A small object the store keeps next to the volume under `name` (rbd: a RADOS object in the image's pool
  // and namespace), for state every target exporting the volume must see the same; null for backends whose
  // store has no such place (files, memory). Control path: its calls wait on the store.
  virtual std::unique_ptr<SideObject> side_object(std::string_view name) const {
    (void)name;
    return nullptr;
  }
};


// --- construction ---------------------------------------------------------------------------------

struct FileOptions {
  std::string path;
  uint64_t size = 0;        // bytes; 0 = use the existing file or device size. A missing file is
                            // created sparse when size > 0.
  uint32_t block_size = 0;  // 0 = the device's logical block size, or 512 for a regular file
  bool direct = true;       // O_DIRECT where alignment allows; false = buffered (volatile cache)
  bool read_only = false;
};
Result<std::unique_ptr<Backend>> open_file_backend(const FileOptions& opts);

struct MemoryOptions {
  uint64_t size = 0;         // bytes, a multiple of block_size
  uint32_t block_size = 512;
  bool read_only = false;
};
// Blocks in memory: tests and the quick start.
Result<std::unique_ptr<Backend>> make_ram_backend(const MemoryOptions& opts);
// Completes every request at once without touching data: for measuring the network path.
Result<std::unique_ptr<Backend>> make_null_backend(const MemoryOptions& opts);

struct RbdOptions {
  std::string pool;                             // required
  std::string image;                            // required
  std::string rados_namespace;                  // optional RADOS namespace inside the pool
  std::string ceph_conf = "/etc/ceph/ceph.conf";
  std::string client = "admin";                 // cephx id (client.<id>)
  std::string keyring;                          // empty: the conf's `keyring`
  uint32_t block_size = 512;                    // 512 or 4096 (any power of two in [512, 65536] works)
  bool read_only = false;                       // rbd_open_read_only
  // client_mount_timeout, rados_mon_op_timeout and rados_osd_op_timeout (unless the conf file or CEPH_ARGS
  // sets them): an unreachable cluster fails the open after this long instead of hanging, and an I/O that
  // gets no answer completes with an error.
  unsigned timeout_seconds = 30;
};
// A Ceph RBD image through librbd. One cluster connection per (ceph_conf, client, keyring) in the process,
// shared by every namespace that names it; the image is opened once per backend and shared by its queues.
// An unreachable cluster gives an error starting "cannot reach the Ceph cluster: ".
// Destroying an rbd backend returns at once: the image is closed (cache flushed, lock released) on a
// background thread, so that the reactor that dropped the last reference does not wait for the cluster.
Result<std::unique_ptr<Backend>> open_rbd_backend(const RbdOptions& opts);
// Waits until every rbd image whose backend was destroyed is closed (shutdown). False after `limit`.
bool wait_for_rbd_closes(std::chrono::milliseconds limit);

// The one errno -> NVMe status mapper (a negative errno, as io_uring reports it, is accepted too).
// The table is in backend/errno_status.cpp. The second form knows the operation and reports media
// errors (EIO, ENODATA, EBADMSG, EUCLEAN, EILSEQ) as Unrecovered Read Error for reads and Write
// Fault for writes/write zeroes/flush; the first reports them as Internal Error (like nvmet).
Status status_from_errno(int err) noexcept;
Status status_from_errno(int err, Op op) noexcept;

}  // namespace rdmablk::backend

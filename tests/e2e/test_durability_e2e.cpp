// Crash durability, end to end: hosts write to a file namespace over NVMe/TCP with several queues at QD > 1,
// the target is SIGKILLed after a seeded random number of acknowledgements (mid-stream: writes and flushes
// are in flight), restarted on the same directory and ports, and every logical block is checked twice, read
// back through the initiator and read from the backing file directly, against a model of what was
// acknowledged.
//
// What the target promises (docs/backends.md#what-is-durable-and-when), and what is checked here:
// - A process crash (SIGKILL) loses no acknowledged write, FUA or not, flushed or not: the target
//   acknowledges a write only when the kernel has it (page cache or device), and nothing is cached in user
//   space. So every block reads back the last acknowledged write to it, or a write to it that was still
//   unacknowledged at the kill (old or new content, never anything else: not zeroes, not an older write,
//   not another block's data, not a mix).
// - Atomicity is per logical block: Identify says AWUN/AWUPF = 0 (one block) and NSFEAT has no namespace
//   atomics. A multi-block write that was in flight may be applied partly (counted and printed, not a
//   failure); a write within the atomic unit the target reports must be all or nothing.
// - Power loss is only survived by writes acknowledged with FUA, writes acknowledged before the submission
//   of a Flush that was acknowledged, and (write cache turned off with Set Features) every acknowledged
//   write. A SIGKILL cannot show that (the page cache survives), so where the kernel allows it the test
//   watches the file system layer: an ftrace instance counts ext4_sync_file calls on the backing file's
//   inode (RWF_DSYNC writes and fdatasync both go through it) and checks that at least one happened for
//   every acknowledged Flush and every acknowledged FUA write, and no more than were submitted (so plain
//   writes do not sync: the count tells them apart). Without root, tracefs or ext4 it says why and skips
//   that part only.
//
// Every block carries a stamp (magic, LBA, write id, its index in the write, the run's seed, the id again in
// its last 8 bytes) and a body derived from (seed, LBA, write id), so a stale, lost, misplaced or torn block
// is detected and named with the write it holds and the write it should hold.
//
// Reproduce a run with RDMABLK_DURABILITY_SEED=<the printed seed>.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "e2e_common.h"
#include "protocol/command.h"
#include "protocol/identify.h"

namespace e2e {
namespace {

using rdmablk::initiator::Controller;
using rdmablk::initiator::IoQueue;
using rdmablk::transport::HostCommand;
namespace p = rdmablk::protocol;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct DurabilityCase {
  const char* name;
  bool direct;
  uint32_t block_size;
  bool write_cache_off;  // Set Features Volatile Write Cache = 0 on every controller: every write is FUA
  unsigned min_acks;     // the kill comes after a random number of acknowledged writes in [min_acks, max_acks]
  unsigned max_acks;
};

void PrintTo(const DurabilityCase& c, std::ostream* os) { *os << c.name; }

const DurabilityCase kCases[] = {
    {"direct_4k", true, 4096, false, 2000, 8000},
    {"direct_512", true, 512, false, 2000, 8000},
    {"buffered_4k", false, 4096, false, 2000, 8000},
    {"buffered_512", false, 512, false, 2000, 8000},
    // Every write is synchronous here (one fdatasync each): fewer of them.
    {"buffered_4k_write_cache_off", false, 4096, true, 500, 2000},
};

constexpr uint64_t kNsBytes = 8ull << 20;
constexpr unsigned kControllers = 2;
constexpr unsigned kQueuesPerController = 2;
constexpr unsigned kQueues = kControllers * kQueuesPerController;
constexpr uint64_t kRegionBytes = 1ull << 20;  // each queue writes its own 1 MiB; the rest stays zero
constexpr unsigned kDepth = 8;                 // commands in flight per queue
constexpr uint32_t kMaxWriteBytes = 32 * 1024;  // above the 16 KiB in-capsule limit: R2T writes too
constexpr unsigned kFuaOneIn = 5;
constexpr unsigned kFlushOneIn = 24;
constexpr auto kStreamLimit = 90s;  // the stream normally reaches its kill point in a few seconds
static_assert(kQueues * kRegionBytes <= kNsBytes);

// --- block stamps -----------------------------------------------------------------------------------------

constexpr char kMagic[8] = {'R', 'B', 'D', 'U', 'R', 'A', 'B', '1'};

struct Stamp {
  char magic[8];
  uint64_t lba;
  uint64_t write_id;  // (queue + 1) << 32 | index of the write in its queue's record
  uint32_t index;     // block index within the write
  uint32_t nlb;       // blocks in the write
  uint64_t seed;
};
static_assert(sizeof(Stamp) == 40);

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void make_block(uint8_t* out, uint32_t bs, uint64_t seed, uint64_t lba, uint64_t write_id, uint32_t index,
                uint32_t nlb) {
  Stamp s{};
  std::memcpy(s.magic, kMagic, sizeof(kMagic));
  s.lba = lba;
  s.write_id = write_id;
  s.index = index;
  s.nlb = nlb;
  s.seed = seed;
  std::memcpy(out, &s, sizeof(s));
  uint64_t x = splitmix(seed ^ splitmix(lba) ^ splitmix(write_id * 0x2545F4914F6CDD1Dull));
  for (uint32_t off = sizeof(Stamp); off + 8 <= bs - 8; off += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(out + off, &x, 8);
  }
  std::memcpy(out + bs - 8, &write_id, 8);
}

struct Decoded {
  enum Kind { zero, whole, torn } kind = torn;
  uint64_t write_id = 0;
  uint64_t stamped_lba = 0;
  std::string why;  // torn: what is wrong with it
};

Decoded decode_block(const uint8_t* b, uint32_t bs, uint64_t seed, std::vector<uint8_t>& scratch) {
  Decoded d;
  if (std::all_of(b, b + bs, [](uint8_t v) { return v == 0; })) {
    d.kind = Decoded::zero;
    return d;
  }
  Stamp s;
  std::memcpy(&s, b, sizeof(s));
  if (std::memcmp(s.magic, kMagic, sizeof(kMagic)) != 0 || s.seed != seed || s.nlb == 0 || s.index >= s.nlb) {
    d.why = "no valid stamp in its first 40 bytes (neither zeroes nor a whole write of this run)";
    return d;
  }
  scratch.resize(bs);
  make_block(scratch.data(), bs, seed, s.lba, s.write_id, s.index, s.nlb);
  const auto mis = std::mismatch(b, b + bs, scratch.begin());
  if (mis.first != b + bs) {
    d.write_id = s.write_id;
    std::ostringstream o;
    o << "stamped by write 0x" << std::hex << s.write_id << std::dec << " but byte " << (mis.first - b)
      << " differs from that write's data (two writes mixed in one block)";
    d.why = o.str();
    return d;
  }
  d.kind = Decoded::whole;
  d.write_id = s.write_id;
  d.stamped_lba = s.lba;
  return d;
}

std::string hex_id(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(id));
  return buf;
}

// --- the host side: one queue, one thread -------------------------------------------------------------------

struct Shared {
  std::atomic<uint64_t> ack_clock{0};  // global order of observed acknowledgements (writes)
  std::atomic<uint64_t> acks{0};
  std::atomic<bool> killed{false};
  uint64_t kill_after = 0;
  std::mutex mu;
  std::condition_variable cv;
  unsigned writers_done = 0;  // under mu
};

struct WriteRec {
  enum State : uint8_t { submitted, acked, failed };
  uint64_t slba = 0;
  uint32_t nlb = 0;
  bool fua = false;
  State state = submitted;
  uint64_t ack_seq = 0;  // ack_clock when its acknowledgement was seen
};

class QueueRun;

struct Slot {
  QueueRun* run = nullptr;
  HostCommand cmd{};
  std::vector<uint8_t> buf;
  bool busy = false;
  int64_t write = -1;      // index into writes, or -1 for a Flush
  uint64_t flush_seq = 0;  // Flush: ack_clock at its submission (every write acknowledged before is covered)
};

class QueueRun {
 public:
  QueueRun(unsigned index, IoQueue& q, const DurabilityCase& c, uint64_t seed, Shared& shared)
      : index_(index), q_(q), c_(c), seed_(seed), shared_(shared), rng_(splitmix(seed ^ (index + 1) * 0x9E37ull)) {
    base_lba_ = index * (kRegionBytes / c.block_size);
    region_blocks_ = kRegionBytes / c.block_size;
    max_blocks_ = kMaxWriteBytes / c.block_size;
    history_.resize(region_blocks_);
    busy_.assign(region_blocks_, false);
    writes_.reserve(16384);
    for (auto& s : slots_) {
      s.run = this;
      s.buf.resize(kMaxWriteBytes);
    }
  }

  void run() {
    const auto give_up_at_kill = [&] { return shared_.killed.load() ? Clock::now() + 60s : Clock::time_point::max(); };
    auto deadline = Clock::time_point::max();
    while (true) {
      if (!dead_) fill();
      if (in_flight_ == 0) break;
      if (deadline == Clock::time_point::max()) deadline = give_up_at_kill();
      if (Clock::now() > deadline) {
        error("queue " + std::to_string(index_) + ": commands still outstanding 60 s after the kill");
        break;
      }
      const int rc = q_.poll(1, 1000ms);
      if (rc < 0) {
        dead_ = true;  // every outstanding command has completed with a transport error (HostQueue::poll)
        if (!shared_.killed.load()) error("queue " + std::to_string(index_) + ": connection failed before the kill");
      }
    }
    std::lock_guard lock(shared_.mu);
    ++shared_.writers_done;
    shared_.cv.notify_all();
  }

  // --- results (read after the thread has joined) ---
  const std::vector<WriteRec>& writes() const { return writes_; }
  const std::vector<uint32_t>& history(uint64_t lba) const { return history_[lba - base_lba_]; }
  uint64_t base_lba() const { return base_lba_; }
  uint64_t region_blocks() const { return region_blocks_; }
  uint64_t covered_seq() const { return covered_seq_; }  // writes with ack_seq below it are flushed
  uint64_t flushes_submitted() const { return flushes_submitted_; }
  uint64_t flushes_acked() const { return flushes_acked_; }
  const std::vector<std::string>& errors() const { return errors_; }
  uint64_t write_id(std::size_t i) const { return (uint64_t{index_} + 1) << 32 | i; }

 private:
  void error(std::string e) {
    if (errors_.size() < 10) errors_.push_back(std::move(e));
  }

  Slot* free_slot() {
    for (auto& s : slots_)
      if (!s.busy) return &s;
    return nullptr;
  }

  void fill() {
    while (in_flight_ < kDepth && !dead_) {
      Slot* s = free_slot();
      if (s == nullptr) return;
      if (!flush_in_flight_ && rng_() % kFlushOneIn == 0) {
        submit_flush(*s);
      } else if (!submit_write(*s)) {
        return;  // no free range: wait for a completion
      }
    }
  }

  void submit_flush(Slot& s) {
    s.write = -1;
    s.flush_seq = shared_.ack_clock.load();
    s.cmd = HostCommand{};
    s.cmd.on_complete = &QueueRun::on_complete;
    s.cmd.context = &s;
    const p::Status st = q_.submit_flush(s.cmd, 1);
    if (!st.ok()) return submit_failed("Flush", st);
    s.busy = true;
    flush_in_flight_ = true;
    ++in_flight_;
    ++flushes_submitted_;
  }

  bool submit_write(Slot& s) {
    // Half of the writes short (1-4 blocks), half up to kMaxWriteBytes; never overlapping a write of this
    // queue still in flight, so that the writes to a block are ordered (each acknowledged before the next).
    uint32_t nlb = 0;
    uint64_t off = 0;
    for (int attempt = 0;; ++attempt) {
      if (attempt == 8) return false;
      nlb = static_cast<uint32_t>(rng_() % 2 == 0 ? 1 + rng_() % std::min<uint32_t>(4, max_blocks_)
                                                  : 1 + rng_() % max_blocks_);
      off = rng_() % (region_blocks_ - nlb + 1);
      if (std::none_of(busy_.begin() + static_cast<std::ptrdiff_t>(off),
                       busy_.begin() + static_cast<std::ptrdiff_t>(off + nlb), [](bool b) { return b; }))
        break;
    }
    const bool fua = rng_() % kFuaOneIn == 0;
    const std::size_t w = writes_.size();
    const uint64_t id = write_id(w);
    const uint64_t slba = base_lba_ + off;
    for (uint32_t i = 0; i < nlb; ++i)
      make_block(s.buf.data() + std::size_t{i} * c_.block_size, c_.block_size, seed_, slba + i, id, i, nlb);
    s.write = static_cast<int64_t>(w);
    s.cmd = HostCommand{};
    s.cmd.on_complete = &QueueRun::on_complete;
    s.cmd.context = &s;
    const p::Status st =
        q_.submit_write(s.cmd, 1, slba, nlb, std::span<uint8_t>(s.buf.data(), std::size_t{nlb} * c_.block_size), fua);
    if (!st.ok()) {
      submit_failed("Write", st);
      return false;
    }
    writes_.push_back(WriteRec{slba, nlb, fua, WriteRec::submitted, 0});
    for (uint32_t i = 0; i < nlb; ++i) {
      busy_[off + i] = true;
      history_[off + i].push_back(static_cast<uint32_t>(w));
    }
    s.busy = true;
    ++in_flight_;
    return true;
  }

  void submit_failed(const char* what, p::Status st) {
    // After the kill the queue refuses commands once it knows the connection is gone.
    dead_ = true;
    if (!shared_.killed.load())
      error(std::string(what) + " refused before the kill: " + rdmablk::initiator::describe_status(st));
  }

  static void on_complete(HostCommand& cmd, const p::Cqe& cqe) noexcept {
    auto& s = *static_cast<Slot*>(cmd.context);
    s.run->completed(s, cqe.get_status());
  }

  void completed(Slot& s, p::Status st) noexcept {
    s.busy = false;
    --in_flight_;
    if (s.write < 0) {
      flush_in_flight_ = false;
      if (st.ok()) {
        ++flushes_acked_;
        covered_seq_ = std::max(covered_seq_, s.flush_seq);
      } else if (!shared_.killed.load()) {
        error("Flush failed before the kill: " + rdmablk::initiator::describe_status(st));
      }
      return;
    }
    WriteRec& w = writes_[static_cast<std::size_t>(s.write)];
    for (uint32_t i = 0; i < w.nlb; ++i) busy_[w.slba - base_lba_ + i] = false;
    if (!st.ok()) {
      w.state = WriteRec::failed;  // unknown: it may or may not have reached the file
      if (!shared_.killed.load())
        error("write " + hex_id(write_id(static_cast<std::size_t>(s.write))) +
              " failed before the kill: " + rdmablk::initiator::describe_status(st));
      return;
    }
    w.state = WriteRec::acked;
    w.ack_seq = shared_.ack_clock.fetch_add(1);
    if (shared_.acks.fetch_add(1) + 1 == shared_.kill_after) {
      std::lock_guard lock(shared_.mu);
      shared_.cv.notify_all();
    }
  }

  const unsigned index_;
  IoQueue& q_;
  const DurabilityCase& c_;
  const uint64_t seed_;
  Shared& shared_;
  std::mt19937_64 rng_;
  uint64_t base_lba_ = 0;
  uint64_t region_blocks_ = 0;
  uint32_t max_blocks_ = 1;
  std::vector<WriteRec> writes_;
  std::vector<std::vector<uint32_t>> history_;  // per block of the region: its writes, in submission order
  std::vector<bool> busy_;                      // per block: a write to it is in flight
  std::array<Slot, kDepth> slots_;
  unsigned in_flight_ = 0;
  bool dead_ = false;
  bool flush_in_flight_ = false;
  uint64_t covered_seq_ = 0;
  uint64_t flushes_submitted_ = 0;
  uint64_t flushes_acked_ = 0;
  std::vector<std::string> errors_;
};

// --- the file system layer: ext4_sync_file calls on one inode, through a private ftrace instance -------------

class SyncTrace {
 public:
  SyncTrace() = default;
  ~SyncTrace() { stop(); }
  SyncTrace(const SyncTrace&) = delete;
  SyncTrace& operator=(const SyncTrace&) = delete;

  // Starts counting; false with why() when this machine cannot (then the check is skipped, saying why).
  bool start(const fs::path& file, const std::string& name) {
    const fs::path root = "/sys/kernel/tracing";
    struct statfs sfs {};
    struct stat st {};
    if (::geteuid() != 0) return no("not root (tracefs needs it)");
    if (!fs::exists(root / "instances")) return no("no tracefs at /sys/kernel/tracing");
    if (!fs::exists(root / "events/ext4/ext4_sync_file_enter")) return no("no ext4:ext4_sync_file_enter event");
    if (::statfs(file.c_str(), &sfs) != 0 || sfs.f_type != 0xEF53) return no("the backing file is not on ext4");
    if (::stat(file.c_str(), &st) != 0) return no("cannot stat the backing file");
    dev_ = st.st_dev;
    instance_ = root / "instances" / name;
    std::error_code ec;
    fs::remove(instance_, ec);  // a leftover of a crashed run (rmdir of an instance removes it)
    if (!fs::create_directory(instance_, ec)) return no("cannot create an ftrace instance: " + ec.message());
    // Kernel dev_t: major << 20 | minor.
    const unsigned long kdev = (static_cast<unsigned long>(major(st.st_dev)) << 20) | minor(st.st_dev);
    const fs::path ev = instance_ / "events/ext4/ext4_sync_file_enter";
    if (!put(instance_ / "buffer_size_kb", "1024") ||
        !put(ev / "filter", "ino == " + std::to_string(st.st_ino) + " && dev == " + std::to_string(kdev)) ||
        !put(ev / "enable", "1"))
      return no("cannot configure the ftrace instance " + instance_.string());
    return true;
  }

  // Events seen so far; -1 when some were lost (the buffer overran).
  long count() const {
    std::ifstream t(instance_ / "trace");
    std::string line;
    long n = 0;
    while (std::getline(t, line))
      if (line.find("ext4_sync_file_enter:") != std::string::npos) ++n;
    for (const auto& e : fs::directory_iterator(instance_ / "per_cpu")) {
      std::ifstream s(e.path() / "stats");
      while (std::getline(s, line))
        if (line.rfind("overrun:", 0) == 0 && std::stol(line.substr(8)) != 0) return -1;
    }
    return n;
  }

  void stop() {
    if (instance_.empty()) return;
    put(instance_ / "events/ext4/ext4_sync_file_enter/enable", "0");
    std::error_code ec;
    fs::remove(instance_, ec);
    instance_.clear();
  }

  const std::string& why() const { return why_; }

  // Whether an O_DIRECT write with RWF_DSYNC over allocated blocks may skip the sync (iomap then uses a FUA
  // write when the device supports it): true when the device says it does, or does not say.
  bool device_may_fua() const {
    for (const char* rel : {"queue/fua", "../queue/fua"}) {
      std::ifstream f(fs::path("/sys/dev/block") / (std::to_string(major(dev_)) + ":" + std::to_string(minor(dev_))) /
                      rel);
      int v = 1;
      if (f >> v) return v != 0;
    }
    return true;
  }

 private:
  bool no(std::string why) {
    why_ = std::move(why);
    return false;
  }
  static bool put(const fs::path& p, const std::string& v) {
    std::ofstream f(p);
    f << v;
    f.flush();
    return static_cast<bool>(f);
  }

  fs::path instance_;
  dev_t dev_ = 0;
  std::string why_;
};

// --- verification -------------------------------------------------------------------------------------------

struct Figures {
  uint64_t blocks = 0;               // blocks checked
  uint64_t required_fua = 0;         // blocks whose last acknowledged write was FUA
  uint64_t required_flushed = 0;     // ... was acknowledged before an acknowledged Flush was submitted
  uint64_t required_wce_off = 0;     // ... was written with the write cache off
  uint64_t required_plain = 0;       // ... none of those (survives a process crash, not power loss)
  uint64_t never_acked_zero = 0;     // blocks with no acknowledged write that read zeroes
  uint64_t unacked_applied = 0;      // blocks holding a write that was not acknowledged at the kill
  uint64_t partial_writes = 0;       // unacknowledged multi-block writes applied to some blocks only
  uint64_t whole_unacked_writes = 0;
  uint64_t absent_unacked_writes = 0;
};

struct Verdict {
  Figures fig;
  std::vector<std::string> failures;  // the first few
  uint64_t failure_count = 0;
};

class Model {
 public:
  Model(const std::vector<std::unique_ptr<QueueRun>>& runs, const DurabilityCase& c, uint64_t seed,
        uint32_t atomic_blocks)
      : runs_(runs), c_(c), seed_(seed), atomic_blocks_(atomic_blocks) {
    for (const auto& r : runs) covered_ = std::max(covered_, r->covered_seq());  // a Flush covers every queue
  }

  // `data` holds the whole namespace as read by `source`.
  Verdict check(const std::vector<uint8_t>& data, const char* source) const {
    Verdict v;
    const uint32_t bs = c_.block_size;
    const uint64_t blocks = data.size() / bs;
    std::vector<uint8_t> scratch;
    // Per unacknowledged write: how many of its blocks hold it.
    std::vector<std::vector<uint32_t>> unacked_seen(runs_.size());
    for (std::size_t r = 0; r < runs_.size(); ++r) unacked_seen[r].assign(runs_[r]->writes().size(), 0);
    auto fail = [&](uint64_t lba, const std::string& what) {
      ++v.failure_count;
      if (v.failures.size() < 20) v.failures.push_back(std::string(source) + ": LBA " + std::to_string(lba) + ": " + what);
    };
    for (uint64_t lba = 0; lba < blocks; ++lba) {
      ++v.fig.blocks;
      const Decoded d = decode_block(data.data() + lba * bs, bs, seed_, scratch);
      const QueueRun* run = owner(lba);
      if (run == nullptr) {  // outside every region: never written
        if (d.kind != Decoded::zero) fail(lba, "outside the written regions, yet not zeroes: " + describe(d));
        continue;
      }
      const auto& hist = run->history(lba);
      const auto& writes = run->writes();
      int last_acked = -1;
      for (std::size_t i = 0; i < hist.size(); ++i)
        if (writes[hist[i]].state == WriteRec::acked) last_acked = static_cast<int>(i);
      std::string required = "zeroes (no write to it was acknowledged)";
      if (last_acked >= 0) {
        const uint32_t w = hist[static_cast<std::size_t>(last_acked)];
        const Promise promise = promise_of(writes[w]);
        required = "write " + hex_id(run->write_id(w)) + " (" + promise_name(promise) + ")";
        switch (promise) {
          case Promise::fua: ++v.fig.required_fua; break;
          case Promise::flushed: ++v.fig.required_flushed; break;
          case Promise::write_cache_off: ++v.fig.required_wce_off; break;
          case Promise::process_crash_only: ++v.fig.required_plain; break;
        }
      }
      if (d.kind == Decoded::torn) {
        fail(lba, "torn: " + d.why + "; expected " + required);
        continue;
      }
      if (d.kind == Decoded::zero) {
        if (last_acked >= 0) fail(lba, "lost: reads zeroes; expected " + required);
        else ++v.fig.never_acked_zero;
        continue;
      }
      // A whole write: the last acknowledged one, or one submitted after it and never acknowledged.
      const auto pos = std::find_if(hist.begin(), hist.end(), [&](uint32_t w) { return run->write_id(w) == d.write_id; });
      if (d.stamped_lba != lba || pos == hist.end()) {
        fail(lba, "misplaced: holds write " + hex_id(d.write_id) + "'s block for LBA " + std::to_string(d.stamped_lba) +
                      "; expected " + required);
        continue;
      }
      const auto at = static_cast<int>(pos - hist.begin());
      if (at < last_acked) {
        fail(lba, "stale: holds the older write " + hex_id(d.write_id) + "; expected " + required);
        continue;
      }
      if (at > last_acked) {
        ++v.fig.unacked_applied;
        ++unacked_seen[index_of(run)][*pos];
      }
    }
    // Unacknowledged writes: all or nothing within the atomic write unit the target reports; beyond it,
    // block by block (counted).
    for (std::size_t r = 0; r < runs_.size(); ++r) {
      const auto& writes = runs_[r]->writes();
      for (std::size_t w = 0; w < writes.size(); ++w) {
        if (writes[w].state == WriteRec::acked) continue;
        const uint32_t seen = unacked_seen[r][w];
        if (seen == 0) ++v.fig.absent_unacked_writes;
        else if (seen == writes[w].nlb) ++v.fig.whole_unacked_writes;
        else ++v.fig.partial_writes;
        if (seen != 0 && seen != writes[w].nlb && writes[w].nlb <= atomic_blocks_)
          fail(writes[w].slba, "unacknowledged write " + hex_id(runs_[r]->write_id(w)) + " of " +
                                   std::to_string(writes[w].nlb) + " blocks applied to " + std::to_string(seen) +
                                   " of them, within the atomic write unit of " + std::to_string(atomic_blocks_) +
                                   " blocks");
      }
    }
    return v;
  }

  // Why an acknowledged write must be there after a crash of the target process (all of them), and which of
  // them must also survive a power loss (all but process_crash_only).
  enum class Promise { fua, flushed, write_cache_off, process_crash_only };
  Promise promise_of(const WriteRec& w) const {
    if (w.fua) return Promise::fua;
    if (w.ack_seq < covered_) return Promise::flushed;
    if (c_.write_cache_off) return Promise::write_cache_off;
    return Promise::process_crash_only;
  }
  static const char* promise_name(Promise p) {
    switch (p) {
      case Promise::fua: return "acknowledged FUA write";
      case Promise::flushed: return "acknowledged before an acknowledged Flush";
      case Promise::write_cache_off: return "acknowledged with the write cache off";
      case Promise::process_crash_only: return "acknowledged, not flushed";
    }
    return "?";
  }

 private:
  const QueueRun* owner(uint64_t lba) const {
    for (const auto& r : runs_)
      if (lba >= r->base_lba() && lba < r->base_lba() + r->region_blocks()) return r.get();
    return nullptr;
  }
  std::size_t index_of(const QueueRun* run) const {
    for (std::size_t i = 0; i < runs_.size(); ++i)
      if (runs_[i].get() == run) return i;
    return 0;
  }
  static std::string describe(const Decoded& d) {
    return d.kind == Decoded::torn ? d.why : "holds write " + hex_id(d.write_id);
  }

  const std::vector<std::unique_ptr<QueueRun>>& runs_;
  const DurabilityCase& c_;
  const uint64_t seed_;
  const uint32_t atomic_blocks_;
  uint64_t covered_ = 0;
};

std::string verdict_text(const Verdict& v) {
  std::string s = std::to_string(v.failure_count) + " bad blocks:\n";
  for (const auto& f : v.failures) s += "  " + f + "\n";
  return s;
}

uint64_t choose_seed() {
  if (const char* e = std::getenv("RDMABLK_DURABILITY_SEED"); e != nullptr && *e != '\0')
    return std::strtoull(e, nullptr, 0);
  return (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
}

std::string namespace_yaml(const DurabilityCase& c) {
  return std::string(R"(      - nsid: 1
        backend: file
        path: ${DIR}/ns.img
        size: 8MiB
        block_size: )") +
         std::to_string(c.block_size) + "\n        direct: " + (c.direct ? "true" : "false") + "\n";
}

class Durability : public ::testing::TestWithParam<DurabilityCase> {};

TEST_P(Durability, SigkillMidStreamLosesNoAcknowledgedWrite) {
  const DurabilityCase& c = GetParam();
  const uint64_t seed = choose_seed();
  Shared shared;
  std::mt19937_64 pick(seed);
  shared.kill_after = c.min_acks + pick() % (c.max_acks - c.min_acks + 1);
  std::printf("[durability] %s: seed %llu (RDMABLK_DURABILITY_SEED=%llu to replay), kill after %llu acknowledged "
              "writes\n",
              c.name, static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(shared.kill_after));
  RecordProperty("seed", std::to_string(seed));
  SCOPED_TRACE("seed " + std::to_string(seed) + " (RDMABLK_DURABILITY_SEED)");

  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(namespace_yaml(c)), {}, 60s));
  const fs::path image = t.dir() / "ns.img";
  const bool fell_back = t.log().find("using buffered I/O instead of O_DIRECT") != std::string::npos;
  if (c.direct && fell_back)
    std::printf("[durability] %s: the file system refused O_DIRECT; the target serves it buffered\n", c.name);

  // Controllers and queues (2 x 2), the write cache turned off where the case says so.
  std::vector<std::unique_ptr<Controller>> ctrls;
  std::vector<std::unique_ptr<IoQueue>> queues;
  for (unsigned i = 0; i < kControllers; ++i) {
    auto opts = controller_options(t.io_port(), kSubnqn, i == 0 ? kHostA : kHostB, 120'000, kQueuesPerController);
    opts.command_timeout = 60s;
    opts.connect_timeout = 60s;
    auto ctrl = connect_or_fail(opts, t);
    ASSERT_TRUE(ctrl);
    ASSERT_GE(ctrl->granted_io_queues(), kQueuesPerController);
    // Files report a volatile write cache whether or not they use O_DIRECT (a sparse file's block
    // allocation is not durable before fdatasync): hosts must Flush.
    EXPECT_EQ(ctrl->identity().vwc & p::idctl::kVwcPresent, p::idctl::kVwcPresent) << "VWC " << int{ctrl->identity().vwc};
    if (c.write_cache_off) {
      auto r = ctrl->admin(p::to_sqe(p::make_set_features(0, p::FeatureId::volatile_write_cache, 0)));
      ASSERT_TRUE(r) << r.error().message;
    }
    for (uint16_t qid = 1; qid <= kQueuesPerController; ++qid) {
      queues.push_back(io_queue_or_fail(*ctrl, qid, 32));
      ASSERT_TRUE(queues.back());
    }
    ctrls.push_back(std::move(ctrl));
  }
  // What the target promises about atomicity: AWUPF (0-based blocks), or NAWUPF where NSFEAT says the
  // namespace has its own.
  const auto& idc = ctrls[0]->identity();
  const auto* ns = ctrls[0]->find_namespace(1);
  ASSERT_NE(ns, nullptr);
  ASSERT_EQ(ns->block_size, c.block_size);
  ASSERT_EQ(ns->size_blocks, kNsBytes / c.block_size);
  const bool ns_atomics = (ns->id.nsfeat & p::idns::kNsfeatNsAtomics) != 0;
  const uint32_t atomic_blocks = 1u + (ns_atomics ? ns->id.nawupf.get() : idc.awupf.get());
  std::printf("[durability] %s: VWC 0x%x, AWUN %u, AWUPF %u, NSFEAT 0x%x: atomic write unit %u block(s) of %u "
              "bytes\n",
              c.name, idc.vwc, idc.awun.get(), idc.awupf.get(), ns->id.nsfeat, atomic_blocks, c.block_size);

  SyncTrace trace;
  const bool tracing = trace.start(image, "rdmablk-durability-" + std::to_string(::getpid()) + "-" + c.name);
  if (!tracing) std::printf("[durability] %s: file-system sync check skipped: %s\n", c.name, trace.why().c_str());

  // The stream: one thread per queue, until the kill.
  std::vector<std::unique_ptr<QueueRun>> runs;
  for (unsigned i = 0; i < kQueues; ++i) runs.push_back(std::make_unique<QueueRun>(i, *queues[i], c, seed, shared));
  const auto started = Clock::now();
  std::vector<std::thread> threads;
  for (auto& r : runs) threads.emplace_back([&r] { r->run(); });
  bool reached = false;
  {
    std::unique_lock lock(shared.mu);
    // The kill point, a writer that stopped early (its error is reported below), or the limit.
    shared.cv.wait_until(lock, started + kStreamLimit, [&] {
      return shared.acks.load() >= shared.kill_after || shared.writers_done > 0;
    });
    reached = shared.acks.load() >= shared.kill_after;
  }
  const uint64_t acks_at_kill = shared.acks.load();
  shared.killed = true;
  const pid_t victim = t.pid();
  t.kill_now();  // SIGKILL + waitpid
  const auto stream_time = Clock::now() - started;
  for (auto& th : threads) th.join();
  const long syncs = tracing ? trace.count() : 0;
  trace.stop();
  queues.clear();  // their threads are gone and every command on them has completed (runs no longer use them)
  ctrls.clear();
  for (const auto& r : runs)
    for (const auto& e : r->errors()) ADD_FAILURE() << e;
  ASSERT_TRUE(reached) << "the stream did not reach " << shared.kill_after << " acknowledged writes within "
                       << std::chrono::duration_cast<std::chrono::seconds>(kStreamLimit).count() << " s (got "
                       << acks_at_kill << ")\n--- target log ---\n" << t.log();

  // What was acknowledged.
  uint64_t submitted = 0, acked = 0, acked_fua = 0, submitted_fua = 0, unknown = 0, flushes_acked = 0,
           flushes_submitted = 0;
  for (const auto& r : runs) {
    for (const auto& w : r->writes()) {
      ++submitted;
      submitted_fua += w.fua;
      if (w.state == WriteRec::acked) {
        ++acked;
        acked_fua += w.fua;
      } else {
        ++unknown;
      }
    }
    flushes_acked += r->flushes_acked();
    flushes_submitted += r->flushes_submitted();
  }
  EXPECT_GT(acked_fua, 0u) << "no FUA write was acknowledged: the run proves nothing about FUA";
  EXPECT_GT(flushes_acked, 0u) << "no Flush was acknowledged: the run proves nothing about Flush";

  // Back up on the same directory and ports; read everything through the initiator, then from the file.
  ASSERT_TRUE(t.restart(60s));
  std::vector<uint8_t> via_target(kNsBytes);
  {
    auto opts = controller_options(t.io_port(), kSubnqn);
    opts.command_timeout = 60s;  // a loaded machine, a sanitizer build: reads of 128 KiB, nothing waits on them
    opts.connect_timeout = 60s;
    auto ctrl = connect_or_fail(opts, t);
    ASSERT_TRUE(ctrl);
    auto q = io_queue_or_fail(*ctrl, 1);
    ASSERT_TRUE(q);
    const uint32_t chunk = std::min<uint32_t>(128 * 1024, ctrl->max_transfer_bytes() ? ctrl->max_transfer_bytes() : 128 * 1024);
    for (uint64_t off = 0; off < kNsBytes; off += chunk) {
      const auto n = static_cast<std::size_t>(std::min<uint64_t>(chunk, kNsBytes - off));
      auto r = read_blocks(*q, 1, off / c.block_size, c.block_size, std::span<uint8_t>(via_target.data() + off, n));
      ASSERT_TRUE(r) << "read at byte " << off << ": " << r.error().message;
    }
    q->disconnect();
    EXPECT_TRUE(ctrl->shutdown());
  }
  std::vector<uint8_t> via_file(kNsBytes);
  {
    const int fd = ::open(image.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << image << ": " << std::strerror(errno);
    ASSERT_EQ(::pread(fd, via_file.data(), via_file.size(), 0), static_cast<ssize_t>(via_file.size()));
    ::close(fd);
  }

  const Model model(runs, c, seed, atomic_blocks);
  const Verdict from_target = model.check(via_target, "read through the restarted target");
  const Verdict from_file = model.check(via_file, "read from the backing file");
  const Figures& f = from_file.fig;
  std::printf("[durability] %s: target pid %d killed after %.1f s at %llu acks; %llu writes submitted (%llu FUA), "
              "%llu acknowledged (%llu FUA), %llu unacknowledged at the kill; %llu/%llu Flushes acknowledged\n",
              c.name, static_cast<int>(victim), std::chrono::duration<double>(stream_time).count(),
              static_cast<unsigned long long>(acks_at_kill), static_cast<unsigned long long>(submitted),
              static_cast<unsigned long long>(submitted_fua), static_cast<unsigned long long>(acked),
              static_cast<unsigned long long>(acked_fua), static_cast<unsigned long long>(unknown),
              static_cast<unsigned long long>(flushes_acked), static_cast<unsigned long long>(flushes_submitted));
  std::printf("[durability] %s: %llu blocks checked; last acknowledged write FUA %llu, flushed %llu, write cache off "
              "%llu, plain %llu; %llu never-acknowledged blocks read zeroes; unacknowledged writes: %llu whole, "
              "%llu absent, %llu partly applied (block by block)\n",
              c.name, static_cast<unsigned long long>(f.blocks), static_cast<unsigned long long>(f.required_fua),
              static_cast<unsigned long long>(f.required_flushed), static_cast<unsigned long long>(f.required_wce_off),
              static_cast<unsigned long long>(f.required_plain), static_cast<unsigned long long>(f.never_acked_zero),
              static_cast<unsigned long long>(f.whole_unacked_writes),
              static_cast<unsigned long long>(f.absent_unacked_writes),
              static_cast<unsigned long long>(f.partial_writes));
  EXPECT_EQ(from_target.failure_count, 0u) << verdict_text(from_target);
  EXPECT_EQ(from_file.failure_count, 0u) << verdict_text(from_file);
  EXPECT_GT(f.required_fua + f.required_flushed + f.required_wce_off, 0u)
      << "no block's last acknowledged write was FUA or flushed: nothing promised was checked";

  // The file system layer: a sync for every acknowledged Flush and FUA write (power-loss durability), and
  // no more than were submitted.
  if (tracing) {
    ASSERT_GE(syncs, 0) << "the ftrace buffer overran: cannot count";
    const bool direct_fua_may_skip = c.direct && !fell_back && trace.device_may_fua();
    const uint64_t sync_writes_acked = c.write_cache_off ? acked : acked_fua;
    const uint64_t sync_writes_submitted = c.write_cache_off ? submitted : submitted_fua;
    const uint64_t at_least = flushes_acked + (direct_fua_may_skip ? 0 : sync_writes_acked);
    const uint64_t at_most = flushes_submitted + sync_writes_submitted;
    std::printf("[durability] %s: ext4_sync_file on the backing file: %ld (acknowledged: %llu Flushes + %llu "
                "synchronous writes%s; submitted: %llu)\n",
                c.name, syncs, static_cast<unsigned long long>(flushes_acked),
                static_cast<unsigned long long>(sync_writes_acked),
                direct_fua_may_skip ? ", which the device may do as FUA writes instead" : "",
                static_cast<unsigned long long>(at_most));
    EXPECT_GE(static_cast<uint64_t>(syncs), at_least)
        << "fewer file system syncs than acknowledged Flushes" << (direct_fua_may_skip ? "" : " + FUA writes");
    EXPECT_LE(static_cast<uint64_t>(syncs), at_most) << "more syncs than Flushes + FUA writes submitted";
  }
  if (HasFailure()) {
    const std::string log = t.log();
    std::printf("--- target log (last 8 KiB) ---\n%s\n", log.substr(log.size() > 8192 ? log.size() - 8192 : 0).c_str());
  }
  EXPECT_TRUE(t.stop(60s));
}

INSTANTIATE_TEST_SUITE_P(E2e, Durability, ::testing::ValuesIn(kCases),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

}  // namespace
}  // namespace e2e

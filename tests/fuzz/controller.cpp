// The initiator against a controller whose every answer comes from the input (initiator/host/controller*):
// bring-up as the Linux host does it (Connect, Property Get CAP/VS, Property Set CC, CSTS.RDY, Identify
// Controller, Set Features Number of Queues, the active namespace list, Identify Namespace and its
// descriptor list), an I/O queue's Connect, the discovery log read in chunks with its generation counter
// check, then what the CLI prints of it all (`rdmablk identify`, `rdmablk discover` normal and json), and
// the shutdown. The transport is a fake HostQueue that completes each command from the next answer.
//
// Input: tests/fuzz/controller_input.h.
// Invariants: nothing the controller answers crashes the initiator, makes it read or write outside a
// buffer, loop without end (at most 512 commands per run), or throw; what it reports after a good
// bring-up is what the answers said (CNTLID, namespaces with a valid block size, MDTS within the limits);
// a discovery log never holds more than 1024 entries; the printed forms are produced for any content.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "controller_input.h"
#include "fuzz_util.h"
#include "initiator/cli/cli.h"
#include "initiator/host/controller.h"
#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/fabrics.h"
#include "protocol/properties.h"
#include "protocol/status.h"
#include "transport/host_queue.h"

namespace {

namespace p = rdmablk::protocol;
namespace tr = rdmablk::transport;
namespace ini = rdmablk::initiator;
using rdmablk::fuzz::ControllerInputOptions;

constexpr unsigned kMaxCommands = 512;
constexpr unsigned kMaxStatusPolls = 4;  // CSTS reads answered from the input (each not-ready one sleeps)

// The controller: the input's answers, shared by every queue of the run.
struct Answers {
  const uint8_t* data;
  std::size_t size;
  std::size_t pos = 0;
  unsigned commands = 0;
  unsigned status_polls = 0;

  bool take(void* out, std::size_t n) {
    if (size - pos < n) {
      pos = size;
      return false;
    }
    std::memcpy(out, data + pos, n);
    pos += n;
    return true;
  }
  // False: the input is used up (the connection is lost).
  bool answer(tr::HostCommand& cmd, p::Cqe& cqe) {
    FUZZ_CHECK(++commands <= kMaxCommands);
    if (cmd.sqe.hdr.opcode == p::kFabricsOpcode &&
        static_cast<p::FabricsType>(cmd.sqe.hdr.nsid.get() & 0xFF) == p::FabricsType::property_get &&
        p::as<p::PropertyGetCommand>(cmd.sqe).offset.get() == p::property::csts && ++status_polls > kMaxStatusPolls) {
      return false;  // enough waiting for CSTS (every poll that is not ready sleeps): the controller is gone
    }
    uint32_t dw0 = 0, dw1 = 0;
    uint16_t status = 0;
    if (!take(&dw0, 4) || !take(&dw1, 4) || !take(&status, 2)) return false;
    cqe.dw0.set(dw0);
    cqe.dw1.set(dw1);
    cqe.status.set(status);
    if (cmd.direction == tr::DataDirection::controller_to_host) {
      uint16_t n = 0;
      if (!take(&n, 2)) return false;
      const std::size_t avail = std::min<std::size_t>(n, size - pos);
      std::fill(cmd.data.begin(), cmd.data.end(), 0);
      std::memcpy(cmd.data.data(), data + pos, std::min(avail, cmd.data.size()));
      pos += avail;
    }
    return true;
  }
};

class FuzzQueue final : public tr::HostQueue {
 public:
  FuzzQueue(Answers& a, tr::HostQueueOptions o, uint32_t max_transfer)
      : answers_(a), opts_(std::move(o)), max_transfer_(max_transfer) {}
  p::Status submit(tr::HostCommand& cmd) noexcept override {
    if (closed_) return p::status::transient_transport_error;
    if (pending_.size() >= opts_.entries) return p::status::transient_transport_error;
    FUZZ_CHECK(cmd.on_complete != nullptr);
    cmd.sqe.hdr.cid.set(next_cid_++);
    pending_.push_back(&cmd);
    return p::status::success;
  }
  int poll(unsigned, std::chrono::milliseconds) noexcept override {
    if (closed_) return -ENOTCONN;
    int done = 0;
    while (!pending_.empty()) {
      tr::HostCommand* cmd = pending_.front();
      pending_.erase(pending_.begin());
      p::Cqe cqe{};
      const bool ok = answers_.answer(*cmd, cqe);
      if (!ok) {
        // The connection is lost: every outstanding command completes with a transport error, once.
        closed_ = true;
        cqe = p::make_cqe(0, opts_.qid, 0, p::status::transient_transport_error);
        cqe.cid = cmd->sqe.hdr.cid;
        cmd->on_complete(*cmd, cqe);
        for (tr::HostCommand* other : pending_) {
          p::Cqe c = cqe;
          c.cid = other->sqe.hdr.cid;
          other->on_complete(*other, c);
        }
        pending_.clear();
        return -ECONNRESET;
      }
      cqe.cid = cmd->sqe.hdr.cid;
      cmd->on_complete(*cmd, cqe);
      ++done;
    }
    return done;
  }
  unsigned outstanding() const noexcept override { return static_cast<unsigned>(pending_.size()); }
  uint16_t entries() const noexcept override { return opts_.entries; }
  uint32_t max_transfer() const noexcept override { return max_transfer_; }
  void set_in_capsule_limit(uint32_t bytes) noexcept override { opts_.in_capsule_limit = bytes; }
  const tr::TransportAddress& address() const noexcept override { return opts_.address; }
  void close() noexcept override {
    closed_ = true;
    pending_.clear();
  }

 private:
  Answers& answers_;
  tr::HostQueueOptions opts_;
  uint32_t max_transfer_;
  std::vector<tr::HostCommand*> pending_;
  uint16_t next_cid_ = 1;
  bool closed_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  Answers answers{data + 1, size - 1};
  const uint32_t transport_limit = (flags & ControllerInputOptions::kTransferLimit) != 0 ? 128 * 1024 : 0;

  ini::ControllerOptions o;
  o.address.type = tr::TransportType::tcp;
  o.address.traddr = "127.0.0.1";
  o.address.trsvcid = 4420;
  o.subnqn = "nqn.2024-01.io.rdmablk:fuzz";
  o.host.hostnqn = "nqn.2014-08.org.nvmexpress:uuid:3fa85f64-5717-4562-b3fc-2c963f66afa6";
  o.host.hostid = *ini::parse_uuid("3fa85f64-5717-4562-b3fc-2c963f66afa6");
  o.io_queues = static_cast<uint16_t>(1 + (flags >> 4));
  o.kato_ms = 0;
  o.command_timeout = std::chrono::milliseconds(60000);  // answers come at once; this never expires
  o.connector = [&answers, transport_limit](const tr::HostQueueOptions& qo) -> rdmablk::Result<std::unique_ptr<tr::HostQueue>> {
    return std::unique_ptr<tr::HostQueue>(std::make_unique<FuzzQueue>(answers, qo, transport_limit));
  };

  if ((flags & ControllerInputOptions::kDiscovery) != 0) {
    auto ctrl = ini::Controller::connect_discovery(o);
    if (!ctrl) return 0;
    auto log = (*ctrl)->discovery_log();
    if (log) {
      FUZZ_CHECK(log->entries.size() <= 1024);
      FUZZ_CHECK(log->reads >= 1 && log->reads <= 10);
      const std::string text = ini::format_discovery_log(*log);
      FUZZ_CHECK(!text.empty());
      const std::string json = ini::format_discovery_log_json(*log);
      FUZZ_CHECK(!json.empty());
    }
    (void)(*ctrl)->shutdown(std::chrono::milliseconds(0));
    return 0;
  }

  auto ctrl = ini::Controller::connect(o);
  if (!ctrl) return 0;
  ini::Controller& c = **ctrl;
  FUZZ_CHECK(c.identity().cntlid.get() == c.cntlid());
  if (transport_limit != 0) FUZZ_CHECK(c.max_transfer_bytes() != 0 && c.max_transfer_bytes() <= transport_limit);
  FUZZ_CHECK(c.granted_io_queues() <= o.io_queues);
  uint32_t last = 0;
  for (const auto& ns : c.namespaces()) {
    FUZZ_CHECK(ns.nsid > last);  // the active list is strictly increasing
    last = ns.nsid;
    FUZZ_CHECK(ns.capacity_blocks != 0);
    FUZZ_CHECK(ns.block_size >= 512 && ns.block_size <= (1u << 31) && (ns.block_size & (ns.block_size - 1)) == 0);
    FUZZ_CHECK(c.find_namespace(ns.nsid) == &ns);
  }
  const std::string text = ini::format_identify(c);
  FUZZ_CHECK(!text.empty());
  if ((flags & ControllerInputOptions::kIoQueue) != 0 && c.granted_io_queues() >= 1) {
    auto q = c.connect_io_queue(1, 32);
    if (q) {
      FUZZ_CHECK((*q)->qid() == 1);
      (*q)->disconnect();
    }
  }
  (void)c.shutdown(std::chrono::milliseconds(0));
  return 0;
}

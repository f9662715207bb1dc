// I/O queues: connected after bring-up (Connect with the qid and the admin queue's CNTLID), then the
// asynchronous data path.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "protocol/command_names.h"
#include "initiator/host/controller.h"
#include "initiator/host/shared_volume.h"
#include "initiator/host/sync_command.h"
#include "protocol/reservation.h"

namespace rdmablk::initiator {

using detail::run_sync;
using detail::SyncFailure;
using protocol::Cqe;
using protocol::Sqe;
using protocol::Status;
using transport::DataDirection;
using transport::HostCommand;
using transport::HostQueue;

Result<std::unique_ptr<IoQueue>> Controller::connect_io_queue(uint16_t qid, uint16_t entries) {
  if (failed_) return make_error(where() + ": controller unusable: " + failure_, EIO);
  if (qid == 0 || (granted_queues_ && qid > granted_queues_)) {
    return make_error(fmt::format("{}: I/O queue {} out of range (the controller granted {})", where(), qid,
                                  granted_queues_),
                      EINVAL);
  }
  uint32_t max_entries = uint32_t{cap_.mqes()} + 1;
  if (entries < 2) entries = 2;
  if (entries > max_entries) entries = static_cast<uint16_t>(max_entries);
  transport::HostQueueOptions qo;
  qo.address = opts_.address;
  qo.qid = qid;
  qo.tls = tls_;
  qo.entries = entries;
  qo.header_digest = opts_.header_digest;
  qo.data_digest = opts_.data_digest;
  qo.in_capsule_limit = io_in_capsule_bytes();
  qo.connect_timeout = opts_.connect_timeout;
  qo.busy_poll = opts_.io_busy_poll;
  auto q = opts_.connector(qo);
  if (!q) {
    return make_error(fmt::format("cannot connect I/O queue {} to {}: {}", qid, transport::to_uri(opts_.address),
                                  q.error().message),
                      q.error().errno_value ? q.error().errno_value : ECONNREFUSED);
  }
  auto ioq = std::make_unique<IoQueue>(*this, std::move(*q), qid);
  if (auto r = do_connect(*ioq->queue_, *ioq->sync_, qid, entries, 0); !r) return tl::unexpected(r.error());
  return ioq;
}

IoQueue::IoQueue(Controller& ctrl, std::unique_ptr<HostQueue> queue, uint16_t qid) noexcept
    : ctrl_(ctrl), queue_(std::move(queue)), qid_(qid), sync_(std::make_unique<detail::SyncSlot>()) {
  uint32_t a = ctrl_.max_transfer_bytes(), b = queue_->max_transfer();
  max_transfer_ = (a && b) ? std::min(a, b) : (a ? a : b);
}

IoQueue::~IoQueue() {
  if (queue_) queue_->close();
}

namespace {
constexpr Status kTooLarge = protocol::status::invalid_field;
}

Status IoQueue::submit_read(HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks, std::span<uint8_t> buffer,
                            bool fua) noexcept {
  if (blocks == 0 || blocks > 65536 || (max_transfer_ && buffer.size() > max_transfer_)) return kTooLarge;
  cmd.sqe = protocol::to_sqe(protocol::make_read(0, nsid, slba, blocks, protocol::SglDescriptor{}, fua));
  cmd.direction = DataDirection::controller_to_host;
  cmd.data = buffer;
  return queue_->submit(cmd);
}

Status IoQueue::submit_write(HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks,
                             std::span<uint8_t> buffer, bool fua) noexcept {
  if (blocks == 0 || blocks > 65536 || (max_transfer_ && buffer.size() > max_transfer_)) return kTooLarge;
  cmd.sqe = protocol::to_sqe(protocol::make_write(0, nsid, slba, blocks, protocol::SglDescriptor{}, fua));
  cmd.direction = DataDirection::host_to_controller;
  cmd.data = buffer;
  return queue_->submit(cmd);
}

Status IoQueue::submit_flush(HostCommand& cmd, uint32_t nsid) noexcept {
  cmd.sqe = protocol::make_flush(0, nsid);
  cmd.direction = DataDirection::none;
  cmd.data = {};
  return queue_->submit(cmd);
}

Status IoQueue::submit_write_zeroes(HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks,
                                    bool deallocate) noexcept {
  if (blocks == 0 || blocks > 65536) return kTooLarge;
  cmd.sqe = protocol::to_sqe(protocol::make_write_zeroes(0, nsid, slba, blocks, deallocate));
  cmd.direction = DataDirection::none;
  cmd.data = {};
  return queue_->submit(cmd);
}

Status IoQueue::submit_dsm(HostCommand& cmd, uint32_t nsid, std::span<uint8_t> ranges, uint32_t attributes) noexcept {
  std::size_t n = ranges.size() / sizeof(protocol::DsmRange);
  if (n == 0 || n > protocol::kDsmMaxRanges || ranges.size() % sizeof(protocol::DsmRange)) return kTooLarge;
  cmd.sqe = protocol::to_sqe(
      protocol::make_dsm(0, nsid, static_cast<uint32_t>(n), attributes, protocol::SglDescriptor{}));
  cmd.direction = DataDirection::host_to_controller;
  cmd.data = ranges;
  return queue_->submit(cmd);
}

Status IoQueue::submit_compare(HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks,
                               std::span<uint8_t> buffer) noexcept {
  if (blocks == 0 || blocks > 65536 || (max_transfer_ && buffer.size() > max_transfer_)) return kTooLarge;
  cmd.sqe = protocol::to_sqe(protocol::make_compare(0, nsid, slba, blocks, protocol::SglDescriptor{}));
  cmd.direction = DataDirection::host_to_controller;
  cmd.data = buffer;
  return queue_->submit(cmd);
}

Status IoQueue::submit_copy(HostCommand& cmd, uint32_t nsid, uint64_t sdlba, std::span<uint8_t> ranges,
                            bool fua) noexcept {
  std::size_t n = ranges.size() / sizeof(protocol::CopySourceRange);
  if (n == 0 || n > 256 || ranges.size() % sizeof(protocol::CopySourceRange)) return kTooLarge;
  cmd.sqe = make_copy(nsid, sdlba, static_cast<uint32_t>(n), fua);
  cmd.direction = DataDirection::host_to_controller;
  cmd.data = ranges;
  return queue_->submit(cmd);
}

Status IoQueue::submit_compare_and_write(HostCommand& first, HostCommand& second, uint32_t nsid, uint64_t slba,
                                         uint32_t blocks, std::span<uint8_t> compare_buf,
                                         std::span<uint8_t> write_buf, bool fua) noexcept {
  if (blocks == 0 || blocks > 65536 || compare_buf.size() != write_buf.size() ||
      (max_transfer_ && write_buf.size() > max_transfer_)) {
    return kTooLarge;
  }
  first.sqe = protocol::to_sqe(protocol::make_compare(0, nsid, slba, blocks, protocol::SglDescriptor{}));
  first.sqe.hdr.set_fuse(protocol::FusedOperation::first);
  first.direction = DataDirection::host_to_controller;
  first.data = compare_buf;
  second.sqe = protocol::to_sqe(protocol::make_write(0, nsid, slba, blocks, protocol::SglDescriptor{}, fua));
  second.sqe.hdr.set_fuse(protocol::FusedOperation::second);
  second.direction = DataDirection::host_to_controller;
  second.data = write_buf;
  return queue_->submit_fused(first, second);
}

Result<Cqe> IoQueue::execute(const Sqe& sqe, std::span<uint8_t> data, DataDirection dir) {
  auto out = run_sync(*queue_, *sync_, sqe, data, dir, ctrl_.opts_.command_timeout);
  std::string name = protocol::describe_command(sqe, false);
  if (out.failure != SyncFailure::none) {
    return make_error(fmt::format("{}: queue {}: {} {}", ctrl_.where(), qid_, name, out.message), EIO);
  }
  if (!out.cqe.get_status().ok()) {
    return make_error(fmt::format("{}: queue {}: {} failed: {}", ctrl_.where(), qid_, name,
                                  describe_status(out.cqe.get_status())),
                      EIO);
  }
  return out.cqe;
}

void IoQueue::disconnect() noexcept {
  if (!queue_) return;
  if (queue_->outstanding() == 0) {
    // Best effort: a target that does not support Disconnect answers with an error; either way we close.
    auto out = run_sync(*queue_, *sync_, protocol::to_sqe(protocol::make_disconnect(0)), {}, DataDirection::none,
                        std::chrono::milliseconds(1000));
    (void)out;
  }
  queue_->close();
}

}  // namespace rdmablk::initiator

// The fake verbs under rdma_queue_bench: a CQ, a QP and a host model. Header-only on purpose: the host's
// refill and the QP's posts inline into the CQ poll, as one translation unit had them, so the figures
// measure the target and not calls between the fakes.
#pragma once

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "bench/rdma_queue_bench/common.h"
#include "protocol/command.h"
#include "protocol/completion.h"
#include "transport/rdma/rdma_queue.h"
#include "transport/reactor.h"

namespace rdmablk::bench::rdma_queue {

namespace p = rdmablk::protocol;
using transport::rdma::RdmaQpOps;
using transport::rdma::RdmaTargetQueue;
using transport::rdma::WrCtx;

class Host;

// The reactor's per-device CQ, as DeviceCq::poll does it: up to 32 completions per poll, dispatched to the
// queue named by wr_id. Here the "device" writes completions into a ring when the WR is posted. The ring is
// only as large as what can be outstanding (a few times the queue depth), so that it stays in L1: a real
// CQ (kReactorCqEntries, written by the NIC) costs cache misses that are not this benchmark's to model.
class FakeCq final : public transport::Poller {
 public:
  explicit FakeCq(uint32_t entries) : ring_(entries), mask_(entries - 1) {}
  // The next completion to fill in (zeroed), or a scratch entry when the ring is full (counted: the run fails).
  ibv_wc& push() noexcept {
    if (tail_ - head_ >= ring_.size()) {
      ++overflows;
      return scratch_;
    }
    ibv_wc& wc = ring_[tail_++ & mask_];
    wc = ibv_wc{};
    return wc;
  }
  bool poll() noexcept override;
  bool empty() const noexcept { return head_ == tail_; }

  Host* host = nullptr;
  uint64_t overflows = 0;

 private:
  int poll_cq(int max, ibv_wc* out) noexcept {
    int n = 0;
    while (n < max && head_ != tail_) out[n++] = ring_[head_++ & mask_];
    return n;
  }
  std::vector<ibv_wc> ring_;
  ibv_wc scratch_{};
  uint32_t mask_;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

// One QP: every signaled WR completes at once (successfully); RECVs wait in a FIFO for the host's next
// capsule; disconnect() flushes them, like a QP moved to the error state.
class FakeQp final : public RdmaQpOps {
 public:
  struct PostedRecv {
    uint64_t wr_id = 0;
    uint8_t* buf = nullptr;
    uint32_t len = 0;
  };

  // recv_count: the RECVs the queue posts (a power-of-two ring of at least that many).
  FakeQp(FakeCq& cq, uint32_t qp_num, uint32_t recv_count) : cq_(cq), qp_num_(qp_num) {
    std::size_t n = 16;
    while (n < recv_count) n *= 2;
    recvs_.resize(n);
    recv_mask_ = n - 1;
  }

  int post_send(ibv_send_wr* wr) noexcept override {
    ++chains;
    for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
      ibv_wc_opcode opcode = IBV_WC_SEND;
      uint32_t bytes = 0;
      switch (w->opcode) {
        case IBV_WR_RDMA_WRITE:
          ++rdma_writes;
          opcode = IBV_WC_RDMA_WRITE;
          break;
        case IBV_WR_RDMA_READ:
          ++rdma_reads;
          opcode = IBV_WC_RDMA_READ;
          for (int i = 0; i < w->num_sge; ++i) bytes += w->sg_list[i].length;
          break;
        case IBV_WR_SEND:
        case IBV_WR_SEND_WITH_INV: {
          ++sends;
          // The host receives the CQE: check its status as a host would.
          std::memcpy(&last_cqe, reinterpret_cast<const void*>(static_cast<uintptr_t>(w->sg_list[0].addr)),
                      sizeof(last_cqe));
          ++cqes;
          if (!last_cqe.get_status().ok()) ++failed_cqes;
          break;
        }
        default:
          ++unexpected_wrs;
          break;
      }
      if ((w->send_flags & IBV_SEND_SIGNALED) == 0) continue;
      ibv_wc& wc = cq_.push();
      wc.wr_id = w->wr_id;
      wc.status = IBV_WC_SUCCESS;
      wc.opcode = opcode;
      wc.byte_len = bytes;
      wc.qp_num = qp_num_;
    }
    return 0;
  }
  int post_recv(ibv_recv_wr* wr) noexcept override {
    for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
      if (recv_tail_ - recv_head_ >= recvs_.size()) return ENOMEM;
      recvs_[recv_tail_++ & recv_mask_] =
          PostedRecv{w->wr_id, reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(w->sg_list[0].addr)),
                     w->sg_list[0].length};
    }
    return 0;
  }
  void disconnect() noexcept override {
    disconnected = true;
    PostedRecv r;
    while (take_recv(r)) {
      ibv_wc& wc = cq_.push();
      wc.wr_id = r.wr_id;
      wc.status = IBV_WC_WR_FLUSH_ERR;
      wc.opcode = IBV_WC_RECV;
      wc.qp_num = qp_num_;
    }
  }
  void destroy() noexcept override { destroyed = true; }

  bool take_recv(PostedRecv& out) noexcept {
    if (recv_head_ == recv_tail_) return false;
    out = recvs_[recv_head_++ & recv_mask_];
    return true;
  }

  // The NIC received a capsule into the oldest posted RECV.
  bool deliver(const p::Sqe& sqe, uint32_t capsule_data_len, std::span<const uint8_t> icd = {}) noexcept {
    PostedRecv r;
    if (!take_recv(r)) return false;
    std::memcpy(r.buf, &sqe, sizeof(sqe));
    if (!icd.empty()) std::memcpy(r.buf + sizeof(sqe), icd.data(), std::min<std::size_t>(icd.size(), r.len - 64));
    complete_recv(r, capsule_data_len);
    return true;
  }
  // The same for an I/O command: `tmpl` with its CID and SLBA patched in place (no in-capsule bytes written:
  // the null backend never reads them).
  bool deliver_io(const p::Sqe& tmpl, uint16_t cid, uint64_t slba, uint32_t capsule_data_len) noexcept {
    PostedRecv r;
    if (!take_recv(r)) return false;
    std::memcpy(r.buf, &tmpl, sizeof(tmpl));
    p::le16 c;
    c.set(cid);
    std::memcpy(r.buf + offsetof(p::SqeHeader, cid), &c, sizeof(c));
    p::le64 lba;
    lba.set(slba);
    std::memcpy(r.buf + offsetof(p::ReadWriteCommand, slba), &lba, sizeof(lba));
    complete_recv(r, capsule_data_len);
    return true;
  }
  void complete_recv(const PostedRecv& r, uint32_t capsule_data_len) noexcept {
    ibv_wc& wc = cq_.push();
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV;
    wc.byte_len = static_cast<uint32_t>(sizeof(p::Sqe)) + capsule_data_len;
    wc.qp_num = qp_num_;
  }

  void reset_counters() noexcept {
    chains = rdma_writes = rdma_reads = sends = cqes = failed_cqes = unexpected_wrs = 0;
  }

  p::Cqe last_cqe{};
  uint64_t chains = 0;
  uint64_t rdma_writes = 0;
  uint64_t rdma_reads = 0;
  uint64_t sends = 0;
  uint64_t cqes = 0;
  uint64_t failed_cqes = 0;
  uint64_t unexpected_wrs = 0;
  bool disconnected = false;
  bool destroyed = false;

 private:
  FakeCq& cq_;
  uint32_t qp_num_;
  std::vector<PostedRecv> recvs_;
  std::size_t recv_mask_ = 0;
  uint64_t recv_head_ = 0;
  uint64_t recv_tail_ = 0;
};

// The host: keeps `qd` commands in flight on the I/O queue; a SEND completion means a CQE reached it.
class Host {
 public:
  void start(FakeQp& qp, const RdmaTargetQueue* queue, const p::Sqe& tmpl, uint32_t capsule_data_len,
             uint64_t count, unsigned qd, uint64_t lba_mask, uint64_t blocks_per_cmd) noexcept {
    qp_ = &qp;
    queue_ = queue;
    tmpl_ = tmpl;
    capsule_data_len_ = capsule_data_len;
    target_ = count;
    qd_ = qd;
    lba_mask_ = lba_mask;
    blocks_per_cmd_ = blocks_per_cmd;
    issued_ = completed_ = 0;
    outstanding_ = 0;
    active_ = true;
    refill();
  }
  void on_send_done(const RdmaTargetQueue* queue) noexcept {
    if (!active_ || queue != queue_) return;
    ++completed_;
    --outstanding_;
    refill();
  }
  bool finished() const noexcept { return completed_ >= target_; }
  void stop() noexcept { active_ = false; }
  uint64_t completed() const noexcept { return completed_; }
  unsigned outstanding() const noexcept { return outstanding_; }
  bool starved = false;  // no RECV posted when the host had a command to send

 private:
  void refill() noexcept {
    while (outstanding_ < qd_ && issued_ < target_) {
      if (!qp_->deliver_io(tmpl_, static_cast<uint16_t>(issued_), (issued_ * blocks_per_cmd_) & lba_mask_,
                           capsule_data_len_)) {
        starved = true;
        return;
      }
      ++issued_;
      ++outstanding_;
    }
  }

  FakeQp* qp_ = nullptr;
  const RdmaTargetQueue* queue_ = nullptr;
  p::Sqe tmpl_{};
  uint32_t capsule_data_len_ = 0;
  uint64_t target_ = 0;
  uint64_t issued_ = 0;
  uint64_t completed_ = 0;
  uint64_t lba_mask_ = 0;
  uint64_t blocks_per_cmd_ = 1;
  unsigned qd_ = 0;
  unsigned outstanding_ = 0;
  bool active_ = false;
};

inline bool FakeCq::poll() noexcept {
  constexpr int kPollBatch = 32;  // DeviceCq's
  ibv_wc wcs[kPollBatch];
  const int n = poll_cq(kPollBatch, wcs);
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    if (wc.wr_id == 0) continue;  // an unsignaled WR (flushed)
    const auto* ctx = reinterpret_cast<const WrCtx*>(static_cast<uintptr_t>(wc.wr_id));
    RdmaTargetQueue* queue = ctx->queue;
    queue->on_completion(*ctx, wc);
    if (wc.opcode == IBV_WC_SEND && host != nullptr) host->on_send_done(queue);
  }
  return n > 0;
}

}  // namespace rdmablk::bench::rdma_queue

// Fake verbs for the RDMA host queue (transport/rdma/rdma_host.h adopt_rdma_host_queue): an ibv_context
// whose ops (poll_cq, req_notify_cq, post_send, post_recv: what the inline ibv_* calls go through) are a
// controller answering every command. No device, no CM. Used by tests/transport/test_rdma_host_queue.cpp and
// bench/rdma_host_bench.cpp.
#pragma once

#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <vector>

#include "protocol/completion.h"
#include "protocol/command.h"
#include "transport/rdma/rdma_host.h"

namespace rdmablk::transport::fakes {

namespace p = rdmablk::protocol;

// A device and a controller in one: every SEND completes at once, and its command's CQE lands in the next
// posted RECV buffer `delay` later (the RECV completion shows up in poll_cq from then on).
struct FakeVerbs {
  using Clock = std::chrono::steady_clock;

  ibv_context ctx{};
  ibv_cq cq{};
  ibv_qp qp{};
  ibv_pd pd{};
  ibv_mr mr{};
  ibv_comp_channel cc{};
  int pipe_fds[2] = {-1, -1};  // cc.fd: never written (an event would need a real context)

  std::chrono::microseconds delay{0};
  p::Status answer = p::status::success;
  ibv_wc_status recv_status = IBV_WC_SUCCESS;
  unsigned poll_calls = 0;
  unsigned arm_calls = 0;
  unsigned sends = 0;            // SEND work requests
  unsigned post_send_calls = 0;  // ibv_post_send calls (a chain counts once)
  bool record = false;           // keep the SQEs sent (tests; the bench sends millions)
  std::vector<p::Sqe> sent;      // with `record`: the SQEs of the SENDs, in order

  struct Recv {
    uint64_t wr_id;
    uint8_t* buf;
  };
  struct Due {
    Clock::time_point at;
    ibv_wc wc;
  };
  std::deque<Recv> recvs;
  std::deque<Due> due;

  FakeVerbs() {
    if (::pipe(pipe_fds) != 0) std::abort();
    ctx.ops.poll_cq = &poll_cq;
    ctx.ops.req_notify_cq = &req_notify_cq;
    ctx.ops.post_send = &post_send;
    ctx.ops.post_recv = &post_recv;
    cq.context = &ctx;
    cq.cq_context = this;
    qp.context = &ctx;
    qp.qp_context = this;
    pd.context = &ctx;
    mr.lkey = 0x1234;
    cc.fd = pipe_fds[0];
  }
  ~FakeVerbs() {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
  }

  rdma::RdmaHostVerbs verbs() { return rdma::RdmaHostVerbs{&pd, &cc, &cq, &qp, &mr, 1u << 20}; }

  static int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
    auto& f = *static_cast<FakeVerbs*>(cq->cq_context);
    ++f.poll_calls;
    const auto now = Clock::now();
    int got = 0;
    while (got < n && !f.due.empty() && f.due.front().at <= now) {
      wc[got++] = f.due.front().wc;
      f.due.pop_front();
    }
    return got;
  }

  static int req_notify_cq(ibv_cq* cq, int /*solicited_only*/) {
    ++static_cast<FakeVerbs*>(cq->cq_context)->arm_calls;
    return 0;
  }

  static int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** /*bad*/) {
    auto& f = *static_cast<FakeVerbs*>(qp->qp_context);
    f.recvs.push_back(Recv{wr->wr_id, reinterpret_cast<uint8_t*>(wr->sg_list[0].addr)});
    return 0;
  }

  // Every work request of the chain, in order (a fused pair comes as one chain of two).
  static int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    auto& f = *static_cast<FakeVerbs*>(qp->qp_context);
    ++f.post_send_calls;
    for (; wr != nullptr; wr = wr->next) {
      if (int rc = post_one(f, wr); rc != 0) {
        *bad = wr;
        return rc;
      }
    }
    return 0;
  }

  static int post_one(FakeVerbs& f, ibv_send_wr* wr) {
    ++f.sends;
    const auto now = Clock::now();
    ibv_wc send{};
    send.wr_id = wr->wr_id;
    send.status = IBV_WC_SUCCESS;
    send.opcode = IBV_WC_SEND;
    f.due.push_back(Due{now, send});
    const auto sqe = p::load<p::Sqe>(reinterpret_cast<const uint8_t*>(wr->sg_list[0].addr));
    if (f.record) f.sent.push_back(sqe);
    if (f.recvs.empty()) return ENOMEM;  // the host posts a RECV per entry: cannot happen
    const Recv r = f.recvs.front();
    f.recvs.pop_front();
    p::store(r.buf, p::make_cqe(sqe.hdr.cid.get(), 1, 0, f.answer));
    ibv_wc recv{};
    recv.wr_id = r.wr_id;
    recv.status = f.recv_status;
    recv.opcode = IBV_WC_RECV;
    recv.byte_len = sizeof(p::Cqe);
    f.due.push_back(Due{now + f.delay, recv});
    return 0;
  }
};

}  // namespace rdmablk::transport::fakes

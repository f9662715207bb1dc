// The RDMA target queue's state machine over a fake verbs layer (no device needed): queue sizing from the
// CM private data and device limits, SGL validation statuses, send-queue exhaustion and in-order
// resumption, completion errors -> queue closed once, held requests released, QP destroyed last.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/rdma_cm.h"
#include "protocol/sgl.h"
#include "transport/buffer_pool.h"
#include "transport/rdma/rdma_queue.h"
#include "transport/recording_core.h"

namespace {

using namespace rdmablk;
using namespace rdmablk::transport;
using namespace rdmablk::transport::rdma;
namespace p = rdmablk::protocol;
namespace cm = rdmablk::protocol::rdma_cm;

DeviceLimits big_device() {
  DeviceLimits d;
  d.max_qp_wr = 16384;
  d.max_sge = 30;
  d.max_qp_rd_atom = 16;
  d.max_qp_init_rd_atom = 16;
  d.max_msg_size = 1u << 30;
  d.max_cqe = 1u << 20;
  return d;
}

cm::ConnectRequest request(uint16_t qid, uint16_t entries) {
  return cm::ConnectRequest{qid, entries, static_cast<uint16_t>(entries - 1), 0};
}

// ---- sizing -------------------------------------------------------------------------------------------

TEST(RdmaQueueSizing, AdminQueueFromPrivateData) {
  auto s = size_queue(request(0, 32), 16, 16, big_device(), RdmaTargetOptions{});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->qid, 0);
  EXPECT_EQ(s->sq_entries, 32);
  EXPECT_EQ(s->recv_count, 32);
  EXPECT_EQ(s->slots, 64);
  EXPECT_EQ(s->crqsize, 32);
  EXPECT_EQ(s->in_capsule, 8192u);
  EXPECT_EQ(s->recv_size, 64u + 8192u);
  EXPECT_EQ(s->chunk, 1u << 30);                 // one WR per transfer on a big device
  EXPECT_EQ(s->sq_depth, 32u * 2 + 1);           // a data WR + the SEND per command (+1)
  EXPECT_EQ(s->initiator_depth, 16);
}

TEST(RdmaQueueSizing, IoQueueInCapsuleAndDeviceClamps) {
  DeviceLimits d = big_device();
  d.max_qp_wr = 100;
  d.max_qp_init_rd_atom = 4;
  d.max_qp_rd_atom = 2;
  RdmaTargetOptions o;
  o.io_in_capsule = 16384;
  auto s = size_queue(request(3, 64), 128, 128, d, o);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->in_capsule, 16384u);
  EXPECT_EQ(s->sq_depth, 100u);         // device limit; the budget handles the rest
  EXPECT_EQ(s->initiator_depth, 4);     // ORD clamped to max_qp_init_rd_atom
  EXPECT_EQ(s->responder_resources, 2);  // IRD clamped to max_qp_rd_atom
}

TEST(RdmaQueueSizing, SmallMessageSizeSplitsTransfers) {
  DeviceLimits d = big_device();
  d.max_msg_size = 256 * 1024;
  auto s = size_queue(request(1, 16), 8, 8, d, RdmaTargetOptions{});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->chunk, 256u * 1024);
  EXPECT_EQ(s->sq_depth, 16u * 5 + 1);  // 4 data WRs for 1 MiB + the SEND
  d.max_msg_size = 4096;                  // 1 MiB would need 256 WRs per chain: refused
  auto r = size_queue(request(1, 16), 8, 8, d, RdmaTargetOptions{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, cm::RejectStatus::no_resources);
}

TEST(RdmaQueueSizing, RejectsWithBindingStatus) {
  DeviceLimits d = big_device();
  d.max_qp_wr = 64;
  auto a = size_queue(request(1, 128), 8, 8, d, RdmaTargetOptions{});
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().status, cm::RejectStatus::invalid_hsqsize);
  auto b = size_queue(cm::ConnectRequest{1, 16, 31, 0}, 8, 8, big_device(), RdmaTargetOptions{});  // HRQSIZE < 32
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().status, cm::RejectStatus::invalid_hrqsize);
  auto c = size_queue(request(1, 16), 0, 8, big_device(), RdmaTargetOptions{});  // no RDMA READ allowed
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().status, cm::RejectStatus::invalid_ord);
  d = big_device();
  d.max_cqe = 16;
  auto e = size_queue(request(1, 16), 8, 8, d, RdmaTargetOptions{});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().status, cm::RejectStatus::no_resources);
}

TEST(RdmaQueueSizing, PrivateDataDecodeFeedsSizing) {
  const auto wire = cm::make_request(0, 33);  // admin above 32 entries
  auto r = cm::decode_request(&wire, sizeof(wire), cm::ConnectLimits{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, cm::RejectStatus::invalid_hsqsize);
  const auto ok = cm::make_request(2, 64);
  auto q = cm::decode_request(&ok, sizeof(ok), cm::ConnectLimits{});
  ASSERT_TRUE(q);
  auto s = size_queue(*q, 8, 8, big_device(), RdmaTargetOptions{});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->sq_entries, 64);
  EXPECT_EQ(s->crqsize, 64);
}

// ---- the state machine over fake verbs ---------------------------------------------------------------

struct PostedWr {
  uint64_t wr_id;
  ibv_wr_opcode opcode;
  bool signaled;
  uint64_t local;
  uint32_t length;
  uint32_t lkey;
  uint64_t remote;
  uint32_t rkey;
  uint32_t invalidate_rkey;
  bool is_last;  // last WR of its post_send chain
  std::array<uint8_t, 16> cqe{};
};

class FakeOps final : public RdmaQpOps {
 public:
  int post_send(ibv_send_wr* wr) noexcept override {
    if (fail_sends) return EIO;
    for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
      PostedWr p{w->wr_id, w->opcode, (w->send_flags & IBV_SEND_SIGNALED) != 0, w->sg_list[0].addr,
                 w->sg_list[0].length, w->sg_list[0].lkey, w->wr.rdma.remote_addr, w->wr.rdma.rkey,
                 w->opcode == IBV_WR_SEND_WITH_INV ? w->invalidate_rkey : 0, w->next == nullptr, {}};
      if (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_INV) {
        std::memcpy(p.cqe.data(), reinterpret_cast<const void*>(w->sg_list[0].addr), 16);
      }
      sends.push_back(p);
    }
    ++chains;
    return 0;
  }
  int post_recv(ibv_recv_wr* wr) noexcept override {
    recvs.push_back(RecvWr{wr->wr_id, reinterpret_cast<uint8_t*>(wr->sg_list[0].addr), wr->sg_list[0].length});
    return 0;
  }
  void disconnect() noexcept override { ++disconnects; }
  void destroy() noexcept override { ++destroys; }

  struct RecvWr {
    uint64_t wr_id;
    uint8_t* buf;
    uint32_t len;
  };
  std::deque<RecvWr> recvs;  // posted, not yet completed
  std::vector<PostedWr> sends;
  unsigned chains = 0;
  int disconnects = 0;
  int destroys = 0;
  bool fail_sends = false;
};

struct QueueHarness {
  FakeOps ops;
  RecordingCore core;
  std::unique_ptr<BufferPool> pool;
  std::vector<uint8_t> region;
  std::unique_ptr<RdmaTargetQueue> q;

  explicit QueueHarness(uint16_t entries = 8, DeviceLimits dev = big_device(), RdmaTargetOptions opts = {},
                        unsigned large_count = 8) {
    BufferPoolOptions po;
    po.small_count = 8;
    po.large_count = large_count;
    pool = std::move(*BufferPool::create(po));
    auto s = size_queue(request(1, entries), 8, 8, dev, opts);
    EXPECT_TRUE(s);
    RdmaQueueSetup setup;
    setup.sizing = *s;
    region.assign(queue_region_bytes(*s), 0);
    setup.region = region.data();
    setup.recv_lkey = 0x1111;
    setup.pool_lkey = 0x2222;
    setup.max_inline = 64;
    setup.peer = "fake:1";
    q = std::make_unique<RdmaTargetQueue>(ops, *pool, core, opts, setup);
    EXPECT_TRUE(q->post_initial_recvs());
    q->start();
  }

  // Deliver a capsule into the oldest posted RECV.
  void capsule(const p::Sqe& sqe, std::span<const uint8_t> icd = {}) {
    ASSERT_FALSE(ops.recvs.empty());
    auto r = ops.recvs.front();
    ops.recvs.pop_front();
    std::memcpy(r.buf, &sqe, 64);
    if (!icd.empty()) std::memcpy(r.buf + 64, icd.data(), icd.size());
    ibv_wc wc{};
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV;
    wc.byte_len = static_cast<uint32_t>(64 + icd.size());
    complete_wc(wc);
  }
  void complete_wc(const ibv_wc& wc) {
    const auto* ctx = reinterpret_cast<const WrCtx*>(static_cast<uintptr_t>(wc.wr_id));
    ctx->queue->on_completion(*ctx, wc);
  }
  // Complete the signaled send WR at index i of ops.sends.
  void complete_send(std::size_t i, ibv_wc_status st = IBV_WC_SUCCESS) {
    ASSERT_TRUE(ops.sends[i].signaled);
    ibv_wc wc{};
    wc.wr_id = ops.sends[i].wr_id;
    wc.status = st;
    wc.opcode = ops.sends[i].opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_SEND;
    done.push_back(i);
    complete_wc(wc);
  }
  // Flush everything still posted (QP in error).
  void flush_all() {
    while (!ops.recvs.empty()) {
      auto r = ops.recvs.front();
      ops.recvs.pop_front();
      ibv_wc wc{};
      wc.wr_id = r.wr_id;
      wc.status = IBV_WC_WR_FLUSH_ERR;
      complete_wc(wc);
    }
    for (std::size_t i = flushed_sends; i < ops.sends.size(); ++i) {
      if (ops.sends[i].signaled && !send_done(i)) complete_send(i, IBV_WC_WR_FLUSH_ERR);
    }
    flushed_sends = ops.sends.size();
  }
  bool send_done(std::size_t i) const { return std::find(done.begin(), done.end(), i) != done.end(); }
  p::Cqe cqe_of(const PostedWr& w) const { return p::load<p::Cqe>(w.cqe.data()); }
  std::vector<std::size_t> done;
  std::size_t flushed_sends = 0;
};

p::Sqe rw_sqe(bool write, uint16_t cid, uint32_t blocks, p::SglDescriptor sgl) {
  p::ReadWriteCommand rw{};
  rw.hdr = p::make_header(write ? 0x01 : 0x02, cid, 1);
  rw.set_start_lba(0);
  rw.set_block_count(blocks);
  auto sqe = p::to_sqe(rw);
  sqe.hdr.dptr = sgl;
  return sqe;
}

TEST(RdmaQueue, PostsOneRecvPerEntryAndTellsTheCore) {
  QueueHarness h(16);
  EXPECT_EQ(h.ops.recvs.size(), 16u);
  EXPECT_EQ(h.q->recvs_posted(), 16u);
  EXPECT_EQ(h.core.created, 1);
  EXPECT_EQ(h.ops.recvs.front().len, 64u + 4096u);
}

TEST(RdmaQueue, SglValidationStatuses) {
  QueueHarness h;
  struct Case {
    p::Sqe sqe;
    std::vector<uint8_t> icd;
    p::Status want;
  };
  std::vector<Case> cases;
  // Keyed length above MDTS (1 MiB).
  cases.push_back({rw_sqe(true, 1, 4096, p::make_keyed_sgl(0x1000, 2 * 1024 * 1024, 7)), {}, p::status::data_sgl_length_invalid});
  // A transport data block (NVMe/TCP's 0x5A) is not an RDMA descriptor.
  cases.push_back({rw_sqe(true, 2, 1, p::make_transport_sgl(512)), {}, p::status::sgl_descriptor_type_invalid});
  // In-capsule offset beyond the data received.
  cases.push_back({rw_sqe(true, 3, 1, p::make_in_capsule_sgl(1024, 512)), std::vector<uint8_t>(512), p::status::sgl_offset_invalid});
  // In-capsule length beyond the data received.
  cases.push_back({rw_sqe(true, 4, 2, p::make_in_capsule_sgl(0, 1024)), std::vector<uint8_t>(512), p::status::data_sgl_length_invalid});
  // In-capsule data for a read.
  cases.push_back({rw_sqe(false, 5, 1, p::make_in_capsule_sgl(0, 512)), std::vector<uint8_t>(512), p::status::invalid_field});
  for (auto& c : cases) h.capsule(c.sqe, c.icd);
  EXPECT_TRUE(h.core.commands.empty()) << "bad descriptors never reach the core";
  ASSERT_EQ(h.ops.sends.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto cqe = h.cqe_of(h.ops.sends[i]);
    EXPECT_EQ(cqe.cid.get(), cases[i].sqe.hdr.cid.get());
    EXPECT_EQ(cqe.get_status(), cases[i].want) << "case " << i;
    EXPECT_EQ(cqe.sqid.get(), 1);
    EXPECT_EQ(h.ops.sends[i].opcode, IBV_WR_SEND);
  }
  // Every RECV went back: the host can keep sending.
  EXPECT_EQ(h.q->recvs_posted(), 8u);
}

// Issue 10, found 1, on RDMA: a no-data command (Keep Alive, Flush) whose data SGL is 16 zero bytes (type 0,
// length 0) reaches the core with no data, as nvmet and SPDK run it; a descriptor with a length that RDMA
// cannot carry (NVMe/TCP's transport data block) is still refused.
TEST(RdmaQueue, ZeroLengthDescriptorOfAnyTypeIsAcceptedWithoutData) {
  QueueHarness h;
  auto ka = p::make_keep_alive(7);
  ka.hdr.dptr = p::SglDescriptor{};
  h.capsule(ka, {});
  ASSERT_EQ(h.core.commands.size(), 1u) << "the command must reach the core";
  EXPECT_EQ(h.core.commands[0]->data_length, 0u);
  h.core.commands[0]->queue->complete(*h.core.commands[0], false);
  auto flush = rw_sqe(true, 8, 0, p::SglDescriptor{});
  flush.hdr.opcode = 0x00;  // Flush
  h.capsule(flush, {});
  ASSERT_EQ(h.core.commands.size(), 2u);
  EXPECT_EQ(h.core.commands[1]->data_length, 0u);
  h.core.commands[1]->queue->complete(*h.core.commands[1], false);
  auto bad = p::make_keep_alive(9);
  bad.hdr.dptr = p::make_transport_sgl(512);
  h.capsule(bad, {});
  EXPECT_EQ(h.core.commands.size(), 2u) << "a transport descriptor with a length is not RDMA's";
  ASSERT_GE(h.ops.sends.size(), 3u);
  EXPECT_EQ(h.cqe_of(h.ops.sends[0]).get_status(), p::status::success);
  EXPECT_EQ(h.cqe_of(h.ops.sends[1]).get_status(), p::status::success);
  EXPECT_EQ(h.cqe_of(h.ops.sends.back()).get_status(), p::status::sgl_descriptor_type_invalid);
}

TEST(RdmaQueue, InCapsuleDataIsNotCopiedAndItsRecvComesBackAtCompletion) {
  QueueHarness h;
  h.core.hold = true;
  std::vector<uint8_t> icd(1024, 0x5C);
  h.capsule(rw_sqe(true, 9, 2, p::make_in_capsule_sgl(0, 1024)), icd);
  ASSERT_EQ(h.core.commands.size(), 1u);
  TargetRequest& req = *h.core.commands[0];
  EXPECT_TRUE(req.data_in_capsule);
  EXPECT_EQ(req.data_length, 1024u);
  EXPECT_EQ(req.data[0], 0x5C);
  EXPECT_GE(req.data, h.region.data());
  EXPECT_LT(req.data, h.region.data() + h.region.size());
  EXPECT_EQ(h.q->recvs_posted(), 7u);  // held with the data
  req.queue->complete(req, false);
  EXPECT_EQ(h.q->recvs_posted(), 8u);  // reposted before the CQE SEND
  ASSERT_EQ(h.ops.sends.size(), 1u);
  EXPECT_EQ(h.cqe_of(h.ops.sends[0]).cid.get(), 9);
}

TEST(RdmaQueue, KeyedWriteReadsFromTheHostThenCompletes) {
  QueueHarness h;
  h.capsule(rw_sqe(true, 4, 16, p::make_keyed_sgl(0xABC000, 8192, 0x77)));
  ASSERT_EQ(h.core.commands.size(), 1u);
  EXPECT_EQ(h.q->recvs_posted(), 8u);  // no in-capsule data: the RECV went straight back
  ASSERT_EQ(h.ops.sends.size(), 1u);
  const auto& rd = h.ops.sends[0];
  EXPECT_EQ(rd.opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(rd.remote, 0xABC000u);
  EXPECT_EQ(rd.rkey, 0x77u);
  EXPECT_EQ(rd.length, 8192u);
  EXPECT_EQ(rd.lkey, 0x2222u);  // into the pool buffer
  EXPECT_TRUE(rd.signaled);
  EXPECT_EQ(h.core.commands[0]->fixed_buffer_index, BufferPool::kFixedBufferIndex);
  h.complete_send(0);
  ASSERT_EQ(h.core.data_ready.size(), 1u);
  EXPECT_TRUE(h.core.data_ready[0].second.ok());
  ASSERT_EQ(h.ops.sends.size(), 2u);
  EXPECT_EQ(h.ops.sends[1].opcode, IBV_WR_SEND);
}

TEST(RdmaQueue, ReadDataIsWrittenChainedWithTheSendAndInvalidates) {
  QueueHarness h;
  h.capsule(rw_sqe(false, 5, 8, p::make_keyed_sgl(0x5000, 4096, 0x99, true)));
  ASSERT_EQ(h.ops.sends.size(), 2u);
  EXPECT_EQ(h.ops.chains, 1u);  // one post_send: WRITE -> SEND
  EXPECT_EQ(h.ops.sends[0].opcode, IBV_WR_RDMA_WRITE);
  EXPECT_FALSE(h.ops.sends[0].signaled);
  EXPECT_EQ(h.ops.sends[0].wr_id, 0u);
  EXPECT_EQ(h.ops.sends[0].remote, 0x5000u);
  EXPECT_EQ(h.ops.sends[0].rkey, 0x99u);
  EXPECT_EQ(h.ops.sends[1].opcode, IBV_WR_SEND_WITH_INV);
  EXPECT_EQ(h.ops.sends[1].invalidate_rkey, 0x99u);
  EXPECT_TRUE(h.ops.sends[1].signaled);
  EXPECT_EQ(h.q->sq_used(), 2u);
  h.complete_send(1);
  EXPECT_EQ(h.q->sq_used(), 0u);
}

TEST(RdmaQueue, LargeTransfersAreSplitAtTheDeviceMessageSize) {
  DeviceLimits d = big_device();
  d.max_msg_size = 128 * 1024;
  QueueHarness h(8, d);
  h.capsule(rw_sqe(false, 6, 1024, p::make_keyed_sgl(0x100000, 512 * 1024, 1)));
  ASSERT_EQ(h.ops.sends.size(), 5u);  // 4 WRITEs of 128 KiB + SEND
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(h.ops.sends[i].length, 128u * 1024);
    EXPECT_EQ(h.ops.sends[i].remote, 0x100000u + i * 128u * 1024);
  }
}

TEST(RdmaQueue, SendQueueExhaustionQueuesAndResumesInOrder) {
  DeviceLimits d = big_device();
  d.max_qp_wr = 8;  // sq_depth 8; recvs 8
  QueueHarness h(8, d);
  ASSERT_EQ(h.q->sizing().sq_depth, 8u);
  // Six reads, each needing WRITE + SEND = 2 WRs: four fit, two wait.
  for (uint16_t cid = 10; cid < 16; ++cid) h.capsule(rw_sqe(false, cid, 1, p::make_keyed_sgl(0x1000u * cid, 512, cid)));
  EXPECT_EQ(h.ops.sends.size(), 8u);
  EXPECT_EQ(h.q->sq_used(), 8u);
  EXPECT_EQ(h.q->pending_count(), 2u);
  // A write arriving now must queue behind them (order is kept) even though its READ would... not fit either.
  h.capsule(rw_sqe(true, 16, 1, p::make_keyed_sgl(0x9000, 512, 3)));
  EXPECT_EQ(h.q->pending_count(), 3u);
  h.complete_send(1);  // cid 10's SEND: frees 2 slots -> cid 14 goes
  ASSERT_EQ(h.ops.sends.size(), 10u);
  EXPECT_EQ(h.cqe_of(h.ops.sends[9]).cid.get(), 14);
  h.complete_send(3);  // cid 11 -> cid 15 goes
  ASSERT_EQ(h.ops.sends.size(), 12u);
  EXPECT_EQ(h.cqe_of(h.ops.sends[11]).cid.get(), 15);
  h.complete_send(5);  // cid 12 -> the write's READ goes
  ASSERT_EQ(h.ops.sends.size(), 13u);
  EXPECT_EQ(h.ops.sends[12].opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(h.q->pending_count(), 0u);
}

TEST(RdmaQueue, CompletionErrorClosesOnceAndReleasesEverything) {
  QueueHarness h;
  h.core.hold_data = true;
  // A write whose READ is in flight, and a read the core holds.
  h.capsule(rw_sqe(true, 1, 16, p::make_keyed_sgl(0x1000, 8192, 5)));
  h.core.hold = true;
  h.capsule(rw_sqe(false, 2, 16, p::make_keyed_sgl(0x8000, 8192, 6)));
  ASSERT_EQ(h.core.commands.size(), 2u);
  const unsigned free_large = h.pool->free_large() + h.pool->free_small();
  // The host's rkey was bad: the READ fails.
  ibv_wc wc{};
  wc.wr_id = h.ops.sends[0].wr_id;
  wc.status = IBV_WC_REM_ACCESS_ERR;
  wc.opcode = IBV_WC_RDMA_READ;
  h.complete_wc(wc);
  EXPECT_EQ(h.ops.disconnects, 1);
  EXPECT_EQ(h.core.closed, 1);
  // The request whose data failed hears about it once, before on_queue_closed (target_queue.h).
  ASSERT_EQ(h.core.data_ready.size(), 1u);
  EXPECT_EQ(h.core.data_ready[0].second, p::status::transient_transport_error);
  // The core gives its requests back (it was told about the queue).
  h.core.commands[0]->queue->release(*h.core.commands[0]);
  EXPECT_EQ(h.ops.destroys, 0) << "RECVs still posted: not yet";
  h.core.commands[1]->queue->release(*h.core.commands[1]);
  h.flush_all();
  EXPECT_EQ(h.core.closed, 1);
  EXPECT_EQ(h.ops.destroys, 1);
  EXPECT_TRUE(h.q->finished());
  EXPECT_EQ(h.pool->free_large() + h.pool->free_small(), free_large + 2) << "pool buffers returned";
  // Late calls are ignored.
  h.q->close("again");
  EXPECT_EQ(h.ops.disconnects, 1);
  EXPECT_EQ(h.ops.destroys, 1);
}

TEST(RdmaQueue, CloseWhileReadInFlightReportsTransientErrorFirst) {
  QueueHarness h;
  h.core.hold_data = true;
  h.capsule(rw_sqe(true, 1, 16, p::make_keyed_sgl(0x1000, 8192, 5)));
  ASSERT_EQ(h.ops.sends.size(), 1u);
  h.q->close("keep-alive expired");
  ASSERT_EQ(h.core.data_ready.size(), 1u);
  EXPECT_EQ(h.core.data_ready[0].second, p::status::transient_transport_error);
  EXPECT_EQ(h.core.closed, 1);
  // The core completes it anyway: just recycled, nothing sent.
  TargetRequest& req = *h.core.data_ready[0].first;
  req.queue->complete(req, false);
  EXPECT_EQ(h.ops.sends.size(), 1u);
  EXPECT_EQ(h.ops.destroys, 0) << "the READ is still the device's";
  h.flush_all();
  EXPECT_EQ(h.ops.destroys, 1);
}

TEST(RdmaQueue, PoolExhaustionWaitsBeforeTheCore) {
  QueueHarness h(8, big_device(), {}, 1);
  h.core.hold = true;
  h.capsule(rw_sqe(false, 1, 2048, p::make_keyed_sgl(0x1000, 1024 * 1024, 5)));
  h.capsule(rw_sqe(false, 2, 2048, p::make_keyed_sgl(0x2000, 1024 * 1024, 5)));
  ASSERT_EQ(h.core.commands.size(), 1u) << "the second waits for a buffer";
  h.core.hold = false;
  TargetRequest& first = *h.core.commands[0];
  std::memset(first.data, 1, first.data_length);
  first.queue->complete(first, true);
  ASSERT_EQ(h.ops.sends.size(), 2u);
  h.core.hold = true;
  h.complete_send(1);  // SEND done: buffer back -> the waiter gets it
  ASSERT_EQ(h.core.commands.size(), 2u);
  EXPECT_EQ(h.core.commands[1]->data_length, 1024u * 1024);
}

TEST(RdmaQueue, TooManyCommandsIsAProtocolError) {
  QueueHarness h(2);  // 2 entries: 4 request slots
  h.core.hold = true;
  for (int i = 0; i < 4; ++i) h.capsule(rw_sqe(false, static_cast<uint16_t>(i), 0, p::make_keyed_sgl(0, 0, 0)));
  EXPECT_EQ(h.core.closed, 0);
  h.capsule(rw_sqe(false, 4, 0, p::make_keyed_sgl(0, 0, 0)));  // a host ignoring its queue size
  EXPECT_EQ(h.core.closed, 1);
  EXPECT_EQ(h.ops.disconnects, 1);
  for (auto* r : h.core.commands) r->queue->release(*r);
  h.flush_all();
  EXPECT_EQ(h.ops.destroys, 1);
}

}  // namespace

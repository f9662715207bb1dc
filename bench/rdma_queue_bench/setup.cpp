#include "bench/rdma_queue_bench/setup.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "protocol/fabrics.h"
#include "protocol/rdma_cm.h"
#include "protocol/sgl.h"

namespace rdmablk::bench::rdma_queue {

namespace cm = rdmablk::protocol::rdma_cm;

namespace {

// A ConnectX-5-like device.
transport::rdma::DeviceLimits device_limits() {
  transport::rdma::DeviceLimits d;
  d.max_qp_wr = 32768;
  d.max_sge = 30;
  d.max_qp_rd_atom = 16;
  d.max_qp_init_rd_atom = 16;
  d.max_msg_size = 1u << 30;
  d.max_cqe = 4194303;
  return d;
}

}  // namespace

target::TargetConfig bench_config(const Config& cfg) {
  target::TargetConfig c;
  c.source = "rdma_queue_bench";
  target::ListenerConfig l;
  l.transport = transport::TransportType::rdma;
  l.address = "0.0.0.0";
  l.port = 4420;
  l.role = target::ListenerRole::io;
  c.listeners = {l};
  target::SubsystemConfig s;
  s.nqn = kSubNqn;
  s.serial = "BENCH0001";
  s.allow_any_host = true;
  target::NamespaceConfig ns;
  ns.nsid = kNsid;
  ns.backend = target::BackendKind::null;
  ns.size = kNsBytes;
  ns.block_size = kBlockSize;
  ns.uuid = target::derive_uuid(kSubNqn, kNsid);
  ns.nguid = target::derive_nguid(kSubNqn, kNsid);
  ns.qos.limits.iops = cfg.qos_iops;
  s.namespaces = {ns};
  c.subsystems = {s};
  c.limits.io_queue_depth = std::max(128u, cfg.queue_size);  // defaults otherwise (16 KiB I/O in-capsule data)
  c.reactors = cfg.reactors;
  return c;
}

BenchQueue make_queue(FakeCq& cq, transport::BufferPool& pool, target::TargetCore& core,
                      const transport::rdma::RdmaTargetOptions& opts, uint16_t qid, uint16_t entries,
                      uint16_t cntlid) {
  const cm::ConnectRequest req{qid, entries, static_cast<uint16_t>(entries - 1), cntlid};
  auto sizing = transport::rdma::size_queue(req, 16, 16, device_limits(), opts);
  if (!sizing) die(fmt::format("queue {}: size_queue refused: {}", qid, sizing.error().what));
  BenchQueue b;
  b.qp = std::make_unique<FakeQp>(cq, 0x100u + qid, sizing->recv_count);
  b.region = std::make_unique<AlignedRegion>(transport::rdma::queue_region_bytes(*sizing));
  transport::rdma::RdmaQueueSetup setup;
  setup.sizing = *sizing;
  setup.region = b.region->data;
  setup.recv_lkey = 0x1111;
  setup.pool_lkey = 0x2222;
  setup.max_inline = 64;  // mlx5 grants inline sends: the CQE goes inline
  setup.local = transport::TransportAddress{transport::TransportType::rdma, "192.168.100.10", 4420};
  setup.peer = "192.168.100.20:50000";
  b.queue = std::make_unique<RdmaTargetQueue>(*b.qp, pool, core, opts, setup);
  if (!b.queue->post_initial_recvs()) die("post_initial_recvs failed");
  b.queue->start();
  return b;
}


p::Cqe exchange(Driver& driver, FakeCq& cq, FakeQp& qp, const p::Sqe& sqe, std::span<const uint8_t> icd) {
  const uint64_t before = qp.cqes;
  if (!qp.deliver(sqe, static_cast<uint32_t>(icd.size()), icd)) die("no RECV posted for a setup command");
  for (int i = 0; i < 1'000'000 && (qp.cqes == before || !cq.empty()); ++i) driver.turn();
  if (qp.cqes == before) die(fmt::format("setup command opcode {:#x} got no completion", sqe.hdr.opcode));
  return qp.last_cqe;
}

p::Cqe connect(Driver& driver, FakeCq& cq, FakeQp& qp, uint16_t cid, uint16_t qid, uint16_t sqsize0,
               uint16_t cntlid) {
  const auto data = p::make_connect_data(kHostId, cntlid, kSubNqn, kHostNqn);
  std::vector<uint8_t> bytes(sizeof(data));
  std::memcpy(bytes.data(), &data, sizeof(data));
  const auto sqe = p::to_sqe(p::make_connect(cid, qid, sqsize0, 0, 0, p::make_in_capsule_sgl(0, p::kConnectDataSize)));
  return exchange(driver, cq, qp, sqe, bytes);
}

}  // namespace rdmablk::bench::rdma_queue

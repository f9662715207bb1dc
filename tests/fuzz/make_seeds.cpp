// Writes the binary seed corpora of the fuzz harnesses (tests/fuzz/README.md): real PDUs, commands and
// controller answers built with protocol/'s builders and the initiator tests' fake target, plus a few
// malformed ones. The text corpora (YAML, fio jobs, JSON lines, HTTP requests) are plain files in the
// repository instead.
//
//   fuzz_make_seeds tests/fuzz/corpus      (built with -DRDMABLK_FUZZ=ON: cmake --build B --target fuzz_make_seeds)
//
// Rewrites corpus/<harness>/seed-* for the binary harnesses; other files in those directories (regression
// inputs from findings) are left alone.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "controller_input.h"
#include "initiator/cli/cli.h"
#include "initiator/fake_target.h"
#include "initiator/host/controller.h"
#include "protocol/command.h"
#include "protocol/crc32c.h"
#include "protocol/endian.h"
#include "protocol/fabrics.h"
#include "protocol/rdma_cm.h"
#include "protocol/sgl.h"
#include "protocol/tcp_pdu.h"

namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;
namespace cm = rdmablk::protocol::rdma_cm;
namespace tr = rdmablk::transport;
namespace ini = rdmablk::initiator;
using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

fs::path g_root;
unsigned g_written = 0;

void write_seed(const std::string& harness, const std::string& name, const Bytes& b) {
  const fs::path dir = g_root / harness;
  fs::create_directories(dir);
  std::ofstream out(dir / ("seed-" + name), std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
    std::exit(1);
  }
  ++g_written;
}

void append(Bytes& to, const Bytes& b) { to.insert(to.end(), b.begin(), b.end()); }
template <typename T>
Bytes bytes_of(const T& v) {
  Bytes b(sizeof(T));
  p::store(b.data(), v);
  return b;
}

// A PDU on the wire: header (+ digest, + padding), data, data digest.
template <typename Pdu>
Bytes pdu(const Pdu& hdr, const Bytes& data = {}, bool ddgst = false) {
  Bytes out(512);
  out.resize(pt::write_pdu_header(hdr, out));
  append(out, data);
  if (ddgst && !data.empty()) {
    uint8_t d[4];
    pt::store_digest(d, p::crc32c(data.data(), data.size()));
    out.insert(out.end(), d, d + 4);
  }
  return out;
}

pt::TcpSession session(bool hdgst, bool ddgst) {
  pt::TcpSession s;
  s.established = true;
  s.hdgst = hdgst;
  s.ddgst = ddgst;
  s.maxh2cdata = 16 * 1024;
  return s;
}

Bytes connect_data(uint16_t cntlid, const char* subnqn = "nqn.2024-01.io.rdmablk:vol1") {
  std::array<uint8_t, 16> hostid{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  return bytes_of(p::make_connect_data(hostid, cntlid, subnqn,
                                       "nqn.2014-08.org.nvmexpress:uuid:3fa85f64-5717-4562-b3fc-2c963f66afa6"));
}

pt::SqeBytes sqe_bytes(const p::Sqe& s) { return p::load<pt::SqeBytes>(&s); }
template <typename Cmd>
pt::SqeBytes sqe_bytes(const Cmd& c) { return sqe_bytes(p::to_sqe(c)); }

// ---- NVMe/TCP ----------------------------------------------------------------------------------------

// The host's side of a session: ICReq, admin Connect (in-capsule data), Property Get, Identify (read by
// C2HData), a write with in-capsule data, a write by R2T + H2CData (ttag guessed), a flush, Keep Alive.
Bytes host_stream(bool hdgst, bool ddgst, uint16_t qid, uint16_t ttag) {
  Bytes out;
  pt::IcReqParams params;
  params.hdgst = hdgst;
  params.ddgst = ddgst;
  append(out, bytes_of(pt::build_icreq(params)));
  const auto s = session(hdgst, ddgst);
  const Bytes cd = connect_data(qid == 0 ? 0xFFFF : 1);
  const auto conn = p::make_connect(1, qid, 31, 0, 0, p::make_in_capsule_sgl(0, p::kConnectDataSize));
  append(out, pdu(pt::build_capsule_cmd(sqe_bytes(conn), p::kConnectDataSize, s), cd, ddgst));
  append(out, pdu(pt::build_capsule_cmd(sqe_bytes(p::make_property_get(2, 0, true)), 0, s)));
  const auto id = p::make_identify(3, p::Cns::controller, 0, p::make_transport_sgl(4096));
  append(out, pdu(pt::build_capsule_cmd(sqe_bytes(id), 0, s)));
  const Bytes four_k(4096, 0x5A);
  const auto w1 = p::make_write(4, 1, 0, 8, p::make_in_capsule_sgl(0, 4096));
  append(out, pdu(pt::build_capsule_cmd(sqe_bytes(w1), 4096, s), four_k, ddgst));
  const auto w2 = p::make_write(5, 1, 8, 16, p::make_transport_sgl(8192));
  append(out, pdu(pt::build_capsule_cmd(sqe_bytes(w2), 0, s)));
  append(out, pdu(pt::build_h2c_data(5, ttag, 0, 8192, true, s), Bytes(8192, 0xC3), ddgst));
  append(out, pdu(pt::build_capsule_cmd(sqe_bytes(p::make_flush(6, 1)), 0, s)));
  append(out, pdu(pt::build_capsule_cmd(sqe_bytes(p::make_keep_alive(7)), 0, s)));
  return out;
}

// The controller's side: ICResp, CapsuleResp, R2T, C2HData (+ SUCCESS), a C2HTermReq at the end.
Bytes controller_stream(bool hdgst, bool ddgst) {
  Bytes out;
  pt::TcpSession s = session(hdgst, ddgst);
  s.maxh2cdata = 128 * 1024;
  append(out, bytes_of(pt::build_icresp(s)));
  append(out, pdu(pt::build_capsule_resp(pt::CqeBytes{}, s)));
  append(out, pdu(pt::build_r2t(5, 0, 0, 8192, s)));
  append(out, pdu(pt::build_c2h_data(3, 0, 2048, false, false, s), Bytes(2048, 0x11), ddgst));
  append(out, pdu(pt::build_c2h_data(3, 2048, 20000, true, true, s), Bytes(20000, 0x22), ddgst));
  append(out, pdu(pt::build_capsule_resp(pt::CqeBytes{}, s)));
  const pt::PduError e{2, "hlen", pt::Fes::invalid_header_field};
  Bytes term(pt::kTermReqMaxPlen);
  term.resize(pt::write_term_req(term, pt::PduType::c2h_term_req, e, Bytes(24, 0x04)));
  append(out, term);
  return out;
}

void tcp_seeds() {
  // tcp_pdu: [flags: 1 host, 2 established, 4 hdgst, 8 ddgst][cpda][hpda][maxh2cdata/4K le16] + PDU
  auto tcp_pdu = [](const std::string& name, uint8_t flags, const Bytes& b) {
    Bytes in{flags, 0, 0, 32, 0};
    append(in, b);
    write_seed("tcp_pdu", name, in);
  };
  tcp_pdu("icreq", 0, bytes_of(pt::build_icreq({})));
  tcp_pdu("icresp", 1, bytes_of(pt::build_icresp(session(true, true))));
  for (const auto& [hd, dd] : {std::pair{false, false}, {true, false}, {true, true}}) {
    const auto s = session(hd, dd);
    const uint8_t f = static_cast<uint8_t>(2 | (hd ? 4 : 0) | (dd ? 8 : 0));
    const std::string sfx = std::string(hd ? "-hd" : "") + (dd ? "-dd" : "");
    tcp_pdu("capsule" + sfx, f, pdu(pt::build_capsule_cmd(sqe_bytes(p::make_flush(1, 1)), 0, s)));
    tcp_pdu("capsule-icd" + sfx, f,
            pdu(pt::build_capsule_cmd(sqe_bytes(p::make_write(2, 1, 0, 1, p::make_in_capsule_sgl(0, 512))), 512, s),
                Bytes(512, 1), dd));
    tcp_pdu("h2cdata" + sfx, f, pdu(pt::build_h2c_data(3, 0, 0, 4096, true, s), Bytes(4096, 2), dd));
    tcp_pdu("resp" + sfx, f | 1, pdu(pt::build_capsule_resp(pt::CqeBytes{}, s)));
    tcp_pdu("c2hdata" + sfx, f | 1, pdu(pt::build_c2h_data(3, 0, 4096, true, true, s), Bytes(4096, 3), dd));
    tcp_pdu("r2t" + sfx, f | 1, pdu(pt::build_r2t(3, 1, 0, 4096, s)));
  }
  Bytes term(pt::kTermReqMaxPlen);
  term.resize(pt::write_term_req(term, pt::PduType::h2c_term_req, pt::PduError{3, "pdo", pt::Fes::invalid_header_field},
                                 Bytes(72, 4)));
  tcp_pdu("h2c-termreq", 2, term);
  // Malformed: hlen wrong, plen short, a bad header digest.
  Bytes bad = pdu(pt::build_capsule_cmd(sqe_bytes(p::make_flush(1, 1)), 0, session(false, false)));
  bad[2] = 71;
  tcp_pdu("bad-hlen", 2, bad);
  Bytes bad_digest = pdu(pt::build_capsule_cmd(sqe_bytes(p::make_flush(1, 1)), 0, session(true, false)));
  bad_digest.back() ^= 1;
  tcp_pdu("bad-hdgst", 2 | 4, bad_digest);

  // pdu_receiver: [bit 0 host side, bits 1-3 staging][cpda][seed le16] + stream
  auto rx = [](const std::string& name, uint8_t setup, const Bytes& stream) {
    Bytes in{setup, 0, 0x34, 0x12};
    append(in, stream);
    write_seed("pdu_receiver", name, in);
  };
  rx("controller", 0, host_stream(false, false, 0, 0));
  rx("controller-digests", 2, host_stream(true, true, 0, 0));
  rx("host", 1, controller_stream(false, false));
  rx("host-digests", 1 | 4, controller_stream(true, true));

  // tcp_target_queue: [seed le16][options][staging, hold] + the host's stream
  auto q = [](const std::string& name, uint8_t opts, uint8_t more, const Bytes& stream) {
    Bytes in{0x21, 0x43, opts, more};
    append(in, stream);
    write_seed("tcp_target_queue", name, in);
  };
  // opts 0x7E: MAXH2CDATA 16 KiB, C2HData 16 KiB, admin 8 KiB and I/O 8 KiB in-capsule, depth 128.
  q("admin", 0x7E, 0x01, host_stream(false, false, 0, 0));
  q("admin-ttag1", 0x7E, 0x01, host_stream(false, false, 0, 1));
  q("admin-digests-hold", 0x7E, 0x05, host_stream(true, true, 0, 0));
  q("io", 0x7E, 0x02, host_stream(false, true, 1, 1));
  q("depth2-small", 0x10, 0x09, host_stream(true, false, 1, 0));
}

// ---- capsule contents ------------------------------------------------------------------------------------

void capsule_seeds() {
  // sgl: [accept | 8 declares data][icd le32][in-capsule limit le32][mdts le32][unused] + SQE
  auto sgl = [](const std::string& name, uint8_t accept, uint32_t icd, const p::Sqe& sqe) {
    Bytes in{accept};
    for (uint32_t v : {icd, 8192u, 1u << 20}) {
      for (int i = 0; i < 4; ++i) in.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
    in.push_back(0);
    append(in, bytes_of(sqe));
    write_seed("sgl", name, in);
  };
  sgl("tcp-write-icd", 1 | 4 | 8, 4096, p::to_sqe(p::make_write(1, 1, 0, 8, p::make_in_capsule_sgl(0, 4096))));
  sgl("tcp-write-r2t", 1 | 4 | 8, 0, p::to_sqe(p::make_write(1, 1, 0, 8, p::make_transport_sgl(4096))));
  sgl("tcp-read", 1 | 4 | 8, 0, p::to_sqe(p::make_read(1, 1, 0, 8, p::make_transport_sgl(4096))));
  sgl("rdma-read-keyed", 1 | 2, 0, p::to_sqe(p::make_read(1, 1, 0, 8, p::make_keyed_sgl(0x7f0000001000, 4096, 0x1234))));
  sgl("rdma-write-inv", 1 | 2, 0,
      p::to_sqe(p::make_write(1, 1, 0, 8, p::make_keyed_sgl(0x7f0000001000, 4096, 0x1234, true))));
  sgl("flush-zero-sgl", 1 | 4 | 8, 0, p::make_flush(1, 1));
  sgl("connect", 1 | 4 | 8, 1024,
      p::to_sqe(p::make_connect(1, 0, 31, 0, 0, p::make_in_capsule_sgl(0, p::kConnectDataSize))));

  // connect_data: the 1024 bytes as they arrive; one with a bad HOSTNQN.
  write_seed("connect_data", "admin", connect_data(0xFFFF));
  write_seed("connect_data", "io", connect_data(1));
  std::array<uint8_t, 16> hostid{};
  write_seed("connect_data", "discovery",
             bytes_of(p::make_connect_data(hostid, 0xFFFF, p::kDiscoveryNqn, "nqn.2014-08.com.example:host-1")));
  Bytes bad = connect_data(0xFFFF);
  bad[512 + 3] = '_';
  write_seed("connect_data", "bad-hostnqn", bad);

  // rdma_cm: [max_qid le16][max I/O entries le16] + private data
  auto rc = [](const std::string& name, const Bytes& pd) {
    Bytes in{0x40, 0, 0x00, 0x04};
    append(in, pd);
    write_seed("rdma_cm", name, in);
  };
  rc("admin", bytes_of(cm::make_request(0, 32)));
  rc("io", bytes_of(cm::make_request(3, 128, 1)));
  Bytes padded = bytes_of(cm::make_request(1, 1024, 1));
  padded.resize(92);  // InfiniBand CM pads private data to 92 bytes
  rc("io-padded", padded);
  rc("accept", bytes_of(cm::make_accept(128)));
  rc("reject", bytes_of(cm::make_reject(cm::RejectStatus::invalid_hsqsize)));
}

// ---- the target core ----------------------------------------------------------------------------------------

// target_core records: [queue (bit 0: I/O queue 1; 0x80: advance the clock [ms/16 le16])] [SQE] [n le16] [data]
void core_cmd(Bytes& out, bool io, const p::Sqe& sqe, const Bytes& data = {}) {
  out.push_back(io ? 1 : 0);
  append(out, bytes_of(sqe));
  out.push_back(static_cast<uint8_t>(data.size()));
  out.push_back(static_cast<uint8_t>(data.size() >> 8));
  append(out, data);
}

void core_seeds() {
  const auto t = [](uint32_t n) { return p::make_transport_sgl(n); };
  {
    Bytes in{0x03};  // admin + I/O queue brought up
    core_cmd(in, false, p::to_sqe(p::make_identify(10, p::Cns::controller, 0, t(4096))));
    core_cmd(in, false, p::to_sqe(p::make_identify(11, p::Cns::active_namespace_list, 0, t(4096))));
    core_cmd(in, false, p::to_sqe(p::make_identify(12, p::Cns::namespace_, 2, t(4096))));
    core_cmd(in, false, p::to_sqe(p::make_identify(13, p::Cns::ns_id_descriptor_list, 1, t(4096))));
    core_cmd(in, false, p::to_sqe(p::make_get_log_page(14, p::LogPageId::smart_health, 0xFFFFFFFF, 0, 512, t(512))));
    core_cmd(in, false, p::to_sqe(p::make_get_log_page(15, p::LogPageId::changed_namespace_list, 0, 0, 4096, t(4096))));
    core_cmd(in, false, p::to_sqe(p::make_get_log_page(16, p::LogPageId::error_information, 0, 64, 128, t(128))));
    core_cmd(in, false, p::to_sqe(p::make_set_features(17, p::FeatureId::number_of_queues, 0x00030003)));
    core_cmd(in, false, p::to_sqe(p::make_get_features(18, p::FeatureId::volatile_write_cache)));
    core_cmd(in, false, p::make_async_event_request(19));
    core_cmd(in, false, p::make_keep_alive(20));
    core_cmd(in, true, p::to_sqe(p::make_write(21, 1, 0, 8, p::make_in_capsule_sgl(0, 4096))), Bytes(4096, 0x77));
    core_cmd(in, true, p::to_sqe(p::make_read(22, 1, 0, 8, t(4096))));
    core_cmd(in, true, p::to_sqe(p::make_write(23, 2, 3, 2, t(8192))), Bytes(8192, 0x42));
    core_cmd(in, true, p::to_sqe(p::make_write_zeroes(24, 1, 16, 32, true)));
    p::DsmRange r{};
    r.nlb.set(8);
    r.slba.set(64);
    core_cmd(in, true, p::to_sqe(p::make_dsm(25, 1, 0, p::DsmCommand::kDeallocate, p::make_in_capsule_sgl(0, 16))),
             bytes_of(r));
    core_cmd(in, true, p::make_flush(26, 0xFFFFFFFF));
    in.push_back(0x80);  // the clock moves on: keep-alive expiry
    in.push_back(0xFF);
    in.push_back(0x10);
    core_cmd(in, false, p::to_sqe(p::make_property_get(27, p::property::csts, false)));
    write_seed("target_core", "admin-io", in);
  }
  {
    Bytes in{0x05};  // a discovery controller
    core_cmd(in, false, p::to_sqe(p::make_get_log_page(10, p::LogPageId::discovery, 0, 0, 1024, t(1024))));
    core_cmd(in, false, p::to_sqe(p::make_get_log_page(11, p::LogPageId::discovery, 0, 1024, 3072, t(3072))));
    core_cmd(in, false, p::to_sqe(p::make_identify(12, p::Cns::controller, 0, t(4096))));
    write_seed("target_core", "discovery", in);
  }
  {
    Bytes in{0x00};  // nothing connected: the host does it, with a shorter KATO
    core_cmd(in, false, p::to_sqe(p::make_connect(1, 0, 31, 15000, 0, p::make_in_capsule_sgl(0, p::kConnectDataSize))),
             connect_data(0xFFFF, "nqn.2024-01.io.rdmablk:sub1"));
    core_cmd(in, false, p::to_sqe(p::make_property_get(2, p::property::cap, true)));
    core_cmd(in, false, p::to_sqe(p::make_property_set(3, p::property::cc, 0x00460001, false)));
    core_cmd(in, false, p::to_sqe(p::make_property_get(4, p::property::csts, false)));
    core_cmd(in, false, p::to_sqe(p::make_disconnect(5)));
    write_seed("target_core", "connect", in);
  }
  {
    Bytes in{0x09};  // a host the restricted subsystem does not list
    core_cmd(in, false, p::to_sqe(p::make_identify(10, p::Cns::controller, 0, t(4096))));
    write_seed("target_core", "stranger", in);
  }
}

// ---- the initiator against recorded answers ----------------------------------------------------------------

// A HostQueue in front of the initiator tests' FakeTarget that records each answer in the controller
// harness's input format.
class RecordingQueue final : public tr::HostQueue {
 public:
  RecordingQueue(rdmablk::testing::FakeTarget& t, tr::HostQueueOptions o, Bytes& rec, uint32_t max_transfer)
      : target_(t), opts_(std::move(o)), rec_(rec), max_transfer_(max_transfer) {}
  p::Status submit(tr::HostCommand& cmd) noexcept override {
    cmd.sqe.hdr.cid.set(next_cid_++);
    pending_.push_back(&cmd);
    return p::status::success;
  }
  int poll(unsigned, std::chrono::milliseconds) noexcept override {
    int n = 0;
    while (!pending_.empty()) {
      tr::HostCommand* cmd = pending_.front();
      pending_.erase(pending_.begin());
      p::Cqe cqe = target_.handle(opts_.qid, cntlid_, *cmd);
      rdmablk::fuzz::put_answer(rec_, cqe.dw0.get(), cqe.dw1.get(), cqe.status.get(), cmd->data,
                                cmd->direction == tr::DataDirection::controller_to_host);
      cqe.cid = cmd->sqe.hdr.cid;
      cmd->on_complete(*cmd, cqe);
      ++n;
    }
    return n;
  }
  unsigned outstanding() const noexcept override { return static_cast<unsigned>(pending_.size()); }
  uint16_t entries() const noexcept override { return opts_.entries; }
  uint32_t max_transfer() const noexcept override { return max_transfer_; }
  void set_in_capsule_limit(uint32_t) noexcept override {}
  const tr::TransportAddress& address() const noexcept override { return opts_.address; }
  void close() noexcept override { pending_.clear(); }

 private:
  rdmablk::testing::FakeTarget& target_;
  tr::HostQueueOptions opts_;
  Bytes& rec_;
  uint32_t max_transfer_;
  std::vector<tr::HostCommand*> pending_;
  uint16_t next_cid_ = 1;
  uint16_t cntlid_ = 0;
};

// Runs what the controller harness runs for `flags` against `t`, recording the answers.
Bytes record_controller(rdmablk::testing::FakeTarget& t, uint8_t flags) {
  using rdmablk::fuzz::ControllerInputOptions;
  Bytes rec{flags};
  const uint32_t limit = (flags & ControllerInputOptions::kTransferLimit) != 0 ? 128 * 1024 : 0;
  ini::ControllerOptions o;
  o.address.type = tr::TransportType::tcp;
  o.address.traddr = "127.0.0.1";
  o.address.trsvcid = 4420;
  o.subnqn = "nqn.2024-01.io.rdmablk:fuzz";
  o.host.hostnqn = "nqn.2014-08.org.nvmexpress:uuid:3fa85f64-5717-4562-b3fc-2c963f66afa6";
  o.host.hostid = *ini::parse_uuid("3fa85f64-5717-4562-b3fc-2c963f66afa6");
  o.io_queues = static_cast<uint16_t>(1 + (flags >> 4));
  o.kato_ms = 0;
  o.command_timeout = std::chrono::milliseconds(60000);
  o.connector = [&](const tr::HostQueueOptions& qo) -> rdmablk::Result<std::unique_ptr<tr::HostQueue>> {
    return std::unique_ptr<tr::HostQueue>(std::make_unique<RecordingQueue>(t, qo, rec, limit));
  };
  if ((flags & ControllerInputOptions::kDiscovery) != 0) {
    auto c = ini::Controller::connect_discovery(o);
    if (!c) {
      std::fprintf(stderr, "recording discovery: %s\n", c.error().message.c_str());
      std::exit(1);
    }
    auto log = (*c)->discovery_log();
    if (!log) std::exit(1);
    (void)(*c)->shutdown(std::chrono::milliseconds(0));
    return rec;
  }
  auto c = ini::Controller::connect(o);
  if (!c) {
    std::fprintf(stderr, "recording: %s\n", c.error().message.c_str());
    std::exit(1);
  }
  if ((flags & ControllerInputOptions::kIoQueue) != 0 && (*c)->granted_io_queues() >= 1) {
    auto q = (*c)->connect_io_queue(1, 32);
    if (q) (*q)->disconnect();
  }
  (void)(*c)->shutdown(std::chrono::milliseconds(0));
  return rec;
}

void controller_seeds() {
  using rdmablk::fuzz::ControllerInputOptions;
  namespace rt = rdmablk::testing;
  {
    rt::FakeTarget t;
    t.subnqn = "nqn.2024-01.io.rdmablk:fuzz";
    write_seed("controller", "io", record_controller(t, ControllerInputOptions::kIoQueue | 0x30));
  }
  {
    rt::FakeTarget t;
    t.subnqn = "nqn.2024-01.io.rdmablk:fuzz";
    t.namespaces.push_back(rt::FakeNamespace{});
    t.namespaces.back().nsid = 3;
    t.namespaces.back().block_size = 4096;
    t.mdts = 0;
    write_seed("controller", "two-namespaces-limited", record_controller(t, ControllerInputOptions::kTransferLimit));
  }
  {
    rt::FakeTarget t;
    t.discovery_entries.push_back(rt::make_discovery_entry("nqn.2024-01.io.rdmablk:vol1", "127.0.0.1", "4420", 1));
    t.discovery_entries.push_back(rt::make_discovery_entry("nqn.2024-01.io.rdmablk:vol2", "::1", "4421", 2));
    t.discovery_entries.back().trtype = 1;  // RDMA: the TSAS is printed too
    write_seed("controller", "discovery", record_controller(t, ControllerInputOptions::kDiscovery));
  }
  {
    rt::FakeTarget t;
    t.discovery_entries.push_back(rt::make_discovery_entry("nqn.2024-01.io.rdmablk:vol1", "127.0.0.1", "4420", 1));
    t.bump_genctr_after_log_reads = 2;  // the log changes under the reader: it starts again
    write_seed("controller", "discovery-changing", record_controller(t, ControllerInputOptions::kDiscovery));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  spdlog::set_level(spdlog::level::off);
  g_root = argv[1];
  tcp_seeds();
  capsule_seeds();
  core_seeds();
  controller_seeds();
  std::printf("wrote %u seeds under %s\n", g_written, g_root.c_str());
  return 0;
}

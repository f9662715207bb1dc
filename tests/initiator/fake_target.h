// A fake NVMe-oF target behind a fake transport::HostQueue, for initiator tests: answers fabrics Connect,
// Property Get/Set, Identify (CNS 0/1/2/3), Set Features, Get Log Page (discovery), Keep Alive and NVM
// I/O on RAM namespaces, like a real target would. Thread-safe (bench jobs poll from several threads).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "initiator/host/controller.h"
#include "protocol/command.h"
#include "protocol/fabrics.h"
#include "protocol/identify.h"
#include "protocol/log_pages.h"
#include "protocol/properties.h"
#include "protocol/reservation.h"
#include "transport/host_queue.h"

namespace rdmablk::testing {

namespace p = rdmablk::protocol;
using transport::DataDirection;
using transport::HostCommand;

struct FakeNamespace {
  uint32_t nsid = 1;
  uint32_t block_size = 512;
  uint64_t blocks = 2048;
  std::vector<uint8_t> data;  // sized lazily
  std::array<uint8_t, 16> uuid{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x47, 0x88,
                               0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01};
};

struct FakeTarget {
  // Configuration (set before connecting)
  std::string subnqn = "nqn.2024-01.io.rdmablk:test";
  std::vector<std::string> allowed_hosts;  // empty: any host
  std::vector<FakeNamespace> namespaces{FakeNamespace{}};
  uint8_t mdts = 5;                  // 2^5 * 4 KiB = 128 KiB
  uint16_t mqes = 127;
  uint8_t cap_to = 2;
  uint32_t ioccsz = (64 + 8192) / 16;
  bool lie_about_cntlid = false;     // Identify reports another CNTLID than Connect returned
  bool never_ready = false;          // CSTS.RDY stays 0
  std::optional<uint64_t> corrupt_read_at;  // flip this namespace byte in every read that covers it
  // Discovery
  std::vector<p::DiscoveryLogEntry> discovery_entries;
  uint64_t genctr = 7;
  int bump_genctr_after_log_reads = -1;  // after this many Get Log Page commands, genctr++ (once)
  uint16_t granted_queues = 4;

  // Observations
  std::mutex mu;
  std::vector<p::Sqe> admin_log;
  std::vector<uint64_t> log_page_offsets;
  std::vector<uint32_t> log_page_lengths;
  std::atomic<int> keep_alives{0};
  std::atomic<int> connects{0};
  std::atomic<int> flushes{0};
  std::atomic<int> dsm_ranges{0};  // deallocated ranges (their blocks read back as zeroes)
  std::atomic<int> io_commands{0};
  // I/O commands in the order they arrived, with the data they carried to the controller.
  std::vector<p::Sqe> io_log;
  std::vector<std::vector<uint8_t>> io_data;
  // Reservation commands: Register / Acquire / Release answer this; Report returns these bytes.
  p::Status reservation_answer = p::status::success;
  std::vector<uint8_t> reservation_report;
  std::string last_hostnqn;
  p::ConnectCommand last_connect{};

  struct Ctrl {
    uint32_t cc = 0;
    uint32_t csts = 0;
    bool discovery = false;
  };
  std::map<uint16_t, Ctrl> ctrls;
  uint16_t next_cntlid = 1;
  int log_reads = 0;

  FakeNamespace* find_ns(uint32_t nsid) {
    for (auto& ns : namespaces) {
      if (ns.nsid == nsid) {
        if (ns.data.size() != ns.block_size * ns.blocks) ns.data.assign(ns.block_size * ns.blocks, 0);
        return &ns;
      }
    }
    return nullptr;
  }

  std::vector<uint8_t> discovery_bytes() {
    std::vector<uint8_t> out(1024 * (1 + discovery_entries.size()));
    p::DiscoveryLogHeader h{};
    h.genctr.set(genctr);
    h.numrec.set(discovery_entries.size());
    p::store(out.data(), h);
    for (std::size_t i = 0; i < discovery_entries.size(); ++i) p::store(out.data() + 1024 * (i + 1), discovery_entries[i]);
    return out;
  }

  static void copy_out(std::span<uint8_t> dst, const void* src, std::size_t n) {
    std::memcpy(dst.data(), src, std::min(n, dst.size()));
  }

  // One command. `cntlid` is the queue's controller (0 before Connect); updated by a Connect.
  p::Cqe handle(uint16_t qid, uint16_t& cntlid, HostCommand& cmd) {
    std::lock_guard lock(mu);
    const p::Sqe& sqe = cmd.sqe;
    auto ok = [&](uint32_t dw0 = 0) { return p::make_cqe(0, qid, 0, p::status::success, dw0); };
    auto err = [&](p::Status s, uint32_t dw0 = 0) { return p::make_cqe(0, qid, 0, s, dw0); };
    if (qid == 0) admin_log.push_back(sqe);

    if (sqe.hdr.opcode == p::kFabricsOpcode) {
      auto f = p::as<p::FabricsCommand>(sqe);
      if (f.type() == p::FabricsType::connect) {
        auto c = p::as<p::ConnectCommand>(sqe);
        last_connect = c;
        ++connects;
        auto d = p::decode_connect_data(cmd.data);
        if (!d) return err(p::status::connect_invalid_parameters, p::connect_invalid_param_result(true, 256));
        last_hostnqn = std::string(d->hostnqn);
        bool disc = d->subnqn == p::kDiscoveryNqn;
        if (!disc && d->subnqn != subnqn) {
          return err(p::status::connect_invalid_parameters, p::connect_invalid_param_result(true, 256));
        }
        if (!disc && !allowed_hosts.empty() &&
            std::find(allowed_hosts.begin(), allowed_hosts.end(), d->hostnqn) == allowed_hosts.end()) {
          return err(p::status::connect_invalid_host);
        }
        if (c.qid.get() == 0) {
          cntlid = next_cntlid++;
          ctrls[cntlid] = Ctrl{0, 0, disc};
          return ok(p::connect_success_result(cntlid));
        }
        auto it = ctrls.find(d->cntlid);
        if (it == ctrls.end() || !(p::Cc{it->second.cc}.en())) {
          return err(p::status::connect_invalid_parameters, p::connect_invalid_param_result(true, 16));
        }
        if (c.qid.get() > granted_queues || c.sqsize.get() > mqes) {
          return err(p::status::connect_invalid_parameters, p::connect_invalid_param_result(false, 42));
        }
        cntlid = d->cntlid;
        return ok(p::connect_success_result(cntlid));
      }
      if (cntlid == 0) return err(p::status::command_sequence_error);
      Ctrl& ctrl = ctrls[cntlid];
      if (f.type() == p::FabricsType::property_get) {
        auto g = p::as<p::PropertyGetCommand>(sqe);
        p::Cqe c = ok();
        switch (g.offset.get()) {
          case p::property::cap: {
            p::Cap cap;
            cap.set_mqes(mqes).set_to(cap_to).set_css(p::Cap::kCssNvm).set_mpsmin(0);
            c.set_result64(cap.value);
            break;
          }
          case p::property::vs: c.dw0.set(p::kNvme1_3.value); break;
          case p::property::cc: c.dw0.set(ctrl.cc); break;
          case p::property::csts: c.dw0.set(ctrl.csts); break;
          default: return err(p::status::invalid_field);
        }
        return c;
      }
      if (f.type() == p::FabricsType::property_set) {
        auto s = p::as<p::PropertySetCommand>(sqe);
        if (s.offset.get() != p::property::cc) return err(p::status::invalid_field);
        p::Cc cc{static_cast<uint32_t>(s.value.get())};
        ctrl.cc = cc.value;
        p::Csts csts{ctrl.csts};
        if (cc.en() && (cc.iosqes() != 6 || cc.iocqes() != 4)) csts.set_cfs(true);
        csts.set_rdy(cc.en() && !never_ready);
        if (cc.shn() == static_cast<uint8_t>(p::Cc::Shn::normal)) csts.set_shst(p::Csts::Shst::complete);
        ctrl.csts = csts.value;
        return ok();
      }
      if (f.type() == p::FabricsType::disconnect) return ok();
      return err(p::status::invalid_opcode);
    }

    if (cntlid == 0) return err(p::status::command_sequence_error);
    if (qid == 0) {
      switch (static_cast<p::AdminOpcode>(sqe.hdr.opcode)) {
        case p::AdminOpcode::identify: {
          auto id = p::as<p::IdentifyCommand>(sqe);
          switch (id.cns()) {
            case p::Cns::controller: {
              p::IdentifyController ic{};
              std::memcpy(ic.sn.data(), "FAKE0001            ", 20);
              std::memcpy(ic.mn.data(), "rdmablk fake target                     ", 40);
              std::memcpy(ic.fr.data(), "0.1     ", 8);
              ic.cntlid.set(static_cast<uint16_t>(lie_about_cntlid ? cntlid + 100 : cntlid));
              ic.mdts = mdts;
              ic.ver.set(p::kNvme1_3.value);
              ic.sqes = p::idctl::kSqes64;
              ic.cqes = p::idctl::kCqes16;
              ic.maxcmd.set(static_cast<uint16_t>(mqes + 1));
              ic.nn.set(1024);
              ic.oncs.set(p::idctl::kOncsDsm | p::idctl::kOncsWriteZeroes);
              ic.sgls.set(p::idctl::kSglsSupported | p::idctl::kSglsOffset | p::idctl::kSglsTransport);
              ic.ioccsz.set(ioccsz);
              ic.iorcsz.set(1);
              ic.kas.set(10);
              ic.cntrltype = ctrls[cntlid].discovery ? p::idctl::kCntrltypeDiscovery : p::idctl::kCntrltypeIo;
              std::memcpy(ic.subnqn.data(), subnqn.data(), subnqn.size());
              copy_out(cmd.data, &ic, sizeof ic);
              return ok();
            }
            case p::Cns::active_namespace_list: {
              std::vector<uint32_t> ids;
              for (auto& ns : namespaces) ids.push_back(ns.nsid);
              std::sort(ids.begin(), ids.end());
              auto list = p::make_active_namespace_list(ids, sqe.hdr.nsid.get());
              copy_out(cmd.data, &list, sizeof list);
              return ok();
            }
            case p::Cns::namespace_: {
              auto* ns = find_ns(sqe.hdr.nsid.get());
              if (!ns) return err(p::status::invalid_namespace);
              p::IdentifyNamespace in{};
              in.nsze.set(ns->blocks);
              in.ncap.set(ns->blocks);
              in.nuse.set(ns->blocks);
              in.nlbaf = 0;
              in.flbas = 0;
              uint8_t lbads = 0;
              while ((1u << lbads) < ns->block_size) ++lbads;
              in.lbaf[0].lbads = lbads;
              copy_out(cmd.data, &in, sizeof in);
              return ok();
            }
            case p::Cns::ns_id_descriptor_list: {
              auto* ns = find_ns(sqe.hdr.nsid.get());
              if (!ns) return err(p::status::invalid_namespace);
              p::NamespaceIds ids;
              ids.uuid = ns->uuid;
              auto list = p::make_ns_id_descriptor_list(ids);
              copy_out(cmd.data, list.data(), list.size());
              return ok();
            }
            default: return err(p::status::invalid_field);
          }
        }
        case p::AdminOpcode::set_features: {
          auto f = p::as<p::FeaturesCommand>(sqe);
          if (f.fid() == p::FeatureId::number_of_queues) {
            uint16_t want = static_cast<uint16_t>(std::min<uint32_t>(f.nsqr() + 1u, granted_queues) - 1);
            return ok(p::number_of_queues_value(want, want));
          }
          return err(p::status::invalid_field);
        }
        case p::AdminOpcode::get_log_page: {
          auto g = p::as<p::GetLogPageCommand>(sqe);
          if (g.lid() != static_cast<uint8_t>(p::LogPageId::discovery)) return err(p::status::invalid_log_page);
          log_page_offsets.push_back(g.offset());
          log_page_lengths.push_back(static_cast<uint32_t>(g.length_bytes()));
          if (g.offset() % 4) return err(p::status::invalid_field);
          auto bytes = discovery_bytes();
          std::fill(cmd.data.begin(), cmd.data.end(), 0);
          if (g.offset() < bytes.size()) {
            copy_out(cmd.data, bytes.data() + g.offset(), std::min<uint64_t>(g.length_bytes(), bytes.size() - g.offset()));
          }
          if (++log_reads == bump_genctr_after_log_reads) ++genctr;
          return ok();
        }
        case p::AdminOpcode::keep_alive: ++keep_alives; return ok();
        default: return err(p::status::invalid_opcode);
      }
    }

    // NVM I/O
    io_log.push_back(sqe);
    io_data.emplace_back();
    if (cmd.direction == DataDirection::host_to_controller) io_data.back().assign(cmd.data.begin(), cmd.data.end());
    auto* ns = find_ns(sqe.hdr.nsid.get());
    if (!ns) return err(p::status::invalid_namespace);
    ++io_commands;
    switch (static_cast<p::IoOpcode>(sqe.hdr.opcode)) {
      case p::IoOpcode::compare: {
        auto rw = p::as<p::ReadWriteCommand>(sqe);
        uint64_t lba = rw.start_lba(), n = rw.block_count();
        if (lba + n > ns->blocks) return err(p::status::lba_out_of_range);
        if (cmd.data.size() != n * ns->block_size) return err(p::status::data_sgl_length_invalid);
        bool same = std::memcmp(ns->data.data() + lba * ns->block_size, cmd.data.data(), cmd.data.size()) == 0;
        return same ? ok() : err(p::status::compare_failure);
      }
      case p::IoOpcode::copy: {
        auto c = p::as<p::CopyCommand>(sqe);
        if (c.descriptor_format() != 0 || cmd.data.size() != c.range_count() * sizeof(p::CopySourceRange)) {
          return err(p::status::invalid_field);
        }
        std::vector<uint8_t> buf;
        for (uint32_t i = 0; i < c.range_count(); ++i) {
          auto r = p::load<p::CopySourceRange>(cmd.data.data() + i * sizeof(p::CopySourceRange));
          if (r.slba.get() + r.block_count() > ns->blocks) return err(p::status::lba_out_of_range);
          auto* from = ns->data.data() + r.slba.get() * ns->block_size;
          buf.insert(buf.end(), from, from + uint64_t{r.block_count()} * ns->block_size);
        }
        if (c.sdlba.get() * ns->block_size + buf.size() > ns->data.size()) return err(p::status::lba_out_of_range);
        std::memcpy(ns->data.data() + c.sdlba.get() * ns->block_size, buf.data(), buf.size());
        return ok();
      }
      case p::IoOpcode::reservation_register:
      case p::IoOpcode::reservation_acquire:
      case p::IoOpcode::reservation_release: return err(reservation_answer);
      case p::IoOpcode::reservation_report: {
        std::fill(cmd.data.begin(), cmd.data.end(), 0);
        copy_out(cmd.data, reservation_report.data(), reservation_report.size());
        return ok();
      }
      case p::IoOpcode::read:
      case p::IoOpcode::write: {
        auto rw = p::as<p::ReadWriteCommand>(sqe);
        uint64_t lba = rw.start_lba(), n = rw.block_count();
        if (lba + n > ns->blocks) return err(p::status::lba_out_of_range);
        uint64_t off = lba * ns->block_size, len = n * ns->block_size;
        if (cmd.data.size() != len) return err(p::status::data_sgl_length_invalid);
        if (sqe.hdr.opcode == static_cast<uint8_t>(p::IoOpcode::write)) {
          std::memcpy(ns->data.data() + off, cmd.data.data(), len);
        } else {
          std::memcpy(cmd.data.data(), ns->data.data() + off, len);
          if (corrupt_read_at && *corrupt_read_at >= off && *corrupt_read_at < off + len) {
            cmd.data[*corrupt_read_at - off] ^= 0x5A;
          }
        }
        return ok();
      }
      case p::IoOpcode::flush: ++flushes; return ok();
      case p::IoOpcode::write_zeroes: {
        auto wz = p::as<p::WriteZeroesCommand>(sqe);
        if (wz.start_lba() + wz.block_count() > ns->blocks) return err(p::status::lba_out_of_range);
        std::memset(ns->data.data() + wz.start_lba() * ns->block_size, 0, wz.block_count() * ns->block_size);
        return ok();
      }
      case p::IoOpcode::dataset_management: {
        // Deallocate: the ranges read back as zeroes afterwards.
        for (std::size_t i = 0; i + sizeof(p::DsmRange) <= cmd.data.size(); i += sizeof(p::DsmRange)) {
          p::DsmRange r;
          std::memcpy(&r, cmd.data.data() + i, sizeof(r));
          if (r.slba.get() + r.nlb.get() > ns->blocks) return err(p::status::lba_out_of_range);
          std::memset(ns->data.data() + r.slba.get() * ns->block_size, 0, uint64_t{r.nlb.get()} * ns->block_size);
          ++dsm_ranges;
        }
        return ok();
      }
      default: return err(p::status::invalid_opcode);
    }
  }
};

class FakeHostQueue final : public transport::HostQueue {
 public:
  FakeHostQueue(FakeTarget& t, transport::HostQueueOptions o) : target_(t), opts_(std::move(o)) {}
  p::Status submit(HostCommand& cmd) noexcept override {
    if (closed_) return p::status::transient_transport_error;
    if (pending_.size() >= opts_.entries) return p::status::transient_transport_error;
    cmd.sqe.hdr.cid.set(next_cid_++);
    pending_.push_back(&cmd);
    return p::status::success;
  }
  int poll(unsigned min_completions, std::chrono::milliseconds timeout) noexcept override {
    if (closed_) return -ENOTCONN;
    int done = 0;
    while (!pending_.empty()) {
      HostCommand* cmd = pending_.front();
      pending_.erase(pending_.begin());
      if (drop_opcode && cmd->sqe.hdr.opcode == *drop_opcode) {
        dropped_.push_back(cmd);
        continue;
      }
      if (cmd->sqe.hdr.fuse() == p::FusedOperation::first && !pending_.empty() &&
          pending_.front()->sqe.hdr.fuse() == p::FusedOperation::second) {
        HostCommand* second = pending_.front();
        pending_.erase(pending_.begin());
        done += run_fused(*cmd, *second);
        continue;
      }
      answer(*cmd, target_.handle(opts_.qid, cntlid_, *cmd));
      ++done;
    }
    if (done == 0 && min_completions > 0) std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(5)));
    return done;
  }
  static void answer(HostCommand& cmd, p::Cqe cqe) noexcept {
    cqe.cid = cmd.sqe.hdr.cid;
    cmd.on_complete(cmd, cqe);
  }
  // Compare, then the Write only if it matched; a miscompare aborts the Write (Failed Fused).
  int run_fused(HostCommand& cmp, HostCommand& wr) noexcept {
    p::Cqe c = target_.handle(opts_.qid, cntlid_, cmp);
    p::Cqe w = c;
    if (c.get_status().ok()) {
      w = target_.handle(opts_.qid, cntlid_, wr);
    } else {
      w.set_status(p::status::aborted_failed_fused);
    }
    answer(cmp, c);
    answer(wr, w);
    return 2;
  }
  unsigned outstanding() const noexcept override { return static_cast<unsigned>(pending_.size() + dropped_.size()); }
  uint16_t entries() const noexcept override { return opts_.entries; }
  uint32_t max_transfer() const noexcept override { return 0; }
  void set_in_capsule_limit(uint32_t bytes) noexcept override { opts_.in_capsule_limit = bytes; }
  const transport::TransportAddress& address() const noexcept override { return opts_.address; }
  void close() noexcept override {
    closed_ = true;
    pending_.clear();
    dropped_.clear();
  }
  // A fused pair stays adjacent in the queue; poll() runs it as the target does (fused.cpp).
  p::Status submit_fused(HostCommand& first, HostCommand& second) noexcept override {
    if (closed_) return p::status::transient_transport_error;
    if (pending_.size() + 2 > opts_.entries) return p::status::command_interrupted;
    (void)submit(first);
    (void)submit(second);
    return p::status::success;
  }
  std::optional<uint8_t> drop_opcode;  // never answer commands with this opcode

 private:
  FakeTarget& target_;
  transport::HostQueueOptions opts_;
  std::vector<HostCommand*> pending_;
  std::vector<HostCommand*> dropped_;
  uint16_t next_cid_ = 1;
  uint16_t cntlid_ = 0;
  bool closed_ = false;
};

// A connector that makes FakeHostQueues on `target`; records every queue's options.
struct FakeConnector {
  explicit FakeConnector(FakeTarget* t) : target(t) {}
  FakeTarget* target;
  std::shared_ptr<std::vector<transport::HostQueueOptions>> seen = std::make_shared<std::vector<transport::HostQueueOptions>>();
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  std::optional<uint8_t> drop_opcode;
  bool refuse = false;
  Result<std::unique_ptr<transport::HostQueue>> operator()(const transport::HostQueueOptions& o) const {
    {
      std::lock_guard lock(*mu);
      seen->push_back(o);
    }
    if (refuse) return make_error("Connection refused", ECONNREFUSED);
    auto q = std::make_unique<FakeHostQueue>(*target, o);
    q->drop_opcode = drop_opcode;
    return std::unique_ptr<transport::HostQueue>(std::move(q));
  }
};

inline p::DiscoveryLogEntry make_discovery_entry(const std::string& subnqn, const std::string& traddr,
                                                 const std::string& port, uint16_t portid) {
  p::DiscoveryLogEntry e{};
  e.trtype = 3;
  e.adrfam = 1;
  e.subtype = 2;
  e.treq = 0;
  e.portid.set(portid);
  e.cntlid.set(0xFFFF);
  e.asqsz.set(32);
  std::memcpy(e.trsvcid.data(), port.data(), port.size());
  std::memcpy(e.subnqn.data(), subnqn.data(), subnqn.size());
  std::memcpy(e.traddr.data(), traddr.data(), traddr.size());
  return e;
}

inline initiator::HostIdentity test_host() {
  initiator::HostIdentity h;
  h.hostnqn = "nqn.2014-08.org.nvmexpress:uuid:3fa85f64-5717-4562-b3fc-2c963f66afa6";
  h.hostid = *initiator::parse_uuid("3fa85f64-5717-4562-b3fc-2c963f66afa6");
  return h;
}

inline initiator::ControllerOptions test_options(FakeTarget& t, FakeConnector conn) {
  initiator::ControllerOptions o;
  o.address.traddr = "127.0.0.1";
  o.address.trsvcid = 4420;
  o.subnqn = t.subnqn;
  o.host = test_host();
  o.connector = conn;
  o.command_timeout = std::chrono::milliseconds(2000);
  return o;
}

}  // namespace rdmablk::testing

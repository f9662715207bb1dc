// End to end over NVMe/TCP on 127.0.0.1: the rdmablk initiator library and the `rdmablk bench` CLI against
// the real rdmablk-target binary. Data path: every backend, several queues, several jobs, reconnects.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "e2e_common.h"
#include "protocol/status.h"

namespace e2e {
namespace {

using rdmablk::initiator::Controller;
using rdmablk::initiator::IoQueue;
using rdmablk::transport::HostCommand;
namespace p = rdmablk::protocol;

constexpr uint64_t kNsBytes = 32ull << 20;

struct BackendCase {
  const char* name;
  const char* yaml;  // one namespace, nsid 1
  uint32_t block_size;
  bool stores_data;                 // null: no
  const char* file = nullptr;       // backing file, relative to the target's directory
};

const BackendCase kBackends[] = {
    {"ram", R"(      - nsid: 1
        backend: ram
        size: 32MiB
)",
     512, true},
    {"null", R"(      - nsid: 1
        backend: null
        size: 32MiB
        block_size: 4096
)",
     4096, false},
    {"file_direct", R"(      - nsid: 1
        backend: file
        path: ${DIR}/direct.img
        size: 32MiB
        direct: true
)",
     512, true, "direct.img"},
    {"file_buffered", R"(      - nsid: 1
        backend: file
        path: buffered.img
        size: 32MiB
        block_size: 4096
        direct: false
)",
     4096, true, "buffered.img"},
};

// gtest (and ctest's test names) print the case by its name.
void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.name; }

class Backends : public ::testing::TestWithParam<BackendCase> {};

// Extents (byte offset, length) written and read back: one block, in-capsule sizes, R2T-sized writes
// (above the 16 KiB in-capsule limit), a large transfer, and the namespace's last block.
std::vector<std::pair<uint64_t, uint32_t>> extents(uint32_t bs) {
  return {{0, bs}, {8192, 4096}, {1 << 20, 16384}, {3 << 20, 65536}, {5 << 20, 256 * 1024},
          {kNsBytes - bs, bs}};
}

TEST_P(Backends, DataWrittenThroughTheLibraryReadsBack) {
  const BackendCase& c = GetParam();
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(c.yaml)));

  auto ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn), t);
  ASSERT_TRUE(ctrl);
  const auto* ns = ctrl->find_namespace(1);
  ASSERT_NE(ns, nullptr);
  EXPECT_EQ(ns->block_size, c.block_size);
  EXPECT_EQ(ns->size_blocks * ns->block_size, kNsBytes);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(q);

  uint32_t seed = 1;
  std::vector<std::vector<uint8_t>> written;
  for (auto [off, len] : extents(c.block_size)) {
    auto data = pattern(len, seed++);
    auto w = write_blocks(*q, 1, off / c.block_size, c.block_size, data);
    ASSERT_TRUE(w) << "write at " << off << " (" << len << " bytes): " << w.error().message;
    written.push_back(std::move(data));
  }
  auto fl = flush(*q, 1);
  ASSERT_TRUE(fl) << fl.error().message;

  auto read_all_back = [&](const char* when) {
    std::size_t k = 0;
    for (auto [off, len] : extents(c.block_size)) {
      std::vector<uint8_t> back(len, 0xEE);
      auto r = read_blocks(*q, 1, off / c.block_size, c.block_size, back);
      ASSERT_TRUE(r) << when << ": read at " << off << ": " << r.error().message;
      if (c.stores_data) {
        EXPECT_TRUE(back == written[k]) << when << ": data mismatch at byte offset " << off;
      }
      ++k;
    }
  };
  read_all_back("after writes");

  // Write Zeroes over the second half of the 64 KiB extent (index 3), and a deallocating one over the
  // first 16 KiB of the 256 KiB extent (index 4): both read back as zeroes, the neighbours are untouched.
  if (c.stores_data) {
    auto zero_range = [&](std::size_t extent, uint32_t from, uint32_t bytes, bool deallocate) {
      const uint64_t off = extents(c.block_size)[extent].first + from;
      auto sqe = p::to_sqe(p::make_write_zeroes(0, 1, off / c.block_size, bytes / c.block_size, deallocate));
      auto z = q->execute(sqe, {}, rdmablk::transport::DataDirection::none);
      ASSERT_TRUE(z) << "write zeroes at " << off << ": " << z.error().message;
      std::fill_n(written[extent].begin() + from, bytes, uint8_t{0});
    };
    zero_range(3, 32768, 32768, false);
    zero_range(4, 0, 16384, true);
    ASSERT_TRUE(flush(*q, 1));
    read_all_back("after write zeroes");
  }

  // A range past the end is refused with LBA Out of Range and the queue goes on.
  std::vector<uint8_t> two(2 * c.block_size);
  auto bad = write_blocks(*q, 1, kNsBytes / c.block_size - 1, c.block_size, two);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("LBA Out of Range"), std::string::npos) << bad.error().message;
  std::vector<uint8_t> one(c.block_size);
  EXPECT_TRUE(read_blocks(*q, 1, 0, c.block_size, one));

  // The file holds exactly what was written (after the flush above), direct or buffered.
  if (c.file != nullptr) {
    std::ifstream f(t.dir() / c.file, std::ios::binary);
    ASSERT_TRUE(f) << "no backing file " << c.file;
    std::size_t i = 0;
    for (auto [off, len] : extents(c.block_size)) {
      std::vector<uint8_t> on_disk(len);
      f.seekg(static_cast<std::streamoff>(off));
      f.read(reinterpret_cast<char*>(on_disk.data()), len);
      EXPECT_TRUE(on_disk == written[i]) << c.file << " differs at byte offset " << off;
      ++i;
    }
  }

  q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());

  // The bench against the same namespace: verified writes where data is stored, plain I/O on null.
  std::string job = c.stores_data ? "[global]\nnamespace=1\nbs=4k\niodepth=16\n\n[verify]\nrw=randwrite\nsize=4m\n"
                                    "verify=crc32c\n"
                                  : "[global]\nnamespace=1\nbs=4k\niodepth=16\n\n[mixed]\nrw=randrw\nsize=4m\n";
  auto j = run_bench_json(t, std::string("bench-") + c.name, job);
  ASSERT_EQ(j["jobs"].size(), 1u);
  const auto& job0 = j["jobs"][0];
  EXPECT_EQ(job0["error"], 0) << job0.dump(2);
  const uint64_t rb = job0["read"]["io_bytes"], wb = job0["write"]["io_bytes"];
  if (c.stores_data) {
    EXPECT_EQ(wb, 4u << 20) << job0.dump(2);
    EXPECT_EQ(rb, 4u << 20) << "verify reads every written block back";
  } else {
    EXPECT_GT(rb + wb, 0u);
    EXPECT_EQ(rb + wb, 4u << 20) << job0.dump(2);
  }
  EXPECT_GT(job0["write"]["clat_ns"]["max"].get<uint64_t>(), 0u);
  EXPECT_TRUE(job0["write"]["clat_ns"].contains("percentile"));
}

INSTANTIATE_TEST_SUITE_P(E2e, Backends, ::testing::ValuesIn(kBackends),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

// Several I/O queues on one controller, all busy at once: each queue writes its own extents with several
// commands outstanding, then every extent is read back through a *different* queue.
TEST(TcpE2e, SeveralQueuesOnOneControllerInterleaved) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  constexpr uint16_t kQueues = 4;
  constexpr unsigned kPerQueue = 16;
  constexpr uint32_t kIo = 16384 + 4096;  // above the in-capsule limit: R2T on every write
  auto ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA, 120'000, kQueues), t);
  ASSERT_TRUE(ctrl);
  ASSERT_EQ(ctrl->granted_io_queues(), kQueues);
  std::vector<std::unique_ptr<IoQueue>> queues;
  for (uint16_t qid = 1; qid <= kQueues; ++qid) {
    queues.push_back(io_queue_or_fail(*ctrl, qid, 32));
    ASSERT_TRUE(queues.back());
  }

  struct Op {
    HostCommand cmd;
    bool done = false;
    p::Status status;
    std::vector<uint8_t> data;
  };
  auto on_done = [](HostCommand& cmd, const p::Cqe& cqe) noexcept {
    auto* op = static_cast<Op*>(cmd.context);
    op->done = true;
    op->status = cqe.get_status();
  };
  auto run_all = [&](std::vector<Op>& ops, bool write, unsigned queue_shift) {
    for (unsigned i = 0; i < ops.size(); ++i) {
      Op& op = ops[i];
      op.cmd = HostCommand{};
      op.cmd.on_complete = on_done;
      op.cmd.context = &op;
      IoQueue& q = *queues[(i / kPerQueue + queue_shift) % kQueues];
      const uint64_t slba = uint64_t{i} * (kIo / 512);
      auto st = write ? q.submit_write(op.cmd, 1, slba, kIo / 512, op.data)
                      : q.submit_read(op.cmd, 1, slba, kIo / 512, op.data);
      ASSERT_TRUE(st.ok()) << "submit " << i << ": " << rdmablk::initiator::describe_status(st);
    }
    auto deadline = std::chrono::steady_clock::now() + 60s;
    auto all_done = [&] { return std::all_of(ops.begin(), ops.end(), [](const Op& o) { return o.done; }); };
    while (!all_done() && std::chrono::steady_clock::now() < deadline) {
      for (auto& q : queues) ASSERT_GE(q->poll(0, 1ms), 0);
    }
    ASSERT_TRUE(all_done()) << "commands still outstanding after 60 s";
    for (unsigned i = 0; i < ops.size(); ++i) {
      EXPECT_TRUE(ops[i].status.ok()) << (write ? "write " : "read ") << i << ": "
                                      << rdmablk::initiator::describe_status(ops[i].status);
    }
  };

  std::vector<Op> writes(kQueues * kPerQueue), reads(kQueues * kPerQueue);
  for (unsigned i = 0; i < writes.size(); ++i) {
    writes[i].data = pattern(kIo, 100 + i);
    reads[i].data.assign(kIo, 0);
  }
  run_all(writes, true, 0);
  run_all(reads, false, 1);
  for (unsigned i = 0; i < writes.size(); ++i) {
    EXPECT_TRUE(reads[i].data == writes[i].data) << "extent " << i << " differs";
  }
  for (auto& q : queues) q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());
}

// NVMe/TCP header and data digests negotiated in ICReq/ICResp: in-capsule writes, R2T/H2CData writes and
// multi-PDU C2HData reads all carry CRC32C and the data arrives intact.
TEST(TcpE2e, HeaderAndDataDigests) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  auto opts = controller_options(t.io_port(), kSubnqn);
  opts.header_digest = true;
  opts.data_digest = true;
  auto ctrl = connect_or_fail(opts, t);
  ASSERT_TRUE(ctrl);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(q);
  uint64_t lba = 0;
  for (uint32_t len : {512u, 4096u, 16384u, 65536u, 512u * 1024u}) {
    auto data = pattern(len, len);
    std::vector<uint8_t> back(len);
    auto w = write_blocks(*q, 1, lba, 512, data);
    ASSERT_TRUE(w) << len << " bytes: " << w.error().message;
    auto r = read_blocks(*q, 1, lba, 512, back);
    ASSERT_TRUE(r) << len << " bytes: " << r.error().message;
    EXPECT_TRUE(back == data) << len << " bytes differ";
    lba += len / 512;
  }
  EXPECT_EQ(t.log().find("digest"), std::string::npos) << t.log();
  q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());
}

// Jobs in parallel, each with its own controller: numjobs=2 with offset_increment (disjoint regions,
// both verified) beside a time-based random reader.
TEST(TcpE2e, ParallelBenchJobsVerified) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  auto j = run_bench_json(t, "parallel", R"([global]
namespace=1
bs=4k
iodepth=8

[writers]
rw=randwrite
size=4m
numjobs=2
offset_increment=8m
verify=crc32c

[reader]
rw=randread
offset=24m
size=4m
runtime=1
time_based
)");
  ASSERT_EQ(j["jobs"].size(), 3u) << j.dump(2);
  unsigned writers = 0;
  for (const auto& job : j["jobs"]) {
    EXPECT_EQ(job["error"], 0) << job.dump(2);
    if (job["jobname"] == "writers") {
      ++writers;
      EXPECT_EQ(job["write"]["io_bytes"], 4u << 20);
      EXPECT_EQ(job["read"]["io_bytes"], 4u << 20);
    } else {
      EXPECT_EQ(job["jobname"], "reader");
      EXPECT_GT(job["read"]["io_bytes"].get<uint64_t>(), 0u);
      EXPECT_EQ(job["write"]["io_bytes"], 0u);
    }
  }
  EXPECT_EQ(writers, 2u);
}

// A verify job that reads a region nobody wrote must fail (the check is real), and say where.
TEST(TcpE2e, BenchVerifyDetectsWrongData) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  const auto job_path = t.dir() / "bad-verify.fio";
  write_file(job_path, "[check]\nnamespace=1\nrw=read\nbs=4k\nsize=64k\nverify=crc32c\n");
  auto r = run_process(bench_argv(t, job_path.string()), t.dir(), 120s);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_status, 1) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_NE(j["jobs"][0]["error"], 0);
  EXPECT_NE(r.err.find("offset"), std::string::npos) << r.err;
}

// Disconnect (Disconnect on the I/O queue, CC.SHN, close) and connect again: the data is still there on
// ram and file namespaces. After a target restart only the file keeps it.
TEST(TcpE2e, DisconnectAndReconnectKeepsData) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(R"(      - nsid: 1
        backend: ram
        size: 32MiB
      - nsid: 2
        backend: file
        path: ${DIR}/vol.img
        size: 32MiB
)")));
  const auto a = pattern(65536, 7), b = pattern(65536, 8);
  uint16_t first_cntlid = 0;
  {
    auto ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn), t);
    ASSERT_TRUE(ctrl);
    first_cntlid = ctrl->cntlid();
    auto q = io_queue_or_fail(*ctrl, 1);
    ASSERT_TRUE(q);
    auto aa = a, bb = b;
    ASSERT_TRUE(write_blocks(*q, 1, 100, 512, aa));
    ASSERT_TRUE(write_blocks(*q, 2, 100, 512, bb));
    ASSERT_TRUE(flush(*q, 2));
    q->disconnect();
    auto s = ctrl->shutdown();
    ASSERT_TRUE(s) << s.error().message;
  }
  // The target notices the host going away.
  EXPECT_TRUE(t.wait_for_log("admin queue closed")) << t.log();

  for (int round = 0; round < 2; ++round) {
    auto ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn), t);
    ASSERT_TRUE(ctrl);
    if (round == 0) {
      EXPECT_NE(ctrl->cntlid(), 0);
    }
    auto q = io_queue_or_fail(*ctrl, 1);
    ASSERT_TRUE(q);
    std::vector<uint8_t> ra(a.size()), rb(b.size());
    ASSERT_TRUE(read_blocks(*q, 1, 100, 512, ra));
    ASSERT_TRUE(read_blocks(*q, 2, 100, 512, rb));
    EXPECT_TRUE(ra == a) << "ram namespace lost data across reconnect (round " << round << ")";
    EXPECT_TRUE(rb == b) << "file namespace lost data across reconnect (round " << round << ")";
    // Round 1 tears down without a clean shutdown: just closing the sockets.
    if (round == 0) {
      q->disconnect();
      ASSERT_TRUE(ctrl->shutdown());
    }
  }
  (void)first_cntlid;

  ASSERT_TRUE(t.stop());
  ASSERT_TRUE(t.restart());
  auto ctrl = connect_or_fail(controller_options(t.io_port(), kSubnqn), t);
  ASSERT_TRUE(ctrl);
  auto q = io_queue_or_fail(*ctrl, 1);
  ASSERT_TRUE(q);
  std::vector<uint8_t> ra(a.size()), rb(b.size());
  ASSERT_TRUE(read_blocks(*q, 1, 100, 512, ra));
  ASSERT_TRUE(read_blocks(*q, 2, 100, 512, rb));
  EXPECT_TRUE(rb == b) << "file namespace lost data across a target restart";
  EXPECT_FALSE(ra == a) << "ram namespace kept data across a restart?";
  q->disconnect();
  EXPECT_TRUE(ctrl->shutdown());
}

}  // namespace
}  // namespace e2e

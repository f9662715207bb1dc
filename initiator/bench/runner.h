// Runs fio job files against NVMe-oF namespaces.
//
// Model (documented choice): every job (each numjobs copy too) runs on its own thread with its own
// controller connection (admin queue + one I/O queue, qid 1). The job thread owns both queues, keeps the
// I/O queue at iodepth, and sends keep-alives from the same poll loop, so nothing is shared between
// threads but progress counters (and, with fio's flow=, one counter per flow_id). Groups (stonewall,
// new_group) run one after the other; the jobs of a group run in parallel; wait_for holds a job until the
// named one has finished. A job's I/O sizes must be multiples of the namespace block size and fit the
// controller's transfer limit (MDTS); the runner does not split I/O.
//
// What each I/O is (direction, offset, length) comes from IoGenerator (workload.h), when it may be
// issued from the RateLimiter, think time, flow control and the iodepth_batch/iodepth_low/latency_target
// depth rules. Without time_based a job stops after io_size (default: the region's size) bytes or
// number_ios I/Os per loop, or at runtime; loops=N repeats that. ramp_time: I/O runs but is not counted;
// runtime starts after the ramp.
//
// verify=KIND: write jobs fill every block with a self-checking pattern (verify.h) and, with
// do_verify (the default), read back every block they wrote when the loop ends (or after every
// verify_backlog writes) and check it; the verify reads count as reads. Read jobs, and verify_only, check
// every block read against the pattern whoever wrote it. A mismatch fails the job (error EILSEQ) with
// the byte offset. fsync=N sends a Flush after every N writes; end_fsync one at the end.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "initiator/bench/job_file.h"
#include "initiator/bench/report.h"
#include "initiator/host/controller.h"

namespace rdmablk::initiator::bench {

struct ConnectionDefaults {
  std::optional<transport::TransportAddress> address;  // -t/-a/-s
  std::optional<std::string> subnqn;                   // -n
  HostIdentity host;
  uint32_t kato_ms = 5000;
  bool header_digest = false;
  bool data_digest = false;
  DhchapSettings dhchap;  // -S/-C: used when a controller requires authentication
  TlsSettings tls;        // --tls-key: NVMe/TCP over TLS 1.3 on every queue
  QueueConnector connector;
};

struct RunnerOptions {
  ConnectionDefaults connection;
  bool progress = false;          // a live progress line (only on a terminal)
  std::FILE* progress_out = stderr;
};

// Runs the jobs of `file` group by group and returns one result per job (in file order). Job failures
// (connection, NVMe errors, verify mismatches, log files that cannot be written) are in the results; the
// error is for a job file that names no target.
Result<std::vector<JobResult>> run_bench(const JobFile& file, const RunnerOptions& opts);

// What would run, one line per job in fio's start-up format
// ("NAME: (g=0): rw=randread, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=rdmablk, iodepth=16"),
// then the number of jobs and groups.
std::string describe_jobs(const JobFile& file);

}  // namespace rdmablk::initiator::bench

// Runs fio job files against NVMe-oF namespaces.
//
// Model (documented choice): every job (each numjobs copy too) runs on its own thread with its own
// controller connection (admin queue + one I/O queue, qid 1). The job thread owns both queues, keeps the
// I/O queue at iodepth, and sends keep-alives from the same poll loop, so nothing is shared between
// threads but progress counters. A job's I/O size (bs) must be a multiple of the namespace block size and
// fit the controller's transfer limit (MDTS); the runner does not split I/O.
//
// Offsets: sequential jobs walk [offset, offset + size) in bs steps and wrap; random jobs visit every
// bs-aligned block of the region once per pass in a pseudo-random order (fio's random map) and start a
// new pass after that. Without time_based a job stops after one pass (size bytes) or at runtime.
// ramp_time: I/O runs but is not counted; runtime starts after the ramp.
//
// verify=crc32c: write/randwrite jobs write every block once with a self-describing pattern (see
// bench_verify.h), then read back every block that completed and check it (fio's write-then-verify);
// the verify reads count as reads. read/randread jobs check every block read against the pattern
// (whoever wrote it). A mismatch fails the job (error EILSEQ) with the byte offset.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "initiator/bench_job.h"
#include "initiator/bench_report.h"
#include "initiator/controller.h"

namespace rdmablk::initiator::bench {

struct ConnectionDefaults {
  std::optional<transport::TransportAddress> address;  // -t/-a/-s
  std::optional<std::string> subnqn;                   // -n
  HostIdentity host;
  uint32_t kato_ms = 5000;
  bool header_digest = false;
  bool data_digest = false;
  QueueConnector connector;
};

struct RunnerOptions {
  ConnectionDefaults connection;
  bool progress = false;          // a live progress line (only on a terminal)
  std::FILE* progress_out = stderr;
};

// Runs every job of `file` in parallel and returns one result per job (in file order). Job failures
// (connection, NVMe errors, verify mismatches) are in the results; the error is for a job file that
// names no target.
Result<std::vector<JobResult>> run_bench(const JobFile& file, const RunnerOptions& opts);

}  // namespace rdmablk::initiator::bench

// Shared pieces of the end-to-end tests: config templates, connecting with the library, running the bench.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "initiator/host/controller.h"
#include "support/target_process.h"

namespace e2e {

// Two listeners on 127.0.0.1 (io + discovery), `reactors` reactors, one subsystem open to any host with the
// namespaces given (YAML list items indented by 6 spaces).
inline std::string config_with_namespaces(const std::string& namespaces, const std::string& subsystem_extra = "",
                                          const std::string& top_extra = "", unsigned reactors = 2) {
  return R"(listeners:
  - transport: tcp
    address: 127.0.0.1
    port: ${IO_PORT}
  - transport: tcp
    address: 127.0.0.1
    port: ${DISC_PORT}
    role: discovery
reactors: )" + std::to_string(reactors) + "\n" + top_extra + R"(subsystems:
  - nqn: ${NQN}
)" + (subsystem_extra.empty() ? std::string("    allow_any_host: true\n") : subsystem_extra) +
         "    namespaces:\n" + namespaces;
}

inline const char* const kRamNamespace = R"(      - nsid: 1
        backend: ram
        size: 32MiB
)";

inline std::unique_ptr<rdmablk::initiator::Controller> connect_or_fail(const rdmablk::initiator::ControllerOptions& o,
                                                                       const TargetProcess& t) {
  auto c = rdmablk::initiator::Controller::connect(o);
  EXPECT_TRUE(c) << (c ? "" : c.error().message) << "\n--- target log ---\n" << t.log();
  return c ? std::move(*c) : nullptr;
}

inline std::unique_ptr<rdmablk::initiator::IoQueue> io_queue_or_fail(rdmablk::initiator::Controller& c, uint16_t qid,
                                                                     uint16_t entries = 32) {
  auto q = c.connect_io_queue(qid, entries);
  EXPECT_TRUE(q) << (q ? "" : q.error().message);
  return q ? std::move(*q) : nullptr;
}

// `rdmablk bench JOB -t tcp -a 127.0.0.1 -s PORT -n NQN -q HOST --hostid ID --kato 30 --output-format=json`
// KATO 30 s (the bench's default is 5): its Keep Alive every 15 s, so that neither the bench nor the target's
// reactor descheduled for a few seconds on a loaded machine costs the bench its controller.
inline std::vector<std::string> bench_argv(const TargetProcess& t, const std::string& job_path,
                                           const std::string& hostnqn = kHostA) {
  return {RDMABLK_CLI_BINARY, "bench", job_path, "-t", "tcp", "-a", "127.0.0.1", "-s",
          std::to_string(t.io_port()), "-n", kSubnqn, "-q", hostnqn, "--hostid",
          rdmablk::initiator::format_uuid(host_identity(hostnqn).hostid), "--kato", "30", "--output-format=json"};
}

// Runs a bench job and parses its JSON; fails the test (with everything printed) on a bad exit or output.
inline nlohmann::json run_bench_json(const TargetProcess& t, const std::string& name, const std::string& job_text,
                                     std::chrono::milliseconds timeout = 120s) {
  const auto job_path = t.dir() / (name + ".fio");
  write_file(job_path, job_text);
  auto r = run_process(bench_argv(t, job_path.string()), t.dir(), timeout);
  const std::string context = "bench " + name + ": exit " + std::to_string(r.exit_status) +
                              (r.timed_out ? " (timed out)" : "") + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err +
                              "\n--- target log ---\n" + t.log();
  EXPECT_FALSE(r.timed_out) << context;
  EXPECT_EQ(r.exit_status, 0) << context;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "bench output is not JSON\n" << context;
  if (j.is_discarded()) return nlohmann::json::object();
  EXPECT_TRUE(j.contains("jobs") && j["jobs"].is_array()) << context;
  return j;
}

}  // namespace e2e

#include "initiator/cli/attach_registry.h"

#include <fcntl.h>

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace rdmablk::initiator {

namespace fs = std::filesystem;

namespace {

fs::path record_path(int dev_id) { return fs::path(attachments_dir()) / fmt::format("ublkb{}.json", dev_id); }

// A record as written by write_attachment; nullopt for anything else (a foreign or damaged file).
std::optional<AttachmentRecord> read_record(const fs::path& p) {
  std::ifstream in(p);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    AttachmentRecord r;
    r.device = j.at("device").get<std::string>();
    r.dev_id = j.at("dev_id").get<int>();
    r.pid = j.at("pid").get<pid_t>();
    r.transport = j.value("transport", "");
    r.traddr = j.value("traddr", "");
    r.trsvcid = j.value("trsvcid", "");
    r.subnqn = j.value("subnqn", "");
    r.nsid = j.value("nsid", 0u);
    r.state = j.value("state", "");
    if (auto it = j.find("paths"); it != j.end() && it->is_array()) {
      for (const auto& pj : *it) {
        if (!pj.is_object()) continue;
        AttachmentPath ap;
        ap.transport = pj.value("transport", "");
        ap.traddr = pj.value("traddr", "");
        ap.trsvcid = pj.value("trsvcid", "");
        ap.state = pj.value("state", "");
        ap.ana = pj.value("ana_state", "");
        ap.in_use = pj.value("in_use", false);
        r.paths.push_back(std::move(ap));
      }
    }
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

nlohmann::ordered_json attachment_to_json(const AttachmentRecord& r) {
  nlohmann::ordered_json j = {{"device", r.device}, {"dev_id", r.dev_id},   {"pid", r.pid},
                              {"transport", r.transport}, {"traddr", r.traddr}, {"trsvcid", r.trsvcid},
                              {"subnqn", r.subnqn}, {"nsid", r.nsid},     {"state", r.state}};
  if (!r.paths.empty()) {
    j["paths"] = nlohmann::ordered_json::array();
    for (const auto& p : r.paths) {
      j["paths"].push_back({{"transport", p.transport},
                            {"traddr", p.traddr},
                            {"trsvcid", p.trsvcid},
                            {"state", p.state},
                            {"ana_state", p.ana},
                            {"in_use", p.in_use}});
    }
  }
  return j;
}

std::string format_attachment(const AttachmentRecord& r) {
  std::string out = fmt::format("{} pid {} {} traddr={},trsvcid={} {} nsid {} {}\n", r.device, r.pid, r.transport,
                                r.traddr, r.trsvcid, r.subnqn, r.nsid, r.state);
  for (const auto& p : r.paths) {
    out += fmt::format("  path {} traddr={},trsvcid={} {} ana {}{}\n", p.transport, p.traddr, p.trsvcid, p.state,
                       p.ana.empty() ? "none" : p.ana, p.in_use ? " (in use)" : "");
  }
  return out;
}

std::string run_dir() {
  const char* d = std::getenv("RDMABLK_RUN_DIR");
  return d && *d ? d : "/run/rdmablk";
}

std::string attachments_dir() { return (fs::path(run_dir()) / "ublk").string(); }

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  // A zombie still answers kill(pid, 0): it is gone for our purposes. /proc/PID/stat: "pid (comm) S ...".
  // Read with plain read(2): a process that exits while we read makes it fail with ESRCH, which
  // libstdc++'s filebuf turns into an exception even with exceptions masked.
  std::string s;
  int fd = ::open(fmt::format("/proc/{}/stat", pid).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (n <= 0) return false;
  s.assign(buf, static_cast<std::size_t>(n));
  auto close_paren = s.rfind(')');
  return close_paren == std::string::npos || close_paren + 2 >= s.size() || s[close_paren + 2] != 'Z';
}

Result<void> write_attachment(const AttachmentRecord& r) {
  if (r.dev_id < 0) return make_error(fmt::format("attachment record for {} has no device id", r.device));
  std::error_code ec;
  fs::create_directories(attachments_dir(), ec);
  if (ec) return make_error(fmt::format("cannot create {}: {}", attachments_dir(), ec.message()), ec.value());
  fs::path final_path = record_path(r.dev_id);
  // Readers never see a half-written record: write a dot-file (skipped by list) and rename it over.
  fs::path tmp = final_path.parent_path() / fmt::format(".{}.{}.tmp", final_path.filename().string(), ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << attachment_to_json(r).dump(2) << "\n";
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return make_error(fmt::format("cannot write {}", tmp.string()));
    }
  }
  fs::rename(tmp, final_path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return make_error(fmt::format("cannot rename {} to {}: {}", tmp.string(), final_path.string(), ec.message()),
                      ec.value());
  }
  return {};
}

void remove_attachment(int dev_id) {
  std::error_code ec;
  fs::remove(record_path(dev_id), ec);
}

std::vector<AttachmentRecord> list_attachments() {
  std::vector<AttachmentRecord> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(attachments_dir(), ec)) {
    std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.' || e.path().extension() != ".json") continue;
    auto r = read_record(e.path());
    if (!r) continue;
    if (!process_alive(r->pid)) {
      // Its process died without cleaning up (SIGKILL, crash): the device is gone with it.
      std::error_code ignored;
      fs::remove(e.path(), ignored);
      continue;
    }
    out.push_back(std::move(*r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.dev_id < b.dev_id; });
  return out;
}

std::vector<AttachmentRecord> matching_attachments(std::string_view device_or_nqn) {
  std::string device(device_or_nqn);
  if (device.rfind("/dev/", 0) != 0) device = "/dev/" + device;
  std::vector<AttachmentRecord> out;
  for (auto& r : list_attachments()) {
    if (r.device == device || r.subnqn == device_or_nqn) out.push_back(std::move(r));
  }
  return out;
}

Result<AttachmentRecord> find_attachment(std::string_view device_or_nqn) {
  auto all = matching_attachments(device_or_nqn);
  if (all.empty()) return make_error(fmt::format("no userspace (ublk) attachment for {}", device_or_nqn), ENOENT);
  return all.front();
}

Result<void> stop_attachment(const AttachmentRecord& r, std::chrono::milliseconds timeout) {
  if (r.pid <= 0) return make_error(fmt::format("attachment {} has no process id", r.device));
  if (::kill(r.pid, SIGTERM) != 0) {
    if (errno != ESRCH) {
      return make_error(fmt::format("cannot stop {} (pid {}): {}", r.device, r.pid, std::strerror(errno)), errno);
    }
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Reap it when it is our child (tests, or a caller that spawned it); ECHILD otherwise, harmless.
    (void)::waitpid(r.pid, nullptr, WNOHANG);
    if (!process_alive(r.pid)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      return make_error(fmt::format("{} (pid {}) did not stop within {} ms of SIGTERM", r.device, r.pid,
                                    timeout.count()),
                        ETIMEDOUT);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The process normally removes its record on exit; a record since rewritten by another process stays.
  auto on_disk = read_record(record_path(r.dev_id));
  if (on_disk && on_disk->pid == r.pid) remove_attachment(r.dev_id);
  return {};
}

}  // namespace rdmablk::initiator

#include "backend/rados_cluster.h"

#include <pthread.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace rdmablk::backend {

std::string rados_errstr(int err) { return std::strerror(err < 0 ? -err : err); }

AsyncSignalsBlocked::AsyncSignalsBlocked() {
  sigset_t set;
  sigfillset(&set);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) sigdelset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, &old_);
}

AsyncSignalsBlocked::~AsyncSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

namespace {

std::string conf_value(rados_t h, const char* option) {
  char buf[512] = {};
  if (rados_conf_get(h, option, buf, sizeof buf - 1) != 0) return {};
  return buf;
}

Result<std::shared_ptr<RadosCluster>> connect_cluster(const RadosOptions& o) {
  rados_t h = nullptr;
  const std::string name = "client." + o.client;
  int rc = rados_create2(&h, "ceph", name.c_str(), 0);
  if (rc < 0) return make_error(fmt::format("rados_create2({}): {}", name, rados_errstr(rc)), -rc);
  auto fail = [&](std::string msg, int err) {
    rados_shutdown(h);
    return make_error(std::move(msg), err < 0 ? -err : err);
  };
  rc = rados_conf_read_file(h, o.ceph_conf.c_str());
  if (rc < 0) return fail(fmt::format("cannot read the Ceph configuration {}: {}", o.ceph_conf, rados_errstr(rc)), rc);
  // CEPH_ARGS from the environment, like the ceph CLIs (after the file, before our own settings).
  rados_conf_parse_env(h, nullptr);
  if (!o.keyring.empty()) {
    rc = rados_conf_set(h, "keyring", o.keyring.c_str());
    if (rc < 0) return fail(fmt::format("keyring {}: {}", o.keyring, rados_errstr(rc)), rc);
  }
  // Our timeouts replace Ceph's defaults (mount 300 s, mon/osd ops: wait forever); a value the conf file or
  // CEPH_ARGS sets is kept.
  const std::string timeout = std::to_string(o.timeout_seconds == 0 ? 30 : o.timeout_seconds);
  for (auto [opt, ceph_default] : {std::pair{"client_mount_timeout", 300.0}, std::pair{"rados_mon_op_timeout", 0.0},
                                   std::pair{"rados_osd_op_timeout", 0.0}}) {
    const std::string current = conf_value(h, opt);
    if (!current.empty() && std::strtod(current.c_str(), nullptr) != ceph_default) continue;
    rc = rados_conf_set(h, opt, timeout.c_str());
    if (rc < 0) return fail(fmt::format("cannot set {}: {}", opt, rados_errstr(rc)), rc);
  }
  const std::string mount_timeout = conf_value(h, "client_mount_timeout");
  // A discard zeroes its whole range (by default librbd skips the parts smaller than its granularity).
  rados_conf_set(h, "rbd_skip_partial_discard", "false");
  std::string mon_host = conf_value(h, "mon_host");
  rc = rados_connect(h);
  if (rc < 0) {
    return fail(fmt::format("cannot reach the Ceph cluster: {} (mon_host {}, {} as {}, client_mount_timeout {} s)",
                            rados_errstr(rc), mon_host.empty() ? "unset" : mon_host, o.ceph_conf, name,
                            std::strtod(mount_timeout.c_str(), nullptr)),
                rc);
  }
  const bool cache = conf_value(h, "rbd_cache") != "false";
  return std::make_shared<RadosCluster>(h, std::move(mon_host), cache);
}

}  // namespace

Result<std::shared_ptr<RadosCluster>> shared_rados_cluster(const RadosOptions& o) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<RadosCluster>> clusters;
  const std::string key = o.ceph_conf + '\0' + o.client + '\0' + o.keyring;
  std::lock_guard lock(mu);
  if (auto it = clusters.find(key); it != clusters.end()) {
    if (auto c = it->second.lock()) return c;
  }
  auto c = connect_cluster(o);
  if (!c) return c;
  std::erase_if(clusters, [](const auto& kv) { return kv.second.expired(); });
  clusters[key] = *c;
  return c;
}


}  // namespace rdmablk::backend

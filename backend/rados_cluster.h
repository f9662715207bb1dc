// A Ceph cluster connection (librados, Debian 12: Ceph 16.2) shared by everything in the process that names
// the same (ceph_conf, client, keyring): rbd namespaces and the RADOS objects next to them, and gateway
// groups' state and leases (issue 28).
#pragma once

#include <rados/librados.h>
#include <signal.h>

#include <memory>
#include <string>

#include "protocol/result.h"

namespace rdmablk::backend {

struct RadosOptions {
  std::string ceph_conf = "/etc/ceph/ceph.conf";
  std::string client = "admin";  // cephx id (client.<id>)
  std::string keyring;           // empty: the conf's `keyring`
  // client_mount_timeout, rados_mon_op_timeout and rados_osd_op_timeout (unless the conf file or CEPH_ARGS
  // sets them): an unreachable cluster fails the connect after this long instead of hanging, and an
  // operation that gets no answer fails with -ETIMEDOUT.
  unsigned timeout_seconds = 30;
};

class RadosCluster {
 public:
  RadosCluster(rados_t handle, std::string mon_host, bool cache)
      : handle_(handle), mon_host_(std::move(mon_host)), cache_(cache) {}
  ~RadosCluster() { rados_shutdown(handle_); }
  RadosCluster(const RadosCluster&) = delete;
  RadosCluster& operator=(const RadosCluster&) = delete;

  rados_t handle() const noexcept { return handle_; }
  const std::string& mon_host() const noexcept { return mon_host_; }
  bool rbd_cache() const noexcept { return cache_; }

 private:
  rados_t handle_;
  std::string mon_host_;
  bool cache_;
};

// One connection per (conf, client, keyring) while anyone holds it; a new one otherwise. An unreachable
// cluster gives an error starting "cannot reach the Ceph cluster: ".
Result<std::shared_ptr<RadosCluster>> shared_rados_cluster(const RadosOptions& o);

// Threads librados / librbd start must never take the daemon's signals: SIGTERM and SIGHUP belong to its
// signalfd, and a thread with them unblocked would be killed by SIGTERM. The daemon blocks them only once
// its config is checked, and that check already connects to the cluster (whose connection may be reused,
// its threads with it). So every call that may start library threads runs with the asynchronous signals
// blocked; the threads inherit that mask. Faults (SIGSEGV, ...) stay unblocked.
class AsyncSignalsBlocked {
 public:
  AsyncSignalsBlocked();
  ~AsyncSignalsBlocked();
  AsyncSignalsBlocked(const AsyncSignalsBlocked&) = delete;
  AsyncSignalsBlocked& operator=(const AsyncSignalsBlocked&) = delete;

 private:
  sigset_t old_{};
};

// strerror of a (negative or positive) errno.
std::string rados_errstr(int err);

}  // namespace rdmablk::backend

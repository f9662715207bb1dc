// The registry of userspace (ublk) attachments: the `rdmablk attach --userspace` process serving a
// /dev/ublkbN writes one JSON record per device under ${RDMABLK_RUN_DIR:-/run/rdmablk}/ublk/ublkb<N>.json
// and removes it when it exits; `rdmablk list` and `rdmablk disconnect` read it, and stop an attachment by
// sending its process SIGTERM.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/result.h"

namespace rdmablk::initiator {

// One path of a multipath attachment.
struct AttachmentPath {
  std::string transport;
  std::string traddr;
  std::string trsvcid;
  std::string state;  // live, connecting, failed
  std::string ana;    // optimized, non-optimized, inaccessible, persistent-loss, change, none
  bool in_use = false;
};

struct AttachmentRecord {
  std::string device;  // /dev/ublkb0
  int dev_id = -1;     // ublk device id (the N of ublkbN)
  pid_t pid = 0;       // the process serving the device
  std::string transport;
  std::string traddr;
  std::string trsvcid;
  std::string subnqn;
  uint32_t nsid = 0;
  std::string state;  // live, reconnecting, failed
  // Several paths (attach -a A -a B): each with its state; transport/traddr/trsvcid above are the one
  // in use. Empty for a single-path attachment (and in records written before multipath).
  std::vector<AttachmentPath> paths;
};

// The record as JSON (what the registry file holds and `rdmablk list -o json` shows).
nlohmann::ordered_json attachment_to_json(const AttachmentRecord& r);
// `rdmablk list`'s lines for a record: one for the attachment, then one per path when it has several.
std::string format_attachment(const AttachmentRecord& r);

// ${RDMABLK_RUN_DIR:-/run/rdmablk}, and its ublk/ folder where the records are.
std::string run_dir();
std::string attachments_dir();

// Atomic (a temporary file renamed over the record), creating the folders.
Result<void> write_attachment(const AttachmentRecord& r);
void remove_attachment(int dev_id);

// Every record whose process is alive, sorted by dev_id; records of dead processes are deleted.
std::vector<AttachmentRecord> list_attachments();
// Live records for a device ("/dev/ublkb0" or "ublkb0") or a subsystem NQN.
std::vector<AttachmentRecord> matching_attachments(std::string_view device_or_nqn);
// The first of matching_attachments(); an error when there is none.
Result<AttachmentRecord> find_attachment(std::string_view device_or_nqn);

// SIGTERM to the record's process, then wait up to `timeout` until it is gone (reaping it when it is our
// child); the record is deleted. An error when the process could not be signalled or did not exit in time.
Result<void> stop_attachment(const AttachmentRecord& r, std::chrono::milliseconds timeout);

// Whether `pid` names a running process (not a zombie).
bool process_alive(pid_t pid);

}  // namespace rdmablk::initiator

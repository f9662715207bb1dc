// /dev/ublk-control: creating, starting, stopping and deleting ublk devices. Each command is an
// io_uring URING_CMD on the control device (128-byte SQEs: the command does not fit a normal SQE's
// 16 bytes), run synchronously. Newer kernels want ioctl-encoded opcodes, older ones the plain numbers:
// which one this kernel speaks is probed once with GET_FEATURES.
//
// One thread at a time (the attach process's main thread).
#pragma once

#include <liburing.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "initiator/ublk/uapi.h"
#include "protocol/result.h"

namespace rdmablk::initiator::ublk {

inline constexpr const char* kControlPath = "/dev/ublk-control";

// "/dev/ublkb3" / "/dev/ublkc3".
std::string block_device_path(uint32_t dev_id);
std::string char_device_path(uint32_t dev_id);
// "/dev/ublkb3", "ublkb3" -> 3.
Result<uint32_t> parse_block_device(const std::string& name);

class Control {
 public:
  // Fails with a message that says what to do when ublk is missing (no module, kernel < 6.0) or the
  // caller lacks the privilege.
  static Result<std::unique_ptr<Control>> open(const std::string& path = kControlPath);
  ~Control();
  Control(const Control&) = delete;
  Control& operator=(const Control&) = delete;

  // `want.dev_id` = UINT32_MAX lets the driver pick. Returns the device as created (its dev_id).
  Result<ublksrv_ctrl_dev_info> add_device(const ublksrv_ctrl_dev_info& want);
  Result<void> set_params(uint32_t dev_id, ublk_params params);
  // Blocks until every queue has fetched all its tags, then adds the disk (which reads the partition
  // table through the queues: they must be serving by then).
  Result<void> start(uint32_t dev_id, pid_t server_pid);
  // Removes the disk; waits for in-flight I/O, then the driver aborts the queues' fetch commands.
  Result<void> stop(uint32_t dev_id);
  // After the server closed /dev/ublkcN: frees the device number.
  Result<void> remove(uint32_t dev_id);
  Result<ublksrv_ctrl_dev_info> info(uint32_t dev_id);

  uint64_t features() const noexcept { return features_; }
  // Flags the driver must see on ADD_DEV for the I/O commands we send (ioctl-encoded opcodes).
  uint64_t io_flags() const noexcept { return ioctl_encode_ ? UBLK_F_CMD_IOCTL_ENCODE : 0; }
  bool ioctl_encoded() const noexcept { return ioctl_encode_; }

 private:
  Control(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  // Runs one control command; returns the CQE result (>= 0) or an error naming `what`.
  Result<int> run(const char* what, unsigned legacy_op, unsigned encoded_op, ublksrv_ctrl_cmd cmd);
  Result<void> run_void(const char* what, unsigned legacy_op, unsigned encoded_op, ublksrv_ctrl_cmd cmd);

  int fd_ = -1;
  std::string path_;
  io_uring ring_{};
  bool ring_ready_ = false;
  bool ioctl_encode_ = true;
  uint64_t features_ = 0;
};

}  // namespace rdmablk::initiator::ublk

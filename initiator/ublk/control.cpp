#include "initiator/ublk/control.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace rdmablk::initiator::ublk {

namespace {
// A command for `dev_id` (not for one queue), with an optional in/out buffer.
ublksrv_ctrl_cmd device_cmd(uint32_t dev_id, void* buffer = nullptr, std::size_t len = 0) {
  ublksrv_ctrl_cmd cmd{};
  cmd.dev_id = dev_id;
  cmd.queue_id = UINT16_MAX;
  cmd.addr = reinterpret_cast<uintptr_t>(buffer);
  cmd.len = static_cast<uint16_t>(len);
  return cmd;
}
}  // namespace

std::string block_device_path(uint32_t dev_id) { return fmt::format("/dev/ublkb{}", dev_id); }
std::string char_device_path(uint32_t dev_id) { return fmt::format("/dev/ublkc{}", dev_id); }

Result<uint32_t> parse_block_device(const std::string& name) {
  std::string_view s = name;
  if (s.starts_with("/dev/")) s.remove_prefix(5);
  if (!s.starts_with("ublkb")) return make_error(fmt::format("'{}' is not a ublk block device (/dev/ublkbN)", name));
  s.remove_prefix(5);
  uint32_t id = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) {
    return make_error(fmt::format("'{}' is not a ublk block device (/dev/ublkbN)", name));
  }
  return id;
}

Result<std::unique_ptr<Control>> Control::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ENODEV || e == ENXIO) {
      return make_error(fmt::format("ublk is not available: {} is missing (load the ublk_drv module, Linux 6.0 or "
                                    "later; or attach through the kernel NVMe-oF host with `rdmablk connect`)",
                                    path),
                        e);
    }
    if (e == EACCES || e == EPERM) {
      return make_error(fmt::format("cannot open {}: {} (creating a ublk device needs root or CAP_SYS_ADMIN)", path,
                                    std::strerror(e)),
                        e);
    }
    return make_error(fmt::format("cannot open {}: {}", path, std::strerror(e)), e);
  }
  std::unique_ptr<Control> c(new Control(fd, path));
  int rc = io_uring_queue_init(4, &c->ring_, IORING_SETUP_SQE128);
  if (rc < 0) return make_error(fmt::format("io_uring with 128-byte SQEs (Linux 5.19+): {}", std::strerror(-rc)), -rc);
  c->ring_ready_ = true;
  // GET_FEATURES exists since 6.5 and only ioctl-encoded; an older driver refuses it: plain opcodes then.
  uint64_t features = 0;
  auto got = c->run("GET_FEATURES", 0, UBLK_U_CMD_GET_FEATURES, device_cmd(UINT32_MAX, &features, sizeof(features)));
  if (got) {
    c->features_ = features;
    c->ioctl_encode_ = (features & UBLK_F_CMD_IOCTL_ENCODE) != 0;
  } else {
    c->ioctl_encode_ = false;
  }
  return c;
}

Control::~Control() {
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (fd_ >= 0) ::close(fd_);
}

Result<int> Control::run(const char* what, unsigned legacy_op, unsigned encoded_op, ublksrv_ctrl_cmd cmd) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) return make_error(fmt::format("ublk {}: no submission slot", what), EBUSY);
  std::memset(sqe, 0, 2 * sizeof(*sqe));  // SQE128: the command area runs into the second half
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd_;
  sqe->cmd_op = ioctl_encode_ || legacy_op == 0 ? encoded_op : legacy_op;
  static_assert(sizeof(cmd) <= 80, "ublksrv_ctrl_cmd must fit the SQE128 command area");
  std::memcpy(sqe->cmd, &cmd, sizeof(cmd));
  int rc = io_uring_submit(&ring_);
  if (rc < 0) return make_error(fmt::format("ublk {}: io_uring_submit: {}", what, std::strerror(-rc)), -rc);
  io_uring_cqe* cqe = nullptr;
  do {
    rc = io_uring_wait_cqe(&ring_, &cqe);
  } while (rc == -EINTR);
  if (rc < 0) return make_error(fmt::format("ublk {}: io_uring_wait_cqe: {}", what, std::strerror(-rc)), -rc);
  int res = cqe->res;
  io_uring_cqe_seen(&ring_, cqe);
  if (res < 0) return make_error(fmt::format("ublk {} on {}: {}", what, path_, std::strerror(-res)), -res);
  return res;
}

Result<void> Control::run_void(const char* what, unsigned legacy_op, unsigned encoded_op, ublksrv_ctrl_cmd cmd) {
  auto r = run(what, legacy_op, encoded_op, cmd);
  if (!r) return tl::unexpected(r.error());
  return {};
}

Result<ublksrv_ctrl_dev_info> Control::add_device(const ublksrv_ctrl_dev_info& want) {
  ublksrv_ctrl_dev_info info = want;
  auto r = run("ADD_DEV", UBLK_CMD_ADD_DEV, UBLK_U_CMD_ADD_DEV, device_cmd(want.dev_id, &info, sizeof(info)));
  if (!r) return tl::unexpected(r.error());
  return info;
}

Result<void> Control::set_params(uint32_t dev_id, ublk_params params) {
  params.len = sizeof(params);
  return run_void("SET_PARAMS", UBLK_CMD_SET_PARAMS, UBLK_U_CMD_SET_PARAMS, device_cmd(dev_id, &params, sizeof(params)));
}

Result<void> Control::start(uint32_t dev_id, pid_t server_pid) {
  ublksrv_ctrl_cmd cmd = device_cmd(dev_id);
  cmd.data[0] = static_cast<uint64_t>(server_pid);
  return run_void("START_DEV", UBLK_CMD_START_DEV, UBLK_U_CMD_START_DEV, cmd);
}

Result<void> Control::stop(uint32_t dev_id) {
  return run_void("STOP_DEV", UBLK_CMD_STOP_DEV, UBLK_U_CMD_STOP_DEV, device_cmd(dev_id));
}

Result<void> Control::remove(uint32_t dev_id) {
  return run_void("DEL_DEV", UBLK_CMD_DEL_DEV, UBLK_U_CMD_DEL_DEV, device_cmd(dev_id));
}

Result<ublksrv_ctrl_dev_info> Control::info(uint32_t dev_id) {
  ublksrv_ctrl_dev_info info{};
  auto r = run("GET_DEV_INFO", UBLK_CMD_GET_DEV_INFO, UBLK_U_CMD_GET_DEV_INFO, device_cmd(dev_id, &info, sizeof(info)));
  if (!r) return tl::unexpected(r.error());
  return info;
}

}  // namespace rdmablk::initiator::ublk

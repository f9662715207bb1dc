// The ublk (userspace block device, drivers/block/ublk_drv.c) kernel interface. Debian 12 ships the
// Linux 6.1 header, which lacks what later kernels added: the ioctl-encoded command opcodes (6.3+; the
// only ones a kernel built without CONFIG_BLKDEV_UBLK_LEGACY_OPCODES accepts) and GET_FEATURES (6.5+).
// The values below are the kernel ABI and must not change; each is defined only where the header has none.
#pragma once

#include <linux/ublk_cmd.h>
#include <sys/ioctl.h>

#ifndef UBLK_U_CMD_GET_DEV_INFO
#define UBLK_U_CMD_GET_DEV_INFO _IOR('u', UBLK_CMD_GET_DEV_INFO, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_ADD_DEV _IOWR('u', UBLK_CMD_ADD_DEV, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_DEL_DEV _IOWR('u', UBLK_CMD_DEL_DEV, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_START_DEV _IOWR('u', UBLK_CMD_START_DEV, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_STOP_DEV _IOWR('u', UBLK_CMD_STOP_DEV, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_SET_PARAMS _IOWR('u', UBLK_CMD_SET_PARAMS, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_GET_FEATURES
#define UBLK_U_CMD_GET_FEATURES _IOR('u', 0x13, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_IO_FETCH_REQ
#define UBLK_U_IO_FETCH_REQ _IOWR('u', UBLK_IO_FETCH_REQ, struct ublksrv_io_cmd)
#define UBLK_U_IO_COMMIT_AND_FETCH_REQ _IOWR('u', UBLK_IO_COMMIT_AND_FETCH_REQ, struct ublksrv_io_cmd)
#endif
#ifndef UBLK_F_CMD_IOCTL_ENCODE
#define UBLK_F_CMD_IOCTL_ENCODE (1ULL << 6)
#endif

namespace rdmablk::initiator::ublk {

// Where the queue's descriptor array is mmap()ed from /dev/ublkcN: one slot per queue, each sized for
// the largest possible queue depth and rounded to pages (ublk_drv's ublk_ch_mmap()).
constexpr unsigned kMaxQueueDepth = UBLK_MAX_QUEUE_DEPTH;

}  // namespace rdmablk::initiator::ublk

// Opening the file or block device behind a `file` namespace (file_open.cpp): create it when missing and
// sized, check or extend its size, read a device's geometry, and choose O_DIRECT where the file system and
// the block size allow it. The io_uring queues over it are file_backend.cpp's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "backend/backend.h"

namespace rdmablk::backend {

std::string errstr(int err);

struct BackingFile {
  int fd = -1;                // open, O_DIRECT when `direct`; the caller owns it
  bool block_device = false;
  dev_t rdev = 0;             // block devices: the device number
  bool direct = false;
  Geometry geo;               // block size, block count and buffer alignment (capabilities are the caller's)
};

// Error: the path cannot serve `opts` (message names the path and the reason); nothing is left open.
Result<BackingFile> open_backing_file(const FileOptions& opts);

// "write back" / "write through" from sysfs for a block device; true (volatile) when unknown.
bool device_write_cache_volatile(dev_t rdev);

}  // namespace rdmablk::backend

#include "backend/file_open.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "backend/request_check.h"

namespace rdmablk::backend {

std::string errstr(int err) { return std::strerror(err); }

namespace {

// Direct-I/O alignment of an open file: {offset alignment, memory alignment}; {0, 0} when the file
// system reports that it cannot do direct I/O; nullopt when the kernel does not say.
struct DioAlign {
  bool known = false;
  uint32_t offset = 0;
  uint32_t memory = 0;
};

DioAlign dio_alignment(int fd) {
  struct statx stx {};
  DioAlign a;
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) != 0 || (stx.stx_mask & STATX_DIOALIGN) == 0) return a;
  // glibc 2.36's struct statx predates the fields: stx_dio_mem_align and stx_dio_offset_align are the
  // two 32-bit words at offset 0x98 (after stx_mnt_id at 0x90).
  static_assert(sizeof(stx) >= 0xA0);
  uint32_t words[2];
  std::memcpy(words, reinterpret_cast<const char*>(&stx) + 0x98, sizeof(words));
  a.known = true;
  a.memory = words[0];
  a.offset = words[1];
  return a;
}

}  // namespace

bool device_write_cache_volatile(dev_t rdev) {
  std::ifstream f(fmt::format("/sys/dev/block/{}:{}/queue/write_cache", major(rdev), minor(rdev)));
  std::string mode;
  if (f && std::getline(f, mode)) return mode.find("through") == std::string::npos;
  return true;
}

namespace {

// fsync of the directory holding `path`, so that a file created there survives a power loss. A file
// system that cannot sync a directory (some network and FUSE ones say EINVAL) gets a warning.
void sync_parent_directory(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || ::fsync(dfd) != 0)
    spdlog::warn("{}: cannot sync the directory {} after creating the file ({}): a power loss soon after may lose it",
                 path, dir, errstr(errno));
  if (dfd >= 0) ::close(dfd);
}


// A missing file, created sparse at the configured size and made durable with its directory entry; `sb`
// then describes it.
Result<void> create_file(const FileOptions& opts, struct stat& sb) {
  const std::string& path = opts.path;
  if (opts.read_only)
    return make_error(fmt::format("{}: does not exist (a read-only namespace is never created)", path), ENOENT);
  if (opts.size == 0)
    return make_error(fmt::format("{}: does not exist and no size was given to create it", path), ENOENT);
  const uint32_t bs = opts.block_size != 0 ? opts.block_size : 512;
  if (opts.size % bs != 0)
    return make_error(fmt::format("{}: size {} is not a multiple of the block size {}", path, opts.size, bs), EINVAL);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    return make_error(fmt::format("{}: cannot create: {}", path, errstr(e)), e);
  }
  if (::ftruncate(fd, static_cast<off_t>(opts.size)) != 0 || ::fstat(fd, &sb) != 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return make_error(fmt::format("{}: cannot size the new file to {} bytes: {}", path, opts.size, errstr(e)), e);
  }
  // The new file and its name durable before any host writes to it: a Flush is fdatasync of the file,
  // which need not persist the directory entry (fsync(2): "an explicit fsync() on a file descriptor for
  // the directory is also needed"; ext2 and vfat, for two, do not), so a power loss could take the whole
  // file, flushed data included, and the next start would quietly create an empty one.
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return make_error(fmt::format("{}: cannot sync the new file: {}", path, errstr(e)), e);
  }
  ::close(fd);
  sync_parent_directory(path);
  spdlog::info("{}: created a sparse file of {} bytes", path, opts.size);
  return {};
}

// A block device's block size and the bytes to serve; `device_lbs` is its logical block size.
Result<uint64_t> device_bytes(const FileOptions& opts, int fd, uint32_t& device_lbs) {
  const std::string& path = opts.path;
  int lbs = 0;
  uint64_t dev_bytes = 0;
  if (::ioctl(fd, BLKSSZGET, &lbs) != 0 || ::ioctl(fd, BLKGETSIZE64, &dev_bytes) != 0) {
    const int err = errno;
    return make_error(fmt::format("{}: cannot read the device geometry: {}", path, errstr(err)), err);
  }
  device_lbs = static_cast<uint32_t>(lbs);
  const uint32_t bs = opts.block_size != 0 ? opts.block_size : device_lbs;
  if (bs < device_lbs)
    return make_error(
        fmt::format("{}: block size {} is smaller than the device's logical block size {}", path, bs, device_lbs),
        EINVAL);
  if (opts.size == 0) {
    const uint64_t bytes = dev_bytes / bs * bs;
    if (bytes != dev_bytes)
      spdlog::warn("{}: device size {} is not a multiple of the block size {}; serving {} bytes", path, dev_bytes, bs,
                   bytes);
    return bytes;
  }
  if (opts.size % bs != 0)
    return make_error(fmt::format("{}: size {} is not a multiple of the block size {}", path, opts.size, bs), EINVAL);
  if (opts.size > dev_bytes)
    return make_error(fmt::format("{}: size {} is larger than the device ({} bytes)", path, opts.size, dev_bytes),
                      EINVAL);
  return opts.size;
}

// A regular file's bytes to serve: its size, or the configured one (a smaller file is extended sparse unless
// it was just created or is read-only).
Result<uint64_t> file_bytes(const FileOptions& opts, int fd, uint64_t file_size, bool created) {
  const std::string& path = opts.path;
  const uint32_t bs = opts.block_size != 0 ? opts.block_size : 512;
  if (opts.size == 0) {
    if (file_size == 0) return make_error(fmt::format("{}: the file is empty and no size was given", path), EINVAL);
    if (file_size % bs != 0)
      return make_error(fmt::format("{}: file size {} is not a multiple of the block size {}", path, file_size, bs),
                        EINVAL);
    return file_size;
  }
  if (opts.size % bs != 0)
    return make_error(fmt::format("{}: size {} is not a multiple of the block size {}", path, opts.size, bs), EINVAL);
  if (file_size < opts.size && !created) {
    if (opts.read_only)
      return make_error(fmt::format("{}: the file has {} bytes, less than the configured size {}, and is read-only",
                                    path, file_size, opts.size),
                        EINVAL);
    if (::ftruncate(fd, static_cast<off_t>(opts.size)) != 0) {
      const int err = errno;
      return make_error(
          fmt::format("{}: cannot extend from {} to {} bytes: {}", path, file_size, opts.size, errstr(err)), err);
    }
    spdlog::info("{}: extended (sparse) from {} to the configured {} bytes", path, file_size, opts.size);
  }
  return opts.size;
}

// O_DIRECT where the file system and the block size allow it: reopens `f.fd` so, or warns and stays buffered.
void try_direct(const FileOptions& opts, int access, uint32_t device_lbs, BackingFile& f) {
  const DioAlign dio = dio_alignment(f.fd);
  std::string why;
  const uint32_t offset_align = dio.known ? dio.offset : (f.block_device ? device_lbs : 512u);
  const uint32_t mem_align = dio.known ? dio.memory : 4096u;
  if (dio.known && dio.offset == 0) {
    why = "the file system does not support direct I/O";
  } else if (f.geo.block_size % offset_align != 0) {
    why = fmt::format("block size {} is not a multiple of the direct-I/O alignment {}", f.geo.block_size, offset_align);
  } else {
    const int dfd = ::open(opts.path.c_str(), access | O_CLOEXEC | O_DIRECT);
    if (dfd >= 0) {
      ::close(f.fd);
      f.fd = dfd;
      f.direct = true;
      f.geo.buf_alignment = std::max(mem_align, 1u);
    } else {
      why = fmt::format("open with O_DIRECT failed: {}", errstr(errno));
    }
  }
  if (!f.direct) spdlog::warn("{}: using buffered I/O instead of O_DIRECT: {}", opts.path, why);
}

}  // namespace

Result<BackingFile> open_backing_file(const FileOptions& opts) {
  const std::string& path = opts.path;
  if (path.empty()) return make_error("file backend: no path given", EINVAL);
  if (opts.block_size != 0 && !detail::valid_block_size(opts.block_size))
    return make_error(fmt::format("{}: block size {} is not a power of two in [512, 65536]", path, opts.block_size),
                      EINVAL);
  struct stat sb {};
  bool created = false;
  if (::stat(path.c_str(), &sb) != 0) {
    const int err = errno;
    if (err != ENOENT) return make_error(fmt::format("{}: cannot stat: {}", path, errstr(err)), err);
    if (auto c = create_file(opts, sb); !c) return tl::unexpected(c.error());
    created = true;
  }
  BackingFile f;
  f.block_device = S_ISBLK(sb.st_mode);
  f.rdev = sb.st_rdev;
  if (!f.block_device && !S_ISREG(sb.st_mode))
    return make_error(fmt::format("{}: not a regular file or a block device", path), EINVAL);
  const int access = opts.read_only ? O_RDONLY : O_RDWR;
  f.fd = ::open(path.c_str(), access | O_CLOEXEC);
  if (f.fd < 0) {
    const int err = errno;
    if (err == EROFS || err == EACCES || err == EPERM)
      return make_error(
          fmt::format("{}: cannot open for writing ({}); configure the namespace read-only", path, errstr(err)), err);
    return make_error(fmt::format("{}: cannot open: {}", path, errstr(err)), err);
  }
  uint32_t device_lbs = 0;  // block devices: the logical block size
  auto bytes = f.block_device ? device_bytes(opts, f.fd, device_lbs)
                              : file_bytes(opts, f.fd, static_cast<uint64_t>(sb.st_size), created);
  if (!bytes) {
    ::close(f.fd);
    return tl::unexpected(bytes.error());
  }
  f.geo.block_size = opts.block_size != 0 ? opts.block_size : (f.block_device ? device_lbs : 512u);
  f.geo.num_blocks = *bytes / f.geo.block_size;
  if (opts.direct) try_direct(opts, access, device_lbs, f);
  return f;
}

}  // namespace rdmablk::backend

// Durable whole-file replacement (durable_file.h).
#include "target/reservations/durable_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace rdmablk::target {

namespace fs = std::filesystem;

namespace {

std::string errstr(int err) { return std::strerror(err); }

// Closes on every path out, so an error return never leaks the descriptor.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }
  // close(2) reports a deferred write error (NFS, some FUSE file systems): the caller checks it.
  int close() noexcept {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

Result<void> write_all(int fd, std::span<const uint8_t> bytes, const fs::path& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(fmt::format("writing {}: {}", path.string(), errstr(errno)), errno);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return {};
}

}  // namespace

Result<void> fsync_dir(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0)
    return make_error(fmt::format("syncing directory {}: {}", dir.string(), errstr(errno)), errno);
  return {};
}

Result<void> replace_file_durably(const fs::path& path, std::span<const uint8_t> bytes) {
  const fs::path dir = path.parent_path();
  const fs::path tmp = path.string() + ".tmp";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(fmt::format("creating {}: {}", dir.string(), ec.message()), ec.value());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd.get() < 0) return make_error(fmt::format("creating {}: {}", tmp.string(), errstr(errno)), errno);
  auto written = write_all(fd.get(), bytes, tmp);
  if (written && ::fsync(fd.get()) != 0)
    written = make_error(fmt::format("syncing {}: {}", tmp.string(), errstr(errno)), errno);
  if (written && fd.close() != 0)
    written = make_error(fmt::format("closing {}: {}", tmp.string(), errstr(errno)), errno);
  if (written && ::rename(tmp.c_str(), path.c_str()) != 0)
    written = make_error(fmt::format("renaming {} to {}: {}", tmp.string(), path.string(), errstr(errno)), errno);
  if (!written) {
    ::unlink(tmp.c_str());  // `path` keeps the previous content
    return written;
  }
  return fsync_dir(dir);
}

Result<std::optional<std::vector<uint8_t>>> read_small_file(const fs::path& path, std::size_t max_size) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<std::vector<uint8_t>>{};
    return make_error(fmt::format("opening {}: {}", path.string(), errstr(errno)), errno);
  }
  std::vector<uint8_t> bytes;
  std::array<uint8_t, 64 * 1024> chunk;
  while (bytes.size() <= max_size) {
    const ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(fmt::format("reading {}: {}", path.string(), errstr(errno)), errno);
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  }
  return std::optional<std::vector<uint8_t>>(std::move(bytes));
}

}  // namespace rdmablk::target

#include "security/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rdmablk::security {

namespace {

tl::unexpected<Error> cannot_read(const std::string& path, int e) {
  return make_error("cannot read " + path + ": " + std::strerror(e), e);
}

}  // namespace

Result<std::string> read_secret_file(const std::string& path, std::string_view what) {
  // O_NOFOLLOW: a symbolic link is refused (its target's mode is not what the operator chmodded);
  // O_NONBLOCK: a FIFO does not block the open, and is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP) return make_error(path + ": a symbolic link (name the key file itself)", e);
    return cannot_read(path, e);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return cannot_read(path, errno);
  if (!S_ISREG(st.st_mode)) return make_error(path + ": not a regular file", EINVAL);
  if ((st.st_mode & kSecretFileForbiddenMode) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(path + ": mode " + mode +
                          " lets other users read or change the secret (chmod 600 it; a group may only read it)",
                      EPERM);
  }
  std::string text(kMaxSecretFileBytes, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      wipe_secret(text);
      return cannot_read(path, e);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got == text.size()) {
    wipe_secret(text);
    return make_error(path + ": too long for " + std::string(what), EINVAL);
  }
  text.resize(got);
  return text;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find_first_of("\r\n")); }

void wipe_secret(std::string& text) noexcept {
  // volatile: the compiler may not drop stores to a string about to be freed.
  volatile char* p = text.data();
  for (std::size_t i = 0; i < text.size(); ++i) p[i] = '\0';
}

}  // namespace rdmablk::security

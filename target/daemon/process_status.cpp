// ProcessStatus from /proc/self and malloc, for the process_* metrics and the control socket's status.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "target/core/status.h"

// Under AddressSanitizer malloc is ASan's, and glibc's mallinfo2 sees none of it (all zeros): ask ASan.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RDMABLK_ASAN_ALLOCATOR 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define RDMABLK_ASAN_ALLOCATOR 1
#endif
#ifdef RDMABLK_ASAN_ALLOCATOR
#include <sanitizer/allocator_interface.h>
#endif

namespace rdmablk::target {

ProcessStatus read_process_status(double start_time_unix_s) {
  ProcessStatus p;
  p.start_time_unix_s = start_time_unix_s;
  // /proc/self/stat: fields after the command name "(...)": state is field 3; utime 14, stime 15,
  // num_threads 20, vsize 23, rss 24 (pages).
  std::ifstream f("/proc/self/stat");
  std::string line;
  if (std::getline(f, line)) {
    const auto close = line.rfind(')');
    if (close != std::string::npos) {
      std::istringstream in(line.substr(close + 2));
      std::string v[22];
      for (auto& field : v) in >> field;
      try {
        const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
        p.cpu_seconds = (std::stod(v[11]) + std::stod(v[12])) / tick;
        p.threads = std::stoull(v[17]);
        p.virtual_bytes = std::stoull(v[20]);
        p.resident_bytes = std::stoull(v[21]) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
      } catch (const std::exception&) {
        // a malformed line: the fields stay 0
      }
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++p.open_fds;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) p.max_fds = rl.rlim_cur;
#ifdef RDMABLK_ASAN_ALLOCATOR
  p.heap_in_use_bytes = __sanitizer_get_current_allocated_bytes();
  p.heap_free_bytes = __sanitizer_get_free_bytes();
#else
  const struct mallinfo2 heap = ::mallinfo2();
  p.heap_in_use_bytes = heap.uordblks + heap.hblkhd;  // in the arenas + in chunks of their own (mmap)
  p.heap_free_bytes = heap.fordblks;
#endif
  return p;
}

}  // namespace rdmablk::target

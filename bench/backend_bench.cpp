// backend_bench: random reads through the `file` backend against fio's io_uring engine on the same file.
//
// Each round runs ours, then fio (--ioengine=io_uring --direct=1 --rw=randread), with the same block
// size, queue depth and run time; the report gives every round, the medians and ours / fio.
// Ours uses what the target uses: O_DIRECT, registered buffers, the registered file, batched
// submit + reap, polling the completion ring while requests are in flight (as a reactor does while
// work flows, and as fio's io_uring engine does: it submits with min_complete = 0 and peeks).
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "backend/backend.h"

extern char** environ;

namespace {

using namespace rdmablk::backend;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string file = "/var/tmp/rdmablk-backend-bench.img";
  uint64_t size = 1ull << 30;
  unsigned runtime = 10;
  unsigned iodepth = 32;
  uint32_t bs = 4096;
  unsigned rounds = 3;
  bool json = false;
  bool no_fio = false;
  bool unregistered = false;
  bool wait = false;
};

struct Aligned {
  explicit Aligned(size_t n) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, n) != 0) throw std::bad_alloc();
    ptr.reset(static_cast<char*>(p));
  }
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> ptr;
};

// Creates or completes the file: every block written with non-zero data, so reads hit real blocks.
void prepare_file(const Config& cfg) {
  struct stat sb {};
  if (::stat(cfg.file.c_str(), &sb) == 0 && static_cast<uint64_t>(sb.st_size) == cfg.size &&
      static_cast<uint64_t>(sb.st_blocks) * 512 >= cfg.size)
    return;  // exists, right size, fully allocated
  fmt::print(stderr, "preparing {} ({} MiB of non-zero data)...\n", cfg.file, cfg.size >> 20);
  const int fd = ::open(cfg.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot create: {}", cfg.file, std::strerror(errno)));
  constexpr size_t chunk = 4 << 20;
  Aligned buf(chunk);
  uint64_t x = 0x243F6A8885A308D3ull;
  auto* words = reinterpret_cast<uint64_t*>(buf.ptr.get());
  for (uint64_t off = 0; off < cfg.size; off += chunk) {
    for (size_t i = 0; i < chunk / 8; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      words[i] = x | 1;  // never zero
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, cfg.size - off));
    if (::pwrite(fd, buf.ptr.get(), n, static_cast<off_t>(off)) != static_cast<ssize_t>(n))
      throw std::runtime_error(fmt::format("{}: write failed: {}", cfg.file, std::strerror(errno)));
  }
  ::fsync(fd);
  ::close(fd);
}

// Drops the file's pages from the page cache so that neither run gets a warm cache from the
// preparation (O_DIRECT does not read them, but the writeback of dirty pages would compete).
void drop_file_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

double run_ours(const Config& cfg) {
  FileOptions fo;
  fo.path = cfg.file;
  fo.size = cfg.size;
  fo.block_size = cfg.bs % 4096 == 0 ? 4096 : 512;
  fo.direct = true;
  fo.read_only = true;  // as fio opens it for a read workload
  auto backend = open_file_backend(fo);
  if (!backend) throw std::runtime_error(backend.error().message);
  if ((*backend)->describe().find("O_DIRECT") == std::string::npos)
    throw std::runtime_error(fmt::format("{}: O_DIRECT is not available: {}", cfg.file, (*backend)->describe()));
  const Geometry& geo = (*backend)->geometry();
  const uint32_t nlb = cfg.bs / geo.block_size;
  const uint64_t slots = geo.num_blocks / nlb;  // bs-aligned positions, as fio picks them

  Aligned buf(size_t{cfg.iodepth} * cfg.bs);
  const iovec iov{buf.ptr.get(), size_t{cfg.iodepth} * cfg.bs};
  QueueOptions qo;
  qo.depth = cfg.iodepth;
  if (!cfg.unregistered) qo.buffers = std::span<const iovec>(&iov, 1);
  auto queue = (*backend)->open_queue(qo);
  if (!queue) throw std::runtime_error(queue.error().message);
  Queue& q = **queue;

  uint64_t rng = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  auto submit = [&](uint64_t slot) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    Request r;
    r.op = Op::read;
    r.slba = (rng % slots) * nlb;
    r.nlb = nlb;
    r.buf = buf.ptr.get() + slot * cfg.bs;
    r.buf_index = cfg.unregistered ? -1 : 0;
    r.user_data = slot;
    const Status s = q.submit(r);
    if (!s.ok()) throw std::runtime_error(fmt::format("submit failed: SCT {} SC {:#x}", int(s.sct()), s.sc()));
  };

  for (uint64_t i = 0; i < cfg.iodepth; ++i) submit(i);
  std::vector<Completion> done(cfg.iodepth);
  uint64_t ios = 0;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(cfg.runtime);
  for (;;) {
    // Pushes the refills queued below. Like a reactor while work flows: poll (no sleep) unless --wait.
    const unsigned n = q.reap(done, cfg.wait ? 1 : 0);
    ios += n;
    for (unsigned i = 0; i < n; ++i) {
      if (!done[i].status.ok()) throw std::runtime_error("read failed");
    }
    if (Clock::now() >= deadline) break;
    for (unsigned i = 0; i < n; ++i) submit(done[i].user_data);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  while (q.in_flight() > 0) q.reap(done, 1);
  return static_cast<double>(ios) / secs;
}

double run_fio(const Config& cfg) {
  std::vector<std::string> args = {"fio",
                                   "--name=baseline",
                                   "--ioengine=io_uring",
                                   "--direct=1",
                                   "--rw=randread",
                                   fmt::format("--bs={}", cfg.bs),
                                   fmt::format("--iodepth={}", cfg.iodepth),
                                   fmt::format("--runtime={}", cfg.runtime),
                                   "--time_based",
                                   fmt::format("--filename={}", cfg.file),
                                   fmt::format("--size={}", cfg.size),
                                   "--output-format=json"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "fio", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    throw std::runtime_error(fmt::format("cannot run fio: {}", std::strerror(rc)));
  }
  std::string out;
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::read(pipefd[0], chunk, sizeof(chunk));
    if (n > 0) {
      out.append(chunk, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipefd[0]);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
    throw std::runtime_error(fmt::format("fio failed (status {}): {}", wstatus, out.substr(0, 500)));
  const auto brace = out.find('{');  // fio may print notes before the JSON
  if (brace == std::string::npos) throw std::runtime_error("fio printed no JSON");
  const auto j = nlohmann::json::parse(out.substr(brace));
  return j.at("jobs").at(0).at("read").at("iops").get<double>();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"4 KiB random reads through the file backend, compared with fio's io_uring engine"};
  app.add_option("--file", cfg.file, "file to read (created and filled with non-zero data if missing)");
  app.add_option("--size", cfg.size, "file size (1G, 512M, or bytes)")->transform(CLI::AsSizeValue(false));
  app.add_option("--runtime", cfg.runtime, "seconds per run")->check(CLI::Range(1u, 3600u));
  app.add_option("--iodepth", cfg.iodepth, "requests in flight")->check(CLI::Range(1u, 4096u));
  app.add_option("--bs", cfg.bs, "bytes per read (a multiple of 512)")->transform(CLI::AsSizeValue(false));
  app.add_option("--rounds", cfg.rounds, "interleaved rounds (ours, fio, ours, fio, ...)")->check(CLI::Range(1u, 100u));
  app.add_flag("--json", cfg.json, "print the result as JSON");
  app.add_flag("--no-fio", cfg.no_fio, "run only ours");
  app.add_flag("--wait", cfg.wait, "ours sleeps in the kernel for each completion instead of polling");
  app.add_flag("--unregistered", cfg.unregistered, "ours without registered (fixed) buffers, for comparison");
  CLI11_PARSE(app, argc, argv);
  if (cfg.bs == 0 || cfg.bs % 512 != 0 || cfg.size % cfg.bs != 0 || cfg.size < cfg.bs) {
    fmt::print(stderr, "--bs must be a non-zero multiple of 512 and divide --size\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);

  try {
    prepare_file(cfg);
    drop_file_cache(cfg.file);
    std::vector<double> ours, fio;
    for (unsigned r = 0; r < cfg.rounds; ++r) {
      ours.push_back(run_ours(cfg));
      if (!cfg.json) fmt::print("round {}: ours {:.0f} IOPS\n", r + 1, ours.back());
      if (!cfg.no_fio) {
        fio.push_back(run_fio(cfg));
        if (!cfg.json) fmt::print("round {}: fio  {:.0f} IOPS\n", r + 1, fio.back());
      }
    }
    const double mo = median(ours);
    const double mf = median(fio);
    const double ratio = mf > 0 ? mo / mf : 0;
    if (cfg.json) {
      nlohmann::json j;
      j["file"] = cfg.file;
      j["size"] = cfg.size;
      j["bs"] = cfg.bs;
      j["iodepth"] = cfg.iodepth;
      j["runtime"] = cfg.runtime;
      j["ours_iops"] = ours;
      j["fio_iops"] = fio;
      j["ours_median_iops"] = mo;
      j["fio_median_iops"] = mf;
      j["ratio"] = ratio;
      fmt::print("{}\n", j.dump(2));
    } else if (cfg.no_fio) {
      fmt::print("median: ours {:.0f} IOPS\n", mo);
    } else {
      fmt::print("median: ours {:.0f} IOPS, fio {:.0f} IOPS, ratio ours/fio {:.3f}\n", mo, mf, ratio);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "backend_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}

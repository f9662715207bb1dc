#include "initiator/bench/progress.h"

#include <algorithm>
#include <string>

#include "initiator/bench/report.h"

namespace rdmablk::initiator::bench::detail {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string rate(uint64_t bytes_per_s) { return num2str(bytes_per_s, 4, 1, true, N2sUnit::byte_per_sec); }

}  // namespace

void ProgressLine::start() {
  start_ = Clock::now();
  thread_ = std::thread([this] {
    auto last = Clock::now();
    while (!done_.load()) {
      std::this_thread::sleep_for(100ms);
      auto now = Clock::now();
      if (now - last >= 1s) {
        print(std::chrono::duration<double>(now - last).count());
        last = now;
      }
    }
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
  });
}

ProgressLine::~ProgressLine() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
}

void ProgressLine::print(double dt) {
  unsigned running = 0;
  std::string phases;
  double fraction = 0;
  uint64_t r = 0, w = 0, ri = 0, wi = 0;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  for (const auto& p : progress_) {
    char ph = p->phase.load();
    if (ph != '_' && ph != 'P') ++running;
    phases += ph;
    r += p->read_bytes;
    w += p->write_bytes;
    ri += p->read_ios;
    wi += p->write_ios;
    double f = 1.0;
    if (ph != '_') {
      if (p->planned_ns) f = std::min(1.0, elapsed * 1e9 / static_cast<double>(p->planned_ns));
      else if (p->total_bytes) f = std::min(1.0, static_cast<double>(p->done_bytes) / static_cast<double>(p->total_bytes));
      else f = 0;
    }
    fraction += f / static_cast<double>(progress_.size());
  }
  auto per_s = [dt](uint64_t now, uint64_t before) { return static_cast<uint64_t>(static_cast<double>(now - before) / dt); };
  uint64_t eta = fraction > 0.001 ? static_cast<uint64_t>(elapsed * (1 - fraction) / fraction) : 0;
  std::fprintf(out_, "\rJobs: %u (f=%u): [%s][%.1f%%][r=%s,w=%s][r=%s,w=%s IOPS][eta %02llum:%02llus]\033[K", running,
               running, phases.c_str(), 100.0 * fraction, rate(per_s(r, last_r_)).c_str(), rate(per_s(w, last_w_)).c_str(),
               num2str(per_s(ri, last_ri_), 4, 1, false, N2sUnit::none).c_str(),
               num2str(per_s(wi, last_wi_), 4, 1, false, N2sUnit::none).c_str(),
               static_cast<unsigned long long>(eta / 60), static_cast<unsigned long long>(eta % 60));
  std::fflush(out_);
  last_r_ = r;
  last_w_ = w;
  last_ri_ = ri;
  last_wi_ = wi;
}

}  // namespace rdmablk::initiator::bench::detail

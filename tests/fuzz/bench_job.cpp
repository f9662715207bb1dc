// The fio job file parser of `rdmablk bench` (initiator/bench/job_file.*): parse_job_text on any text, then
// what `rdmablk bench --parse-only` prints of it (describe_jobs).
//
// Input: the job file text. Its name for messages and relative includes is fuzz.fio in the current
// directory (the run's scratch directory); include= and pattern files are only ever read.
// Invariants: never throws; an accepted file has jobs (numjobs expanded, 1..256 each) with block sizes that
// are multiples of 512 up to 1 GiB and min <= max, a depth >= 1, bssplit percentages that sum to 100 at
// most, and it parses the same the second time and prints.
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "initiator/bench/job_file.h"
#include "initiator/bench/runner.h"

namespace bench = rdmablk::initiator::bench;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto file = bench::parse_job_text(text, "fuzz.fio");
  if (!file) {
    FUZZ_CHECK(!file.error().message.empty());
    return 0;
  }
  for (const auto& j : file->jobs) {
    FUZZ_CHECK(j.iodepth >= 1);
    FUZZ_CHECK(j.numjobs >= 1 && j.numjobs <= 256);
    for (const auto& bs : j.bs) {
      FUZZ_CHECK(bs.min <= bs.max);
      FUZZ_CHECK(bs.min % 512 == 0 && bs.max % 512 == 0 && bs.max <= (uint64_t{1} << 30));
      unsigned percent = 0;
      for (const auto& s : bs.split) {
        FUZZ_CHECK(s.bs % 512 == 0 && s.bs <= (uint64_t{1} << 30));
        percent += s.percent;
      }
      FUZZ_CHECK(percent <= 100);
    }
  }
  const std::string described = bench::describe_jobs(*file);
  auto again = bench::parse_job_text(text, "fuzz.fio");
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(again->jobs.size() == file->jobs.size());
  FUZZ_CHECK(bench::describe_jobs(*again) == described);
  return 0;
}

// From a job file's sections to jobs: options applied to drafts in fio's order, then what fio resolves once
// a job's options are all in (block sizes, verify interval, depth fixups, ...) and checked. Internal to
// the job file parser.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "initiator/bench/job_file.h"
#include "initiator/bench/job_options.h"
#include "initiator/bench/job_reader.h"

namespace rdmablk::initiator::bench::detail {

class Builder {
 public:
  // Options accepted without effect are reported once each in `notes`.
  explicit Builder(std::vector<std::string>& notes) : notes_(notes) {}

  // Applies a section's options to `d`, recording them in `record` (fio's job/global options).
  Result<void> apply(Draft& d, const Section& s, Options& record);
  // The job `d` describes, resolved and checked.
  Result<JobSpec> finish(Draft& d);

 private:
  Result<void> apply_option(Draft& d, const RawOption& o, const OptionDef& def);
  void note(const RawOption& o, std::string_view reason);
  Result<void> resolve_verify(JobSpec& j, const Draft& d);

  std::vector<std::string>& notes_;
  std::set<std::string> noted_;
};

// "FILE:LINE: job 'NAME': message"
tl::unexpected<Error> job_error(const JobSpec& j, const std::string& message);

}  // namespace rdmablk::initiator::bench::detail

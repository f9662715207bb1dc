// `rdmablk bench --plot DIR`: SVG charts of a bench run that a browser opens, hand-written SVG 1.1 (no
// dependency), deterministic for a given input.
//
//   iops.svg   I/Os per second over time, one line per job: x = seconds since the job started (ramp
//              included), y = IOPS over each JobResult::timeline interval, plotted at the interval's end.
//              A job whose timeline has I/O in one direction gets one line (named after the job); a job
//              with I/O in several directions (rw/randrw, a write job's verify reads) gets a line per
//              direction ("NAME read", "NAME write"): summing them would hide the mix.
//   bw.svg     the same in MiB/s (2^20 bytes per second).
//   clat.svg   completion latency percentiles, a line per job and direction with I/O ("NAME read"), from
//              DirectionStats::clat: x = percentile on fio's "nines" scale (-log10(1 - p/100): ticks 0, 50,
//              90, 99, 99.9, ... as far as the sample count supports), y = µs, logarithmic when the largest
//              value is over 100 times the smallest; markers with tooltips at 50/90/99/99.9/... percent.
//   index.html the three charts on one page.
//
// Jobs with the same name (numjobs copies) are told apart as "NAME (job N)", N = 1-based position in
// `results` (fio's job number when results are in JobFile::jobs order). Every chart has a title naming the
// job file, labelled axes with "nice" ticks (1, 2, 5 x 10^k), a legend below the plot, one
// <polyline class="series" data-label="..."> per series (with a <title> tooltip), names XML-escaped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "initiator/bench/report.h"
#include "protocol/result.h"

namespace rdmablk::initiator::bench {

// The job file's name for titles: `job_file` when given, else taken from results[0].spec.where
// ("FILE:LINE" of the first section).
std::string plot_title(const std::vector<JobResult>& results, const std::string& job_file = {});

std::string iops_svg(const std::vector<JobResult>& results, const std::string& title);
std::string bw_svg(const std::vector<JobResult>& results, const std::string& title);
std::string clat_svg(const std::vector<JobResult>& results, const std::string& title);
std::string plots_index_html(const std::string& title);

// Writes iops.svg, bw.svg, clat.svg and index.html into `dir` (created with its parents if missing);
// returns their paths (index.html last).
Result<std::vector<std::string>> write_plots(const std::string& dir, const std::vector<JobResult>& results,
                                             const std::string& job_file = {});

// &, <, >, " and ' as XML entities.
std::string xml_escape(std::string_view s);

}  // namespace rdmablk::initiator::bench

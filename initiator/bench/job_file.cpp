#include "initiator/bench/job_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "initiator/bench/job_builder.h"
#include "initiator/bench/job_options.h"
#include "initiator/bench/job_reader.h"
#include "initiator/bench/mix.h"

namespace rdmablk::initiator::bench {

using detail::Draft;
using detail::job_error;

const char* rw_name(RwMode m) noexcept {
  switch (m) {
    case RwMode::read: return "read";
    case RwMode::write: return "write";
    case RwMode::randread: return "randread";
    case RwMode::randwrite: return "randwrite";
    case RwMode::trim: return "trim";
    case RwMode::randtrim: return "randtrim";
    case RwMode::rw: return "rw";
    case RwMode::randrw: return "randrw";
  }
  return "?";
}

const char* ddir_name(Ddir d) noexcept {
  switch (d) {
    case kRead: return "read";
    case kWrite: return "write";
    case kTrim: return "trim";
  }
  return "?";
}

uint64_t JobSpec::max_bs() const noexcept {
  uint64_t m = 0;
  for (std::size_t d = 0; d < kDdirs; ++d) {
    const auto& b = bs[d];
    m = std::max(m, b.max);
    for (const auto& s : b.split) m = std::max(m, s.bs);
  }
  return m;
}

uint64_t JobSpec::min_bs() const noexcept {
  uint64_t m = UINT64_MAX;
  for (std::size_t d = 0; d < kDdirs; ++d) {
    const auto& b = bs[d];
    if (b.split.empty()) m = std::min(m, b.min);
    for (const auto& s : b.split) m = std::min(m, s.bs);
  }
  return m;
}

namespace {

// Applies [global] sections to the options every job after them starts from, and each job section to its
// own draft.
Result<std::vector<Draft>> draft_jobs(const std::vector<detail::Section>& sections, detail::Builder& builder,
                                      JobFile& out) {
  Draft global;
  std::vector<Draft> drafts;
  for (const auto& s : sections) {
    if (s.global) {
      if (auto r = builder.apply(global, s, out.global_options); !r) return tl::unexpected(r.error());
      continue;
    }
    Draft d = global;  // a job starts from the [global] options seen so far
    d.section = s.name;
    d.spec.name = s.name;
    d.spec.where = s.where;
    d.spec.options.clear();
    if (auto r = builder.apply(d, s, d.spec.options); !r) return tl::unexpected(r.error());
    drafts.push_back(std::move(d));
  }
  return drafts;
}

// Groups (fio init.c add_job): a job with stonewall or new_group starts the next group unless no job
// came before it.
void assign_groups(std::vector<JobSpec>& specs) {
  unsigned group = 0;
  bool group_has_jobs = false;
  for (auto& j : specs) {
    if ((j.stonewall || j.new_group) && group_has_jobs) ++group;
    j.groupid = group;
    group_has_jobs = true;
  }
}

// What jobs say about each other: lat_percentiles within a reported group, wait_for names.
Result<void> check_job_relations(const std::vector<JobSpec>& specs, const std::vector<Draft>& drafts) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const JobSpec& j = specs[i];
    // fio: group_reporting merges a group's latencies, so its jobs agree on lat_percentiles.
    for (std::size_t k = 0; k < i; ++k) {
      if (specs[k].groupid == j.groupid && j.group_reporting && specs[k].lat_percentiles != j.lat_percentiles) {
        return job_error(j, fmt::format("lat_percentiles differs from job '{}' of the same group", specs[k].name));
      }
    }
    if (j.wait_for.empty()) continue;
    if (j.wait_for == drafts[i].section || j.wait_for == j.name) return job_error(j, "a job cannot wait for itself");
    auto n = std::count_if(specs.begin(), specs.begin() + static_cast<std::ptrdiff_t>(i),
                           [&](const JobSpec& e) { return e.name == j.wait_for; });
    if (n == 0) return job_error(j, fmt::format("wait_for='{}' names no job before this one", j.wait_for));
    if (n > 1) return job_error(j, fmt::format("wait_for='{}' is ambiguous: {} jobs have that name", j.wait_for, n));
  }
  return {};
}

// numjobs copies: same group, offset + i * offset_increment; stonewall and new_group stay with the
// first copy (fio). startdelay=LOW-HIGH: each copy picks its own delay.
void expand_numjobs(const std::vector<JobSpec>& specs, const std::vector<Draft>& drafts, std::vector<JobSpec>& jobs) {
  std::random_device entropy;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const JobSpec& s = specs[i];
    const Draft& d = drafts[i];
    for (unsigned c = 0; c < s.numjobs; ++c) {
      JobSpec copy = s;
      copy.clone = c;
      copy.offset = s.offset + uint64_t{c} * s.offset_increment;
      if (c > 0) copy.stonewall = copy.new_group = false;
      if (d.startdelay_high > s.startdelay) {
        uint64_t seed = s.randseed ^ (uint64_t{i} << 32) ^ c;
        uint64_t r = s.randrepeat ? splitmix64(seed) : (uint64_t{entropy()} << 32 | entropy());
        auto span = static_cast<uint64_t>((d.startdelay_high - s.startdelay).count()) + 1;
        copy.startdelay = s.startdelay + std::chrono::nanoseconds(static_cast<int64_t>(r % span));
      }
      jobs.push_back(std::move(copy));
    }
  }
}

}  // namespace

Result<JobFile> parse_job_text(std::string_view text, std::string_view file_name) {
  auto sections = detail::read_sections(text, std::string(file_name));
  if (!sections) return tl::unexpected(sections.error());

  JobFile out;
  detail::Builder builder(out.notes);
  auto drafts = draft_jobs(*sections, builder, out);
  if (!drafts) return tl::unexpected(drafts.error());
  if (drafts->empty()) return make_error(fmt::format("{}: no job sections (only [global])", file_name));

  std::vector<JobSpec> specs;
  for (auto& d : *drafts) {
    auto j = builder.finish(d);
    if (!j) return tl::unexpected(j.error());
    specs.push_back(std::move(*j));
  }
  assign_groups(specs);
  if (auto r = check_job_relations(specs, *drafts); !r) return tl::unexpected(r.error());
  expand_numjobs(specs, *drafts, out.jobs);
  return out;
}

Result<JobFile> parse_job_file(const std::string& path) {
  auto text = detail::read_whole_file(path);
  if (!text) return tl::unexpected(text.error());
  return parse_job_text(*text, path);
}

}  // namespace rdmablk::initiator::bench

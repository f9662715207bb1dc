#include "initiator/bench/job_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace rdmablk::initiator::bench::detail {

namespace {

// Block sizes: bssplit wins over bsrange, which wins over bs (fio, whatever the order).
void resolve_block_sizes(JobSpec& j, const Draft& d) {
  const bool random = is_random(j.rw);
  for (std::size_t dd = 0; dd < kDdirs; ++dd) {
    BlockSizeSpec& b = j.bs[dd];
    if (!d.bssplit[dd].empty()) {
      b.split = d.bssplit[dd];
      auto [lo, hi] = std::minmax_element(b.split.begin(), b.split.end(), [](const auto& x, const auto& y) { return x.bs < y.bs; });
      b.min = lo->bs;
      b.max = hi->bs;
    } else if (d.bsrange[dd]) {
      b.split.clear();
      std::tie(b.min, b.max) = *d.bsrange[dd];
    } else if (d.bs[dd]) {
      b.split.clear();
      b.min = b.max = *d.bs[dd];
    }
    // blockalign only matters for random offsets; any alignment but the block size turns the random
    // map off (fio).
    b.align = random ? d.ba[dd] : 0;
    if (b.align && b.align != b.min) j.norandommap = true;
  }
}

// Times, rates, queue depth and random offsets.
Result<void> resolve_pacing(JobSpec& j, const Draft& d) {
  if (j.time_based && j.runtime.count() == 0) return job_error(j, "time_based needs a runtime");
  if (j.thinktime_spin > j.thinktime) j.thinktime_spin = j.thinktime;
  bool any_rate = std::any_of(j.rate.begin(), j.rate.end(), [](uint64_t r) { return r != 0; });
  bool any_iops = std::any_of(j.rate_iops.begin(), j.rate_iops.end(), [](uint64_t r) { return r != 0; });
  if (any_rate && any_iops) return job_error(j, "rate and rate_iops are mutually exclusive");

  // Queue depth (fio's fixups).
  if (j.iodepth_low == 0 || j.iodepth_low > j.iodepth) j.iodepth_low = j.iodepth;
  if (j.iodepth_batch_submit == 0 || j.iodepth_batch_submit > j.iodepth) j.iodepth_batch_submit = j.iodepth;
  if (j.iodepth_batch_complete_min > j.iodepth) j.iodepth_batch_complete_min = j.iodepth;

  // Random offsets.
  if (j.distribution.kind != Distribution::random) j.norandommap = true;  // fio: no random map for skewed offsets
  if (d.randseed_set) j.randrepeat = true;  // an explicit seed is repeatable
  if (j.distribution.kind == Distribution::zoned_abs && j.distribution.zones.empty()) return job_error(j, "zoned_abs needs zones");
  return {};
}

// Buffer contents, the final flush and the log file names.
void resolve_buffers_and_logs(JobSpec& j, const Draft& d) {
  // Buffers: 100% compressible = zeros (fio).
  if (j.buffer_compress_percentage == 100) {
    j.zero_buffers = true;
    j.buffer_compress_percentage = 0;
  }
  j.end_fsync = d.end_fsync || d.fsync_on_close;

  // Logs: a bare write_*_log names the files after the job (fio uses the section name).
  auto log_name = [&](const std::optional<std::string>& l) { return !l ? std::string() : l->empty() ? d.section : *l; };
  j.write_lat_log = log_name(d.lat_log);
  j.write_bw_log = log_name(d.bw_log);
  j.write_iops_log = log_name(d.iops_log);
}

// The smallest block size of the directions the job uses (UINT64_MAX: none).
uint64_t smallest_block_used(const JobSpec& j) {
  std::array<bool, kDdirs> used{does_reads(j.rw) || (j.verify != VerifyKind::none), does_writes(j.rw), does_trims(j.rw)};
  uint64_t min_used = UINT64_MAX;
  for (std::size_t dd = 0; dd < kDdirs; ++dd) {
    if (used[dd]) min_used = std::min(min_used, j.bs[dd].min);
  }
  return min_used;
}

Result<void> check_region(const JobSpec& j, uint64_t min_used) {
  if (j.size && min_used != UINT64_MAX && j.size < min_used) {
    return job_error(j, fmt::format("size ({}) is smaller than bs ({})", j.size, min_used));
  }
  if (j.offset % 512) return job_error(j, "offset must be a multiple of 512");
  if (j.offset_increment % 512) return job_error(j, "offset_increment must be a multiple of 512");
  return {};
}

}  // namespace

tl::unexpected<Error> job_error(const JobSpec& j, const std::string& message) {
  return make_error(fmt::format("{}: job '{}': {}", j.where, j.name, message));
}

Result<void> Builder::apply(Draft& d, const Section& s, Options& record) {
  std::vector<const RawOption*> order;
  for (const auto& o : s.options) order.push_back(&o);
  std::stable_sort(order.begin(), order.end(), [](const RawOption* a, const RawOption* b) {
    const OptionDef* da = find_option(a->key);
    const OptionDef* db = find_option(b->key);
    return option_priority(da ? da->name : "") > option_priority(db ? db->name : "");
  });
  for (const RawOption* o : order) {
    const OptionDef* def = find_option(o->key);
    if (!def) return make_error(fmt::format("{}: unknown option '{}'", o->where, o->key));
    if (auto r = apply_option(d, *o, *def); !r) return r;
    std::string key(def->name);
    auto it = std::find_if(record.begin(), record.end(), [&](const auto& kv) { return kv.first == key; });
    if (it != record.end()) it->second = o->value;
    else record.emplace_back(key, o->value);
  }
  return {};
}

Result<void> Builder::apply_option(Draft& d, const RawOption& o, const OptionDef& def) {
  if (def.kind == Kind::unsupported) {
    return make_error(fmt::format("{}: option '{}' is not supported ({})", o.where, o.key, def.reason));
  }
  if (o.bare && !def.bare_ok) {
    return make_error(fmt::format("{}: option '{}' needs a value ({}=...)", o.where, o.key, o.key));
  }
  if (def.kind == Kind::noted) {
    note(o, def.reason);
  } else if (def.name == "filename" && !is_namespace_uri(o.value)) {
    note(o, "it is not an rdmablk URI tcp://ADDR:PORT/NQN[/NSID]; the namespace comes from -t/-a/-s/-n");
    d.spec.filename.reset();
  } else if (auto r = def.handle(d, o.value); !r) {
    return make_error(fmt::format("{}: invalid value '{}' for '{}': {}", o.where, o.value, o.key, r.error().message));
  }
  return {};
}

Result<JobSpec> Builder::finish(Draft& d) {
  JobSpec& j = d.spec;
  resolve_block_sizes(j, d);
  // Taken before verify_pattern implies verify=pattern, which would count the reads' block size too.
  const uint64_t min_used = smallest_block_used(j);
  if (auto r = resolve_verify(j, d); !r) return tl::unexpected(r.error());
  if (auto r = resolve_pacing(j, d); !r) return tl::unexpected(r.error());
  resolve_buffers_and_logs(j, d);
  if (auto r = check_region(j, min_used); !r) return tl::unexpected(r.error());
  return j;
}

Result<void> Builder::resolve_verify(JobSpec& j, const Draft& d) {
  const uint64_t min_write = j.bs[kWrite].min;
  const uint64_t max_write = j.bs[kWrite].max;
  if (!d.verify_set && !j.verify_pattern.empty()) j.verify = VerifyKind::pattern;  // fio: the pattern implies it
  if (j.verify == VerifyKind::pattern && j.verify_pattern.empty()) return job_error(j, "verify=pattern needs a verify_pattern");
  if (j.verify == VerifyKind::none) return {};
  if (does_trims(j.rw)) return job_error(j, fmt::format("verify does not work with rw={} (trimmed blocks hold no data)", rw_name(j.rw)));
  if (j.verify_only && j.time_based) return job_error(j, "verify_only does not work with time_based");
  if (j.numjobs > 1 && does_writes(j.rw) && (j.size == 0 || j.offset_increment < j.size)) {
    return job_error(j, "numjobs > 1 with verify needs size and offset_increment >= size, so copies do not "
                        "overwrite each other's blocks");
  }
  // fio: the verify interval divides the write block sizes and is at most the smallest.
  if (does_writes(j.rw)) {
    if (!j.verify_interval && min_write != max_write) j.verify_interval = min_write;
    if (j.verify_interval > min_write) j.verify_interval = min_write;
    if (j.verify_interval && (min_write % j.verify_interval || max_write % j.verify_interval)) {
      j.verify_interval = std::gcd(min_write, max_write);
    }
  } else if (j.verify_interval > j.bs[kRead].min) {
    j.verify_interval = j.bs[kRead].min;
  }
  if (does_writes(j.rw) && !does_reads(j.rw) && j.do_verify && j.time_based && j.runtime.count() && !j.verify_backlog &&
      !j.verify_only) {
    notes_.push_back(fmt::format("{}: job '{}': the verify phase never starts: the writes use all of runtime "
                                 "(use verify_backlog, or drop time_based)", j.where, j.name));
  }
  return {};
}

void Builder::note(const RawOption& o, std::string_view reason) {
  if (!noted_.insert(o.key).second) return;
  notes_.push_back(fmt::format("{}: option '{}' has no effect on NVMe-oF namespaces ({})", o.where, o.key, reason));
}

}  // namespace rdmablk::initiator::bench::detail

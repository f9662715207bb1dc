#include "initiator/bench/job_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "initiator/bench/job_values.h"

namespace rdmablk::initiator::bench::detail {

namespace {

using std::chrono::nanoseconds;

constexpr std::size_t kMaxPercentiles = 20;  // fio's FIO_IO_U_LIST_MAX_LEN

template <typename T>
Result<void> store(Result<T> r, T& dst) {
  if (!r) return tl::unexpected(r.error());
  dst = *r;
  return {};
}

template <typename T>
Result<void> store_uint(std::string_view v, T& dst, uint64_t min, uint64_t max) {
  auto r = parse_uint(v, min, max);
  if (!r) return tl::unexpected(r.error());
  dst = static_cast<T>(*r);
  return {};
}

Result<void> set_rw(Draft& d, std::string_view v) {
  auto colon = v.find(':');
  std::string mode = lower(trim(v.substr(0, colon)));
  RwMode m;
  if (mode == "read") m = RwMode::read;
  else if (mode == "write") m = RwMode::write;
  else if (mode == "trim") m = RwMode::trim;
  else if (mode == "randread") m = RwMode::randread;
  else if (mode == "randwrite") m = RwMode::randwrite;
  else if (mode == "randtrim") m = RwMode::randtrim;
  else if (mode == "rw" || mode == "readwrite") m = RwMode::rw;
  else if (mode == "randrw") m = RwMode::randrw;
  else if (mode == "trimwrite" || mode == "randtrimwrite") return make_error(fmt::format("rw={} is not supported", mode));
  else return make_error("expected read, write, trim, randread, randwrite, randtrim, rw, readwrite or randrw");
  d.spec.rw = m;
  d.spec.seq_skip = 0;
  d.spec.random_nr = 1;
  if (colon == std::string_view::npos) return {};
  std::string_view modifier = trim(v.substr(colon + 1));
  if (is_random(m)) {
    // rw=randread:8: a new random offset every 8 I/Os.
    auto n = parse_uint(modifier, 1, UINT32_MAX);
    if (!n) return make_error(fmt::format("':{}': the number of I/Os per random offset {}", modifier, n.error().message));
    d.spec.random_nr = static_cast<unsigned>(*n);
  } else {
    // rw=read:8k: skip 8k after each I/O; rw=read:-8k goes backwards.
    auto n = signed_size_value(modifier, d.kb_base);
    if (!n) return make_error(fmt::format("':{}': {}", modifier, n.error().message));
    if (*n % 512) return make_error(fmt::format("':{}': the offset step must be a multiple of 512", modifier));
    d.spec.seq_skip = *n;
  }
  return {};
}

Result<void> set_distribution(Draft& d, std::string_view v) {
  v = trim(v);
  auto colon = v.find(':');
  std::string kind = lower(trim(v.substr(0, colon)));
  std::string_view rest = colon == std::string_view::npos ? std::string_view{} : trim(v.substr(colon + 1));
  DistributionSpec spec;
  if (kind == "random") {
    if (colon != std::string_view::npos) return make_error("random takes no parameter");
  } else if (kind == "zipf" || kind == "pareto" || kind == "normal" || kind == "gauss") {
    spec.kind = kind == "zipf" ? Distribution::zipf : kind == "pareto" ? Distribution::pareto : Distribution::normal;
    spec.param = kind == "zipf" ? 1.1 : kind == "pareto" ? 0.2 : 0.0;  // fio's defaults
    if (!rest.empty()) {
      if (rest.find(':') != std::string_view::npos) return make_error("a distribution center (zipf:THETA:CENTER) is not supported");
      auto p = parse_double(rest);
      if (!p) return tl::unexpected(p.error());
      spec.param = *p;
    }
    if (spec.kind == Distribution::zipf && (spec.param <= 0 || spec.param == 1.0)) {
      return make_error("zipf theta must be above 0 and not 1");
    }
    if (spec.kind == Distribution::pareto && (spec.param <= 0 || spec.param >= 1)) {
      return make_error("pareto h must be between 0 and 1 (exclusive)");
    }
    if (spec.kind == Distribution::normal && (spec.param < 0 || spec.param >= 100)) {
      return make_error("the normal deviation must be at least 0 and below 100");
    }
  } else if (kind == "zoned" || kind == "zoned_abs") {
    bool absolute = kind == "zoned_abs";
    spec.kind = absolute ? Distribution::zoned_abs : Distribution::zoned;
    if (rest.empty()) return make_error(fmt::format("expected {}:ACCESS/SIZE:ACCESS/SIZE...", kind));
    std::array<std::optional<std::vector<DistributionSpec::Zone>>, kDdirs> lists;
    auto r = per_ddir(rest, [&](Ddir dd, std::string_view list) -> Result<void> {
      auto z = parse_zone_list(list, absolute, d.kb_base);
      if (!z) return tl::unexpected(z.error());
      lists[dd] = std::move(*z);
      return {};
    });
    if (!r) return r;
    const std::vector<DistributionSpec::Zone>* first = nullptr;
    for (const auto& l : lists) {
      if (!l) continue;
      if (first && (first->size() != l->size() ||
                    !std::equal(first->begin(), first->end(), l->begin(), [](const auto& a, const auto& b) {
                      return a.access_percent == b.access_percent && a.size == b.size;
                    }))) {
        return make_error("separate zones for reads, writes and trims are not supported");
      }
      if (!first) first = &*l;
    }
    spec.zones = *first;
  } else {
    return make_error("expected random, zipf[:THETA], pareto[:H], normal[:DEV], zoned:... or zoned_abs:...");
  }
  d.spec.distribution = std::move(spec);
  return {};
}

Result<void> set_verify(Draft& d, std::string_view v) {
  std::string k = lower(trim(v));
  VerifyKind kind;
  if (k == "0" || k == "none" || k == "null") kind = VerifyKind::none;
  else if (k == "crc32c" || k == "crc32c-intel") kind = VerifyKind::crc32c;
  else if (k == "md5") kind = VerifyKind::md5;
  else if (k == "sha1") kind = VerifyKind::sha1;
  else if (k == "sha256") kind = VerifyKind::sha256;
  else if (k == "pattern") kind = VerifyKind::pattern;
  else if (k == "meta") kind = VerifyKind::meta;
  else return make_error("supported: crc32c (crc32c-intel), md5, sha1, sha256, meta, pattern, 0 (none, null)");
  d.spec.verify = kind;
  d.verify_set = true;
  return {};
}

Result<void> set_filename(Draft& d, std::string_view v) {
  // Only an rdmablk URI names a namespace; a local path is noted by the caller.
  auto u = parse_namespace_uri(trim(v));
  if (!u) return tl::unexpected(u.error());
  d.spec.filename = *u;
  return {};
}

Result<void> set_log(std::optional<std::string>& dst, std::string_view v) {
  dst = std::string(trim(v));
  return {};
}

Result<void> set_percentile_list(Draft& d, std::string_view v) {
  std::vector<double> list;
  for (auto item : split(trim(v), ':')) {
    auto p = parse_double(item);
    if (!p) return tl::unexpected(p.error());
    if (*p <= 0 || *p > 100) return make_error(fmt::format("{} is not a percentile (0 < p <= 100)", trim(item)));
    list.push_back(*p);
  }
  if (list.size() > kMaxPercentiles) return make_error(fmt::format("at most {} percentiles", kMaxPercentiles));
  d.spec.percentile_list = std::move(list);
  return {};
}

Result<void> set_startdelay(Draft& d, std::string_view v) {
  v = trim(v);
  auto dash = v.find('-', 1);
  auto lo = duration_value(v.substr(0, dash), kNsPerSec);
  if (!lo) return tl::unexpected(lo.error());
  nanoseconds hi{0};
  if (dash != std::string_view::npos) {
    auto h = duration_value(v.substr(dash + 1), kNsPerSec);
    if (!h) return tl::unexpected(h.error());
    if (*h < *lo) return make_error("the range goes backwards");
    hi = *h;
  }
  d.spec.startdelay = *lo;
  d.startdelay_high = hi;
  return {};
}

// bs= and blockalign=: a block size per direction.
template <typename Slot>
Result<void> set_block_sizes(Draft& d, std::string_view v, std::array<Slot, kDdirs>& dst) {
  return per_ddir(v, [&](Ddir dd, std::string_view s) -> Result<void> {
    auto b = block_size_value(s, d.kb_base);
    if (!b) return tl::unexpected(b.error());
    dst[dd] = *b;
    return {};
  });
}

// size= and offset=: bytes, or N% of the namespace (one of the two is 0).
Result<void> set_bytes_or_percent(Draft& d, std::string_view v, uint64_t& bytes, unsigned& percent_of_ns) {
  bool percent = false;
  auto s = size_value(v, d.kb_base, &percent);
  if (!s) return tl::unexpected(s.error());
  bytes = percent ? 0 : *s;
  percent_of_ns = percent ? static_cast<unsigned>(*s) : 0;
  return {};
}

// A size where fio would take a percentage but rdmablk does not.
Result<void> set_bytes(Draft& d, std::string_view v, uint64_t& bytes, std::string_view key) {
  bool percent = false;
  auto s = size_value(v, d.kb_base, &percent);
  if (!s) return tl::unexpected(s.error());
  if (percent) return make_error(fmt::format("a percentage is not supported for {}", key));
  bytes = *s;
  return {};
}

// loops= and thinktime_blocks=: a count where fio takes 0 as 1.
Result<void> store_count(std::string_view v, unsigned& dst) {
  auto r = parse_uint(v, 0, UINT32_MAX);
  if (!r) return tl::unexpected(r.error());
  dst = *r ? static_cast<unsigned>(*r) : 1;
  return {};
}

// Lambdas, not named functions: each key's handling stays next to its name. Constant data (no
// initialization at run time); the order is the lookup order, names and aliases are unique.
#define IMPL(NAME, ALIAS, BARE, ...)                                                                  \
  OptionDef {                                                                                          \
    NAME, ALIAS, Kind::implemented, BARE,                                                              \
        []([[maybe_unused]] Draft& d, [[maybe_unused]] std::string_view v) -> Result<void> __VA_ARGS__, {} \
  }

constexpr OptionDef kImplementedOptions[] = {
  // Job identity and data direction.
  IMPL("name", {}, false, {
    if (trim(v).empty()) return make_error("must not be empty");
    d.spec.name = std::string(trim(v));
    return {};
  }),
  IMPL("description", {}, false, {
    d.spec.description = std::string(trim(v));
    return {};
  }),
  IMPL("rw", "readwrite", false, { return set_rw(d, v); }),
  IMPL("rw_sequencer", {}, false, {
    std::string s = lower(trim(v));
    if (s == "sequential") return {};
    if (s == "identical") return make_error("rw_sequencer=identical is not supported");
    return make_error("expected sequential");
  }),
  IMPL("rwmixread", {}, false, {
    auto r = parse_uint(v, 0, 100);
    if (!r) return tl::unexpected(r.error());
    d.spec.rwmixread = static_cast<unsigned>(*r);
    return {};
  }),
  IMPL("rwmixwrite", {}, false, {
    auto r = parse_uint(v, 0, 100);
    if (!r) return tl::unexpected(r.error());
    d.spec.rwmixread = static_cast<unsigned>(100 - *r);
    return {};
  }),
  // Block sizes.
  IMPL("bs", "blocksize", false, { return set_block_sizes(d, v, d.bs); }),
  IMPL("bsrange", "blocksize_range", false, {
    return per_ddir(v, [&](Ddir dd, std::string_view s) -> Result<void> {
      auto sep = s.find('-');
      if (sep == std::string_view::npos) sep = s.find(':');
      if (sep == std::string_view::npos) return make_error(fmt::format("'{}': expected MIN-MAX", s));
      auto lo = block_size_value(s.substr(0, sep), d.kb_base);
      if (!lo) return make_error(fmt::format("'{}': {}", s, lo.error().message));
      auto hi = block_size_value(s.substr(sep + 1), d.kb_base);
      if (!hi) return make_error(fmt::format("'{}': {}", s, hi.error().message));
      d.bsrange[dd] = std::minmax(*lo, *hi);  // fio swaps a range given backwards
      return {};
    });
  }),
  IMPL("bssplit", {}, false, {
    return per_ddir(v, [&](Ddir dd, std::string_view s) -> Result<void> {
      auto l = parse_bssplit_list(s, d.kb_base);
      if (!l) return tl::unexpected(l.error());
      d.bssplit[dd] = std::move(*l);
      return {};
    });
  }),
  IMPL("ba", "blockalign", false, { return set_block_sizes(d, v, d.ba); }),
  // Queue depth.
  IMPL("iodepth", {}, false, { return store_uint(v, d.spec.iodepth, 1, 4096); }),
  IMPL("iodepth_batch", "iodepth_batch_submit", false, { return store_uint(v, d.spec.iodepth_batch_submit, 0, 4096); }),
  IMPL("iodepth_batch_complete_min", "iodepth_batch_complete", false,
       { return store_uint(v, d.spec.iodepth_batch_complete_min, 0, 4096); }),
  IMPL("iodepth_low", {}, false, { return store_uint(v, d.spec.iodepth_low, 0, 4096); }),
  IMPL("numjobs", {}, false, { return store_uint(v, d.spec.numjobs, 1, 256); }),
  // Region and amount.
  IMPL("size", {}, false, { return set_bytes_or_percent(d, v, d.spec.size, d.spec.size_percent); }),
  IMPL("fill_device", "fill_fs", true, { return store(parse_bool(v), d.spec.fill_device); }),
  IMPL("offset", "fileoffset", false, { return set_bytes_or_percent(d, v, d.spec.offset, d.spec.offset_percent); }),
  IMPL("offset_increment", {}, false, { return set_bytes(d, v, d.spec.offset_increment, "offset_increment"); }),
  IMPL("io_size", "io_limit", false, { return set_bytes(d, v, d.spec.io_size, "io_size"); }),
  IMPL("number_ios", {}, false, { return store(size_value(v, d.kb_base), d.spec.number_ios); }),
  IMPL("loops", {}, false, { return store_count(v, d.spec.loops); }),
  // Time.
  IMPL("runtime", "timeout", false, { return store(duration_value(v, kNsPerSec), d.spec.runtime); }),
  IMPL("time_based", {}, true, { return store(parse_bool(v), d.spec.time_based); }),
  IMPL("ramp_time", {}, false, { return store(duration_value(v, kNsPerSec), d.spec.ramp_time); }),
  IMPL("startdelay", {}, false, { return set_startdelay(d, v); }),
  IMPL("hipri", {}, true, { return store(parse_bool(v), d.spec.hipri); }),
  // Random offsets.
  IMPL("random_distribution", {}, false, { return set_distribution(d, v); }),
  IMPL("norandommap", {}, true, { return store(parse_bool(v), d.spec.norandommap); }),
  IMPL("randrepeat", {}, true, { return store(parse_bool(v), d.spec.randrepeat); }),
  IMPL("allrandrepeat", {}, true, {
    auto b = parse_bool(v);
    if (!b) return tl::unexpected(b.error());
    if (*b) d.spec.randrepeat = true;  // we have one generator family: randrepeat covers all
    return {};
  }),
  IMPL("randseed", {}, false, {
    auto s = size_value(v, d.kb_base);
    if (!s) return tl::unexpected(s.error());
    d.spec.randseed = *s;
    d.randseed_set = true;
    return {};
  }),
  // Rates and pacing.
  IMPL("rate", {}, false, {
    return per_ddir(v, [&](Ddir dd, std::string_view s) { return store(size_value(s, d.kb_base), d.spec.rate[dd]); });
  }),
  IMPL("rate_iops", {}, false, {
    return per_ddir(v, [&](Ddir dd, std::string_view s) { return store(size_value(s, d.kb_base), d.spec.rate_iops[dd]); });
  }),
  IMPL("rate_process", {}, false, {
    std::string s = lower(trim(v));
    if (s == "linear") d.spec.rate_process = RateProcess::linear;
    else if (s == "poisson") d.spec.rate_process = RateProcess::poisson;
    else return make_error("expected linear or poisson");
    return {};
  }),
  IMPL("thinktime", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.thinktime); }),
  IMPL("thinktime_spin", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.thinktime_spin); }),
  IMPL("thinktime_blocks", {}, false, { return store_count(v, d.spec.thinktime_blocks); }),
  IMPL("flow", {}, false, { return store_uint(v, d.spec.flow, 0, 1000); }),
  IMPL("flow_id", {}, false, { return store_uint(v, d.spec.flow_id, 0, UINT32_MAX); }),
  IMPL("flow_sleep", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.flow_sleep); }),
  IMPL("latency_target", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.latency_target); }),
  IMPL("latency_window", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.latency_window); }),
  IMPL("latency_percentile", {}, false, {
    auto p = parse_double(v);
    if (!p) return tl::unexpected(p.error());
    if (*p <= 0 || *p > 100) return make_error("must be above 0 and at most 100");
    d.spec.latency_percentile = *p;
    return {};
  }),
  // Verification.
  IMPL("verify", {}, false, { return set_verify(d, v); }),
  IMPL("do_verify", {}, true, { return store(parse_bool(v), d.spec.do_verify); }),
  IMPL("verify_only", {}, true, { return store(parse_bool(v), d.spec.verify_only); }),
  IMPL("verify_backlog", {}, false, {
    auto r = size_value(v, d.kb_base);
    if (!r) return tl::unexpected(r.error());
    if (*r > UINT32_MAX) return make_error("too large");
    d.spec.verify_backlog = static_cast<unsigned>(*r);
    return {};
  }),
  IMPL("verify_pattern", {}, false, { return store(parse_pattern(v), d.spec.verify_pattern); }),
  IMPL("verify_interval", {}, false, {
    auto r = size_value(v, d.kb_base);
    if (!r) return tl::unexpected(r.error());
    if (*r == 0) return make_error("must not be 0");
    d.spec.verify_interval = *r;
    return {};
  }),
  IMPL("verify_fatal", {}, true, { return store(parse_bool(v), d.spec.verify_fatal); }),
  // Flushes.
  IMPL("fsync", {}, false, { return store_uint(v, d.spec.fsync, 0, UINT32_MAX); }),
  IMPL("fdatasync", {}, false, { return store_uint(v, d.spec.fsync, 0, UINT32_MAX); }),
  IMPL("end_fsync", {}, true, { return store(parse_bool(v), d.end_fsync); }),
  IMPL("fsync_on_close", {}, true, { return store(parse_bool(v), d.fsync_on_close); }),
  // Buffer contents.
  IMPL("zero_buffers", {}, true, { return store(parse_bool(v), d.spec.zero_buffers); }),
  IMPL("refill_buffers", {}, true, { return store(parse_bool(v), d.spec.refill_buffers); }),
  IMPL("scramble_buffers", {}, true, { return store(parse_bool(v), d.spec.scramble_buffers); }),
  IMPL("buffer_compress_percentage", {}, false, { return store_uint(v, d.spec.buffer_compress_percentage, 0, 100); }),
  IMPL("buffer_compress_chunk", {}, false, { return store(size_value(v, d.kb_base), d.spec.buffer_compress_chunk); }),
  IMPL("buffer_pattern", {}, false, { return store(parse_pattern(v), d.spec.buffer_pattern); }),
  // CPUs.
  IMPL("cpus_allowed", {}, false, { return store(parse_cpu_list(v), d.spec.cpus_allowed); }),
  IMPL("cpumask", {}, false, {
    auto m = parse_uint(v, 1, UINT64_MAX);
    if (!m) return make_error("expected a CPU bit mask (1 << cpu | ...)");
    d.spec.cpus_allowed.clear();
    for (unsigned c = 0; c < 64; ++c) {
      if (*m >> c & 1) d.spec.cpus_allowed.push_back(c);
    }
    return {};
  }),
  IMPL("cpus_allowed_policy", {}, false, {
    std::string s = lower(trim(v));
    if (s == "shared") d.spec.cpus_allowed_split = false;
    else if (s == "split") d.spec.cpus_allowed_split = true;
    else return make_error("expected shared or split");
    return {};
  }),
  // Reporting.
  IMPL("group_reporting", {}, true, { return store(parse_bool(v), d.spec.group_reporting); }),
  IMPL("percentile_list", {}, false, { return set_percentile_list(d, v); }),
  IMPL("lat_percentiles", {}, true, { return store(parse_bool(v), d.spec.lat_percentiles); }),
  IMPL("clat_percentiles", {}, true, { return store(parse_bool(v), d.spec.clat_percentiles); }),
  IMPL("unified_rw_reporting", {}, false, {
    std::string s = lower(trim(v));
    if (s == "none" || s == "0") d.spec.unified_rw_reporting = UnifiedRw::none;
    else if (s == "mixed" || s == "1") d.spec.unified_rw_reporting = UnifiedRw::mixed;
    else if (s == "both" || s == "2") d.spec.unified_rw_reporting = UnifiedRw::both;
    else return make_error("expected none (0), mixed (1) or both (2)");
    return {};
  }),
  IMPL("kb_base", {}, false, {
    std::string s(trim(v));
    if (s == "1024") d.kb_base = 1024;
    else if (s == "1000") d.kb_base = 1000;
    else return make_error("expected 1024 or 1000");
    return {};
  }),
  IMPL("unit_base", {}, false, {
    std::string s(trim(v));
    if (s == "0" || s == "1") return {};
    if (s == "8") return make_error("bit-based output is not supported");
    return make_error("expected 0 or 1");
  }),
  // Logs.
  IMPL("write_lat_log", {}, true, { return set_log(d.lat_log, v); }),
  IMPL("write_bw_log", {}, true, { return set_log(d.bw_log, v); }),
  IMPL("write_iops_log", {}, true, { return set_log(d.iops_log, v); }),
  IMPL("log_avg_msec", {}, false, {
    auto r = parse_uint(v, 0, UINT32_MAX);
    if (!r) return tl::unexpected(r.error());
    d.spec.log_avg_msec = std::chrono::milliseconds(*r);
    return {};
  }),
  IMPL("log_offset", {}, true, { return store(parse_bool(v), d.spec.log_offset); }),
  IMPL("per_job_logs", {}, true, { return store(parse_bool(v), d.spec.per_job_logs); }),
  // Groups.
  IMPL("stonewall", "wait_for_previous", true, { return store(parse_bool(v), d.spec.stonewall); }),
  IMPL("new_group", {}, true, { return store(parse_bool(v), d.spec.new_group); }),
  IMPL("wait_for", {}, false, {
    if (trim(v).empty()) return make_error("must name a job");
    d.spec.wait_for = std::string(trim(v));
    return {};
  }),
  // Target.
  IMPL("namespace", {}, false, { return store_uint(v, d.spec.nsid, 1, 0xFFFFFFFEu); }),
  IMPL("filename", {}, false, { return set_filename(d, v); }),  // a local path is noted (see apply)
};

#undef IMPL

}  // namespace

// tcp:// and rdma:// name a namespace (a malformed one is an error); anything else is a local path
// or another program's URI.
bool is_namespace_uri(std::string_view v) {
  std::string l = lower(trim(v));
  return l.rfind("tcp://", 0) == 0 || l.rfind("rdma://", 0) == 0;
}

const OptionDef* find_option(std::string_view key) {
  auto matches = [&](const OptionDef& o) { return o.name == key || (!o.alias.empty() && o.alias == key); };
  for (const auto& o : kImplementedOptions) {
    if (matches(o)) return &o;
  }
  for (const auto& o : ignored_options()) {
    if (matches(o)) return &o;
  }
  return nullptr;
}

int option_priority(std::string_view canonical) { return canonical == "kb_base" ? 1 : 0; }

}  // namespace rdmablk::initiator::bench::detail

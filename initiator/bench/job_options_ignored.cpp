// fio options that rdmablk knows but does not implement: accepted and noted once (they only make sense
// for local files or fio's own engines), or refused (they would change the result in a way rdmablk does
// not reproduce).
#include "initiator/bench/job_options.h"

namespace rdmablk::initiator::bench::detail {

namespace {

// Reasons for options that are accepted and do nothing.
constexpr std::string_view kLocalFiles = "it applies to local files";
constexpr std::string_view kEngine = "I/O goes through rdmablk's own NVMe-oF queues";
constexpr std::string_view kBuffers = "I/O buffers are rdmablk's own";
constexpr std::string_view kProcess = "jobs are threads of one rdmablk process";
constexpr std::string_view kAlwaysMeasured = "rdmablk always measures completion latency and bandwidth";

// Reasons several options share.
constexpr std::string_view kPageCache = "there is no local page cache";
constexpr std::string_view kDeprecated = "deprecated in fio";
constexpr std::string_view kHistLogs = "histogram logs are not written";
constexpr std::string_view kLogCompression = "logs are not compressed";
constexpr std::string_view kMinRates = "minimum rates are not enforced";
constexpr std::string_view kZoned = "zoned I/O is not implemented";
constexpr std::string_view kTrimOnly = "trims are only issued by rw=trim|randtrim";
constexpr std::string_view kDedupe = "dedupable buffers are not generated";
constexpr std::string_view kReplay = "I/O logs are not replayed";
constexpr std::string_view kJobEnd = "jobs end by size, number_ios or runtime";
constexpr std::string_view kLogEpoch = "log times count from the job's start";

#define NOTED(NAME, REASON) \
  OptionDef { NAME, {}, Kind::noted, true, nullptr, REASON }
#define UNSUPPORTED(NAME, REASON) \
  OptionDef { NAME, {}, Kind::unsupported, true, nullptr, REASON }

constexpr OptionDef kIgnoredOptions[] = {
  // Accepted, noted once, no effect.
  NOTED("directory", kLocalFiles), NOTED("filename_format", kLocalFiles), NOTED("unique_filename", kLocalFiles),
  NOTED("opendir", kLocalFiles), NOTED("lockfile", kLocalFiles), NOTED("nrfiles", kLocalFiles),
  NOTED("nr_files", kLocalFiles), NOTED("openfiles", kLocalFiles), NOTED("file_service_type", kLocalFiles),
  NOTED("create_serialize", kLocalFiles), NOTED("create_fsync", kLocalFiles), NOTED("create_on_open", kLocalFiles),
  NOTED("allow_file_create", kLocalFiles), NOTED("allow_mounted_write", kLocalFiles), NOTED("fallocate", kLocalFiles),
  NOTED("unlink", kLocalFiles), NOTED("unlink_each_loop", kLocalFiles), NOTED("overwrite", kLocalFiles),
  NOTED("invalidate", kPageCache), NOTED("fadvise_hint", kPageCache), NOTED("pre_read", kPageCache),
  NOTED("sync_file_range", kLocalFiles), NOTED("ioscheduler", "there is no local block device"),
  NOTED("disk_util", "there is no local block device"), NOTED("ioengine", kEngine), NOTED("direct", kEngine),
  NOTED("buffered", kEngine), NOTED("atomic", kEngine), NOTED("sync", kEngine), NOTED("io_submit_mode", kEngine),
  NOTED("userspace_reap", kEngine), NOTED("fixedbufs", kEngine), NOTED("registerfiles", kEngine),
  NOTED("sqthread_poll", kEngine), NOTED("sqthread_poll_cpu", kEngine), NOTED("nonvectored", kEngine),
  NOTED("uncached", kEngine), NOTED("force_async", kEngine), NOTED("cmdprio_percentage", kEngine),
  NOTED("cmdprio_class", kEngine), NOTED("cmdprio", kEngine), NOTED("cmdprio_bssplit", kEngine),
  NOTED("write_hint", kEngine), NOTED("serialize_overlap", kEngine),
  NOTED("random_generator", "rdmablk has one random generator"),
  NOTED("softrandommap", "the random map always fits in memory"), NOTED("iomem", kBuffers), NOTED("mem", kBuffers),
  NOTED("iomem_align", kBuffers), NOTED("mem_align", kBuffers), NOTED("hugepage-size", kBuffers),
  NOTED("lockmem", kBuffers), NOTED("thread", kProcess), NOTED("nice", kProcess), NOTED("prio", kProcess),
  NOTED("prioclass", kProcess), NOTED("cgroup", kProcess), NOTED("cgroup_weight", kProcess),
  NOTED("cgroup_nodelete", kProcess), NOTED("uid", kProcess), NOTED("gid", kProcess), NOTED("numa_cpu_nodes", kProcess),
  NOTED("numa_mem_policy", kProcess), NOTED("exitall", kProcess), NOTED("exit_what", kProcess),
  NOTED("exitall_on_error", kProcess), NOTED("gtod_cpu", kProcess),
  NOTED("continue_on_error", "an I/O error always ends the job"), NOTED("error_dump", "errors are always reported"),
  NOTED("gtod_reduce", kAlwaysMeasured), NOTED("disable_lat", kAlwaysMeasured), NOTED("disable_clat", kAlwaysMeasured),
  NOTED("disable_slat", kAlwaysMeasured), NOTED("disable_bw_measurement", kAlwaysMeasured),
  NOTED("disable_bw", kAlwaysMeasured), NOTED("clocksource", "rdmablk uses CLOCK_MONOTONIC"),
  NOTED("stats", kAlwaysMeasured), NOTED("bwavgtime", "bandwidth samples are not reported"),
  NOTED("iopsavgtime", "IOPS samples are not reported"),
  NOTED("slat_percentiles", "submission latency is not measured separately"),
  NOTED("significant_figures", "output uses fio's default of 4"),
  NOTED("verify_async", "verification runs in the job's thread"),
  NOTED("verify_async_cpus", "verification runs in the job's thread"),
  NOTED("verify_dump", "mismatches are reported with their offset"),
  NOTED("verify_state_save", "verify state is not saved"), NOTED("verify_state_load", "verify state is not saved"),
  NOTED("verifysort", kDeprecated), NOTED("verifysort_nr", kDeprecated), NOTED("rwmixcycle", kDeprecated),
  NOTED("flow_watermark", kDeprecated), NOTED("write_hist_log", kHistLogs), NOTED("log_hist_msec", kHistLogs),
  NOTED("log_hist_coarseness", kHistLogs), NOTED("log_max_value", "logs hold averages"),
  NOTED("log_entries", "log memory grows as needed"), NOTED("log_compression", kLogCompression),
  NOTED("log_compression_cpus", kLogCompression), NOTED("log_store_compressed", kLogCompression),

  // Known and refused: they would change the result in a way rdmablk does not reproduce.
  UNSUPPORTED("rate_min", kMinRates), UNSUPPORTED("ratemin", kMinRates), UNSUPPORTED("rate_iops_min", kMinRates),
  UNSUPPORTED("rate_cycle", kMinRates), UNSUPPORTED("ratecycle", kMinRates),
  UNSUPPORTED("rate_ignore_thinktime", "rates always include think time"),
  UNSUPPORTED("max_latency", "latency limits are not enforced"), UNSUPPORTED("latency_run", "use latency_target"),
  UNSUPPORTED("thinktime_blocks_type", "think time counts completed blocks"),
  UNSUPPORTED("thinktime_iotime", "think time counts completed blocks"),
  UNSUPPORTED("iodepth_batch_complete_max", "completions are reaped as they come"), UNSUPPORTED("zonemode", kZoned),
  UNSUPPORTED("zonesize", kZoned), UNSUPPORTED("zonecapacity", kZoned), UNSUPPORTED("zonerange", kZoned),
  UNSUPPORTED("zoneskip", kZoned), UNSUPPORTED("read_beyond_wp", kZoned), UNSUPPORTED("max_open_zones", kZoned),
  UNSUPPORTED("job_max_open_zones", kZoned), UNSUPPORTED("ignore_zone_limits", kZoned),
  UNSUPPORTED("zone_reset_threshold", kZoned), UNSUPPORTED("zone_reset_frequency", kZoned),
  UNSUPPORTED("trim_percentage", kTrimOnly), UNSUPPORTED("trim_verify_zero", kTrimOnly),
  UNSUPPORTED("trim_backlog", kTrimOnly), UNSUPPORTED("trim_backlog_batch", kTrimOnly),
  UNSUPPORTED("verify_offset", "the verify header is always at the start of the block"),
  UNSUPPORTED("verify_backlog_batch", "verify_backlog checks every block it holds"),
  UNSUPPORTED("experimental_verify", "not implemented"), UNSUPPORTED("dedupe_percentage", kDedupe),
  UNSUPPORTED("dedupe_global", kDedupe), UNSUPPORTED("dedupe_mode", kDedupe),
  UNSUPPORTED("dedupe_working_set_percentage", kDedupe),
  UNSUPPORTED("percentage_random", "a job is either sequential or random"),
  UNSUPPORTED("percentage_sequential", "a job is either sequential or random"),
  UNSUPPORTED("bs_unaligned", "block sizes are multiples of the smallest one"),
  UNSUPPORTED("blocksize_unaligned", "block sizes are multiples of the smallest one"),
  UNSUPPORTED("bs_is_seq_rand", "bs values are per data direction"),
  UNSUPPORTED("offset_align", "offsets are aligned to the block size"),
  UNSUPPORTED("filesize", "the region is set by size and offset"),
  UNSUPPORTED("file_append", "the region is set by size and offset"), UNSUPPORTED("create_only", "jobs always do I/O"),
  UNSUPPORTED("read_iolog", kReplay), UNSUPPORTED("write_iolog", "I/O logs are not written"),
  UNSUPPORTED("read_iolog_chunked", kReplay), UNSUPPORTED("replay_no_stall", kReplay),
  UNSUPPORTED("replay_redirect", kReplay), UNSUPPORTED("replay_scale", kReplay), UNSUPPORTED("replay_align", kReplay),
  UNSUPPORTED("replay_time_scale", kReplay), UNSUPPORTED("replay_skip", kReplay),
  UNSUPPORTED("merge_blktrace_file", kReplay), UNSUPPORTED("exec_prerun", "rdmablk does not run commands"),
  UNSUPPORTED("exec_postrun", "rdmablk does not run commands"), UNSUPPORTED("steadystate", kJobEnd),
  UNSUPPORTED("ss", kJobEnd), UNSUPPORTED("ss_dur", kJobEnd), UNSUPPORTED("ss_ramp", kJobEnd),
  UNSUPPORTED("write_barrier", "writes are plain NVMe Writes"),
  UNSUPPORTED("ignore_error", "an I/O error always ends the job"),
  UNSUPPORTED("block_error_percentiles", "trim errors are not tracked"), UNSUPPORTED("log_unix_epoch", kLogEpoch),
  UNSUPPORTED("log_alternate_epoch", kLogEpoch), UNSUPPORTED("log_alternate_epoch_clock_id", kLogEpoch),
  UNSUPPORTED("log_prio", "logs do not hold priorities"),
  UNSUPPORTED("profile", "fio's built-in profiles are not available"),
};

#undef NOTED
#undef UNSUPPORTED

}  // namespace

std::span<const OptionDef> ignored_options() { return kIgnoredOptions; }

}  // namespace rdmablk::initiator::bench::detail

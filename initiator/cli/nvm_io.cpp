// compare and copy (nvme-cli 2.4's `nvme compare` and `nvme copy`, same option letters and meanings) on one
// namespace named by a URI (common.h NamespaceFlags), through our userspace host.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <iterator>

#include "initiator/cli/common.h"
#include "initiator/host/shared_volume.h"

namespace rdmablk::initiator::cli {

namespace {

struct CompareFlags {
  NamespaceFlags ns;
  uint64_t start_block = 0;
  uint32_t block_count = 0;  // 0-based, as nvme-cli's
  uint64_t data_size = 0;
  std::string data;  // empty or "-": standard input
};

// `want` bytes from the file (or standard input), or why not.
Result<std::vector<uint8_t>> read_data(const std::string& path, std::size_t want) {
  std::vector<uint8_t> buf(want);
  std::size_t got = 0;
  if (path.empty() || path == "-") {
    std::cin.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(want));
    got = static_cast<std::size_t>(std::cin.gcount());
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(fmt::format("cannot open the data file {}", path), ENOENT);
    in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(want));
    got = static_cast<std::size_t>(in.gcount());
  }
  if (got < want) {
    return make_error(fmt::format("{} holds {} bytes; the compare needs {}", path.empty() ? "standard input" : path,
                                  got, want),
                      EINVAL);
  }
  return buf;
}

int run_compare(const CompareFlags& f, const CliEnv& env) {
  if (f.data_size == 0) return report_error(env, "data size not provided (-z/--data-size)", 2);
  if (f.block_count > 0xFFFF) return report_error(env, "--block-count is 0-based and at most 65535", 2);
  auto s = open_namespace(f.ns, env, true);
  if (!s) return s.error();
  const uint32_t blocks = f.block_count + 1;
  const uint64_t need = uint64_t{blocks} * s->ns->block_size;
  if (f.data_size > need) {
    return report_error(env,
                        fmt::format("--data-size {} is more than the {} bytes of {} blocks of {} bytes", f.data_size,
                                    need, blocks, s->ns->block_size),
                        2);
  }
  if (f.data_size < need) *env.err << fmt::format("Rounding data size to fit block count ({} bytes)\n", need);
  auto data = read_data(f.data, need);
  if (!data) return report_error(env, data.error().message, 2);
  auto r = compare_blocks(*s->io, s->nsid, f.start_block, blocks, *data);
  if (!r) return report_error(env, r.error().message);
  *env.out << "compare: Success\n";
  return 0;
}

struct CopyFlags {
  NamespaceFlags ns;
  uint64_t sdlba = 0;
  std::vector<uint64_t> slbs;
  std::vector<uint32_t> blocks;  // 0-based, as nvme-cli's
  unsigned format = 0;
  bool fua = false;
};

int run_copy(const CopyFlags& f, const CliEnv& env) {
  if (f.format != 0) {
    return report_error(env, fmt::format("source range entry format {} is not supported (only format 0)", f.format), 2);
  }
  if (f.slbs.size() != f.blocks.size()) {
    return report_error(
        env, fmt::format("--slbs lists {} ranges, --blocks {}: they must match", f.slbs.size(), f.blocks.size()), 2);
  }
  std::vector<CopyRange> ranges;
  for (std::size_t i = 0; i < f.slbs.size(); ++i) {
    if (f.blocks[i] > 0xFFFF) return report_error(env, "--blocks values are 0-based and at most 65535", 2);
    ranges.push_back(CopyRange{f.slbs[i], f.blocks[i] + 1});
  }
  if (auto list = encode_copy_ranges(ranges); !list) return report_error(env, list.error().message, 2);
  auto s = open_namespace(f.ns, env, false);
  if (!s) return s.error();
  auto r = copy_blocks(*s->io, s->nsid, f.sdlba, ranges, f.fua);
  if (!r) return report_error(env, r.error().message);
  *env.out << "NVMe Copy: success\n";
  return 0;
}

}  // namespace

void add_nvm_io_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out) {
  auto cf = std::make_shared<CompareFlags>();
  auto* compare =
      app.add_subcommand("compare",
                         "compare blocks of a namespace with a data file (Compare command); fails on a mismatch");
  add_namespace_flags(compare, cf->ns);
  compare->add_option("-s,--start-block", cf->start_block, "64-bit address of the first block to compare");
  compare->add_option("-c,--block-count", cf->block_count, "number of blocks (zeroes based)");
  compare->add_option("-z,--data-size", cf->data_size, "size of data in bytes (required)");
  compare->add_option("-d,--data", cf->data, "data file (default: standard input)");
  out.push_back({compare, [cf, &env] { return run_compare(*cf, env); }});

  auto yf = std::make_shared<CopyFlags>();
  auto* copy =
      app.add_subcommand("copy", "copy source block ranges to one destination range inside the target (Copy command)");
  add_namespace_flags(copy, yf->ns);
  copy->add_option("-d,--sdlba", yf->sdlba, "64-bit address of the first destination block");
  copy->add_option("-s,--slbs", yf->slbs, "first block of each source range (comma-separated list)")
      ->delimiter(',')
      ->required();
  copy->add_option("-b,--blocks", yf->blocks, "blocks of each source range (comma-separated list, zeroes based)")
      ->delimiter(',')
      ->required();
  copy->add_option("-F,--format", yf->format, "source range entry format (only 0)");
  copy->add_flag("-f,--force-unit-access", yf->fua, "force unit access: the destination is durable at completion");
  out.push_back({copy, [yf, &env] { return run_copy(*yf, env); }});
}

}  // namespace rdmablk::initiator::cli

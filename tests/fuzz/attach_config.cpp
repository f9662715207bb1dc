// The attach configuration (initiator/cli/attach_config.*): parse_attach_config on any text, as
// `rdmablk attach --config FILE` and rdmablk-attach@NAME.service read it.
//
// Input: the YAML text.
// Invariants: parsing never throws; an error is one line that names the file; an accepted config is
// within the documented ranges (queue size 2..1024, I/O queues <= 4096, reconnect delay 1..3600 s,
// controller loss timeout >= -1, a subsystem NQN and an address) and parses the same the second time.
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "initiator/cli/attach_config.h"

namespace ini = rdmablk::initiator;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = ini::parse_attach_config(text, "fuzz.yaml");
  if (!cfg) {
    FUZZ_CHECK(cfg.error().message.rfind("fuzz.yaml", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(!cfg->subnqn.empty());
  FUZZ_CHECK(!cfg->address.traddr.empty());
  FUZZ_CHECK(cfg->queue_size >= ini::kAttachMinQueueSize && cfg->queue_size <= ini::kAttachMaxQueueSize);
  FUZZ_CHECK(cfg->nr_io_queues <= ini::kAttachMaxIoQueues);
  FUZZ_CHECK(cfg->reconnect_delay_s >= 1 && cfg->reconnect_delay_s <= ini::kAttachMaxReconnectDelay);
  FUZZ_CHECK(cfg->ctrl_loss_tmo_s >= -1);
  FUZZ_CHECK(ini::attach_mode_name(cfg->mode) != nullptr);
  auto again = ini::parse_attach_config(text, "fuzz.yaml");
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(again->subnqn == cfg->subnqn && again->nsid == cfg->nsid && again->address.traddr == cfg->address.traddr &&
             again->address.trsvcid == cfg->address.trsvcid && again->queue_size == cfg->queue_size &&
             again->hostnqn == cfg->hostnqn && again->hostid == cfg->hostid);
  return 0;
}

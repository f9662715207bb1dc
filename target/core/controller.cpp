#include "target/core/controller.h"

#include "target/core/core_internal.h"  // CoreQueue (weak_ptr expiry)

namespace rdmablk::target {

uint16_t Controller::live_io_queue_count() const noexcept {
  uint16_t n = 0;
  for (const auto& w : io_queue_table)
    if (!w.expired()) ++n;
  return n;
}

void Controller::record_error(uint16_t sqid, uint16_t cid, protocol::Status st, uint32_t nsid, uint8_t opcode,
                              uint64_t lba) noexcept {
  std::lock_guard lock(error_mu);
  protocol::ErrorLogEntry e{};
  e.error_count.set(++error_count);
  e.sqid.set(sqid);
  e.cid.set(cid);
  e.status.set(st.cqe_status());
  e.parameter_error_location.set(0xFFFF);
  e.lba.set(lba);
  e.nsid.set(nsid);
  e.trtype = static_cast<uint8_t>(trtype);
  e.opcode = opcode;
  e.log_page_version = 1;
  errors[(error_count - 1) % kErrorLogEntries] = e;
}

}  // namespace rdmablk::target

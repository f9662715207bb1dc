// RDMA-CM private data (protocol/rdma_cm.*): the controller's decoder of a host's CM REQUEST, and the
// host's decoders of the controller's ACCEPT and REJECT, on any bytes.
//
// Input: [0..1] max_qid, [2..3] max_io_queue_entries (the controller's limits), then the private data
// (as rdma_cm hands it over: any length, or none).
// Invariants: an accepted request is within the limits (QID, HRQSIZE != 0, 2 <= entries <= the queue
// kind's maximum) and make_request() of its fields decodes to the same values; a refused one names a
// field inside the 32-byte record (or the short length); accept/reject round trip through make_*;
// reject_status_name() answers for any status.
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "protocol/endian.h"
#include "protocol/rdma_cm.h"

namespace {
namespace p = rdmablk::protocol;
namespace cm = rdmablk::protocol::rdma_cm;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  cm::ConnectLimits lim;
  lim.max_qid = static_cast<uint16_t>(data[0] | data[1] << 8);
  lim.max_io_queue_entries = static_cast<uint16_t>(data[2] | data[3] << 8);
  // Exactly the private data's bytes on the heap: ASan sees any read past them.
  const std::vector<uint8_t> pd(data + 4, data + size);
  const void* ptr = pd.empty() ? nullptr : pd.data();

  auto req = cm::decode_request(ptr, pd.size(), lim);
  if (req) {
    FUZZ_CHECK(pd.size() >= sizeof(cm::CmRequest));
    FUZZ_CHECK(req->qid <= lim.max_qid);
    FUZZ_CHECK(req->hrqsize != 0);
    FUZZ_CHECK(req->sq_entries() >= 2);
    FUZZ_CHECK(req->sq_entries() <= (req->qid == 0 ? cm::kAdminQueueMaxEntries : lim.max_io_queue_entries));
    // What the Linux host sends for these entries decodes to the same request (HRQSIZE = entries).
    const auto again_pdu = cm::make_request(req->qid, static_cast<uint16_t>(req->sq_entries()), req->cntlid);
    auto again = cm::decode_request(&again_pdu, sizeof(again_pdu), lim);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(again->qid == req->qid && again->hsqsize == req->hsqsize && again->cntlid == req->cntlid);
  } else {
    FUZZ_CHECK(req.error().offset < sizeof(cm::CmRequest) || req.error().status == cm::RejectStatus::invalid_length);
    FUZZ_CHECK(req.error().what != nullptr);
    FUZZ_CHECK(cm::reject_status_name(req.error().status) != nullptr);
    // The reject we would send decodes on the host to the same status.
    const auto rej = cm::make_reject(req.error().status);
    auto st = cm::decode_reject(&rej, sizeof(rej));
    FUZZ_CHECK(st.has_value() && *st == req.error().status);
  }

  auto acc = cm::decode_accept(ptr, pd.size());
  if (acc) {
    FUZZ_CHECK(*acc != 0);
    const auto a = cm::make_accept(*acc);
    auto again = cm::decode_accept(&a, sizeof(a));
    FUZZ_CHECK(again.has_value() && *again == *acc);
  }
  auto rej = cm::decode_reject(ptr, pd.size());
  if (rej) {
    FUZZ_CHECK(pd.size() >= sizeof(cm::CmReject));
    FUZZ_CHECK(cm::reject_status_name(*rej) != nullptr);
  }
  return 0;
}

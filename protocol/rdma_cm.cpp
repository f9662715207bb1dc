#include "protocol/rdma_cm.h"

namespace rdmablk::protocol::rdma_cm {

namespace {
tl::unexpected<CmError> refuse(RejectStatus status, uint32_t offset, const char* what) noexcept {
  return tl::unexpected<CmError>(CmError{status, offset, what});
}
}  // namespace

const char* reject_status_name(RejectStatus status) noexcept {
  switch (status) {
    case RejectStatus::invalid_length: return "invalid length";
    case RejectStatus::invalid_recfmt: return "invalid record format";
    case RejectStatus::invalid_qid: return "invalid queue ID";
    case RejectStatus::invalid_hsqsize: return "invalid host SQ size";
    case RejectStatus::invalid_hrqsize: return "invalid host RQ size";
    case RejectStatus::no_resources: return "resource not found";
    case RejectStatus::invalid_ird: return "invalid IRD";
    case RejectStatus::invalid_ord: return "invalid ORD";
    case RejectStatus::invalid_cntlid: return "invalid controller ID";
  }
  return "unrecognized reason";
}

tl::expected<ConnectRequest, CmError> decode_request(const void* data, std::size_t len,
                                                     const ConnectLimits& limits) noexcept {
  if (data == nullptr || len < sizeof(CmRequest)) {
    return refuse(RejectStatus::invalid_length, static_cast<uint32_t>(data == nullptr ? 0 : len),
                  "private data shorter than 32 bytes");
  }
  const auto req = load<CmRequest>(data);
  if (req.recfmt.get() != kRecfmt10) {
    return refuse(RejectStatus::invalid_recfmt, offsetof(CmRequest, recfmt), "RECFMT not 0");
  }
  ConnectRequest out{req.qid.get(), req.hrqsize.get(), req.hsqsize.get(), req.cntlid.get()};
  if (out.qid > limits.max_qid) return refuse(RejectStatus::invalid_qid, offsetof(CmRequest, qid), "QID too large");
  if (out.hrqsize == 0) return refuse(RejectStatus::invalid_hrqsize, offsetof(CmRequest, hrqsize), "HRQSIZE is 0");
  if (out.hsqsize == 0) {
    return refuse(RejectStatus::invalid_hsqsize, offsetof(CmRequest, hsqsize), "HSQSIZE 0: a queue needs 2 entries");
  }
  const uint32_t max_entries = out.qid == 0 ? kAdminQueueMaxEntries : limits.max_io_queue_entries;
  if (out.sq_entries() > max_entries) {
    return refuse(RejectStatus::invalid_hsqsize, offsetof(CmRequest, hsqsize),
                  out.qid == 0 ? "admin HSQSIZE + 1 above 32" : "I/O HSQSIZE + 1 above the queue limit");
  }
  return out;
}

CmAccept make_accept(uint16_t crqsize) noexcept {
  CmAccept a{};
  a.recfmt.set(kRecfmt10);
  a.crqsize.set(crqsize);
  return a;
}

CmReject make_reject(RejectStatus status) noexcept {
  CmReject r{};
  r.recfmt.set(kRecfmt10);
  r.sts.set(static_cast<uint16_t>(status));
  return r;
}

CmRequest make_request(uint16_t qid, uint16_t sq_entries, uint16_t cntlid) noexcept {
  CmRequest r{};
  r.recfmt.set(kRecfmt10);
  r.qid.set(qid);
  r.hrqsize.set(sq_entries);
  r.hsqsize.set(static_cast<uint16_t>(sq_entries - 1));
  r.cntlid.set(cntlid);
  return r;
}

tl::expected<uint16_t, DecodeError> decode_accept(const void* data, std::size_t len) noexcept {
  if (data == nullptr || len < offsetof(CmAccept, rsvd4)) {
    return reject(static_cast<uint32_t>(data == nullptr ? 0 : len), "accept private data too short");
  }
  le16 recfmt = load<le16>(data);
  le16 crqsize = load<le16>(static_cast<const uint8_t*>(data) + offsetof(CmAccept, crqsize));
  if (recfmt.get() != kRecfmt10) return reject(offsetof(CmAccept, recfmt), "accept RECFMT not 0");
  if (crqsize.get() == 0) return reject(offsetof(CmAccept, crqsize), "accept CRQSIZE is 0");
  return crqsize.get();
}

tl::expected<RejectStatus, DecodeError> decode_reject(const void* data, std::size_t len) noexcept {
  if (data == nullptr || len < sizeof(CmReject)) {
    return reject(static_cast<uint32_t>(data == nullptr ? 0 : len), "reject private data too short");
  }
  return static_cast<RejectStatus>(load<CmReject>(data).sts.get());
}

}  // namespace rdmablk::protocol::rdma_cm

// NVMe over Fabrics RDMA transport binding: the RDMA-CM private data exchanged while a queue pair connects
// (NVMe over Fabrics 1.1, 7.3.2 "RDMA Transport Binding: Queue Pair Setup"; include/linux/nvme-rdma.h).
//
// Queue sizes, as the Linux host (drivers/nvme/host/rdma.c nvme_rdma_route_resolved), SPDK's host and the
// Linux target (drivers/nvme/target/rdma.c nvmet_rdma_parse_cm_connect_req) put them on the wire:
//   HSQSIZE is 0's based: the SQSIZE of the Connect command (admin: 31 for 32 entries).
//   HRQSIZE is 1's based: HSQSIZE + 1, the receive buffers the host posts for CQEs (admin: 32).
//   CRQSIZE in the accept is the number of SQ entries the controller provides, 1's based (nvmet: HSQSIZE + 1).
// nvmet refuses an admin queue with HSQSIZE + 1 > 32 with status 4 (invalid HSQSIZE).
// CNTLID (bytes 9:8) was added to the request later (Linux 6.x headers, SPDK's host fills it); the Linux
// host leaves it 0. Nothing in the connect path depends on it, so the decoder reports it and checks nothing.
#pragma once

#include <tl/expected.hpp>

#include "protocol/wire.h"
#include "protocol/result.h"

namespace rdmablk::protocol::rdma_cm {

inline constexpr uint16_t kRecfmt10 = 0;      // record format 1.0, the only one defined
inline constexpr uint16_t kAdminQueueMaxEntries = 32;  // NVMe-oF: admin queue at most 32 entries (nvmet AQ depth)
inline constexpr uint16_t kDefaultPort = 4420;

// Reject status (RDMA_CM_REJECT private data STS).
enum class RejectStatus : uint16_t {
  invalid_length = 0x01,   // private data too short
  invalid_recfmt = 0x02,   // RECFMT not 0
  invalid_qid = 0x03,      // no such queue / queue id in use
  invalid_hsqsize = 0x04,  // host SQ size out of range
  invalid_hrqsize = 0x05,  // host RQ size out of range
  no_resources = 0x06,     // controller cannot allocate the queue
  invalid_ird = 0x07,      // rdma_conn_param responder_resources unacceptable (not private data)
  invalid_ord = 0x08,      // rdma_conn_param initiator_depth unacceptable (not private data)
  invalid_cntlid = 0x09,   // CNTLID does not name a controller this host owns
};
const char* reject_status_name(RejectStatus status) noexcept;  // the kernel's nvme_rdma_cm_msg() strings

// RDMA_CM_REQUEST private data, host -> controller.
struct CmRequest {
  le16 recfmt;                     // record format, 0
  le16 qid;                        // queue id: 0 admin, 1.. I/O
  le16 hrqsize;                    // host receive queue size, 1's based (= hsqsize + 1)
  le16 hsqsize;                    // host send queue size, 0's based (= Connect SQSIZE)
  le16 cntlid;                     // controller id for I/O queues (0 when the host does not say)
  std::array<uint8_t, 22> rsvd10;  // reserved
};
static_assert(sizeof(CmRequest) == 32);
static_assert(offsetof(CmRequest, recfmt) == 0);
static_assert(offsetof(CmRequest, qid) == 2);
static_assert(offsetof(CmRequest, hrqsize) == 4);
static_assert(offsetof(CmRequest, hsqsize) == 6);
static_assert(offsetof(CmRequest, cntlid) == 8);
static_assert(offsetof(CmRequest, rsvd10) == 10);

// RDMA_CM_ACCEPT private data, controller -> host.
struct CmAccept {
  le16 recfmt;                    // record format, 0
  le16 crqsize;                   // controller receive queue size: SQ entries it provides, 1's based
  std::array<uint8_t, 28> rsvd4;  // reserved
};
static_assert(sizeof(CmAccept) == 32);
static_assert(offsetof(CmAccept, recfmt) == 0);
static_assert(offsetof(CmAccept, crqsize) == 2);
static_assert(offsetof(CmAccept, rsvd4) == 4);

// RDMA_CM_REJECT private data, controller -> host. 4 bytes: nvmet sends sizeof(struct nvme_rdma_cm_rej).
struct CmReject {
  le16 recfmt;  // record format, 0
  le16 sts;     // RejectStatus
};
static_assert(sizeof(CmReject) == 4);
static_assert(offsetof(CmReject, recfmt) == 0);
static_assert(offsetof(CmReject, sts) == 2);

static_assert(std::is_trivially_copyable_v<CmRequest> && std::is_trivially_copyable_v<CmAccept> &&
              std::is_trivially_copyable_v<CmReject>);

// ---- controller side --------------------------------------------------------------------------------

struct ConnectRequest {
  uint16_t qid;
  uint16_t hrqsize;  // 1's based
  uint16_t hsqsize;  // 0's based
  uint16_t cntlid;
  constexpr uint32_t sq_entries() const noexcept { return uint32_t{hsqsize} + 1; }
};

// What this controller accepts.
struct ConnectLimits {
  uint16_t max_qid = 0xFFFE;            // highest queue id accepted
  uint16_t max_io_queue_entries = 1024;  // highest HSQSIZE + 1 for an I/O queue (MQES + 1)
};

// A request to refuse: the status for the reject private data, and the offset of the field at fault.
struct CmError {
  RejectStatus status;
  uint32_t offset;
  const char* what;
  constexpr DecodeError decode_error() const noexcept { return DecodeError{offset, what}; }
};

// Checks, in order: length >= 32 (invalid_length, offset = len), RECFMT 0 (invalid_recfmt, 0),
// QID <= max_qid (invalid_qid, 2), HRQSIZE != 0 (invalid_hrqsize, 4), HSQSIZE >= 1 -- an NVMe queue has at
// least 2 entries -- and HSQSIZE + 1 <= 32 for the admin queue or <= max_io_queue_entries for I/O
// (invalid_hsqsize, 6). CNTLID is returned unchecked. Extra bytes beyond 32 are ignored (InfiniBand CM
// pads private data to 92 bytes with zeros).
tl::expected<ConnectRequest, CmError> decode_request(const void* data, std::size_t len,
                                                     const ConnectLimits& limits) noexcept;

CmAccept make_accept(uint16_t crqsize) noexcept;
CmReject make_reject(RejectStatus status) noexcept;

// ---- host side --------------------------------------------------------------------------------------

// The request the Linux host sends for a queue of `sq_entries` entries: HSQSIZE = sq_entries - 1,
// HRQSIZE = sq_entries. `sq_entries` >= 2.
CmRequest make_request(uint16_t qid, uint16_t sq_entries, uint16_t cntlid = 0) noexcept;

// The controller's accept: length >= 4 (offset len), RECFMT 0 (offset 0), CRQSIZE != 0 (offset 2).
// Returns CRQSIZE. (The reject-status field of the error is unused here.)
tl::expected<uint16_t, DecodeError> decode_accept(const void* data, std::size_t len) noexcept;

// The controller's reject: the status, when at least 4 bytes came with it (the Linux host's rule).
tl::expected<RejectStatus, DecodeError> decode_reject(const void* data, std::size_t len) noexcept;

}  // namespace rdmablk::protocol::rdma_cm

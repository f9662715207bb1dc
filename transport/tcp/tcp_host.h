// NVMe/TCP, host side. connect_host_queue() (transport/host_queue.h) calls this for TransportType::tcp.
//
// The queue: a non-blocking socket driven by poll() with plain syscalls (see tcp_host.cpp for why),
// CIDs = slot indices from a free list, write data in the capsule (SGL 0x01, offset 0) when it fits the
// in-capsule limit, else SGL 0x5A answered with H2CData per R2T (<= MAXH2CDATA per PDU), read data
// received straight into HostCommand::data. A C2HTermReq, a protocol error or a broken socket fails every
// outstanding command once with Transient Transport Error (no DNR: a reconnect may succeed) and poll()
// returns -errno (-ECONNRESET, -EPROTO, ...). A data digest error fails only that command (Data Transfer
// Error), as the Linux host does. submit() on a full queue returns Command Interrupted (retry later).
//
// HostQueueOptions::tls (tcp_tls.h TcpTlsClientOptions): a TLS 1.3 PSK handshake before ICReq, then kTLS
// when the kernel has it, else userspace records. A refused handshake fails the connect with
// "TLS handshake with ADDR failed: <reason>" (wrong PSK, unknown PSK identity, peer alert, a plain port).
#pragma once

#include <memory>

#include "protocol/result.h"
#include "transport/host_queue.h"

namespace rdmablk::transport::tcp {

Result<std::unique_ptr<HostQueue>> connect_tcp_host_queue(const HostQueueOptions& opts);

}  // namespace rdmablk::transport::tcp

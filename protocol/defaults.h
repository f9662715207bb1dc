// Shared defaults of NVMe-oF queue sizing: the one place that says what each in-capsule data size is and
// why. In-capsule data is the write data a host may send inside the command capsule, after the 64-byte
// SQE, instead of being fetched (RDMA READ) or solicited (NVMe/TCP R2T); the controller advertises it on
// I/O queues as IOCCSZ = (64 + bytes) / 16 (Identify Controller), and the admin queue's size is fixed by
// the transport binding and the hosts' expectations.
//
// Who uses which value:
//   the target's config (target/config/config.h QueueLimits, parse_limits.cpp) -> kAdminInCapsule,
//     kTargetIoInCapsule, which the daemon copies into both transports' options (target/daemon/
//     transport_options.cpp), so a running target advertises the same IOCCSZ on TCP and RDMA;
//   the transports' own option structs (transport/tcp/tcp_target_queue.h TcpTargetOptions,
//     transport/rdma/rdma_queue.h RdmaTargetOptions), used as they are only by tests and tools that build
//     queues without a config -> kAdminInCapsule, kTcpIoInCapsule, kRdmaIoInCapsule;
//   the initiator's admin queue (initiator/host/controller.cpp) -> kAdminInCapsule on TCP, none on RDMA;
//   the RDMA host's capsule buffers (transport/rdma/rdma_host.cpp kHostMaxInCapsule) -> kRdmaHostInCapsuleCap;
//   the reactors' small buffers (target/daemon/transport_options.cpp; transport/buffer_pool.h's default)
//     -> kSmallBufferBytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rdmablk::protocol::defaults {

// Admin queue, both transports: 8 KiB. The Linux NVMe/TCP host sends the 1 KiB Connect data in-capsule and
// sizes its admin capsules for 8 KiB (NVME_TCP_ADMIN_CCSZ); nvmet accepts as much. It is also the smallest
// admin_inline_data the target's config accepts, for the same reason.
inline constexpr uint32_t kAdminInCapsule = 8 * 1024;

// I/O queues of a running rdmablk-target (io_inline_data), TCP and RDMA alike: 16 KiB, so that writes up
// to 16 KiB need no RDMA READ or R2T round trip; it fits one small buffer of the pool (kSmallBufferBytes).
inline constexpr uint32_t kTargetIoInCapsule = 16 * 1024;

// The transports' defaults when no config sets them (tests, tools). They differ on purpose:
//   TCP 8 KiB: in-capsule data arrives in the byte stream anyway, so the size only bounds one command's
//     buffer; 8 KiB matches the admin queue and nvmet-tcp;
//   RDMA 4 KiB: every queue entry posts a RECV buffer of 64 bytes + this much, registered for the queue's
//     life, so the RDMA default stays at nvmet-rdma's (NVMET_RDMA_DEFAULT_INLINE_DATA_SIZE, a page).
inline constexpr uint32_t kTcpIoInCapsule = 8 * 1024;
inline constexpr uint32_t kRdmaIoInCapsule = 4 * 1024;

// The RDMA host's cap on in-capsule write data, whatever IOCCSZ allows: each queue entry has a registered
// capsule buffer of 64 bytes + this much for the queue's life, so a controller advertising 128 KiB cannot
// make the host register megabytes per queue; larger writes are read by the controller (RDMA READ).
// 8 KiB covers the admin queue's size and the 4 KiB writes that matter most.
inline constexpr uint32_t kRdmaHostInCapsuleCap = 8 * 1024;

// The small buffers of a reactor's pool: in-capsule data and small I/O; never smaller than the in-capsule
// sizes above (the daemon raises it to a configured larger one).
inline constexpr std::size_t kSmallBufferBytes = 16 * 1024;

static_assert(kAdminInCapsule % 16 == 0 && kTargetIoInCapsule % 16 == 0 && kTcpIoInCapsule % 16 == 0 &&
                  kRdmaIoInCapsule % 16 == 0,
              "capsule sizes are in 16-byte units");
static_assert(kSmallBufferBytes >= kTargetIoInCapsule && kSmallBufferBytes >= kAdminInCapsule);

}  // namespace rdmablk::protocol::defaults

// Log pages (NVMe Base 2.0, 5.16.1) and the discovery log page (NVMe over Fabrics 1.1, 5.3 / Base 2.0 5.16.1.23).
#pragma once

#include "protocol/wire.h"
#include "protocol/le128.h"

namespace rdmablk::protocol {

// ---------------------------------------------------------------------------------------------------------
// Error Information (LID 0x01), Base 2.0 Figure 205: one 64-byte entry per error, newest first.
// ---------------------------------------------------------------------------------------------------------
struct ErrorLogEntry {
  le64 error_count;                // 0  unique, incrementing; 0 = invalid entry
  le16 sqid;                       // 8  submission queue of the failed command
  le16 cid;                        // 10 command identifier
  le16 status;                     // 12 status field: bit 0 phase tag, 15:1 status (as in the CQE)
  le16 parameter_error_location;   // 14 byte 7:0 and bit 10:8 within the command of the bad field; FFFFh n/a
  le64 lba;                        // 16 first LBA that hit the error
  le32 nsid;                       // 24 namespace
  uint8_t vs;                      // 28 vendor specific information available (log page id)
  uint8_t trtype;                  // 29 transport type (fabrics), see TransportType
  uint8_t csi;                     // 30 command set indicator
  uint8_t opcode;                  // 31 opcode of the failed command
  le64 command_specific;           // 32 command specific information
  le16 transport_specific;         // 40 transport type specific information
  std::array<uint8_t, 21> rsvd42;  // 42
  uint8_t log_page_version;        // 63 0 for NVMe 1.x layouts, 1 for this one
};
static_assert(sizeof(ErrorLogEntry) == 64);
static_assert(offsetof(ErrorLogEntry, error_count) == 0);
static_assert(offsetof(ErrorLogEntry, sqid) == 8);
static_assert(offsetof(ErrorLogEntry, cid) == 10);
static_assert(offsetof(ErrorLogEntry, status) == 12);
static_assert(offsetof(ErrorLogEntry, parameter_error_location) == 14);
static_assert(offsetof(ErrorLogEntry, lba) == 16);
static_assert(offsetof(ErrorLogEntry, nsid) == 24);
static_assert(offsetof(ErrorLogEntry, vs) == 28);
static_assert(offsetof(ErrorLogEntry, trtype) == 29);
static_assert(offsetof(ErrorLogEntry, csi) == 30);
static_assert(offsetof(ErrorLogEntry, opcode) == 31);
static_assert(offsetof(ErrorLogEntry, command_specific) == 32);
static_assert(offsetof(ErrorLogEntry, transport_specific) == 40);
static_assert(offsetof(ErrorLogEntry, rsvd42) == 42);
static_assert(offsetof(ErrorLogEntry, log_page_version) == 63);

// ---------------------------------------------------------------------------------------------------------
// SMART / Health Information (LID 0x02), Base 2.0 Figure 207. 128-bit counters are le128.
// ---------------------------------------------------------------------------------------------------------
namespace smart {
inline constexpr uint8_t kWarnSpare = 1u << 0;            // available spare below threshold
inline constexpr uint8_t kWarnTemperature = 1u << 1;      // temperature over/under threshold
inline constexpr uint8_t kWarnReliability = 1u << 2;      // NVM subsystem reliability degraded
inline constexpr uint8_t kWarnReadOnly = 1u << 3;         // media placed in read only mode
inline constexpr uint8_t kWarnVolatileBackup = 1u << 4;   // volatile memory backup failed
inline constexpr uint8_t kWarnPmrReadOnly = 1u << 5;      // persistent memory region read only
}  // namespace smart

struct SmartLog {
  uint8_t critical_warning;              // 0   bit mask, smart::kWarn*
  le_bytes<2> composite_temperature;     // 1   kelvin (unaligned)
  uint8_t available_spare;               // 3   percent
  uint8_t available_spare_threshold;     // 4   percent
  uint8_t percentage_used;               // 5   percent of life used (may exceed 100)
  uint8_t endurance_group_warning;       // 6   endurance group critical warning summary
  std::array<uint8_t, 25> rsvd7;         // 7
  le128 data_units_read;                 // 32  thousands of 512-byte units
  le128 data_units_written;              // 48  thousands of 512-byte units
  le128 host_read_commands;              // 64
  le128 host_write_commands;             // 80
  le128 controller_busy_time;            // 96  minutes
  le128 power_cycles;                    // 112
  le128 power_on_hours;                  // 128
  le128 unsafe_shutdowns;                // 144
  le128 media_errors;                    // 160 unrecovered data integrity errors
  le128 num_error_log_entries;           // 176
  le32 warning_temp_time;                // 192 minutes above WCTEMP
  le32 critical_temp_time;               // 196 minutes above CCTEMP
  std::array<le16, 8> temp_sensor;       // 200 sensors 1-8, kelvin
  le32 thermal_mgmt_temp1_count;         // 216
  le32 thermal_mgmt_temp2_count;         // 220
  le32 thermal_mgmt_temp1_time;          // 224 seconds
  le32 thermal_mgmt_temp2_time;          // 228 seconds
  std::array<uint8_t, 280> rsvd232;      // 232
};
static_assert(sizeof(SmartLog) == 512);
static_assert(offsetof(SmartLog, critical_warning) == 0);
static_assert(offsetof(SmartLog, composite_temperature) == 1);
static_assert(offsetof(SmartLog, available_spare) == 3);
static_assert(offsetof(SmartLog, available_spare_threshold) == 4);
static_assert(offsetof(SmartLog, percentage_used) == 5);
static_assert(offsetof(SmartLog, endurance_group_warning) == 6);
static_assert(offsetof(SmartLog, rsvd7) == 7);
static_assert(offsetof(SmartLog, data_units_read) == 32);
static_assert(offsetof(SmartLog, data_units_written) == 48);
static_assert(offsetof(SmartLog, host_read_commands) == 64);
static_assert(offsetof(SmartLog, host_write_commands) == 80);
static_assert(offsetof(SmartLog, controller_busy_time) == 96);
static_assert(offsetof(SmartLog, power_cycles) == 112);
static_assert(offsetof(SmartLog, power_on_hours) == 128);
static_assert(offsetof(SmartLog, unsafe_shutdowns) == 144);
static_assert(offsetof(SmartLog, media_errors) == 160);
static_assert(offsetof(SmartLog, num_error_log_entries) == 176);
static_assert(offsetof(SmartLog, warning_temp_time) == 192);
static_assert(offsetof(SmartLog, critical_temp_time) == 196);
static_assert(offsetof(SmartLog, temp_sensor) == 200);
static_assert(offsetof(SmartLog, thermal_mgmt_temp1_count) == 216);
static_assert(offsetof(SmartLog, thermal_mgmt_temp2_count) == 220);
static_assert(offsetof(SmartLog, thermal_mgmt_temp1_time) == 224);
static_assert(offsetof(SmartLog, thermal_mgmt_temp2_time) == 228);
static_assert(offsetof(SmartLog, rsvd232) == 232);

// SMART "data units" count thousands of 512-byte units, rounded up.
constexpr uint64_t smart_data_units(uint64_t bytes) noexcept { return (bytes / 512 + 999) / 1000; }

// ---------------------------------------------------------------------------------------------------------
// Firmware Slot Information (LID 0x03), Base 2.0 Figure 209.
// ---------------------------------------------------------------------------------------------------------
struct FirmwareSlotLog {
  uint8_t afi;                                   // 0  active slot 2:0, next-reset slot 6:4
  std::array<uint8_t, 7> rsvd1;                  // 1
  std::array<std::array<char, 8>, 7> frs;        // 8  FRS1..FRS7: revision per slot, ASCII, 0 = empty
  std::array<uint8_t, 448> rsvd64;               // 64
};
static_assert(sizeof(FirmwareSlotLog) == 512);
static_assert(offsetof(FirmwareSlotLog, afi) == 0);
static_assert(offsetof(FirmwareSlotLog, rsvd1) == 1);
static_assert(offsetof(FirmwareSlotLog, frs) == 8);
static_assert(offsetof(FirmwareSlotLog, rsvd64) == 64);

// ---------------------------------------------------------------------------------------------------------
// Changed Namespace List (LID 0x04), Base 2.0 Figure 210: up to 1024 NSIDs; first entry FFFFFFFFh means
// more than 1024 changed.
// ---------------------------------------------------------------------------------------------------------
struct ChangedNamespaceList {
  std::array<le32, 1024> nsid;  // 0
};
static_assert(sizeof(ChangedNamespaceList) == 4096);
static_assert(offsetof(ChangedNamespaceList, nsid) == 0);
inline constexpr uint32_t kChangedNsOverflow = 0xFFFFFFFF;

// ---------------------------------------------------------------------------------------------------------
// Commands Supported and Effects (LID 0x05), Base 2.0 Figures 211-212.
// ---------------------------------------------------------------------------------------------------------
namespace effects {
inline constexpr uint32_t kCsupp = 1u << 0;   // command supported
inline constexpr uint32_t kLbcc = 1u << 1;    // logical block content change
inline constexpr uint32_t kNcc = 1u << 2;     // namespace capability change
inline constexpr uint32_t kNic = 1u << 3;     // namespace inventory change
inline constexpr uint32_t kCcc = 1u << 4;     // controller capability change
inline constexpr uint32_t kCseShift = 16;     // 18:16 command submission and execution
inline constexpr uint32_t kUuidSelection = 1u << 19;
inline constexpr uint32_t kCspShift = 20;     // 31:20 command scope
}  // namespace effects

struct CommandEffectsLog {
  std::array<le32, 256> acs;          // 0    admin command effects, by opcode
  std::array<le32, 256> iocs;         // 1024 I/O command effects, by opcode
  std::array<uint8_t, 2048> rsvd2048;  // 2048
};
static_assert(sizeof(CommandEffectsLog) == 4096);
static_assert(offsetof(CommandEffectsLog, acs) == 0);
static_assert(offsetof(CommandEffectsLog, iocs) == 1024);
static_assert(offsetof(CommandEffectsLog, rsvd2048) == 2048);

// ---------------------------------------------------------------------------------------------------------
// Discovery log page (LID 0x70), NVMe-oF 1.1 Figures 31-32 / Base 2.0 Figures 263-264.
// ---------------------------------------------------------------------------------------------------------

// TRTYPE
enum class TransportType : uint8_t { rdma = 1, fc = 2, tcp = 3, loop = 254 /* host internal */ };
// ADRFAM
enum class AddressFamily : uint8_t { pci = 0, ipv4 = 1, ipv6 = 2, ib = 3, fc = 4, loop = 254 };
// SUBTYPE
enum class SubsystemType : uint8_t {
  discovery_referral = 1,  // a referral to another discovery subsystem
  nvme = 2,                // an NVM subsystem with I/O controllers
  current_discovery = 3,   // the discovery subsystem that returned this log page
};
// TREQ: secure channel 1:0, bit 2 "SQ flow control disable supported".
namespace treq {
inline constexpr uint8_t kSecureNotSpecified = 0;
inline constexpr uint8_t kSecureRequired = 1;
inline constexpr uint8_t kSecureNotRequired = 2;
inline constexpr uint8_t kSecureMask = 0x3;
inline constexpr uint8_t kDisableSqFlowSupported = 1u << 2;
}  // namespace treq
// EFLAGS
namespace eflags {
inline constexpr uint16_t kExplicitPersistentConnection = 1u << 0;  // EPCSD
inline constexpr uint16_t kDuplicateReturnedInfo = 1u << 1;         // DUPRETINFO
inline constexpr uint16_t kNoCdcConnectivity = 1u << 2;             // NCC
}  // namespace eflags

// TSAS for RDMA (NVMe-oF 1.1 Figure 33).
enum class RdmaQpType : uint8_t { reliable_connected = 1, reliable_datagram = 2 };
enum class RdmaProviderType : uint8_t { not_specified = 1, infiniband = 2, roce = 3, roce_v2 = 4, iwarp = 5 };
enum class RdmaCms : uint8_t { rdma_cm = 1 };
struct RdmaTsas {
  uint8_t qptype;                   // 0  RDMA_QPTYPE
  uint8_t prtype;                   // 1  RDMA_PRTYPE
  uint8_t cms;                      // 2  RDMA_CMS
  std::array<uint8_t, 5> rsvd3;     // 3
  le16 pkey;                        // 8  RDMA_PKEY (InfiniBand partition key)
  std::array<uint8_t, 246> rsvd10;  // 10
};
static_assert(sizeof(RdmaTsas) == 256);
static_assert(offsetof(RdmaTsas, qptype) == 0);
static_assert(offsetof(RdmaTsas, prtype) == 1);
static_assert(offsetof(RdmaTsas, cms) == 2);
static_assert(offsetof(RdmaTsas, rsvd3) == 3);
static_assert(offsetof(RdmaTsas, pkey) == 8);
static_assert(offsetof(RdmaTsas, rsvd10) == 10);

// TSAS for TCP (NVMe/TCP Transport Specification Figure 19).
enum class TcpSecType : uint8_t { none = 0, tls12 = 1 /* obsolete */, tls13 = 2 };
struct TcpTsas {
  uint8_t sectype;                 // 0 security type
  std::array<uint8_t, 255> rsvd1;  // 1
};
static_assert(sizeof(TcpTsas) == 256);
static_assert(offsetof(TcpTsas, sectype) == 0);
static_assert(offsetof(TcpTsas, rsvd1) == 1);

// The TLS secure channel of an NVMe/TCP port as its discovery log entry states it (TP 8011): SECTYPE 2
// (TLS 1.3) with TREQ 1:0 = 01b when a listener requires TLS, 10b when it also takes plain connections;
// no TLS: SECTYPE 0 and TREQ 1:0 = 00b (not specified), what nvmet reports for a plain port.
enum class TcpSecureChannel : uint8_t { none, tls13_optional, tls13_required };
inline uint8_t tcp_secure_channel_treq(TcpSecureChannel c) noexcept {
  switch (c) {
    case TcpSecureChannel::tls13_required: return treq::kSecureRequired;
    case TcpSecureChannel::tls13_optional: return treq::kSecureNotRequired;
    case TcpSecureChannel::none: break;
  }
  return treq::kSecureNotSpecified;
}
inline TcpTsas tcp_secure_channel_tsas(TcpSecureChannel c) noexcept {
  TcpTsas t{};
  t.sectype = static_cast<uint8_t>(c == TcpSecureChannel::none ? TcpSecType::none : TcpSecType::tls13);
  return t;
}

struct DiscoveryLogHeader {
  le64 genctr;                         // 0  generation counter: changes whenever the log changes
  le64 numrec;                         // 8  number of records
  le16 recfmt;                         // 16 record format, 0
  std::array<uint8_t, 1006> rsvd18;    // 18
};
static_assert(sizeof(DiscoveryLogHeader) == 1024);
static_assert(offsetof(DiscoveryLogHeader, genctr) == 0);
static_assert(offsetof(DiscoveryLogHeader, numrec) == 8);
static_assert(offsetof(DiscoveryLogHeader, recfmt) == 16);
static_assert(offsetof(DiscoveryLogHeader, rsvd18) == 18);

struct DiscoveryLogEntry {
  uint8_t trtype;                     // 0   transport type
  uint8_t adrfam;                     // 1   address family
  uint8_t subtype;                    // 2   subsystem type
  uint8_t treq;                       // 3   transport requirements
  le16 portid;                        // 4   port identifier
  le16 cntlid;                        // 6   controller id: 0xFFFF dynamic model
  le16 asqsz;                         // 8   admin max SQ size (>= 32)
  le16 eflags;                        // 10  entry flags
  std::array<uint8_t, 20> rsvd12;     // 12
  std::array<char, 32> trsvcid;       // 32  transport service id (port number as ASCII), padded
  std::array<uint8_t, 192> rsvd64;    // 64
  std::array<char, 256> subnqn;       // 256 subsystem NQN, NUL terminated
  std::array<char, 256> traddr;       // 512 transport address (IP as ASCII), padded
  std::array<uint8_t, 256> tsas;      // 768 transport specific address subtype

  RdmaTsas rdma_tsas() const noexcept { return load<RdmaTsas>(tsas.data()); }
  TcpTsas tcp_tsas() const noexcept { return load<TcpTsas>(tsas.data()); }
  void set_tsas(const RdmaTsas& t) noexcept { store(tsas.data(), t); }
  void set_tsas(const TcpTsas& t) noexcept { store(tsas.data(), t); }
};
static_assert(sizeof(DiscoveryLogEntry) == 1024);
static_assert(offsetof(DiscoveryLogEntry, trtype) == 0);
static_assert(offsetof(DiscoveryLogEntry, adrfam) == 1);
static_assert(offsetof(DiscoveryLogEntry, subtype) == 2);
static_assert(offsetof(DiscoveryLogEntry, treq) == 3);
static_assert(offsetof(DiscoveryLogEntry, portid) == 4);
static_assert(offsetof(DiscoveryLogEntry, cntlid) == 6);
static_assert(offsetof(DiscoveryLogEntry, asqsz) == 8);
static_assert(offsetof(DiscoveryLogEntry, eflags) == 10);
static_assert(offsetof(DiscoveryLogEntry, rsvd12) == 12);
static_assert(offsetof(DiscoveryLogEntry, trsvcid) == 32);
static_assert(offsetof(DiscoveryLogEntry, rsvd64) == 64);
static_assert(offsetof(DiscoveryLogEntry, subnqn) == 256);
static_assert(offsetof(DiscoveryLogEntry, traddr) == 512);
static_assert(offsetof(DiscoveryLogEntry, tsas) == 768);

// Sets TREQ 1:0 (the other TREQ bits are kept) and the TCP TSAS for `c`.
inline void set_tcp_secure_channel(DiscoveryLogEntry& e, TcpSecureChannel c) noexcept {
  e.treq = static_cast<uint8_t>((e.treq & ~treq::kSecureMask) | tcp_secure_channel_treq(c));
  e.set_tsas(tcp_secure_channel_tsas(c));
}

static_assert(WireLayout<ErrorLogEntry>);
static_assert(WireLayout<SmartLog>);
static_assert(WireLayout<FirmwareSlotLog>);
static_assert(WireLayout<ChangedNamespaceList>);
static_assert(WireLayout<CommandEffectsLog>);
static_assert(WireLayout<DiscoveryLogHeader>);
static_assert(WireLayout<DiscoveryLogEntry>);
static_assert(std::is_trivially_copyable_v<RdmaTsas> && std::is_trivially_copyable_v<TcpTsas>);

}  // namespace rdmablk::protocol

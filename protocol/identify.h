// Identify data structures (NVMe Base 2.0, 5.17.2; NVM Command Set 1.0, 4.1.5). All are 4096 bytes.
#pragma once

#include <optional>

#include "protocol/wire.h"
#include "protocol/le128.h"
#include "protocol/result.h"

namespace rdmablk::protocol {

// ---------------------------------------------------------------------------------------------------------
// Identify Controller (CNS 0x01), Base 2.0 Figure 275
// ---------------------------------------------------------------------------------------------------------

// Power State Descriptor (Base 2.0 Figure 276), 32 bytes.
struct PowerStateDescriptor {
  le16 mp;                        // 0  maximum power (centiwatts, or 0.0001 W if MXPS)
  uint8_t rsvd2;                  // 2
  uint8_t flags;                  // 3  MXPS 0 (max power scale), NOPS 1 (non-operational state)
  le32 enlat;                     // 4  entry latency, us
  le32 exlat;                     // 8  exit latency, us
  uint8_t rrt;                    // 12 relative read throughput 4:0
  uint8_t rrl;                    // 13 relative read latency 4:0
  uint8_t rwt;                    // 14 relative write throughput 4:0
  uint8_t rwl;                    // 15 relative write latency 4:0
  le16 idlp;                      // 16 idle power
  uint8_t ips;                    // 18 idle power scale 7:6
  uint8_t rsvd19;                 // 19
  le16 actp;                      // 20 active power
  uint8_t apw_aps;                // 22 active power workload 2:0, active power scale 7:6
  std::array<uint8_t, 9> rsvd23;  // 23
};
static_assert(sizeof(PowerStateDescriptor) == 32);
static_assert(offsetof(PowerStateDescriptor, mp) == 0);
static_assert(offsetof(PowerStateDescriptor, rsvd2) == 2);
static_assert(offsetof(PowerStateDescriptor, flags) == 3);
static_assert(offsetof(PowerStateDescriptor, enlat) == 4);
static_assert(offsetof(PowerStateDescriptor, exlat) == 8);
static_assert(offsetof(PowerStateDescriptor, rrt) == 12);
static_assert(offsetof(PowerStateDescriptor, rrl) == 13);
static_assert(offsetof(PowerStateDescriptor, rwt) == 14);
static_assert(offsetof(PowerStateDescriptor, rwl) == 15);
static_assert(offsetof(PowerStateDescriptor, idlp) == 16);
static_assert(offsetof(PowerStateDescriptor, ips) == 18);
static_assert(offsetof(PowerStateDescriptor, rsvd19) == 19);
static_assert(offsetof(PowerStateDescriptor, actp) == 20);
static_assert(offsetof(PowerStateDescriptor, apw_aps) == 22);
static_assert(offsetof(PowerStateDescriptor, rsvd23) == 23);

// Bits of the Identify Controller fields the target fills and the host checks.
namespace idctl {
// CMIC
inline constexpr uint8_t kCmicMultiPort = 1u << 0;
inline constexpr uint8_t kCmicMultiController = 1u << 1;
inline constexpr uint8_t kCmicSriov = 1u << 2;
inline constexpr uint8_t kCmicAna = 1u << 3;
// OAES (optional asynchronous events supported)
inline constexpr uint32_t kOaesNamespaceAttribute = 1u << 8;
inline constexpr uint32_t kOaesFirmwareActivation = 1u << 9;
inline constexpr uint32_t kOaesAnaChange = 1u << 11;
inline constexpr uint32_t kOaesDiscoveryLogChange = 1u << 31;
// CTRATT (controller attributes)
inline constexpr uint32_t kCtrattHostId128 = 1u << 0;     // 128-bit host identifier
inline constexpr uint32_t kCtrattNopspm = 1u << 1;        // non-operational power state permissive mode
inline constexpr uint32_t kCtrattNvmSets = 1u << 2;
inline constexpr uint32_t kCtrattReadRecovery = 1u << 3;
inline constexpr uint32_t kCtrattEnduranceGroups = 1u << 4;
inline constexpr uint32_t kCtrattPredictableLatency = 1u << 5;
inline constexpr uint32_t kCtrattTbkas = 1u << 6;         // traffic based keep alive
inline constexpr uint32_t kCtrattNamespaceGranularity = 1u << 7;
inline constexpr uint32_t kCtrattSqAssociations = 1u << 8;
inline constexpr uint32_t kCtrattUuidList = 1u << 9;
// ANACAP (asymmetric namespace access capabilities)
inline constexpr uint8_t kAnacapOptimized = 1u << 0;        // reports the optimized state
inline constexpr uint8_t kAnacapNonOptimized = 1u << 1;
inline constexpr uint8_t kAnacapInaccessible = 1u << 2;
inline constexpr uint8_t kAnacapPersistentLoss = 1u << 3;
inline constexpr uint8_t kAnacapChange = 1u << 4;
inline constexpr uint8_t kAnacapGrpidFixed = 1u << 6;       // ANAGRPID does not change while attached
inline constexpr uint8_t kAnacapGrpidNonZeroNsMgmt = 1u << 7; // non-zero ANAGRPID in Namespace Management
// CNTRLTYPE
inline constexpr uint8_t kCntrltypeIo = 1;
inline constexpr uint8_t kCntrltypeDiscovery = 2;
inline constexpr uint8_t kCntrltypeAdmin = 3;
// OACS (optional admin command support)
inline constexpr uint16_t kOacsSecurity = 1u << 0;
inline constexpr uint16_t kOacsFormat = 1u << 1;
inline constexpr uint16_t kOacsFirmware = 1u << 2;
inline constexpr uint16_t kOacsNamespaceManagement = 1u << 3;
inline constexpr uint16_t kOacsSelfTest = 1u << 4;
inline constexpr uint16_t kOacsDirectives = 1u << 5;
inline constexpr uint16_t kOacsDoorbellBufferConfig = 1u << 8;
// FRMW
inline constexpr uint8_t kFrmwSlot1ReadOnly = 1u << 0;  // slot count in 3:1
// LPA (log page attributes)
inline constexpr uint8_t kLpaSmartPerNamespace = 1u << 0;
inline constexpr uint8_t kLpaCommandEffects = 1u << 1;
inline constexpr uint8_t kLpaExtendedData = 1u << 2;  // NUMDU / LPO supported
inline constexpr uint8_t kLpaTelemetry = 1u << 3;
// ONCS (optional NVM command support)
inline constexpr uint16_t kOncsCompare = 1u << 0;
inline constexpr uint16_t kOncsWriteUncorrectable = 1u << 1;
inline constexpr uint16_t kOncsDsm = 1u << 2;
inline constexpr uint16_t kOncsWriteZeroes = 1u << 3;
inline constexpr uint16_t kOncsSaveSelect = 1u << 4;
inline constexpr uint16_t kOncsReservations = 1u << 5;
inline constexpr uint16_t kOncsTimestamp = 1u << 6;
inline constexpr uint16_t kOncsVerify = 1u << 7;
inline constexpr uint16_t kOncsCopy = 1u << 8;
// FUSES
inline constexpr uint16_t kFusesCompareWrite = 1u << 0;
// VWC
inline constexpr uint8_t kVwcPresent = 1u << 0;
inline constexpr uint8_t kVwcFlushAllNotSupported = 0x2u << 1;  // 2:1 = 10b: NSID FFFFFFFF flush unsupported
inline constexpr uint8_t kVwcFlushAllSupported = 0x3u << 1;     // 2:1 = 11b
// SGLS
inline constexpr uint32_t kSglsSupported = 0x1;                 // 1:0 = 01b, no alignment requirement
inline constexpr uint32_t kSglsDwordAligned = 0x2;              // 1:0 = 10b
inline constexpr uint32_t kSglsKeyed = 1u << 2;                 // keyed SGL data block (RDMA)
inline constexpr uint32_t kSglsBitBucket = 1u << 16;
inline constexpr uint32_t kSglsByteAlignedMetadata = 1u << 17;
inline constexpr uint32_t kSglsLongerThanData = 1u << 18;
inline constexpr uint32_t kSglsMptrSgl = 1u << 19;
inline constexpr uint32_t kSglsOffset = 1u << 20;               // address as offset: in-capsule data
inline constexpr uint32_t kSglsTransport = 1u << 21;            // transport SGL data block (TCP)
// SQES / CQES: required 3:0 and maximum 7:4, as powers of two.
inline constexpr uint8_t kSqes64 = 0x66;
inline constexpr uint8_t kCqes16 = 0x44;
// FCATT (fabrics controller attributes)
inline constexpr uint8_t kFcattStaticModel = 1u << 0;  // 0 = dynamic controller model
// DCTYPE (discovery controller type)
inline constexpr uint8_t kDctypeNotReported = 0;
inline constexpr uint8_t kDctypeDirect = 1;
inline constexpr uint8_t kDctypeCentral = 2;
}  // namespace idctl

struct IdentifyController {
  // Controller capabilities and features
  le16 vid;                           // 0    PCI vendor ID
  le16 ssvid;                         // 2    PCI subsystem vendor ID
  std::array<char, 20> sn;            // 4    serial number, ASCII, space padded
  std::array<char, 40> mn;            // 24   model number, ASCII, space padded
  std::array<char, 8> fr;             // 64   firmware revision, ASCII, space padded
  uint8_t rab;                        // 72   recommended arbitration burst
  std::array<uint8_t, 3> ieee;        // 73   IEEE OUI identifier
  uint8_t cmic;                       // 76   multi-path I/O and namespace sharing capabilities
  uint8_t mdts;                       // 77   maximum data transfer size, 2^n units of CAP.MPSMIN; 0 = none
  le16 cntlid;                        // 78   controller ID
  le32 ver;                           // 80   version (same encoding as VS)
  le32 rtd3r;                         // 84   RTD3 resume latency, us
  le32 rtd3e;                         // 88   RTD3 entry latency, us
  le32 oaes;                          // 92   optional asynchronous events supported
  le32 ctratt;                        // 96   controller attributes
  le16 rrls;                          // 100  read recovery levels supported
  std::array<uint8_t, 9> rsvd102;     // 102
  uint8_t cntrltype;                  // 111  controller type: 1 I/O, 2 discovery, 3 administrative
  std::array<uint8_t, 16> fguid;      // 112  FRU globally unique identifier
  le16 crdt1;                         // 128  command retry delay time 1, 100 ms units
  le16 crdt2;                         // 130  command retry delay time 2
  le16 crdt3;                         // 132  command retry delay time 3
  std::array<uint8_t, 119> rsvd134;   // 134
  uint8_t nvmsr;                      // 253  NVM subsystem report (NVMe-MI)
  uint8_t vwci;                       // 254  VPD write cycle information
  uint8_t mec;                        // 255  management endpoint capabilities
  // Admin command set attributes and optional controller capabilities
  le16 oacs;                          // 256  optional admin command support
  uint8_t acl;                        // 258  abort command limit, 0-based
  uint8_t aerl;                       // 259  asynchronous event request limit, 0-based
  uint8_t frmw;                       // 260  firmware updates
  uint8_t lpa;                        // 261  log page attributes
  uint8_t elpe;                       // 262  error log page entries, 0-based
  uint8_t npss;                       // 263  number of power states support, 0-based
  uint8_t avscc;                      // 264  admin vendor specific command configuration
  uint8_t apsta;                      // 265  autonomous power state transition attributes
  le16 wctemp;                        // 266  warning composite temperature threshold, K
  le16 cctemp;                        // 268  critical composite temperature threshold, K
  le16 mtfa;                          // 270  maximum time for firmware activation, 100 ms
  le32 hmpre;                         // 272  host memory buffer preferred size, 4 KiB
  le32 hmmin;                         // 276  host memory buffer minimum size, 4 KiB
  le128 tnvmcap;                      // 280  total NVM capacity, bytes
  le128 unvmcap;                      // 296  unallocated NVM capacity, bytes
  le32 rpmbs;                         // 312  replay protected memory block support
  le16 edstt;                         // 316  extended device self-test time, minutes
  uint8_t dsto;                       // 318  device self-test options
  uint8_t fwug;                       // 319  firmware update granularity, 4 KiB
  le16 kas;                           // 320  keep alive support: granularity in 100 ms, 0 = unsupported
  le16 hctma;                         // 322  host controlled thermal management attributes
  le16 mntmt;                         // 324  minimum thermal management temperature
  le16 mxtmt;                         // 326  maximum thermal management temperature
  le32 sanicap;                       // 328  sanitize capabilities
  le32 hmminds;                       // 332  host memory buffer minimum descriptor entry size
  le16 hmmaxd;                        // 336  host memory maximum descriptors entries
  le16 nsetidmax;                     // 338  NVM set identifier maximum
  le16 endgidmax;                     // 340  endurance group identifier maximum
  uint8_t anatt;                      // 342  ANA transition time, s
  uint8_t anacap;                     // 343  asymmetric namespace access capabilities
  le32 anagrpmax;                     // 344  ANA group identifier maximum
  le32 nanagrpid;                     // 348  number of ANA group identifiers
  le32 pels;                          // 352  persistent event log size, 64 KiB
  le16 domainid;                      // 356  domain identifier
  std::array<uint8_t, 10> rsvd358;    // 358
  le128 megcap;                       // 368  max endurance group capacity
  std::array<uint8_t, 128> rsvd384;   // 384
  // NVM command set attributes
  uint8_t sqes;                       // 512  SQ entry size: required 3:0, max 7:4 (2^n bytes)
  uint8_t cqes;                       // 513  CQ entry size: required 3:0, max 7:4
  le16 maxcmd;                        // 514  maximum outstanding commands (fabrics)
  le32 nn;                            // 516  number of namespaces (largest valid NSID)
  le16 oncs;                          // 520  optional NVM command support
  le16 fuses;                         // 522  fused operation support
  uint8_t fna;                        // 524  format NVM attributes
  uint8_t vwc;                        // 525  volatile write cache
  le16 awun;                          // 526  atomic write unit normal, 0-based blocks
  le16 awupf;                         // 528  atomic write unit power fail, 0-based blocks
  uint8_t nvscc;                      // 530  I/O command set vendor specific command configuration
  uint8_t nwpc;                       // 531  namespace write protection capabilities
  le16 acwu;                          // 532  atomic compare & write unit, 0-based
  le16 ocfs;                          // 534  copy formats supported
  le32 sgls;                          // 536  SGL support
  le32 mnan;                          // 540  maximum number of allowed namespaces
  le128 maxdna;                       // 544  maximum domain namespace attachments
  le32 maxcna;                        // 560  maximum I/O controller namespace attachments
  std::array<uint8_t, 204> rsvd564;   // 564
  std::array<char, 256> subnqn;       // 768  NVM subsystem NQN, NUL terminated
  std::array<uint8_t, 768> rsvd1024;  // 1024
  // Fabrics specific (NVMe-oF 1.1 Figure 28)
  le32 ioccsz;                        // 1792 I/O queue command capsule size, 16-byte units (>= 4)
  le32 iorcsz;                        // 1796 I/O queue response capsule size, 16-byte units (>= 1)
  le16 icdoff;                        // 1800 in-capsule data offset, 16-byte units after the SQE
  uint8_t fcatt;                      // 1802 fabrics controller attributes (bit 0: static model)
  uint8_t msdbd;                      // 1803 maximum SGL data block descriptors (0 = unlimited)
  le16 ofcs;                          // 1804 optional fabric commands supported (bit 0: Disconnect)
  uint8_t dctype;                     // 1806 discovery controller type
  std::array<uint8_t, 241> rsvd1807;  // 1807
  // Power state descriptors and vendor specific
  std::array<PowerStateDescriptor, 32> psd;  // 2048 PSD0..PSD31
  std::array<uint8_t, 1024> vs;              // 3072 vendor specific
};
static_assert(sizeof(IdentifyController) == 4096);
static_assert(offsetof(IdentifyController, vid) == 0);
static_assert(offsetof(IdentifyController, ssvid) == 2);
static_assert(offsetof(IdentifyController, sn) == 4);
static_assert(offsetof(IdentifyController, mn) == 24);
static_assert(offsetof(IdentifyController, fr) == 64);
static_assert(offsetof(IdentifyController, rab) == 72);
static_assert(offsetof(IdentifyController, ieee) == 73);
static_assert(offsetof(IdentifyController, cmic) == 76);
static_assert(offsetof(IdentifyController, mdts) == 77);
static_assert(offsetof(IdentifyController, cntlid) == 78);
static_assert(offsetof(IdentifyController, ver) == 80);
static_assert(offsetof(IdentifyController, rtd3r) == 84);
static_assert(offsetof(IdentifyController, rtd3e) == 88);
static_assert(offsetof(IdentifyController, oaes) == 92);
static_assert(offsetof(IdentifyController, ctratt) == 96);
static_assert(offsetof(IdentifyController, rrls) == 100);
static_assert(offsetof(IdentifyController, rsvd102) == 102);
static_assert(offsetof(IdentifyController, cntrltype) == 111);
static_assert(offsetof(IdentifyController, fguid) == 112);
static_assert(offsetof(IdentifyController, crdt1) == 128);
static_assert(offsetof(IdentifyController, crdt2) == 130);
static_assert(offsetof(IdentifyController, crdt3) == 132);
static_assert(offsetof(IdentifyController, rsvd134) == 134);
static_assert(offsetof(IdentifyController, nvmsr) == 253);
static_assert(offsetof(IdentifyController, vwci) == 254);
static_assert(offsetof(IdentifyController, mec) == 255);
static_assert(offsetof(IdentifyController, oacs) == 256);
static_assert(offsetof(IdentifyController, acl) == 258);
static_assert(offsetof(IdentifyController, aerl) == 259);
static_assert(offsetof(IdentifyController, frmw) == 260);
static_assert(offsetof(IdentifyController, lpa) == 261);
static_assert(offsetof(IdentifyController, elpe) == 262);
static_assert(offsetof(IdentifyController, npss) == 263);
static_assert(offsetof(IdentifyController, avscc) == 264);
static_assert(offsetof(IdentifyController, apsta) == 265);
static_assert(offsetof(IdentifyController, wctemp) == 266);
static_assert(offsetof(IdentifyController, cctemp) == 268);
static_assert(offsetof(IdentifyController, mtfa) == 270);
static_assert(offsetof(IdentifyController, hmpre) == 272);
static_assert(offsetof(IdentifyController, hmmin) == 276);
static_assert(offsetof(IdentifyController, tnvmcap) == 280);
static_assert(offsetof(IdentifyController, unvmcap) == 296);
static_assert(offsetof(IdentifyController, rpmbs) == 312);
static_assert(offsetof(IdentifyController, edstt) == 316);
static_assert(offsetof(IdentifyController, dsto) == 318);
static_assert(offsetof(IdentifyController, fwug) == 319);
static_assert(offsetof(IdentifyController, kas) == 320);
static_assert(offsetof(IdentifyController, hctma) == 322);
static_assert(offsetof(IdentifyController, mntmt) == 324);
static_assert(offsetof(IdentifyController, mxtmt) == 326);
static_assert(offsetof(IdentifyController, sanicap) == 328);
static_assert(offsetof(IdentifyController, hmminds) == 332);
static_assert(offsetof(IdentifyController, hmmaxd) == 336);
static_assert(offsetof(IdentifyController, nsetidmax) == 338);
static_assert(offsetof(IdentifyController, endgidmax) == 340);
static_assert(offsetof(IdentifyController, anatt) == 342);
static_assert(offsetof(IdentifyController, anacap) == 343);
static_assert(offsetof(IdentifyController, anagrpmax) == 344);
static_assert(offsetof(IdentifyController, nanagrpid) == 348);
static_assert(offsetof(IdentifyController, pels) == 352);
static_assert(offsetof(IdentifyController, domainid) == 356);
static_assert(offsetof(IdentifyController, rsvd358) == 358);
static_assert(offsetof(IdentifyController, megcap) == 368);
static_assert(offsetof(IdentifyController, rsvd384) == 384);
static_assert(offsetof(IdentifyController, sqes) == 512);
static_assert(offsetof(IdentifyController, cqes) == 513);
static_assert(offsetof(IdentifyController, maxcmd) == 514);
static_assert(offsetof(IdentifyController, nn) == 516);
static_assert(offsetof(IdentifyController, oncs) == 520);
static_assert(offsetof(IdentifyController, fuses) == 522);
static_assert(offsetof(IdentifyController, fna) == 524);
static_assert(offsetof(IdentifyController, vwc) == 525);
static_assert(offsetof(IdentifyController, awun) == 526);
static_assert(offsetof(IdentifyController, awupf) == 528);
static_assert(offsetof(IdentifyController, nvscc) == 530);
static_assert(offsetof(IdentifyController, nwpc) == 531);
static_assert(offsetof(IdentifyController, acwu) == 532);
static_assert(offsetof(IdentifyController, ocfs) == 534);
static_assert(offsetof(IdentifyController, sgls) == 536);
static_assert(offsetof(IdentifyController, mnan) == 540);
static_assert(offsetof(IdentifyController, maxdna) == 544);
static_assert(offsetof(IdentifyController, maxcna) == 560);
static_assert(offsetof(IdentifyController, rsvd564) == 564);
static_assert(offsetof(IdentifyController, subnqn) == 768);
static_assert(offsetof(IdentifyController, rsvd1024) == 1024);
static_assert(offsetof(IdentifyController, ioccsz) == 1792);
static_assert(offsetof(IdentifyController, iorcsz) == 1796);
static_assert(offsetof(IdentifyController, icdoff) == 1800);
static_assert(offsetof(IdentifyController, fcatt) == 1802);
static_assert(offsetof(IdentifyController, msdbd) == 1803);
static_assert(offsetof(IdentifyController, ofcs) == 1804);
static_assert(offsetof(IdentifyController, dctype) == 1806);
static_assert(offsetof(IdentifyController, rsvd1807) == 1807);
static_assert(offsetof(IdentifyController, psd) == 2048);
static_assert(offsetof(IdentifyController, vs) == 3072);
static_assert(WireLayout<IdentifyController>);

// ---------------------------------------------------------------------------------------------------------
// Identify Namespace (CNS 0x00), NVM Command Set 1.0 Figure 97
// ---------------------------------------------------------------------------------------------------------

// LBA Format (NVM Command Set 1.0 Figure 98).
struct LbaFormat {
  le16 ms;        // 0 metadata size per block, bytes
  uint8_t lbads;  // 2 LBA data size, 2^n bytes (9 = 512, 12 = 4096); 0 = format not available
  uint8_t rp;     // 3 relative performance 1:0 (0 best .. 3 degraded)
};
static_assert(sizeof(LbaFormat) == 4);
static_assert(offsetof(LbaFormat, ms) == 0);
static_assert(offsetof(LbaFormat, lbads) == 2);
static_assert(offsetof(LbaFormat, rp) == 3);

namespace idns {
inline constexpr uint8_t kNsfeatThinProvisioning = 1u << 0;
inline constexpr uint8_t kNsfeatNsAtomics = 1u << 1;     // NAWUN/NAWUPF/NACWU valid
inline constexpr uint8_t kNsfeatDeallocErrors = 1u << 2;
inline constexpr uint8_t kNsfeatUidReuse = 1u << 3;
inline constexpr uint8_t kNsfeatOptPerf = 1u << 4;       // NPWG/NPWA/NPDG/NPDA/NOWS valid
inline constexpr uint8_t kFlbasFormatLowMask = 0x0F;     // 3:0 format index (low bits)
inline constexpr uint8_t kFlbasExtendedMetadata = 1u << 4;
inline constexpr uint8_t kFlbasFormatHighMask = 0x60;    // 6:5 format index bits 5:4
inline constexpr uint8_t kNmicShared = 1u << 0;
inline constexpr uint8_t kDlfeatReadZeroes = 0x1;        // 2:0 = 001b: deallocated blocks read as zeroes
inline constexpr uint8_t kDlfeatWriteZeroesDeallocate = 1u << 3;
inline constexpr uint8_t kNsattrWriteProtected = 1u << 0;
}  // namespace idns

struct IdentifyNamespace {
  le64 nsze;                          // 0    namespace size, blocks
  le64 ncap;                          // 8    namespace capacity, blocks (0 = not active)
  le64 nuse;                          // 16   namespace utilization, blocks
  uint8_t nsfeat;                     // 24   namespace features
  uint8_t nlbaf;                      // 25   number of LBA formats, 0-based
  uint8_t flbas;                      // 26   formatted LBA size: index 3:0 (+ 6:5), extended metadata 4
  uint8_t mc;                         // 27   metadata capabilities
  uint8_t dpc;                        // 28   end-to-end data protection capabilities
  uint8_t dps;                        // 29   end-to-end data protection type settings
  uint8_t nmic;                       // 30   multi-path I/O and namespace sharing (bit 0 shared)
  uint8_t rescap;                     // 31   reservation capabilities
  uint8_t fpi;                        // 32   format progress indicator
  uint8_t dlfeat;                     // 33   deallocate logical block features
  le16 nawun;                         // 34   namespace atomic write unit normal, 0-based
  le16 nawupf;                        // 36   namespace atomic write unit power fail, 0-based
  le16 nacwu;                         // 38   namespace atomic compare & write unit, 0-based
  le16 nabsn;                         // 40   namespace atomic boundary size normal
  le16 nabo;                          // 42   namespace atomic boundary offset
  le16 nabspf;                        // 44   namespace atomic boundary size power fail
  le16 noiob;                         // 46   namespace optimal I/O boundary, blocks
  le128 nvmcap;                       // 48   NVM capacity, bytes
  le16 npwg;                          // 64   preferred write granularity, 0-based blocks
  le16 npwa;                          // 66   preferred write alignment, 0-based
  le16 npdg;                          // 68   preferred deallocate granularity, 0-based
  le16 npda;                          // 70   preferred deallocate alignment, 0-based
  le16 nows;                          // 72   optimal write size, 0-based
  le16 mssrl;                         // 74   maximum single source range length (copy)
  le32 mcl;                           // 76   maximum copy length
  uint8_t msrc;                       // 80   maximum source range count, 0-based
  uint8_t rsvd81;                     // 81
  uint8_t nulbaf;                     // 82   number of unique capability LBA formats
  std::array<uint8_t, 9> rsvd83;      // 83
  le32 anagrpid;                      // 92   ANA group identifier
  std::array<uint8_t, 3> rsvd96;      // 96
  uint8_t nsattr;                     // 99   namespace attributes (bit 0 write protected)
  le16 nvmsetid;                      // 100  NVM set identifier
  le16 endgid;                        // 102  endurance group identifier
  std::array<uint8_t, 16> nguid;      // 104  namespace globally unique identifier
  std::array<uint8_t, 8> eui64;       // 120  IEEE extended unique identifier
  std::array<LbaFormat, 64> lbaf;     // 128  LBA format 0..63
  std::array<uint8_t, 3328> rsvd384;  // 384
  std::array<uint8_t, 384> vs;        // 3712 vendor specific

  constexpr uint8_t format_index() const noexcept {
    return static_cast<uint8_t>((flbas & idns::kFlbasFormatLowMask) | (flbas & idns::kFlbasFormatHighMask) >> 1);
  }
};
static_assert(sizeof(IdentifyNamespace) == 4096);
static_assert(offsetof(IdentifyNamespace, nsze) == 0);
static_assert(offsetof(IdentifyNamespace, ncap) == 8);
static_assert(offsetof(IdentifyNamespace, nuse) == 16);
static_assert(offsetof(IdentifyNamespace, nsfeat) == 24);
static_assert(offsetof(IdentifyNamespace, nlbaf) == 25);
static_assert(offsetof(IdentifyNamespace, flbas) == 26);
static_assert(offsetof(IdentifyNamespace, mc) == 27);
static_assert(offsetof(IdentifyNamespace, dpc) == 28);
static_assert(offsetof(IdentifyNamespace, dps) == 29);
static_assert(offsetof(IdentifyNamespace, nmic) == 30);
static_assert(offsetof(IdentifyNamespace, rescap) == 31);
static_assert(offsetof(IdentifyNamespace, fpi) == 32);
static_assert(offsetof(IdentifyNamespace, dlfeat) == 33);
static_assert(offsetof(IdentifyNamespace, nawun) == 34);
static_assert(offsetof(IdentifyNamespace, nawupf) == 36);
static_assert(offsetof(IdentifyNamespace, nacwu) == 38);
static_assert(offsetof(IdentifyNamespace, nabsn) == 40);
static_assert(offsetof(IdentifyNamespace, nabo) == 42);
static_assert(offsetof(IdentifyNamespace, nabspf) == 44);
static_assert(offsetof(IdentifyNamespace, noiob) == 46);
static_assert(offsetof(IdentifyNamespace, nvmcap) == 48);
static_assert(offsetof(IdentifyNamespace, npwg) == 64);
static_assert(offsetof(IdentifyNamespace, npwa) == 66);
static_assert(offsetof(IdentifyNamespace, npdg) == 68);
static_assert(offsetof(IdentifyNamespace, npda) == 70);
static_assert(offsetof(IdentifyNamespace, nows) == 72);
static_assert(offsetof(IdentifyNamespace, mssrl) == 74);
static_assert(offsetof(IdentifyNamespace, mcl) == 76);
static_assert(offsetof(IdentifyNamespace, msrc) == 80);
static_assert(offsetof(IdentifyNamespace, rsvd81) == 81);
static_assert(offsetof(IdentifyNamespace, nulbaf) == 82);
static_assert(offsetof(IdentifyNamespace, rsvd83) == 83);
static_assert(offsetof(IdentifyNamespace, anagrpid) == 92);
static_assert(offsetof(IdentifyNamespace, rsvd96) == 96);
static_assert(offsetof(IdentifyNamespace, nsattr) == 99);
static_assert(offsetof(IdentifyNamespace, nvmsetid) == 100);
static_assert(offsetof(IdentifyNamespace, endgid) == 102);
static_assert(offsetof(IdentifyNamespace, nguid) == 104);
static_assert(offsetof(IdentifyNamespace, eui64) == 120);
static_assert(offsetof(IdentifyNamespace, lbaf) == 128);
static_assert(offsetof(IdentifyNamespace, rsvd384) == 384);
static_assert(offsetof(IdentifyNamespace, vs) == 3712);
static_assert(WireLayout<IdentifyNamespace>);

// ---------------------------------------------------------------------------------------------------------
// Active Namespace ID list (CNS 0x02) and Namespace Identification Descriptor list (CNS 0x03)
// ---------------------------------------------------------------------------------------------------------

// Up to 1024 NSIDs in increasing order, greater than the command's NSID; unused entries are 0.
struct NamespaceList {
  std::array<le32, 1024> nsid;  // 0
};
static_assert(sizeof(NamespaceList) == 4096);
static_assert(offsetof(NamespaceList, nsid) == 0);

// Builds the CNS 0x02 reply: the NSIDs of `active` (sorted ascending) greater than `after`, at most 1024.
// (NSID 0xFFFFFFFE and 0xFFFFFFFF in the command are invalid: the caller completes them with an error.)
NamespaceList make_active_namespace_list(std::span<const uint32_t> active_sorted, uint32_t after) noexcept;

// Namespace Identifier Type (Base 2.0 Figure 281).
enum class Nidt : uint8_t { eui64 = 0x1, nguid = 0x2, uuid = 0x3, csi = 0x4 };
constexpr uint8_t nid_length(Nidt t) noexcept {
  switch (t) {
    case Nidt::eui64: return 8;
    case Nidt::nguid: return 16;
    case Nidt::uuid: return 16;
    case Nidt::csi: return 1;
  }
  return 0;
}

// Descriptor header; NIDL bytes of identifier follow it.
struct NsIdDescriptorHeader {
  uint8_t nidt;                  // 0 namespace identifier type
  uint8_t nidl;                  // 1 namespace identifier length
  std::array<uint8_t, 2> rsvd2;  // 2
};
static_assert(sizeof(NsIdDescriptorHeader) == 4);
static_assert(offsetof(NsIdDescriptorHeader, nidt) == 0);
static_assert(offsetof(NsIdDescriptorHeader, nidl) == 1);
static_assert(offsetof(NsIdDescriptorHeader, rsvd2) == 2);

// The identifiers of one namespace; each is optional.
struct NamespaceIds {
  std::optional<std::array<uint8_t, 8>> eui64;
  std::optional<std::array<uint8_t, 16>> nguid;
  std::optional<std::array<uint8_t, 16>> uuid;
  std::optional<uint8_t> csi;
};

// Builds the 4096-byte CNS 0x03 reply: EUI64, NGUID, UUID, CSI in that order (those present), zero after.
std::array<uint8_t, 4096> make_ns_id_descriptor_list(const NamespaceIds& ids) noexcept;

// Parses a descriptor list. Stops at a NIDT of 0 or the end of the buffer. Rejects (offset within `list`):
// a header that does not fit (offset of the header), a known NIDT with the wrong NIDL (offset of NIDL),
// an identifier that runs past the buffer (offset of NIDL), a type given twice (offset of NIDT).
// Unknown types are skipped.
Decoded<NamespaceIds> parse_ns_id_descriptor_list(std::span<const uint8_t> list) noexcept;

}  // namespace rdmablk::protocol

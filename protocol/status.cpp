#include "protocol/status.h"

#include <cstdio>

namespace rdmablk::protocol {

namespace {

// Generic command status (SCT 0): Base 2.0 Figure 102 (0x00-0x7F) and NVM Command Set Figure 103 (0x80-).
const char* generic_name(uint8_t sc) noexcept {
  switch (sc) {
    case 0x00: return "Successful Completion";
    case 0x01: return "Invalid Command Opcode";
    case 0x02: return "Invalid Field in Command";
    case 0x03: return "Command ID Conflict";
    case 0x04: return "Data Transfer Error";
    case 0x05: return "Commands Aborted due to Power Loss Notification";
    case 0x06: return "Internal Error";
    case 0x07: return "Command Abort Requested";
    case 0x08: return "Command Aborted due to SQ Deletion";
    case 0x09: return "Command Aborted due to Failed Fused Command";
    case 0x0A: return "Command Aborted due to Missing Fused Command";
    case 0x0B: return "Invalid Namespace or Format";
    case 0x0C: return "Command Sequence Error";
    case 0x0D: return "Invalid SGL Segment Descriptor";
    case 0x0E: return "Invalid Number of SGL Descriptors";
    case 0x0F: return "Data SGL Length Invalid";
    case 0x10: return "Metadata SGL Length Invalid";
    case 0x11: return "SGL Descriptor Type Invalid";
    case 0x12: return "Invalid Use of Controller Memory Buffer";
    case 0x13: return "PRP Offset Invalid";
    case 0x14: return "Atomic Write Unit Exceeded";
    case 0x15: return "Operation Denied";
    case 0x16: return "SGL Offset Invalid";
    case 0x18: return "Host Identifier Inconsistent Format";
    case 0x19: return "Keep Alive Timer Expired";
    case 0x1A: return "Keep Alive Timeout Invalid";
    case 0x1B: return "Command Aborted due to Preempt and Abort";
    case 0x1C: return "Sanitize Failed";
    case 0x1D: return "Sanitize In Progress";
    case 0x1E: return "SGL Data Block Granularity Invalid";
    case 0x1F: return "Command Not Supported for Queue in CMB";
    case 0x20: return "Namespace is Write Protected";
    case 0x21: return "Command Interrupted";
    case 0x22: return "Transient Transport Error";
    case 0x23: return "Command Prohibited by Command and Feature Lockdown";
    case 0x24: return "Admin Command Media Not Ready";
    case 0x80: return "LBA Out of Range";
    case 0x81: return "Capacity Exceeded";
    case 0x82: return "Namespace Not Ready";
    case 0x83: return "Reservation Conflict";
    case 0x84: return "Format In Progress";
    default: return nullptr;
  }
}

// Command specific status (SCT 1): admin commands (Base 2.0 Figure 104) below 0x80; from 0x80 the NVM
// command set (NVM Command Set Figure 104) and the fabrics commands (Base 2.0 Figure 105 / NVMe-oF 1.1
// Figure 11) reuse the same codes, so names give both readings.
const char* command_specific_name(uint8_t sc) noexcept {
  switch (sc) {
    case 0x00: return "Completion Queue Invalid";
    case 0x01: return "Invalid Queue Identifier";
    case 0x02: return "Invalid Queue Size";
    case 0x03: return "Abort Command Limit Exceeded";
    case 0x05: return "Asynchronous Event Request Limit Exceeded";
    case 0x06: return "Invalid Firmware Slot";
    case 0x07: return "Invalid Firmware Image";
    case 0x08: return "Invalid Interrupt Vector";
    case 0x09: return "Invalid Log Page";
    case 0x0A: return "Invalid Format";
    case 0x0B: return "Firmware Activation Requires Conventional Reset";
    case 0x0C: return "Invalid Queue Deletion";
    case 0x0D: return "Feature Identifier Not Saveable";
    case 0x0E: return "Feature Not Changeable";
    case 0x0F: return "Feature Not Namespace Specific";
    case 0x10: return "Firmware Activation Requires NVM Subsystem Reset";
    case 0x11: return "Firmware Activation Requires Controller Level Reset";
    case 0x12: return "Firmware Activation Requires Maximum Time Violation";
    case 0x13: return "Firmware Activation Prohibited";
    case 0x14: return "Overlapping Range";
    case 0x15: return "Namespace Insufficient Capacity";
    case 0x16: return "Namespace Identifier Unavailable";
    case 0x18: return "Namespace Already Attached";
    case 0x19: return "Namespace Is Private";
    case 0x1A: return "Namespace Not Attached";
    case 0x1B: return "Thin Provisioning Not Supported";
    case 0x1C: return "Controller List Invalid";
    case 0x1D: return "Device Self-test In Progress";
    case 0x1E: return "Boot Partition Write Prohibited";
    case 0x1F: return "Invalid Controller Identifier";
    case 0x20: return "Invalid Secondary Controller State";
    case 0x21: return "Invalid Number of Controller Resources";
    case 0x22: return "Invalid Resource Identifier";
    case 0x23: return "Sanitize Prohibited While Persistent Memory Region is Enabled";
    case 0x24: return "ANA Group Identifier Invalid";
    case 0x25: return "ANA Attach Failed";
    case 0x26: return "Insufficient Capacity";
    case 0x27: return "Namespace Attachment Limit Exceeded";
    case 0x28: return "Prohibition of Command Execution Not Supported";
    case 0x29: return "I/O Command Set Not Supported";
    case 0x2A: return "I/O Command Set Not Enabled";
    case 0x2B: return "I/O Command Set Combination Rejected";
    case 0x2C: return "Invalid I/O Command Set";
    case 0x2D: return "Identifier Unavailable";
    case 0x80: return "Connect Incompatible Format / Conflicting Attributes";
    case 0x81: return "Connect Controller Busy / Invalid Protection Information";
    case 0x82: return "Connect Invalid Parameters / Attempted Write to Read Only Range";
    case 0x83: return "Connect Restart Discovery / Command Size Limit Exceeded";
    case 0x84: return "Connect Invalid Host";
    case 0x85: return "Invalid Queue Type";
    case 0x90: return "Discover Restart";
    case 0x91: return "Authentication Required";
    default: return nullptr;
  }
}

// Media and data integrity errors (SCT 2), Base 2.0 Figure 106.
const char* media_name(uint8_t sc) noexcept {
  switch (sc) {
    case 0x80: return "Write Fault";
    case 0x81: return "Unrecovered Read Error";
    case 0x82: return "End-to-end Guard Check Error";
    case 0x83: return "End-to-end Application Tag Check Error";
    case 0x84: return "End-to-end Reference Tag Check Error";
    case 0x85: return "Compare Failure";
    case 0x86: return "Access Denied";
    case 0x87: return "Deallocated or Unwritten Logical Block";
    case 0x88: return "End-to-End Storage Tag Check Error";
    default: return nullptr;
  }
}

// Path related status (SCT 3), Base 2.0 Figure 107.
const char* path_name(uint8_t sc) noexcept {
  switch (sc) {
    case 0x00: return "Internal Path Error";
    case 0x01: return "Asymmetric Access Persistent Loss";
    case 0x02: return "Asymmetric Access Inaccessible";
    case 0x03: return "Asymmetric Access Transition";
    case 0x60: return "Controller Pathing Error";
    case 0x70: return "Host Pathing Error";
    case 0x71: return "Command Aborted By Host";
    default: return nullptr;
  }
}

}  // namespace

const char* status_name(Status s) noexcept {
  const char* name = nullptr;
  switch (s.sct()) {
    case StatusCodeType::generic: name = generic_name(s.sc()); break;
    case StatusCodeType::command_specific: name = command_specific_name(s.sc()); break;
    case StatusCodeType::media_error: name = media_name(s.sc()); break;
    case StatusCodeType::path_related: name = path_name(s.sc()); break;
    default: break;
  }
  if (name != nullptr) return name;
  // Unknown: format into a per-thread buffer (valid until this thread's next unknown status).
  thread_local char buf[24];
  std::snprintf(buf, sizeof(buf), "SCT %u SC 0x%02x", static_cast<unsigned>(s.sct()), static_cast<unsigned>(s.sc()));
  return buf;
}

}  // namespace rdmablk::protocol

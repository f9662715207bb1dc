#include "protocol/command_names.h"

#include <array>
#include <cstdio>

#include "protocol/fabrics.h"

namespace rdmablk::protocol {

namespace {

struct Name {
  uint8_t opcode;
  std::string_view name;
};

// Base 2.0 Figure 138.
constexpr Name kAdminNames[] = {
    {0x00, "Delete I/O Submission Queue"}, {0x01, "Create I/O Submission Queue"}, {0x02, "Get Log Page"},
    {0x04, "Delete I/O Completion Queue"}, {0x05, "Create I/O Completion Queue"}, {0x06, "Identify"},
    {0x08, "Abort"}, {0x09, "Set Features"}, {0x0A, "Get Features"}, {0x0C, "Asynchronous Event Request"},
    {0x0D, "Namespace Management"}, {0x10, "Firmware Commit"}, {0x11, "Firmware Image Download"},
    {0x14, "Device Self-test"}, {0x15, "Namespace Attachment"}, {0x18, "Keep Alive"}, {0x19, "Directive Send"},
    {0x1A, "Directive Receive"}, {0x1C, "Virtualization Management"}, {0x1D, "NVMe-MI Send"},
    {0x1E, "NVMe-MI Receive"}, {0x20, "Capacity Management"}, {0x24, "Lockdown"},
    {0x7C, "Doorbell Buffer Config"}, {0x7F, "Fabrics Commands"}, {0x80, "Format NVM"}, {0x81, "Security Send"},
    {0x82, "Security Receive"}, {0x84, "Sanitize"}, {0x86, "Get LBA Status"},
};

// NVM Command Set 1.0 Figure 17 (and Base 2.0's I/O commands common to every command set).
constexpr Name kIoNames[] = {
    {0x00, "Flush"}, {0x01, "Write"}, {0x02, "Read"}, {0x04, "Write Uncorrectable"}, {0x05, "Compare"},
    {0x08, "Write Zeroes"}, {0x09, "Dataset Management"}, {0x0C, "Verify"}, {0x0D, "Reservation Register"},
    {0x0E, "Reservation Report"}, {0x11, "Reservation Acquire"}, {0x15, "Reservation Release"},
    {0x19, "Copy"}, {0x7F, "Fabrics Commands"},
};

// NVMe-oF 1.1 Figure 9 (and TP 8006 for authentication).
constexpr Name kFabricsNames[] = {
    {0x00, "Property Set"}, {0x01, "Connect"}, {0x04, "Property Get"}, {0x05, "Authentication Send"},
    {0x06, "Authentication Receive"}, {0x08, "Disconnect"},
};

template <std::size_t N>
std::string_view find(const Name (&names)[N], uint8_t opcode) noexcept {
  for (const Name& n : names)
    if (n.opcode == opcode) return n.name;
  return {};
}

}  // namespace

const char* command_set_name(CommandSet set) noexcept {
  switch (set) {
    case CommandSet::fabrics: return "fabrics";
    case CommandSet::admin: return "admin";
    case CommandSet::io: return "I/O";
  }
  return "?";
}

std::string_view admin_opcode_name(uint8_t opcode) noexcept { return find(kAdminNames, opcode); }
std::string_view io_opcode_name(uint8_t opcode) noexcept { return find(kIoNames, opcode); }
std::string_view fabrics_type_name(uint8_t fctype) noexcept { return find(kFabricsNames, fctype); }

std::string_view command_name(CommandSet set, uint8_t opcode) noexcept {
  switch (set) {
    case CommandSet::fabrics: return fabrics_type_name(opcode);
    case CommandSet::admin: return admin_opcode_name(opcode);
    case CommandSet::io: return io_opcode_name(opcode);
  }
  return {};
}

std::string describe_command(const Sqe& sqe, bool admin) {
  CommandSet set = admin ? CommandSet::admin : CommandSet::io;
  uint8_t code = sqe.hdr.opcode;
  if (code == kFabricsOpcode) {
    set = CommandSet::fabrics;
    code = as<FabricsCommand>(sqe).fctype;
  }
  if (std::string_view name = command_name(set, code); !name.empty()) return std::string(name);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s command 0x%02x", command_set_name(set), code);
  return buf;
}

}  // namespace rdmablk::protocol

// The specifications' names of commands, for logs, statistics, `ctl` and the initiator's messages: every
// admin opcode of NVMe Base 2.0 (Figure 138), every I/O opcode of the NVM Command Set 1.0 (Figure 17) and
// every fabrics command type of NVMe-oF 1.1 (Figure 9). Which of them a target supports is not said here:
// that is the target's command table (target/commands/command_table.h), which takes its names from here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/command.h"

namespace rdmablk::protocol {

// Which set an opcode belongs to: the queue it arrives on decides (admin or I/O), except opcode 7Fh, a
// fabrics command on either, whose type is FCTYPE.
enum class CommandSet : uint8_t { fabrics, admin, io };

const char* command_set_name(CommandSet set) noexcept;  // "fabrics" / "admin" / "I/O"

// The spec's name ("Identify", "Write Zeroes", "Property Get"), or empty when the spec defines none.
std::string_view admin_opcode_name(uint8_t opcode) noexcept;
std::string_view io_opcode_name(uint8_t opcode) noexcept;
std::string_view fabrics_type_name(uint8_t fctype) noexcept;
std::string_view command_name(CommandSet set, uint8_t opcode) noexcept;

// The name of a submitted command, for messages: the spec's name, else "admin command 0xc3" and the like.
// `admin`: it went to an admin queue.
std::string describe_command(const Sqe& sqe, bool admin);

}  // namespace rdmablk::protocol

// The target's command table: every command the target runs - fabrics, admin (I/O and discovery
// controllers) and NVM I/O - declared once, with what the rest of the target derives from it:
//   - dispatch: the core looks a command up here (find_command) and runs its handler; an opcode without an
//     entry, or one not allowed where it arrived, gets the status the spec gives for it;
//   - the Commands Supported and Effects log page (command_effects_log);
//   - Identify Controller's optional-command fields ONCS, OACS and FUSES (capability_bits), and LPA from the
//     log page entries;
//   - names in logs and messages (protocol::command_name, which the initiator uses too).
// Adding a command = one entry below (in command_table.cpp), its handler in the commands/ file of its family,
// and its tests; tests/target/test_command_table.cpp checks that the derived views agree with the table.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "protocol/command_names.h"
#include "protocol/log_pages.h"
#include "protocol/status.h"
#include "transport/target_queue.h"

namespace rdmablk::target {

class TargetCore;
struct Controller;
struct CoreQueue;
struct IoPrep;

using protocol::CommandSet;

// Where an entry may run (CommandEntry::runs_on). Fabrics commands by the state of the queue they arrive on;
// admin commands by the kind of controller.
namespace runs_on {
inline constexpr uint8_t kUnconnectedQueue = 1u << 0;  // before Connect
inline constexpr uint8_t kAdminQueue = 1u << 1;
inline constexpr uint8_t kIoQueue = 1u << 2;
inline constexpr uint8_t kIoController = 1u << 3;         // a controller of an NVM subsystem
inline constexpr uint8_t kDiscoveryController = 1u << 4;  // a controller of the discovery subsystem
}  // namespace runs_on

// The Identify Controller field and bit an optional command sets when the target supports it.
enum class CapabilityField : uint8_t { none, oacs, oncs, fuses };
struct Capability {
  CapabilityField field = CapabilityField::none;
  uint16_t bit = 0;
};

// Fabrics and admin commands: run on the admin queue's (or the connecting queue's) reactor thread.
using CommandHandler = void (TargetCore::*)(CoreQueue&, transport::TargetRequest&) noexcept;
// I/O commands: check the command against its namespace and fill its request state (io_commands.h); the core
// then moves its data and runs its backend requests. Returns success or the status to complete it with.
using IoPrepare = protocol::Status (*)(IoPrep&) noexcept;

struct CommandEntry {
  CommandSet set;
  uint8_t opcode;                       // admin and I/O: the opcode; fabrics: FCTYPE
  transport::DataDirection direction;   // the data it moves (the opcode's bits 1:0; fabrics: by FCTYPE)
  uint8_t runs_on;                      // runs_on:: bits
  uint32_t effects;                     // its Commands Supported and Effects entry beyond CSUPP (admin, I/O)
  Capability capability;                // the Identify bit that says it is supported (optional commands)
  CommandHandler handler;               // fabrics, admin
  IoPrepare prepare;                    // I/O
  Capability also = {};                 // a second bit it sets (Compare: FUSES compare and write)

  std::string_view name() const noexcept { return protocol::command_name(set, opcode); }
};

// Every entry, in table order.
std::span<const CommandEntry> command_table() noexcept;

// The entry of an opcode (fabrics: FCTYPE), or nullptr when the target does not support it. O(1).
namespace detail {
extern const std::array<std::array<const CommandEntry*, 256>, 3> command_index;
}
inline const CommandEntry* find_command(CommandSet set, uint8_t opcode) noexcept {
  return detail::command_index[static_cast<std::size_t>(set)][opcode];
}

// The OR of the capability bits of the entries that set `field` (Identify Controller ONCS, OACS, FUSES).
uint16_t capability_bits(CapabilityField field) noexcept;

// Log pages (Get Log Page), declared the same way: which controllers have each, the Identify Controller LPA
// bit that announces it, and the core's function that builds it (mu_ held; sets `status` to refuse).
using LogPageBuilder = std::vector<uint8_t> (TargetCore::*)(Controller&, const protocol::GetLogPageCommand&,
                                                            protocol::Status&);
struct LogPageEntry {
  uint8_t lid;
  uint8_t runs_on;  // runs_on::kIoController / kDiscoveryController
  uint8_t lpa;      // Identify Controller LPA bit, 0 = none
  LogPageBuilder build;
};
std::span<const LogPageEntry> log_page_table() noexcept;
// The entry for `lid` on an I/O or a discovery controller, or nullptr (Invalid Field).
const LogPageEntry* find_log_page(uint8_t lid, bool discovery) noexcept;
// The LPA bits of the log pages an I/O or a discovery controller has.
uint8_t log_page_attributes(bool discovery) noexcept;

// The Commands Supported and Effects log page (LID 05h) of an I/O controller: CSUPP and the effects of every
// admin entry that runs on one and of every I/O entry.
protocol::CommandEffectsLog command_effects_log() noexcept;

}  // namespace rdmablk::target

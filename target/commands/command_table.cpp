#include "target/commands/command_table.h"

#include "protocol/fabrics.h"
#include "protocol/identify.h"
#include "target/commands/io_commands.h"
#include "target/core/core.h"

namespace rdmablk::target {

namespace {

using protocol::AdminOpcode;
using protocol::FabricsType;
using protocol::IoOpcode;
using transport::DataDirection;
namespace fx = protocol::effects;
namespace ic = protocol::idctl;
using namespace runs_on;

constexpr DataDirection kNone = DataDirection::none;
constexpr DataDirection kToController = DataDirection::host_to_controller;
constexpr DataDirection kToHost = DataDirection::controller_to_host;
constexpr uint8_t kAnyController = kIoController | kDiscoveryController;

constexpr uint8_t op(AdminOpcode o) noexcept { return static_cast<uint8_t>(o); }
constexpr uint8_t op(IoOpcode o) noexcept { return static_cast<uint8_t>(o); }
constexpr uint8_t op(FabricsType t) noexcept { return static_cast<uint8_t>(t); }
using protocol::LogPageId;
constexpr uint8_t lid(LogPageId l) noexcept { return static_cast<uint8_t>(l); }

}  // namespace

// A friend of TargetCore: the handlers are its members.
struct CommandTableAccess {
  // clang-format off
  static constexpr CommandEntry kEntries[] = {
    // set                  opcode                             data           runs on                          effects    capability                                handler                                 I/O prepare
    // Fabrics (NVMe-oF 1.1, 3.3-3.5; TP 8006)
    {CommandSet::fabrics, op(FabricsType::connect),             kToController, kUnconnectedQueue,               0,         {},                                        &TargetCore::connect,                   nullptr},
    {CommandSet::fabrics, op(FabricsType::property_get),        kNone,         kAdminQueue,                     0,         {},                                        &TargetCore::property_get,              nullptr},
    {CommandSet::fabrics, op(FabricsType::property_set),        kNone,         kAdminQueue,                     0,         {},                                        &TargetCore::property_set,              nullptr},
    {CommandSet::fabrics, op(FabricsType::authentication_send), kToController, kAdminQueue | kIoQueue,          0,         {},                                        &TargetCore::auth_send,                 nullptr},
    {CommandSet::fabrics, op(FabricsType::authentication_receive), kToHost,    kAdminQueue | kIoQueue,          0,         {},                                        &TargetCore::auth_receive,              nullptr},
    // Admin (Base 2.0, 5)
    {CommandSet::admin,   op(AdminOpcode::get_log_page),        kToHost,       kAnyController,                  0,         {},                                        &TargetCore::get_log_page,              nullptr},
    {CommandSet::admin,   op(AdminOpcode::identify),            kToHost,       kAnyController,                  0,         {},                                        &TargetCore::identify,                  nullptr},
    {CommandSet::admin,   op(AdminOpcode::abort),               kNone,         kIoController,                   0,         {},                                        &TargetCore::abort_command,             nullptr},
    {CommandSet::admin,   op(AdminOpcode::set_features),        kToController, kAnyController,                  0,         {},                                        &TargetCore::set_features,              nullptr},
    {CommandSet::admin,   op(AdminOpcode::get_features),        kToHost,       kAnyController,                  0,         {},                                        &TargetCore::get_features,              nullptr},
    {CommandSet::admin,   op(AdminOpcode::async_event_request), kNone,         kAnyController,                  0,         {},                                        &TargetCore::async_event_request,       nullptr},
    {CommandSet::admin,   op(AdminOpcode::keep_alive),          kNone,         kAnyController,                  0,         {},                                        &TargetCore::keep_alive,                nullptr},
    // NVM I/O (NVM Command Set 1.0, 3)
    {CommandSet::io,      op(IoOpcode::flush),                  kNone,         kIoQueue,                        0,         {},                                        nullptr, &prepare_flush},
    {CommandSet::io,      op(IoOpcode::write),                  kToController, kIoQueue,                        fx::kLbcc, {},                                        nullptr, &prepare_read_write},
    {CommandSet::io,      op(IoOpcode::read),                   kToHost,       kIoQueue,                        0,         {},                                        nullptr, &prepare_read_write},
    {CommandSet::io,      op(IoOpcode::write_zeroes),           kNone,         kIoQueue,                        fx::kLbcc, {CapabilityField::oncs, ic::kOncsWriteZeroes}, nullptr, &prepare_write_zeroes},
    {CommandSet::io,      op(IoOpcode::dataset_management),     kToController, kIoQueue,                        fx::kLbcc, {CapabilityField::oncs, ic::kOncsDsm},        nullptr, &prepare_dataset_management},
    {CommandSet::io,      op(IoOpcode::compare),                kToController, kIoQueue,                        0,         {CapabilityField::oncs, ic::kOncsCompare},    nullptr, &prepare_compare, {CapabilityField::fuses, ic::kFusesCompareWrite}},
    {CommandSet::io,      op(IoOpcode::copy),                   kToController, kIoQueue,                        fx::kLbcc, {CapabilityField::oncs, ic::kOncsCopy},       nullptr, &prepare_copy},
    {CommandSet::io,      op(IoOpcode::reservation_register),   kToController, kIoQueue,                        0,         {CapabilityField::oncs, ic::kOncsReservations}, nullptr, &prepare_reservation},
    {CommandSet::io,      op(IoOpcode::reservation_report),     kToHost,       kIoQueue,                        0,         {CapabilityField::oncs, ic::kOncsReservations}, nullptr, &prepare_reservation_report},
    {CommandSet::io,      op(IoOpcode::reservation_acquire),    kToController, kIoQueue,                        0,         {CapabilityField::oncs, ic::kOncsReservations}, nullptr, &prepare_reservation},
    {CommandSet::io,      op(IoOpcode::reservation_release),    kToController, kIoQueue,                        0,         {CapabilityField::oncs, ic::kOncsReservations}, nullptr, &prepare_reservation},
  };
  // clang-format on

  // clang-format off
  static constexpr LogPageEntry kLogPages[] = {
    // log page                                               controllers           LPA                          builder
    {lid(LogPageId::error_information),          kIoController,        0,                           &TargetCore::error_log_locked},
    {lid(LogPageId::smart_health),               kIoController,        ic::kLpaSmartPerNamespace,   &TargetCore::smart_log_locked},
    {lid(LogPageId::firmware_slot),              kIoController,        0,                           &TargetCore::firmware_log_locked},
    {lid(LogPageId::changed_namespace_list),     kIoController,        0,                           &TargetCore::changed_namespaces_log_locked},
    {lid(LogPageId::commands_supported_effects), kIoController,        ic::kLpaCommandEffects,      &TargetCore::effects_log_locked},
    {lid(LogPageId::ana),                        kIoController,        0,                           &TargetCore::ana_log_page_locked},
    {lid(LogPageId::reservation_notification),   kIoController,        0,                           &TargetCore::reservation_log_locked},
    {lid(LogPageId::discovery),                  kDiscoveryController, 0,                           &TargetCore::discovery_log_page_locked},
  };
  // clang-format on
};

namespace {

constexpr std::array<std::array<const CommandEntry*, 256>, 3> build_index() {
  std::array<std::array<const CommandEntry*, 256>, 3> index{};
  for (const CommandEntry& e : CommandTableAccess::kEntries) {
    auto& slot = index[static_cast<std::size_t>(e.set)][e.opcode];
    if (slot != nullptr) throw "two entries for one opcode";  // not a constant expression: fails the build
    slot = &e;
  }
  return index;
}

}  // namespace

namespace detail {
constinit const std::array<std::array<const CommandEntry*, 256>, 3> command_index = build_index();
}

std::span<const CommandEntry> command_table() noexcept { return CommandTableAccess::kEntries; }

uint16_t capability_bits(CapabilityField field) noexcept {
  uint16_t bits = 0;
  for (const CommandEntry& e : command_table())
    for (const Capability& c : {e.capability, e.also})
      if (c.field == field) bits = static_cast<uint16_t>(bits | c.bit);
  return bits;
}

std::span<const LogPageEntry> log_page_table() noexcept { return CommandTableAccess::kLogPages; }

const LogPageEntry* find_log_page(uint8_t id, bool discovery) noexcept {
  const uint8_t here = discovery ? kDiscoveryController : kIoController;
  for (const LogPageEntry& e : log_page_table())
    if (e.lid == id && (e.runs_on & here) != 0) return &e;
  return nullptr;
}

uint8_t log_page_attributes(bool discovery) noexcept {
  const uint8_t here = discovery ? kDiscoveryController : kIoController;
  uint8_t bits = 0;
  for (const LogPageEntry& e : log_page_table())
    if ((e.runs_on & here) != 0) bits = static_cast<uint8_t>(bits | e.lpa);
  return bits;
}

protocol::CommandEffectsLog command_effects_log() noexcept {
  protocol::CommandEffectsLog log{};
  for (const CommandEntry& e : command_table()) {
    if (e.set == CommandSet::admin && (e.runs_on & kIoController) != 0) log.acs[e.opcode].set(fx::kCsupp | e.effects);
    if (e.set == CommandSet::io) log.iocs[e.opcode].set(fx::kCsupp | e.effects);
  }
  return log;
}

}  // namespace rdmablk::target

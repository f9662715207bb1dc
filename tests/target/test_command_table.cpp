// The command table (target/commands/command_table.h) and what the target derives from it agree: dispatch
// refuses exactly the opcodes without an entry (where they arrive), the Commands Supported and Effects log
// and Identify's ONCS/OACS/FUSES say what the table says, and every entry has the spec's name and its
// opcode's data direction.
#include "target/commands/command_table.h"

#include <set>

#include "protocol/command_names.h"
#include "protocol/fabrics.h"
#include "protocol/identify.h"
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

namespace fx = p::effects;

p::Sqe command(uint8_t opcode, uint16_t cid, uint32_t nsid = 1) {
  p::Sqe sqe{};
  sqe.hdr = p::make_header(opcode, cid, nsid);
  sqe.hdr.dptr = p::make_transport_sgl(0);
  return sqe;
}

p::Sqe fabrics_command(uint8_t fctype, uint16_t cid) {
  p::Sqe sqe{};
  sqe.hdr = p::make_header(p::kFabricsOpcode, cid, fctype);  // FCTYPE is byte 4, where NSID would be
  sqe.hdr.dptr = p::make_transport_sgl(0);
  return sqe;
}

// Submits a command and returns its status, or nullopt when it did not complete (an AER is held).
std::optional<p::Status> status_of(CoreHarness& h, FakeTargetQueue& q, const p::Sqe& sqe) {
  q.submit(sqe);
  h.reactor.run();
  auto r = q.result(sqe.hdr.cid.get());
  if (!r) return std::nullopt;
  return r->status();
}

TEST(CommandTable, EveryEntryHasTheSpecsNameItsOpcodesDirectionAndOneHandler) {
  std::set<std::pair<CommandSet, uint8_t>> seen;
  for (const CommandEntry& e : command_table()) {
    SCOPED_TRACE(std::string(p::command_set_name(e.set)) + " " + std::to_string(e.opcode));
    EXPECT_FALSE(e.name().empty());
    EXPECT_TRUE(seen.emplace(e.set, e.opcode).second) << "two entries";
    EXPECT_EQ(find_command(e.set, e.opcode), &e);
    const p::Sqe sqe = e.set == CommandSet::fabrics ? fabrics_command(e.opcode, 1) : command(e.opcode, 1);
    bool bidirectional = false;
    EXPECT_EQ(transport::command_direction(sqe, bidirectional), e.direction);
    EXPECT_FALSE(bidirectional);
    if (e.set == CommandSet::io) {
      EXPECT_NE(e.prepare, nullptr);
      EXPECT_EQ(e.handler, nullptr);
      EXPECT_EQ(e.runs_on, runs_on::kIoQueue);
    } else {
      EXPECT_NE(e.handler, nullptr);
      EXPECT_EQ(e.prepare, nullptr);
    }
    EXPECT_NE(e.runs_on, 0);
  }
  // Nothing is found that is not in the table.
  for (auto set : {CommandSet::fabrics, CommandSet::admin, CommandSet::io})
    for (unsigned op = 0; op < 256; ++op)
      if (find_command(set, static_cast<uint8_t>(op)) != nullptr) {
        EXPECT_TRUE(seen.count({set, static_cast<uint8_t>(op)})) << op;
      }
}

TEST(CommandTable, TheEffectsLogIsTheTables) {
  CoreHarness h;
  auto admin = h.queue();
  h.bring_up(*admin);
  auto c = h.get_log(*admin, p::LogPageId::commands_supported_effects, 0, 4096);
  ASSERT_TRUE(c.status().ok());
  const auto log = from_bytes<p::CommandEffectsLog>(c.data);
  const auto derived = command_effects_log();
  for (unsigned op = 0; op < 256; ++op) {
    SCOPED_TRACE(op);
    EXPECT_EQ(log.acs[op].get(), derived.acs[op].get());
    EXPECT_EQ(log.iocs[op].get(), derived.iocs[op].get());
    const CommandEntry* a = find_command(CommandSet::admin, static_cast<uint8_t>(op));
    const bool admin_supported = a != nullptr && (a->runs_on & runs_on::kIoController) != 0;
    EXPECT_EQ((log.acs[op].get() & fx::kCsupp) != 0, admin_supported);
    const CommandEntry* i = find_command(CommandSet::io, static_cast<uint8_t>(op));
    EXPECT_EQ((log.iocs[op].get() & fx::kCsupp) != 0, i != nullptr);
    if (i != nullptr) {
      EXPECT_EQ(log.iocs[op].get(), fx::kCsupp | i->effects);
    }
  }
  // What the target supports today, so that losing an entry fails a test too.
  for (unsigned op : {0x02u, 0x06u, 0x08u, 0x09u, 0x0Au, 0x0Cu, 0x18u}) EXPECT_EQ(log.acs[op].get(), fx::kCsupp) << op;
  for (unsigned op : {0x00u, 0x02u}) EXPECT_EQ(log.iocs[op].get(), fx::kCsupp) << op;
  for (unsigned op : {0x01u, 0x08u, 0x09u}) EXPECT_EQ(log.iocs[op].get(), fx::kCsupp | fx::kLbcc) << op;
}

TEST(CommandTable, IdentifysOptionalCommandFieldsAreTheTables) {
  CoreHarness h;
  auto admin = h.queue();
  h.bring_up(*admin);
  const auto id = from_bytes<p::IdentifyController>(h.identify(*admin, p::Cns::controller, 0).data);
  EXPECT_EQ(id.oncs.get(), capability_bits(CapabilityField::oncs));
  EXPECT_EQ(id.oacs.get(), capability_bits(CapabilityField::oacs));
  EXPECT_EQ(id.fuses.get(), capability_bits(CapabilityField::fuses));
  EXPECT_EQ(capability_bits(CapabilityField::oncs), p::idctl::kOncsCompare | p::idctl::kOncsDsm |
                                                        p::idctl::kOncsWriteZeroes | p::idctl::kOncsCopy |
                                                        p::idctl::kOncsReservations);
  EXPECT_EQ(capability_bits(CapabilityField::oacs), 0);
  EXPECT_EQ(capability_bits(CapabilityField::fuses), p::idctl::kFusesCompareWrite);  // Compare's second bit
  // Every capability bit is set by a supported command (an entry), never by hand.
  for (const CommandEntry& e : command_table())
    for (const Capability& c : {e.capability, e.also})
      if (c.field != CapabilityField::none) {
        EXPECT_NE(c.bit, 0) << e.name();
      }
}

// Every admin opcode on an I/O controller and on a discovery controller: Invalid Opcode exactly where the
// table has no entry for that controller.
TEST(CommandTable, AdminDispatchRefusesExactlyWhatTheTableLacks) {
  for (bool discovery : {false, true}) {
    SCOPED_TRACE(discovery ? "discovery controller" : "I/O controller");
    CoreHarness h;
    auto admin = discovery ? h.queue(transport::TransportType::tcp, "10.0.0.1", 8009) : h.queue();
    h.bring_up(*admin, discovery ? p::kDiscoveryNqn : kSub1, discovery ? kHost2 : kHost1);
    const uint8_t here = discovery ? runs_on::kDiscoveryController : runs_on::kIoController;
    for (unsigned op = 0; op < 256; ++op) {
      if (op == p::kFabricsOpcode) continue;
      SCOPED_TRACE(op);
      const CommandEntry* e = find_command(CommandSet::admin, static_cast<uint8_t>(op));
      const bool supported = e != nullptr && (e->runs_on & here) != 0;
      const auto s = status_of(h, *admin, command(static_cast<uint8_t>(op), h.next_cid(), 0));
      if (!supported) {
        ASSERT_TRUE(s.has_value());
        EXPECT_EQ(*s, st::invalid_opcode);
      } else if (s) {
        EXPECT_NE(*s, st::invalid_opcode);
      }
    }
  }
}

TEST(CommandTable, IoDispatchRefusesExactlyWhatTheTableLacks) {
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin);
  auto io = h.io_queue(cntlid, 1);
  for (unsigned op = 0; op < 256; ++op) {
    if (op == p::kFabricsOpcode) continue;
    SCOPED_TRACE(op);
    const auto s = status_of(h, *io, command(static_cast<uint8_t>(op), h.next_cid()));
    ASSERT_TRUE(s.has_value());
    if (find_command(CommandSet::io, static_cast<uint8_t>(op)) == nullptr) {
      EXPECT_EQ(*s, st::invalid_opcode);
    } else {
      EXPECT_NE(*s, st::invalid_opcode);
    }
  }
}

// Every FCTYPE on a queue before Connect, on an admin queue and on an I/O queue.
TEST(CommandTable, FabricsDispatchFollowsWhereEachEntryRuns) {
  CoreHarness h;
  auto fresh = h.queue();
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin);
  auto io = h.io_queue(cntlid, 1);
  struct Where {
    FakeTargetQueue* q;
    uint8_t bit;
  };
  for (const Where w : {Where{fresh.get(), runs_on::kUnconnectedQueue}, Where{admin.get(), runs_on::kAdminQueue},
                        Where{io.get(), runs_on::kIoQueue}}) {
    for (unsigned type = 0; type < 256; ++type) {
      SCOPED_TRACE(std::to_string(w.bit) + " fctype " + std::to_string(type));
      const CommandEntry* e = find_command(CommandSet::fabrics, static_cast<uint8_t>(type));
      const auto s = status_of(h, *w.q, fabrics_command(static_cast<uint8_t>(type), h.next_cid()));
      ASSERT_TRUE(s.has_value());
      if (e != nullptr && (e->runs_on & w.bit) != 0) {
        EXPECT_NE(*s, st::invalid_opcode);
        EXPECT_NE(*s, st::command_sequence_error);
      } else if (w.bit == runs_on::kUnconnectedQueue || (e != nullptr && e->runs_on == runs_on::kUnconnectedQueue)) {
        EXPECT_EQ(*s, st::command_sequence_error);  // nothing but Connect before Connect, Connect once
      } else {
        EXPECT_EQ(*s, st::invalid_opcode);
      }
    }
  }
}

// Every log page ID on an I/O and a discovery controller: Invalid Field exactly where the table has no log
// page entry; LPA announces what the entries say.
TEST(CommandTable, LogPagesAndLpaAreTheTables) {
  for (bool discovery : {false, true}) {
    SCOPED_TRACE(discovery ? "discovery controller" : "I/O controller");
    CoreHarness h;
    auto admin = discovery ? h.queue(transport::TransportType::tcp, "10.0.0.1", 8009) : h.queue();
    h.bring_up(*admin, discovery ? p::kDiscoveryNqn : kSub1, discovery ? kHost2 : kHost1);
    for (unsigned id = 0; id < 256; ++id) {
      SCOPED_TRACE(id);
      const auto c = h.get_log(*admin, static_cast<p::LogPageId>(id), 0, 4, /*rae=*/true);
      if (find_log_page(static_cast<uint8_t>(id), discovery) == nullptr) {
        EXPECT_EQ(c.status(), st::invalid_field);
      } else {
        EXPECT_TRUE(c.status().ok()) << p::status_name(c.status());
      }
    }
    const auto ctrl = from_bytes<p::IdentifyController>(h.identify(*admin, p::Cns::controller, 0).data);
    EXPECT_EQ(ctrl.lpa, p::idctl::kLpaExtendedData | log_page_attributes(discovery));
  }
  EXPECT_EQ(log_page_attributes(false), p::idctl::kLpaSmartPerNamespace | p::idctl::kLpaCommandEffects);
  EXPECT_EQ(log_page_attributes(true), 0);
}

TEST(CommandNames, TheInitiatorsMessagesUseTheSpecsNames) {
  EXPECT_EQ(p::describe_command(command(0x06, 1), true), "Identify");
  EXPECT_EQ(p::describe_command(command(0x08, 1), true), "Abort");
  EXPECT_EQ(p::describe_command(command(0x09, 1), false), "Dataset Management");
  EXPECT_EQ(p::describe_command(fabrics_command(0x04, 1), true), "Property Get");
  EXPECT_EQ(p::describe_command(command(0xC3, 1), true), "admin command 0xc3");
  EXPECT_EQ(p::describe_command(command(0x7E, 1), false), "I/O command 0x7e");
  EXPECT_EQ(p::describe_command(fabrics_command(0x0B, 1), false), "fabrics command 0x0b");
}

}  // namespace
}  // namespace rdmablk::target::testing

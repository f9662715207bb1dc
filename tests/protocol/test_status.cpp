// Status field accessors, CQE status half-word and status_name (NVMe Base 2.0, 4.6.1).
#include <gtest/gtest.h>

#include <string>

#include "protocol/completion.h"
#include "protocol/status.h"

namespace rdmablk::protocol {
namespace {

TEST(Status, FieldAccessorsFromRawField) {
  // DNR 14, More 13, CRD 12:11 = 2, SCT 10:8 = 1, SC 0x82.
  const Status s = Status::from_field(0x4000 | 0x2000 | 0x1000 | 0x0100 | 0x82);
  EXPECT_TRUE(s.dnr());
  EXPECT_TRUE(s.more());
  EXPECT_EQ(s.crd(), 2);
  EXPECT_EQ(s.sct(), StatusCodeType::command_specific);
  EXPECT_EQ(s.sc(), 0x82);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.is(status::connect_invalid_parameters));
  EXPECT_TRUE(s.is(status::write_to_read_only_range));
  EXPECT_FALSE(s == status::connect_invalid_parameters);  // More and CRD differ
}

TEST(Status, CqeStatusHalfWordCarriesPhase) {
  const Status s = status::invalid_field;  // SCT 0, SC 2, DNR
  EXPECT_EQ(s.field(), 0x4002);
  EXPECT_EQ(s.cqe_status(false), 0x8004);
  EXPECT_EQ(s.cqe_status(true), 0x8005);
  EXPECT_EQ(Status::from_cqe_status(0x8005), s);
  Cqe c{};
  c.set_status(s, true);
  EXPECT_EQ(c.status.get(), 0x8005);
  EXPECT_TRUE(c.phase());
  c.set_status(status::success, false);
  EXPECT_EQ(c.status.get(), 0);
  EXPECT_TRUE(c.get_status().ok());
}

TEST(Status, WithersChangeOnlyTheirBits) {
  const Status s = status::internal_error.with_dnr().with_more().with_crd(3);
  EXPECT_EQ(s.field(), 0x4000 | 0x2000 | 0x1800 | 0x06);
  EXPECT_EQ(s.with_dnr(false).with_more(false).with_crd(0), status::internal_error);
  EXPECT_TRUE(status::success.ok());
  EXPECT_TRUE(Status::from_field(0x4000).ok());  // DNR alone is still success
}

TEST(Status, NamesForEachStatusCodeType) {
  EXPECT_STREQ(status_name(status::success), "Successful Completion");
  EXPECT_STREQ(status_name(status::invalid_field), "Invalid Field in Command");
  EXPECT_STREQ(status_name(status::lba_out_of_range), "LBA Out of Range");
  EXPECT_STREQ(status_name(status::keep_alive_timer_expired), "Keep Alive Timer Expired");
  EXPECT_STREQ(status_name(status::invalid_log_page), "Invalid Log Page");
  EXPECT_STREQ(status_name(status::unrecovered_read_error), "Unrecovered Read Error");
  EXPECT_STREQ(status_name(status::ana_inaccessible), "Asymmetric Access Inaccessible");
  EXPECT_STREQ(status_name(status::connect_invalid_host), "Connect Invalid Host");
  EXPECT_STREQ(status_name(status::authentication_required), "Authentication Required");
}

TEST(Status, SharedCommandSpecificCodesNameBothReadings) {
  const std::string x80 = status_name(status::connect_incompatible_format);
  EXPECT_EQ(x80, status_name(status::conflicting_attributes));
  EXPECT_NE(x80.find("Connect Incompatible Format"), std::string::npos);
  EXPECT_NE(x80.find("Conflicting Attributes"), std::string::npos);
  const std::string x82 = status_name(status::connect_invalid_parameters);
  EXPECT_NE(x82.find("Connect Invalid Parameters"), std::string::npos);
  EXPECT_NE(x82.find("Read Only Range"), std::string::npos);
}

TEST(Status, NameIgnoresDnrMoreCrd) {
  EXPECT_STREQ(status_name(status::internal_error.with_dnr().with_more().with_crd(1)), "Internal Error");
}

TEST(Status, UnknownCodesPrintSctAndSc) {
  EXPECT_STREQ(status_name(Status(StatusCodeType::vendor_specific, 0x12)), "SCT 7 SC 0x12");
  EXPECT_STREQ(status_name(Status(StatusCodeType::generic, 0x7E)), "SCT 0 SC 0x7e");
  EXPECT_STREQ(status_name(Status::from_field(0x04FF)), "SCT 4 SC 0xff");
}

}  // namespace
}  // namespace rdmablk::protocol

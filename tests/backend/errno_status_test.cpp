// The errno -> NVMe status table (backend/errno_status.cpp) and op_name.
#include <gtest/gtest.h>

#include <cerrno>

#include "backend/backend.h"

namespace rdmablk::backend {
namespace {

namespace st = protocol::status;

TEST(StatusFromErrno, FollowsNvmetWhereItSpeaks) {
  EXPECT_EQ(status_from_errno(0), st::success);
  EXPECT_EQ(status_from_errno(ENOSPC), st::capacity_exceeded);
  EXPECT_TRUE(status_from_errno(ENOSPC).dnr());
  EXPECT_EQ(status_from_errno(EREMOTEIO), st::lba_out_of_range);
  EXPECT_EQ(status_from_errno(EOPNOTSUPP), st::invalid_opcode);
  EXPECT_EQ(status_from_errno(ENOTSUP), st::invalid_opcode);
  EXPECT_EQ(status_from_errno(EIO), st::internal_error.with_dnr());
  EXPECT_EQ(status_from_errno(ENOENT), st::internal_error.with_dnr());  // the default
}

TEST(StatusFromErrno, AcceptsNegativeErrno) {
  for (int e : {ENOSPC, EIO, EROFS, EINVAL, EAGAIN, EPERM})
    EXPECT_EQ(status_from_errno(-e), status_from_errno(e)) << e;
}

TEST(StatusFromErrno, PermissionsAndValidation) {
  EXPECT_EQ(status_from_errno(EROFS), st::namespace_write_protected);
  EXPECT_EQ(status_from_errno(EPERM), st::access_denied);
  EXPECT_EQ(status_from_errno(EACCES), st::access_denied);
  EXPECT_EQ(status_from_errno(EINVAL), st::invalid_field);
  EXPECT_EQ(status_from_errno(EFAULT), st::invalid_field);
  EXPECT_EQ(status_from_errno(EDQUOT), st::capacity_exceeded);
  EXPECT_EQ(status_from_errno(EFBIG), st::lba_out_of_range);
  EXPECT_EQ(status_from_errno(ENXIO), st::namespace_not_ready);
}

TEST(StatusFromErrno, TransientErrorsAreRetryable) {
  for (int e : {EAGAIN, EINTR, EBUSY, ENOMEM, ENOBUFS, ETIMEDOUT}) {
    const Status s = status_from_errno(e);
    EXPECT_EQ(s, st::command_interrupted) << e;
    EXPECT_FALSE(s.dnr()) << e;
  }
}

TEST(StatusFromErrno, MediaErrorsDependOnTheOperation) {
  for (int e : {EIO, ENODATA, EBADMSG, EUCLEAN, EILSEQ}) {
    SCOPED_TRACE(e);
    EXPECT_EQ(status_from_errno(e, Op::read), st::unrecovered_read_error);
    EXPECT_EQ(status_from_errno(e, Op::write), st::write_fault);
    EXPECT_EQ(status_from_errno(e, Op::write_zeroes), st::write_fault);
    EXPECT_EQ(status_from_errno(e, Op::flush), st::write_fault);
    EXPECT_EQ(status_from_errno(-e, Op::deallocate), st::internal_error.with_dnr());
  }
  // Non-media errors ignore the operation.
  EXPECT_EQ(status_from_errno(ENOSPC, Op::write), st::capacity_exceeded);
  EXPECT_EQ(status_from_errno(-EPERM, Op::read), st::access_denied);
  EXPECT_EQ(status_from_errno(0, Op::read), st::success);
}

TEST(OpName, NamesEveryOperation) {
  EXPECT_STREQ(op_name(Op::read), "read");
  EXPECT_STREQ(op_name(Op::write), "write");
  EXPECT_STREQ(op_name(Op::flush), "flush");
  EXPECT_STREQ(op_name(Op::write_zeroes), "write zeroes");
  EXPECT_STREQ(op_name(Op::deallocate), "deallocate");
  EXPECT_STREQ(op_name(static_cast<Op>(99)), "unknown");
}

}  // namespace
}  // namespace rdmablk::backend

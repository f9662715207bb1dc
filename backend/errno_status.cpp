// The one errno -> NVMe status mapper, and op_name.
//
// Modelled on the Linux nvmet's errno_to_nvme_status() (drivers/nvme/target/core.c), which maps
//   0 -> Success, ENOSPC -> Capacity Exceeded (DNR), EREMOTEIO -> LBA Out of Range (DNR),
//   EOPNOTSUPP -> Invalid Opcode (DNR), ENODATA -> Access Denied, EIO and everything else ->
//   Internal Error (DNR).
// Where we differ, and why:
//   - Media errors (EIO, ENODATA = BLK_STS_MEDIUM, EBADMSG / EUCLEAN = checksum or corruption found by
//     the file system, EILSEQ) become Unrecovered Read Error on a read and Write Fault on a
//     write, write zeroes or flush, when the operation is known: NVMe has exact media status codes
//     and the Linux host turns them into BLK_STS_MEDIUM / a write error, not "permission denied".
//     Without the operation (and for deallocate) they stay Internal Error, like nvmet.
//   - Transient conditions (EAGAIN, EINTR, EBUSY, ENOMEM, ENOBUFS, ETIMEDOUT) become Command
//     Interrupted (no DNR: the host retries) instead of a DNR Internal Error.
//   - Permission problems are told apart: EROFS -> Namespace Is Write Protected; EPERM / EACCES
//     (immutable or append-only file, LSM denial) -> Access Denied.
#include <cerrno>

#include "backend/backend.h"

namespace rdmablk::backend {

namespace st = protocol::status;

namespace {

bool is_media_error(int err) noexcept {
  switch (err) {
    case EIO:
    case ENODATA:
    case EBADMSG:
    case EUCLEAN:
    case EILSEQ:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status status_from_errno(int err) noexcept {
  if (err < 0) err = -err;
  switch (err) {
    case 0:
      return st::success;
    case ENOSPC:  // the file system is full (nvmet: Capacity Exceeded)
    case EDQUOT:  // a quota is full: the same thing for the host
      return st::capacity_exceeded;
    case EREMOTEIO:  // nvmet: the block layer's BLK_STS_TARGET
    case EFBIG:      // offset beyond what the file system allows
    case EOVERFLOW:
      return st::lba_out_of_range;
    case EOPNOTSUPP:  // == ENOTSUP on Linux
    case ENOSYS:
      return st::invalid_opcode;
    case EINVAL:  // misaligned O_DIRECT buffer, bad flags: the command is malformed for this namespace
    case EFAULT:  // a buffer outside the registered region
      return st::invalid_field;
    case EROFS:
      return st::namespace_write_protected;
    case EPERM:
    case EACCES:
      return st::access_denied;
    case EAGAIN:
    case EINTR:
    case EBUSY:
    case ENOMEM:
    case ENOBUFS:
    case ETIMEDOUT:
      return st::command_interrupted;
    case ENXIO:   // the device went away
    case ENODEV:
    case ESHUTDOWN:
      return st::namespace_not_ready;
    default:  // EIO and the other media errors without an operation, EBADF, ...
      return st::internal_error.with_dnr();
  }
}

Status status_from_errno(int err, Op op) noexcept {
  if (err < 0) err = -err;
  if (is_media_error(err)) {
    switch (op) {
      case Op::read:
        return st::unrecovered_read_error;
      case Op::write:
      case Op::write_zeroes:
      case Op::compare_and_write:
      case Op::flush:  // fdatasync's EIO: written data did not reach stable storage
        return st::write_fault;
      case Op::deallocate:
        break;
    }
  }
  return status_from_errno(err);
}

const char* op_name(Op op) noexcept {
  switch (op) {
    case Op::read:
      return "read";
    case Op::write:
      return "write";
    case Op::flush:
      return "flush";
    case Op::write_zeroes:
      return "write zeroes";
    case Op::deallocate:
      return "deallocate";
    case Op::compare_and_write:
      return "compare and write";
  }
  return "unknown";
}

}  // namespace rdmablk::backend

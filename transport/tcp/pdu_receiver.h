// The NVMe/TCP receive engine, one for both ends of a connection: the controller (target connection) and
// the host queue differ only in what they do with a PDU, not in how a byte stream becomes PDUs.
//
// Bytes land in a staging buffer (prepare() / commit() around one recv); process() walks the stream:
//   header -> [pad] -> [data] -> [data digest] -> header ...
// validating every header (validate_common_header, then validate_pdu_header: state, type, hlen, flags,
// pdo, plen, header digest) before the owner sees it. The owner (a PduReceiver::Handler) says where the
// data of each PDU goes: a request buffer (data_to), nowhere (dropped, the default), or later (pause(),
// then resume() when a buffer is free).
//
// Where data is received: a recv costs far more than a copy of a few KiB, so the engine never lets a
// small destination cut a recv short. Data shorter than kDirectMin comes in through staging with the PDUs
// around it (one recv carries many 4 KiB in-capsule writes or C2HData PDUs) and is copied out; the rest of
// a longer payload is received straight into its destination (a two-element iovec: the destination, then
// a little staging for the digest and the next headers). While long payloads flow, reads between them are
// kept short too, so that the next payload is not pulled through staging.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "protocol/tcp_pdu.h"

namespace rdmablk::transport::tcp {

class PduReceiver {
 public:
  class Handler {
   public:
    // A validated PDU header: pdu() and header() describe it. For a PDU with data, call data_to() to have it
    // land somewhere (else it is dropped) or pause(). May call stop() (after a protocol error of its own).
    virtual void on_pdu(PduReceiver& rx) noexcept = 0;
    // All data of the current PDU (and its digest) is in. `digest_ok` is false on a data digest mismatch
    // (checked only for data that landed in a destination).
    virtual void on_pdu_data(PduReceiver& rx, bool digest_ok) noexcept = 0;
    // The stream is malformed (`offending`: the bytes to quote in a TermReq). The engine has stopped.
    virtual void on_pdu_error(const protocol::tcp::PduError& e, std::span<const uint8_t> offending) noexcept = 0;

   protected:
    ~Handler() = default;
  };

  // Payloads from this size up are received straight into their destination.
  static constexpr std::size_t kDirectMin = 16 * 1024;
  // While a destination is received directly, at most this much of the following stream goes to staging.
  static constexpr std::size_t kStagingWhileDirect = 4096;

  PduReceiver(std::size_t staging_bytes, protocol::tcp::Receiver side, const protocol::tcp::TcpSession& session);

  // ---- around one recv ----
  // The iovecs for the next recv (1 or 2; 0 when paused or stopped: nothing may be received now).
  unsigned prepare(iovec* iov) noexcept;
  // `n` bytes arrived through the iovecs of the last prepare().
  void commit(std::size_t n) noexcept;

  // Parse what has arrived, calling the handler, until more bytes are needed, pause() or stop().
  void process(Handler& h) noexcept;

  // ---- for the handler, about the current PDU ----
  const protocol::tcp::PduHeaderInfo& pdu() const noexcept { return cur_; }
  std::span<const uint8_t> header() const noexcept { return {hdr_.data(), hdr_len_}; }
  // The current PDU's data goes to dst (pdu().data_len bytes). Without it, the data is dropped.
  void data_to(uint8_t* dst) noexcept { dst_ = dst; }
  // Stop before the current PDU's data until resume(). process() returns; prepare() offers nothing.
  void pause() noexcept { paused_ = true; }
  // Continue with the data going to `dst` (nullptr: dropped). The owner then calls process() again.
  void resume(uint8_t* dst) noexcept;
  bool paused() const noexcept { return paused_; }
  // No more parsing (protocol error, connection closing).
  void stop() noexcept { stopped_ = true; }
  bool stopped() const noexcept { return stopped_; }

  // Between PDUs, with nothing of the next one received (a clean place for the peer to close).
  bool at_pdu_boundary() const noexcept { return state_ == State::header && size() == 0; }

 private:
  enum class State : uint8_t { header, pad, data, ddgst };

  const uint8_t* staged() const noexcept { return buf_.get() + head_; }
  std::size_t size() const noexcept { return tail_ - head_; }
  void consume(std::size_t n) noexcept {
    head_ += n;
    if (head_ == tail_) head_ = tail_ = 0;
  }
  bool step(Handler& h) noexcept;
  void start_data() noexcept;
  void finish_pdu(Handler& h, bool digest_ok) noexcept;

  std::unique_ptr<uint8_t[]> buf_;
  std::size_t cap_;
  std::size_t head_ = 0;
  std::size_t tail_ = 0;
  protocol::tcp::Receiver side_;
  const protocol::tcp::TcpSession& session_;

  State state_ = State::header;
  bool paused_ = false;
  bool stopped_ = false;
  bool data_started_ = false;  // the current PDU's data phase has begun (pause() no longer applies)
  protocol::tcp::PduHeaderInfo cur_{};
  std::array<uint8_t, 160> hdr_{};
  uint32_t hdr_len_ = 0;
  uint32_t pad_left_ = 0;
  uint8_t* dst_ = nullptr;       // where the current PDU's data goes (nullptr: dropped)
  uint32_t data_left_ = 0;       // data bytes of the current PDU still to come
  bool direct_ = false;          // the last prepare() offered the destination itself as the first iovec
  bool long_payloads_ = false;   // the last PDU with data had a long payload (>= kDirectMin)
};

}  // namespace rdmablk::transport::tcp

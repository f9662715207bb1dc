#include "transport/tcp/pdu_receiver.h"

#include "protocol/crc32c.h"

namespace rdmablk::transport::tcp {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

PduReceiver::PduReceiver(std::size_t staging_bytes, pt::Receiver side, const pt::TcpSession& session)
    : buf_(new uint8_t[std::max<std::size_t>(staging_bytes, 4096)]),
      cap_(std::max<std::size_t>(staging_bytes, 4096)),
      side_(side),
      session_(session) {}

unsigned PduReceiver::prepare(iovec* iov) noexcept {
  direct_ = false;
  if (stopped_ || paused_) return 0;
  if (head_ != 0 && cap_ - tail_ < cap_ / 2) {
    std::memmove(buf_.get(), buf_.get() + head_, tail_ - head_);
    tail_ -= head_;
    head_ = 0;
  }
  unsigned n = 0;
  std::size_t room = cap_ - tail_;
  // process() has copied out everything staged before it returns in the data state, so the stream's next
  // bytes are this payload's: receive the rest of a long one in place.
  if (state_ == State::data && dst_ != nullptr && size() == 0 && data_left_ >= kDirectMin) {
    iov[n++] = iovec{dst_ + (cur_.data_len - data_left_), data_left_};
    room = std::min(room, kStagingWhileDirect);
    direct_ = true;
  } else if (long_payloads_) {
    // Long payloads are flowing: a big staging read would pull the next one's data through staging (a
    // second copy of up to the whole staging size). Read just past the next headers instead.
    room = std::min(room, kStagingWhileDirect);
  }
  if (room != 0) iov[n++] = iovec{buf_.get() + tail_, room};
  return n;
}

void PduReceiver::commit(std::size_t n) noexcept {
  if (direct_) {
    const std::size_t d = std::min<std::size_t>(n, data_left_);
    data_left_ -= static_cast<uint32_t>(d);
    n -= d;
    direct_ = false;
  }
  tail_ += n;
}

void PduReceiver::process(Handler& h) noexcept {
  while (!stopped_ && !paused_ && step(h)) {
  }
}

void PduReceiver::resume(uint8_t* dst) noexcept {
  if (!paused_) return;
  paused_ = false;
  dst_ = dst;
  if (state_ == State::header && cur_.has_data() && !data_started_) start_data();
}

void PduReceiver::start_data() noexcept {
  data_started_ = true;
  pad_left_ = cur_.pad_len();
  data_left_ = cur_.data_len;
  state_ = State::pad;
}

void PduReceiver::finish_pdu(Handler& h, bool digest_ok) noexcept {
  state_ = State::header;
  h.on_pdu_data(*this, digest_ok);
}

// One step of the state machine. False when it needs more bytes (or stopped / paused).
bool PduReceiver::step(Handler& h) noexcept {
  switch (state_) {
    case State::header: {
      if (size() < pt::kCommonHeaderLen) return false;
      auto ch = pt::validate_common_header(staged(), size(), session_, side_);
      if (!ch) {
        stopped_ = true;
        h.on_pdu_error(ch.error(), {staged(), std::min<std::size_t>(size(), 128)});
        return false;
      }
      if (size() < ch->header_len) return false;
      auto info = pt::validate_pdu_header(staged(), ch->header_len, session_, side_);
      if (!info) {
        stopped_ = true;
        h.on_pdu_error(info.error(), {staged(), std::min<std::size_t>(ch->header_len, 128)});
        return false;
      }
      cur_ = *info;
      if (info->data_len != 0) long_payloads_ = info->data_len >= kDirectMin;
      hdr_len_ = std::min<uint32_t>(info->header_len, static_cast<uint32_t>(hdr_.size()));
      std::memcpy(hdr_.data(), staged(), hdr_len_);
      consume(info->header_len);
      dst_ = nullptr;
      data_started_ = false;
      h.on_pdu(*this);
      if (stopped_) return false;
      if (cur_.has_data() && !paused_) start_data();
      return true;
    }
    case State::pad: {
      const std::size_t take = std::min<std::size_t>(pad_left_, size());
      consume(take);
      pad_left_ -= static_cast<uint32_t>(take);
      if (pad_left_ != 0) return false;
      state_ = State::data;
      return true;
    }
    case State::data: {
      const std::size_t take = std::min<std::size_t>(data_left_, size());
      if (take != 0) {
        if (dst_ != nullptr) std::memcpy(dst_ + (cur_.data_len - data_left_), staged(), take);
        consume(take);
        data_left_ -= static_cast<uint32_t>(take);
      }
      if (data_left_ != 0) return false;
      if (cur_.ddgst_len != 0) {
        state_ = State::ddgst;
      } else {
        finish_pdu(h, true);
      }
      return true;
    }
    case State::ddgst: {
      if (size() < pt::kDigestLen) return false;
      const bool ok = dst_ == nullptr || p::crc32c(dst_, cur_.data_len) == pt::load_digest(staged());
      consume(pt::kDigestLen);
      finish_pdu(h, ok);
      return true;
    }
  }
  return false;
}

}  // namespace rdmablk::transport::tcp

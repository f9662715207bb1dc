// The NVMe/TCP receive engine (transport/tcp/pdu_receiver.*) fed a byte stream, on either side, through
// prepare()/commit() in recv-sized chunks, with the owner putting each PDU's data in a buffer of exactly
// its size, dropping it, or pausing before it and resuming later (as the target does while it waits for a
// pool buffer). The connection state follows the stream: an accepted ICReq (ICResp on the host side)
// establishes the session with its digests, as the target queue and the host queue do.
//
// Input: 4 bytes of setup, then the stream.
//   [0] bit 0 host side (else controller); bits 1-3 staging size (4 KiB << n); [1] CPDA (controller side)
//   [2..3] seed for the chunk sizes and the owner's choices.
// Invariants:
//   - the PDUs handed to the owner tile the stream: each header is the stream's bytes at the PDU's start
//     and a PDU's data lands byte for byte from stream[start + data offset]; on_pdu_data() comes once per
//     PDU with data, after its on_pdu(), and never for one without;
//   - a data digest is reported good only when the digest in the stream matches the data;
//   - on_pdu_error() ends the stream: nothing is called after it and prepare() offers nothing;
//   - prepare() offers at most the data still expected when it receives in place.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_util.h"
#include "protocol/crc32c.h"
#include "protocol/endian.h"
#include "protocol/tcp_pdu.h"
#include "transport/tcp/pdu_receiver.h"

namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;
using rdmablk::fuzz::Rng;
using rdmablk::transport::tcp::PduReceiver;

constexpr uint32_t kMaxBuffer = 1u << 20;

struct Owner final : PduReceiver::Handler {
  const std::vector<uint8_t>& stream;
  pt::TcpSession& session;
  pt::Receiver side;
  uint8_t cpda;
  Rng& rng;

  std::size_t next_start = 0;  // where the next PDU begins in the stream
  std::size_t cur_start = 0;
  bool in_pdu = false;      // on_pdu() seen, on_pdu_data() still due
  bool error = false;
  std::unique_ptr<uint8_t[]> dst;  // exactly data_len bytes: ASan catches any write past it
  bool held = false;               // paused, waiting for resume()

  Owner(const std::vector<uint8_t>& s, pt::TcpSession& sess, pt::Receiver r, uint8_t c, Rng& g)
      : stream(s), session(sess), side(r), cpda(c), rng(g) {}

  void on_pdu(PduReceiver& rx) noexcept override {
    FUZZ_CHECK(!error);
    FUZZ_CHECK(!in_pdu);
    const pt::PduHeaderInfo& info = rx.pdu();
    cur_start = next_start;
    next_start += info.plen;
    FUZZ_CHECK(next_start <= stream.size() || info.has_data());  // a data-less PDU is whole when handed over
    const auto hdr = rx.header();
    FUZZ_CHECK(hdr.size() == std::min<std::size_t>(info.header_len, 160));
    FUZZ_CHECK(cur_start + hdr.size() <= stream.size());
    FUZZ_CHECK(std::memcmp(hdr.data(), stream.data() + cur_start, hdr.size()) == 0);

    // The connection is set up by the IC exchange, as the queues do it.
    if (side == pt::Receiver::controller && info.type == pt::PduType::ic_req) {
      session = pt::controller_session(p::load<pt::IcReqPdu>(hdr.data()), cpda, 128 * 1024);
    } else if (side == pt::Receiver::host && info.type == pt::PduType::ic_resp) {
      const auto icresp = p::load<pt::IcRespPdu>(hdr.data());
      pt::IcReqParams params;
      params.hdgst = (icresp.dgst & pt::kDigestHeader) != 0;
      params.ddgst = (icresp.dgst & pt::kDigestData) != 0;
      auto s = pt::host_session(pt::build_icreq(params), icresp);
      FUZZ_CHECK(s.has_value());
      session = *s;
    }

    if (!info.has_data()) return;
    in_pdu = true;
    dst.reset();
    // A PDU can announce up to 4 GiB; owners only ever give buffers of a command's (MDTS-bounded) length.
    const bool fits = info.data_len <= kMaxBuffer;
    switch (rng.next() % 4) {
      case 0: break;  // dropped
      case 1:
        rx.pause();  // resumed from the recv loop
        held = true;
        break;
      default:
        if (!fits) break;
        dst.reset(new uint8_t[info.data_len]);
        rx.data_to(dst.get());
        break;
    }
  }

  void on_pdu_data(PduReceiver& rx, bool digest_ok) noexcept override {
    FUZZ_CHECK(!error);
    FUZZ_CHECK(in_pdu);
    in_pdu = false;
    const pt::PduHeaderInfo& info = rx.pdu();
    const std::size_t data_at = cur_start + info.data_offset;
    FUZZ_CHECK(data_at + info.data_len + info.ddgst_len <= stream.size());
    FUZZ_CHECK(data_at + info.data_len + info.ddgst_len == next_start);
    if (dst == nullptr) return;
    FUZZ_CHECK(std::memcmp(dst.get(), stream.data() + data_at, info.data_len) == 0);
    if (info.ddgst_len != 0) {
      const bool good = p::crc32c(stream.data() + data_at, info.data_len) ==
                        pt::load_digest(stream.data() + data_at + info.data_len);
      FUZZ_CHECK(digest_ok == good);
    } else {
      FUZZ_CHECK(digest_ok);
    }
    dst.reset();
  }

  void on_pdu_error(const pt::PduError& e, std::span<const uint8_t> offending) noexcept override {
    FUZZ_CHECK(!error);
    error = true;
    FUZZ_CHECK(e.what != nullptr);
    FUZZ_CHECK(offending.size() <= 128);
    // The engine quotes the bytes at the start of the bad PDU.
    FUZZ_CHECK(next_start + offending.size() <= stream.size());
    FUZZ_CHECK(offending.empty() || std::memcmp(offending.data(), stream.data() + next_start, offending.size()) == 0);
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const pt::Receiver side = (data[0] & 1) != 0 ? pt::Receiver::host : pt::Receiver::controller;
  const std::size_t staging = std::size_t{4096} << ((data[0] >> 1) & 7);
  const uint8_t cpda = data[1] & 31;
  Rng rng(static_cast<uint64_t>(data[2] | data[3] << 8));
  const std::vector<uint8_t> stream(data + 4, data + size);

  pt::TcpSession session{};
  // The host side starts as our host queue does: its ICReq sent, waiting for the ICResp.
  PduReceiver rx(staging, side, session);
  Owner owner(stream, session, side, cpda, rng);

  std::size_t pos = 0;
  for (unsigned round = 0; round < 100000; ++round) {
    if (owner.held && (rng.one_in(3) || pos == stream.size())) {
      owner.held = false;
      const auto& info = rx.pdu();
      if (info.data_len <= kMaxBuffer && rng.one_in(2)) {
        owner.dst.reset(new uint8_t[info.data_len]);
        rx.resume(owner.dst.get());
      } else {
        rx.resume(nullptr);
      }
      rx.process(owner);
      continue;
    }
    iovec iov[2];
    const unsigned n = rx.prepare(iov);
    if (n == 0) {
      FUZZ_CHECK(rx.stopped() || rx.paused());
      if (rx.stopped()) break;
      continue;  // paused: the next round resumes it
    }
    FUZZ_CHECK(!owner.error);
    if (pos == stream.size()) break;
    // A recv of 1 byte up to everything offered.
    std::size_t offered = 0;
    for (unsigned i = 0; i < n; ++i) offered += iov[i].iov_len;
    FUZZ_CHECK(offered != 0);
    std::size_t chunk = std::min(stream.size() - pos, offered);
    if (!rng.one_in(4)) chunk = std::min<std::size_t>(chunk, rng.range(1, 4096));
    std::size_t got = 0;
    for (unsigned i = 0; i < n && got < chunk; ++i) {
      const std::size_t take = std::min(chunk - got, iov[i].iov_len);
      std::memcpy(iov[i].iov_base, stream.data() + pos + got, take);
      got += take;
    }
    pos += got;
    rx.commit(got);
    rx.process(owner);
    if (owner.error) {
      FUZZ_CHECK(rx.stopped());
      iovec after[2];
      FUZZ_CHECK(rx.prepare(after) == 0);
      break;
    }
  }
  // Everything delivered and parsed: the engine is between PDUs exactly when the stream ended on a boundary.
  if (!owner.error && !rx.paused() && pos == stream.size()) {
    FUZZ_CHECK(rx.at_pdu_boundary() == (owner.next_start == stream.size() && !owner.in_pdu));
  }
  return 0;
}

// Fabrics Connect data and NQNs (protocol/fabrics.*): decode_connect_data on any bytes (the 1024-byte data
// of a Connect command, as it arrives in a capsule or by RDMA READ), and decode_nqn / nqn_field on any
// string.
//
// Input: the Connect data (any length; the decoder needs 1024 bytes). The same bytes are also tried as
// one NQN string, and their first 256 bytes as a NUL-terminated NQN field.
// Invariants: accepted data has SUBNQN and HOSTNQN inside their 256-byte fields, NUL-terminated, each a
// valid NQN; make_connect_data() of the decoded fields decodes to the same fields; a rejection points
// inside the data (or at its short length). An accepted NQN is 1..223 bytes starting "nqn." (or is the
// discovery NQN) and survives a Connect data round trip unchanged.
#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "protocol/endian.h"
#include "protocol/fabrics.h"

namespace {
namespace p = rdmablk::protocol;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::vector<uint8_t> buf(data, data + size);
  auto v = p::decode_connect_data(buf);
  if (v) {
    FUZZ_CHECK(size >= p::kConnectDataSize);
    const auto* base = reinterpret_cast<const char*>(buf.data());
    FUZZ_CHECK(v->subnqn.data() == base + offsetof(p::ConnectData, subnqn));
    FUZZ_CHECK(v->hostnqn.data() == base + offsetof(p::ConnectData, hostnqn));
    FUZZ_CHECK(!v->subnqn.empty() && v->subnqn.size() < p::kNqnFieldSize && v->subnqn.data()[v->subnqn.size()] == '\0');
    FUZZ_CHECK(!v->hostnqn.empty() && v->hostnqn.size() < p::kNqnFieldSize &&
               v->hostnqn.data()[v->hostnqn.size()] == '\0');
    FUZZ_CHECK(p::valid_nqn(v->subnqn) && p::valid_nqn(v->hostnqn));
    FUZZ_CHECK(std::memcmp(v->hostid.data(), buf.data(), 16) == 0);
    // Encode the decoded fields again: the same view comes back.
    const auto cd = p::make_connect_data(v->hostid, v->cntlid, v->subnqn, v->hostnqn);
    std::vector<uint8_t> out(p::kConnectDataSize);
    p::store(out.data(), cd);
    auto again = p::decode_connect_data(out);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(again->hostid == v->hostid && again->cntlid == v->cntlid && again->subnqn == v->subnqn &&
               again->hostnqn == v->hostnqn);
  } else {
    FUZZ_CHECK(v.error().offset <= std::max<std::size_t>(size, p::kConnectDataSize));
    FUZZ_CHECK(v.error().what != nullptr);
  }

  // The same bytes as an NQN.
  const std::string nqn(buf.begin(), buf.end());
  auto form = p::decode_nqn(nqn);
  if (form) {
    FUZZ_CHECK(!nqn.empty() && nqn.size() <= p::kNqnMaxLength);
    FUZZ_CHECK(nqn.rfind("nqn.", 0) == 0);
    FUZZ_CHECK(nqn.find('\0') == std::string::npos);
    // A valid NQN travels in Connect data unchanged.
    const auto cd = p::make_connect_data({}, 0xFFFF, nqn, nqn);
    std::vector<uint8_t> out(p::kConnectDataSize);
    p::store(out.data(), cd);
    auto again = p::decode_connect_data(out);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(again->subnqn == nqn && again->hostnqn == nqn);
  } else {
    FUZZ_CHECK(form.error().offset <= std::max<std::size_t>(nqn.size(), p::kNqnMaxLength));
  }

  // The first 256 bytes as an NQN field.
  std::array<char, p::kNqnFieldSize> field{};
  if (size != 0) std::memcpy(field.data(), buf.data(), std::min(size, field.size()));
  if (auto f = p::nqn_field(field, 256)) {
    FUZZ_CHECK(f->size() < field.size() && f->data() == field.data());
    FUZZ_CHECK(f->find('\0') == std::string_view::npos);
  }
  return 0;
}

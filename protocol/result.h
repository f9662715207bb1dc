// Error types shared by every layer. Data path: status codes, noexcept. Control path: Result<T>
// (tl::expected until we build as C++23 and can use std::expected).
#pragma once

#include <cstdint>
#include <string>
#include <tl/expected.hpp>

namespace rdmablk {

// A control-path error: a message for a human, and the errno behind it when there is one.
struct Error {
  std::string message;
  int errno_value = 0;
};

template <typename T>
using Result = tl::expected<T, Error>;

inline tl::unexpected<Error> make_error(std::string message, int errno_value = 0) {
  return tl::unexpected<Error>(Error{std::move(message), errno_value});
}

namespace protocol {

// A decoder's rejection of peer input: the byte offset of the offending field from the start of the
// structure that was decoded (NVMe/TCP reports it to the peer in a termination PDU's FEI), and why.
// `what` points at a string literal: decoding never allocates.
struct DecodeError {
  uint32_t offset;
  const char* what;
};

template <typename T>
using Decoded = tl::expected<T, DecodeError>;

inline tl::unexpected<DecodeError> reject(uint32_t offset, const char* what) noexcept {
  return tl::unexpected<DecodeError>(DecodeError{offset, what});
}

}  // namespace protocol
}  // namespace rdmablk

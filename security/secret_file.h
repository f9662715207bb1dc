// Reading a file that holds a secret: a DH-HMAC-CHAP secret (DHHC-1) or a TLS PSK (NVMeTLSkey-1). The one
// reader of the target's key files (dhchap_key_file, dhchap_ctrl_key_file, tls_psk_file), the attach
// config's (dhchap_secret_file, dhchap_ctrl_secret_file, tls_key_file) and `rdmablk --tls-key-file`, so
// that all of them apply the same permission policy (docs/security.md#secrets-and-key-files):
//
//   - the path names a regular file itself: a symbolic link, a directory, a FIFO or a device is refused
//     (a FIFO is never waited on);
//   - other users have no access at all, and the group may at most read it: any of the mode bits 0027
//     (S_IWGRP | S_IRWXO) set is refused with "PATH: mode 0644 lets other users read or change the
//     secret (chmod 600 it; a group may only read it)";
//   - it holds at most kMaxSecretFileBytes - 1 bytes (a secret is about a hundred).
//
// Errors name the file and never quote its content. The caller parses the text and then wipes it
// (wipe_secret()).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "protocol/result.h"

namespace rdmablk::security {

// The mode bits that make a secret's file refused: group write, and anything for other users.
inline constexpr unsigned kSecretFileForbiddenMode = 0027;
// A file this long or longer is not one secret ("DHHC-1:03:" + base64 of 68 bytes + ":" is 103 bytes).
inline constexpr std::size_t kMaxSecretFileBytes = 4096;

// The file's whole content (a trailing newline included), or an error naming PATH. `what` names the
// secret in the too-long error, e.g. "a DHHC-1 secret".
Result<std::string> read_secret_file(const std::string& path, std::string_view what);

// The text up to its first line break: the secret of a file that holds it on the first line.
std::string first_line(const std::string& text);

// Overwrites the text with zeros (the secret does not linger in freed memory).
void wipe_secret(std::string& text) noexcept;

}  // namespace rdmablk::security

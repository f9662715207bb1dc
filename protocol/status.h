// NVMe completion status (NVMe Base 2.0, 4.6.1 "Status Field Definition").
//
// A Status holds the 15-bit Status Field as it sits in CQE Dword 3 bits 31:17, shifted down by one:
//   bits  7:0  SC   status code
//   bits 10:8  SCT  status code type
//   bits 12:11 CRD  command retry delay
//   bit  13    M    more (error log page has more information)
//   bit  14    DNR  do not retry
// The CQE's 16-bit status half-word is (value << 1) | phase.
#pragma once

#include <cstdint>

namespace rdmablk::protocol {

enum class StatusCodeType : uint8_t {
  generic = 0x0,
  command_specific = 0x1,
  media_error = 0x2,
  path_related = 0x3,
  vendor_specific = 0x7,
};

class Status {
 public:
  constexpr Status() noexcept = default;
  constexpr Status(StatusCodeType sct, uint8_t sc, bool dnr = false) noexcept
      : value_(static_cast<uint16_t>(sc | (static_cast<unsigned>(sct) & 0x7u) << 8 | (dnr ? kDnr : 0u))) {}
  static constexpr Status from_field(uint16_t field) noexcept { return Status(field & 0x7FFF); }
  // From the CQE's status half-word (bit 0 is the phase tag, dropped).
  static constexpr Status from_cqe_status(uint16_t cqe_status) noexcept { return Status(cqe_status >> 1); }

  constexpr uint16_t field() const noexcept { return value_; }
  constexpr uint16_t cqe_status(bool phase = false) const noexcept {
    return static_cast<uint16_t>(value_ << 1 | (phase ? 1u : 0u));
  }
  constexpr uint8_t sc() const noexcept { return static_cast<uint8_t>(value_ & 0xFF); }
  constexpr StatusCodeType sct() const noexcept { return static_cast<StatusCodeType>(value_ >> 8 & 0x7); }
  constexpr uint8_t crd() const noexcept { return static_cast<uint8_t>(value_ >> 11 & 0x3); }
  constexpr bool more() const noexcept { return (value_ & kMore) != 0; }
  constexpr bool dnr() const noexcept { return (value_ & kDnr) != 0; }
  constexpr bool ok() const noexcept { return (value_ & 0x7FF) == 0; }  // SCT 0, SC 0

  constexpr Status with_dnr(bool on = true) const noexcept {
    return Status(static_cast<uint16_t>(on ? value_ | kDnr : value_ & ~kDnr));
  }
  constexpr Status with_more(bool on = true) const noexcept {
    return Status(static_cast<uint16_t>(on ? value_ | kMore : value_ & ~kMore));
  }
  constexpr Status with_crd(uint8_t crd) const noexcept {
    return Status(static_cast<uint16_t>((value_ & ~(0x3u << 11)) | (crd & 0x3u) << 11));
  }
  // Equality ignores nothing: two statuses are equal when every bit of the field is equal.
  friend constexpr bool operator==(Status a, Status b) noexcept { return a.value_ == b.value_; }
  // Same SCT and SC, whatever DNR/More/CRD say.
  constexpr bool is(Status other) const noexcept { return (value_ & 0x7FF) == (other.value_ & 0x7FF); }

 private:
  static constexpr uint16_t kMore = 1u << 13;
  static constexpr uint16_t kDnr = 1u << 14;
  explicit constexpr Status(uint16_t v) noexcept : value_(v) {}
  uint16_t value_ = 0;
};

namespace status {
using enum StatusCodeType;
// Generic command status (SCT 0), NVMe Base 2.0 Figure 102.
inline constexpr Status success{generic, 0x00};
inline constexpr Status invalid_opcode{generic, 0x01, true};
inline constexpr Status invalid_field{generic, 0x02, true};
inline constexpr Status command_id_conflict{generic, 0x03, true};
inline constexpr Status data_transfer_error{generic, 0x04};
inline constexpr Status aborted_power_loss{generic, 0x05};
inline constexpr Status internal_error{generic, 0x06};
inline constexpr Status abort_requested{generic, 0x07};
inline constexpr Status aborted_sq_deletion{generic, 0x08};
inline constexpr Status aborted_failed_fused{generic, 0x09};   // the other half of a fused pair failed
inline constexpr Status aborted_missing_fused{generic, 0x0A};  // a fused half without its partner
inline constexpr Status invalid_namespace{generic, 0x0B, true};
inline constexpr Status command_sequence_error{generic, 0x0C, true};
inline constexpr Status invalid_sgl_segment_descriptor{generic, 0x0D, true};
inline constexpr Status invalid_sgl_descriptor_count{generic, 0x0E, true};
inline constexpr Status data_sgl_length_invalid{generic, 0x0F, true};
inline constexpr Status metadata_sgl_length_invalid{generic, 0x10, true};
inline constexpr Status sgl_descriptor_type_invalid{generic, 0x11, true};
inline constexpr Status operation_denied{generic, 0x15, true};
inline constexpr Status sgl_offset_invalid{generic, 0x16, true};
inline constexpr Status host_id_inconsistent_format{generic, 0x18, true};
inline constexpr Status keep_alive_timer_expired{generic, 0x19};
inline constexpr Status keep_alive_timeout_invalid{generic, 0x1A, true};
inline constexpr Status aborted_preempt_and_abort{generic, 0x1B};  // its host's registration was preempted
inline constexpr Status namespace_write_protected{generic, 0x20, true};
inline constexpr Status command_interrupted{generic, 0x21};
inline constexpr Status transient_transport_error{generic, 0x22};
// Generic, NVM command set (Figure 103).
inline constexpr Status lba_out_of_range{generic, 0x80, true};
inline constexpr Status capacity_exceeded{generic, 0x81, true};
inline constexpr Status namespace_not_ready{generic, 0x82};
inline constexpr Status reservation_conflict{generic, 0x83, true};

// Command specific status (SCT 1), Figure 104 / admin commands.
inline constexpr Status completion_queue_invalid{command_specific, 0x00, true};
inline constexpr Status invalid_queue_identifier{command_specific, 0x01, true};
inline constexpr Status invalid_queue_size{command_specific, 0x02, true};
inline constexpr Status abort_command_limit_exceeded{command_specific, 0x03, true};
inline constexpr Status async_event_request_limit_exceeded{command_specific, 0x05, true};
inline constexpr Status invalid_log_page{command_specific, 0x09, true};
inline constexpr Status feature_id_not_saveable{command_specific, 0x0D, true};
inline constexpr Status feature_not_changeable{command_specific, 0x0E, true};
inline constexpr Status feature_not_namespace_specific{command_specific, 0x0F, true};
// NVM command set, command specific.
inline constexpr Status conflicting_attributes{command_specific, 0x80, true};
inline constexpr Status write_to_read_only_range{command_specific, 0x82, true};
inline constexpr Status command_size_limit_exceeded{command_specific, 0x83, true};  // Copy: MSSRL, MCL, MSRC
// Fabrics command specific (NVMe over Fabrics 1.1, Figure 11 / Base 2.0 Figure 105).
inline constexpr Status connect_incompatible_format{command_specific, 0x80, true};
inline constexpr Status connect_controller_busy{command_specific, 0x81};
inline constexpr Status connect_invalid_parameters{command_specific, 0x82, true};
inline constexpr Status connect_restart_discovery{command_specific, 0x83, true};
inline constexpr Status connect_invalid_host{command_specific, 0x84, true};
inline constexpr Status invalid_queue_type{command_specific, 0x85, true};
inline constexpr Status discover_restart{command_specific, 0x90};
inline constexpr Status authentication_required{command_specific, 0x91, true};

// Media and data integrity errors (SCT 2), Figure 106.
inline constexpr Status write_fault{media_error, 0x80};
inline constexpr Status unrecovered_read_error{media_error, 0x81};
inline constexpr Status compare_failure{media_error, 0x85, true};
inline constexpr Status access_denied{media_error, 0x86, true};
inline constexpr Status deallocated_or_unwritten_block{media_error, 0x87, true};

// Path related (SCT 3), Figure 107.
inline constexpr Status internal_path_error{path_related, 0x00};
// Asymmetric Namespace Access: the path cannot serve the namespace now; never DNR (the host fails over).
inline constexpr Status ana_persistent_loss{path_related, 0x01};
inline constexpr Status ana_inaccessible{path_related, 0x02};
inline constexpr Status ana_transition{path_related, 0x03};
inline constexpr Status command_aborted_by_host{path_related, 0x71};
}  // namespace status

// A short name for a status, for logs and CLI output ("LBA Out of Range", "Invalid Field in Command").
// Unknown codes print as "SCT x SC 0xyy".
const char* status_name(Status s) noexcept;

}  // namespace rdmablk::protocol

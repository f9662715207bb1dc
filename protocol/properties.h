// Controller properties (NVMe Base 2.0, 3.1.3 "Controller Properties"). On PCIe these are BAR registers; on
// fabrics the host reads and writes them with Property Get/Set. Values are plain integers (they travel in
// a Property Set's value field or a CQE's DW0/DW1), wrapped in small types with field accessors.
#pragma once

#include <cstdint>
#include <optional>

namespace rdmablk::protocol {

// Property offsets (Base 2.0 Figure 33).
namespace property {
inline constexpr uint32_t cap = 0x00;     // 8 bytes, Controller Capabilities
inline constexpr uint32_t vs = 0x08;      // 4, Version
inline constexpr uint32_t intms = 0x0C;   // 4, Interrupt Mask Set (PCIe only)
inline constexpr uint32_t intmc = 0x10;   // 4, Interrupt Mask Clear (PCIe only)
inline constexpr uint32_t cc = 0x14;      // 4, Controller Configuration
inline constexpr uint32_t csts = 0x1C;    // 4, Controller Status
inline constexpr uint32_t nssr = 0x20;    // 4, NVM Subsystem Reset
inline constexpr uint32_t aqa = 0x24;     // 4, Admin Queue Attributes (PCIe)
inline constexpr uint32_t asq = 0x28;     // 8, Admin SQ Base Address (PCIe)
inline constexpr uint32_t acq = 0x30;     // 8, Admin CQ Base Address (PCIe)
inline constexpr uint32_t cmbloc = 0x38;  // 4
inline constexpr uint32_t cmbsz = 0x3C;   // 4
}  // namespace property

// Size in bytes of the property at `offset`, or nullopt when there is none we know. Property Get/Set
// whose ATTRIB size disagrees completes with Invalid Field.
constexpr std::optional<uint32_t> property_size(uint32_t offset) noexcept {
  switch (offset) {
    case property::cap:
    case property::asq:
    case property::acq:
      return 8;
    case property::vs:
    case property::intms:
    case property::intmc:
    case property::cc:
    case property::csts:
    case property::nssr:
    case property::aqa:
    case property::cmbloc:
    case property::cmbsz:
      return 4;
    default:
      return std::nullopt;
  }
}

// NSSR: writing "NVMe" (0x4E564D65) starts an NVM subsystem reset.
inline constexpr uint32_t kNssrResetValue = 0x4E564D65;

namespace detail {
template <typename T>
constexpr T prop_get(T v, unsigned shift, T mask) noexcept { return static_cast<T>(v >> shift & mask); }
template <typename T>
constexpr T prop_put(T v, unsigned shift, T mask, T field) noexcept {
  return static_cast<T>((v & ~static_cast<T>(mask << shift)) | static_cast<T>((field & mask) << shift));
}
}  // namespace detail

// CAP, Controller Capabilities (Base 2.0 Figure 36).
struct Cap {
  uint64_t value = 0;

  // CSS bits (CAP bits 44:37).
  static constexpr uint8_t kCssNvm = 1u << 0;          // bit 37: NVM command set
  static constexpr uint8_t kCssIoCommandSets = 1u << 6;  // bit 43: one or more I/O command sets
  static constexpr uint8_t kCssNoIo = 1u << 7;         // bit 44: no I/O command set (admin only)

  constexpr uint16_t mqes() const noexcept { return static_cast<uint16_t>(get(0, 0xFFFF)); }  // 0-based
  constexpr bool cqr() const noexcept { return get(16, 1) != 0; }        // contiguous queues required
  constexpr uint8_t ams() const noexcept { return static_cast<uint8_t>(get(17, 0x3)); }  // 18:17 arbitration
  constexpr uint8_t to() const noexcept { return static_cast<uint8_t>(get(24, 0xFF)); }  // 31:24, 500 ms units
  constexpr uint8_t dstrd() const noexcept { return static_cast<uint8_t>(get(32, 0xF)); }  // 35:32 doorbell stride
  constexpr bool nssrs() const noexcept { return get(36, 1) != 0; }      // NVM subsystem reset supported
  constexpr uint8_t css() const noexcept { return static_cast<uint8_t>(get(37, 0xFF)); }  // 44:37
  constexpr bool bps() const noexcept { return get(45, 1) != 0; }        // boot partition support
  constexpr uint8_t cps() const noexcept { return static_cast<uint8_t>(get(46, 0x3)); }  // 47:46 power scope
  constexpr uint8_t mpsmin() const noexcept { return static_cast<uint8_t>(get(48, 0xF)); }  // 51:48, 2^(12+n)
  constexpr uint8_t mpsmax() const noexcept { return static_cast<uint8_t>(get(52, 0xF)); }  // 55:52
  constexpr bool pmrs() const noexcept { return get(56, 1) != 0; }       // persistent memory region
  constexpr bool cmbs() const noexcept { return get(57, 1) != 0; }       // controller memory buffer
  constexpr bool nsss() const noexcept { return get(58, 1) != 0; }       // NVM subsystem shutdown
  constexpr uint8_t crms() const noexcept { return static_cast<uint8_t>(get(59, 0x3)); }  // 60:59 ready modes

  constexpr Cap& set_mqes(uint16_t v) noexcept { return put(0, 0xFFFF, v); }
  constexpr Cap& set_cqr(bool v) noexcept { return put(16, 1, v ? 1 : 0); }
  constexpr Cap& set_ams(uint8_t v) noexcept { return put(17, 0x3, v); }
  constexpr Cap& set_to(uint8_t v) noexcept { return put(24, 0xFF, v); }
  constexpr Cap& set_dstrd(uint8_t v) noexcept { return put(32, 0xF, v); }
  constexpr Cap& set_nssrs(bool v) noexcept { return put(36, 1, v ? 1 : 0); }
  constexpr Cap& set_css(uint8_t v) noexcept { return put(37, 0xFF, v); }
  constexpr Cap& set_bps(bool v) noexcept { return put(45, 1, v ? 1 : 0); }
  constexpr Cap& set_mpsmin(uint8_t v) noexcept { return put(48, 0xF, v); }
  constexpr Cap& set_mpsmax(uint8_t v) noexcept { return put(52, 0xF, v); }
  constexpr Cap& set_cmbs(bool v) noexcept { return put(57, 1, v ? 1 : 0); }
  constexpr Cap& set_nsss(bool v) noexcept { return put(58, 1, v ? 1 : 0); }

 private:
  constexpr uint64_t get(unsigned shift, uint64_t mask) const noexcept { return detail::prop_get(value, shift, mask); }
  constexpr Cap& put(unsigned shift, uint64_t mask, uint64_t v) noexcept {
    value = detail::prop_put(value, shift, mask, v);
    return *this;
  }
};

// VS, Version (Base 2.0 Figure 37): MJR 31:16, MNR 15:8, TER 7:0.
struct Vs {
  uint32_t value = 0;
  static constexpr Vs make(uint16_t major, uint8_t minor, uint8_t tertiary = 0) noexcept {
    return Vs{uint32_t{major} << 16 | uint32_t{minor} << 8 | tertiary};
  }
  constexpr uint16_t major() const noexcept { return static_cast<uint16_t>(value >> 16); }
  constexpr uint8_t minor() const noexcept { return static_cast<uint8_t>(value >> 8); }
  constexpr uint8_t tertiary() const noexcept { return static_cast<uint8_t>(value); }
};
inline constexpr Vs kNvme1_3 = Vs::make(1, 3);
inline constexpr Vs kNvme1_4 = Vs::make(1, 4);
inline constexpr Vs kNvme2_0 = Vs::make(2, 0);

// CC, Controller Configuration (Base 2.0 Figure 41).
struct Cc {
  uint32_t value = 0;

  enum class Css : uint8_t { nvm = 0, all_io_command_sets = 6, admin_only = 7 };
  enum class Shn : uint8_t { none = 0, normal = 1, abrupt = 2 };
  enum class Ams : uint8_t { round_robin = 0, weighted_round_robin = 1, vendor = 7 };

  constexpr bool en() const noexcept { return get(0, 1) != 0; }
  constexpr uint8_t css() const noexcept { return static_cast<uint8_t>(get(4, 0x7)); }     // 6:4
  constexpr uint8_t mps() const noexcept { return static_cast<uint8_t>(get(7, 0xF)); }     // 10:7, 2^(12+n)
  constexpr uint8_t ams() const noexcept { return static_cast<uint8_t>(get(11, 0x7)); }    // 13:11
  constexpr uint8_t shn() const noexcept { return static_cast<uint8_t>(get(14, 0x3)); }    // 15:14
  constexpr uint8_t iosqes() const noexcept { return static_cast<uint8_t>(get(16, 0xF)); }  // 19:16, 2^n
  constexpr uint8_t iocqes() const noexcept { return static_cast<uint8_t>(get(20, 0xF)); }  // 23:20, 2^n
  constexpr bool crime() const noexcept { return get(24, 1) != 0; }  // controller ready independent of media

  constexpr Cc& set_en(bool v) noexcept { return put(0, 1, v ? 1 : 0); }
  constexpr Cc& set_css(uint8_t v) noexcept { return put(4, 0x7, v); }
  constexpr Cc& set_mps(uint8_t v) noexcept { return put(7, 0xF, v); }
  constexpr Cc& set_ams(uint8_t v) noexcept { return put(11, 0x7, v); }
  constexpr Cc& set_shn(Shn v) noexcept { return put(14, 0x3, static_cast<uint32_t>(v)); }
  constexpr Cc& set_iosqes(uint8_t v) noexcept { return put(16, 0xF, v); }
  constexpr Cc& set_iocqes(uint8_t v) noexcept { return put(20, 0xF, v); }

 private:
  constexpr uint32_t get(unsigned shift, uint32_t mask) const noexcept { return detail::prop_get(value, shift, mask); }
  constexpr Cc& put(unsigned shift, uint32_t mask, uint32_t v) noexcept {
    value = detail::prop_put(value, shift, mask, v);
    return *this;
  }
};

// CSTS, Controller Status (Base 2.0 Figure 42).
struct Csts {
  uint32_t value = 0;

  enum class Shst : uint8_t { normal = 0, occurring = 1, complete = 2 };

  constexpr bool rdy() const noexcept { return get(0, 1) != 0; }    // ready
  constexpr bool cfs() const noexcept { return get(1, 1) != 0; }    // controller fatal status
  constexpr uint8_t shst() const noexcept { return static_cast<uint8_t>(get(2, 0x3)); }  // 3:2
  constexpr bool nssro() const noexcept { return get(4, 1) != 0; }  // NVM subsystem reset occurred
  constexpr bool pp() const noexcept { return get(5, 1) != 0; }     // processing paused
  constexpr bool st() const noexcept { return get(6, 1) != 0; }     // shutdown type (subsystem)

  constexpr Csts& set_rdy(bool v) noexcept { return put(0, 1, v ? 1 : 0); }
  constexpr Csts& set_cfs(bool v) noexcept { return put(1, 1, v ? 1 : 0); }
  constexpr Csts& set_shst(Shst v) noexcept { return put(2, 0x3, static_cast<uint32_t>(v)); }
  constexpr Csts& set_nssro(bool v) noexcept { return put(4, 1, v ? 1 : 0); }
  constexpr Csts& set_pp(bool v) noexcept { return put(5, 1, v ? 1 : 0); }

 private:
  constexpr uint32_t get(unsigned shift, uint32_t mask) const noexcept { return detail::prop_get(value, shift, mask); }
  constexpr Csts& put(unsigned shift, uint32_t mask, uint32_t v) noexcept {
    value = detail::prop_put(value, shift, mask, v);
    return *this;
  }
};

}  // namespace rdmablk::protocol

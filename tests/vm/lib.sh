# shellcheck shell=bash
# Shared by the VM lab test scripts (sourced, not run). Provides:
#   vm_skip REASON        print "SKIP: REASON" and exit 77 (ctest SKIP_RETURN_CODE)
#   vm_fail MESSAGE       print "FAIL: MESSAGE" and exit 1
#   vm_log MESSAGE        a timestamped progress line (seconds since the script started)
#   vm_require_lab        skip unless qemu is present and the guest is built (builds it on a cold run)
# Variables: vm_here (tests/vm), vm_root (the source tree), vm_dir (the guest cache, $VM_DIR).

vm_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm_root=$(cd "$vm_here/../.." && pwd)
vm_dir=${VM_DIR:-$vm_root/build/vm}
vm_t0=$(date +%s)

vm_skip() { echo "SKIP: $*"; exit 77; }
vm_fail() { echo "FAIL: $*"; exit 1; }
vm_log() { echo "vm-test [$(($(date +%s) - vm_t0))s]: $*"; }

vm_require_lab() {
  command -v qemu-system-x86_64 >/dev/null || vm_skip "no qemu-system-x86_64 (scripts/setup installs qemu-system-x86)"
  [ "$(uname -m)" = x86_64 ] || vm_skip "the lab's guest and our binaries are x86_64; this host is $(uname -m)"
  if [ -f "$vm_dir/kernel/vmlinuz" ] && [ -f "$vm_dir/rootfs/.complete" ] && [ -f "$vm_dir/initrd.gz" ]; then
    # Cached: build-guest only checks (and refreshes the module tree if the kernel changed).
    "$vm_here/build-guest" || vm_fail "tests/vm/build-guest failed on a cached guest in $vm_dir"
    return 0
  fi
  # Cold: the guest is built from the apt mirror (kernel package + debootstrap, about 1-2 minutes).
  [ "$(id -u)" -eq 0 ] || vm_skip "building the VM guest needs root (debootstrap); run once as root or set VM_DIR"
  local t
  for t in debootstrap cpio depmod modprobe dpkg apt-get apt-cache gzip xz zstd; do
    command -v "$t" >/dev/null || vm_skip "building the VM guest needs $t (scripts/setup installs the lab's packages)"
  done
  [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 ||
    vm_skip "building the VM guest needs a static /bin/busybox (package busybox-static)"
  vm_log "no cached guest in $vm_dir: building it (kernel download + debootstrap)"
  local blog
  blog=$(mktemp)
  if ! "$vm_here/build-guest" >"$blog" 2>&1; then
    cat "$blog" >&2
    local why
    why=$(tail -1 "$blog")
    rm -f "$blog"
    vm_skip "cannot build the VM guest (no network to the apt mirror?): $why"
  fi
  cat "$blog" >&2
  rm -f "$blog"
  vm_log "guest built"
}

# A TCP port nobody on this host uses (listening or connected), from the ephemeral-free range.
vm_free_port() {
  local p hex used=" "
  # /proc/net/tcp*: column 2 is local_address as HEXIP:HEXPORT (mawk has no strtonum: convert here).
  for hex in $(awk 'NR > 1 { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
    used+="$((16#$hex)) "
  done
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 12000))
    [[ $used == *" $p "* ]] || { echo "$p"; return 0; }
  done
  return 1
}

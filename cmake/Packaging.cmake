# The Debian package (CPack DEB): `scripts/package`, or `cmake --build build --target package` in a build
# configured with CMAKE_INSTALL_PREFIX=/usr, writes build/rdmablk_<version>_amd64.deb (and the detached
# debug symbols, rdmablk-dbgsym_<version>_amd64.ddeb). docs/operations.md#the-debian-package.
#
# Included from the top-level CMakeLists.txt before anything includes GNUInstallDirs: the default prefix
# is /usr, because the units name the installed paths (/usr/bin/rdmablk-target, /etc/rdmablk/target.yaml,
# the daemon's built-in default config path) and a package installs there. A build directory configured
# with another prefix keeps it for `cmake --install`, and its `package` target refuses to run.
#
# The package holds what `cmake --install` installs (top-level CMakeLists.txt): both binaries, the fio
# ioengine and its symlink when built, the units (/lib/systemd/system), /etc/rdmablk/target.yaml and
# /etc/rdmablk/attach/example.yaml.sample (conffiles: kept on remove, changes kept on upgrade), the
# README and docs/. Dependencies come from dpkg-shlibdeps (scripts/setup installs dpkg-dev). The
# maintainer scripts (cmake/debian/) reload systemd and stop the units on removal; nothing is enabled or
# started by installing.
if(CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
  set(CMAKE_INSTALL_PREFIX /usr CACHE PATH "Install prefix (the Debian package's is /usr)" FORCE)
endif()
# Debian 12 keeps packaged units in /lib/systemd/system (`pkg-config --variable=systemdsystemunitdir
# systemd`); a relative directory is taken under the prefix. Also read by the top-level install rules.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(RDMABLK_SYSTEMD_UNIT_DIR "/lib/systemd/system" CACHE STRING "Where the systemd units are installed")
else()
  set(RDMABLK_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING "Where the systemd units are installed")
endif()
include(GNUInstallDirs)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rdmablk)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "rdmablk")
set(CPACK_PACKAGE_CONTACT "rdmablk maintainers <rdmablk@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "userspace NVMe over Fabrics target and initiator (RDMA and NVMe/TCP)")
# The long description; CPack puts the summary above it as the first line.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "rdmablk-target serves NVMe namespaces from files, block devices or memory to
NVMe-oF hosts (the Linux kernel host, SPDK, rdmablk) over RDMA and NVMe/TCP, as the systemd
service rdmablk-target. rdmablk discovers, identifies and benchmarks NVMe-oF targets and attaches
their namespaces as local block devices (ublk or the kernel host), at boot through
rdmablk-attach@NAME.service.")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # rdmablk_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# modprobe for ublk_drv / nvme-fabrics (rdmablk-attach@.service); nvme-cli and fio use what we serve.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "kmod")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "nvme-cli, fio")
# Split the debug info into rdmablk-dbgsym_<version>_<arch>.ddeb (the .deb's binaries are stripped).
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
# Absolute destinations (/etc/rdmablk, /lib/systemd/system) go under the staging directory, not the host's.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})

# Control files: every file under /etc is a conffile; the maintainer scripts as they are.
set(rdmablk_conffiles
  ${CMAKE_INSTALL_FULL_SYSCONFDIR}/rdmablk/target.yaml
  ${CMAKE_INSTALL_FULL_SYSCONFDIR}/rdmablk/attach/example.yaml.sample)
list(JOIN rdmablk_conffiles "\n" rdmablk_conffiles)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/debian/conffiles "${rdmablk_conffiles}\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${CMAKE_CURRENT_BINARY_DIR}/debian/conffiles
  ${CMAKE_CURRENT_SOURCE_DIR}/cmake/debian/postinst
  ${CMAKE_CURRENT_SOURCE_DIR}/cmake/debian/prerm
  ${CMAKE_CURRENT_SOURCE_DIR}/cmake/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)  # scripts 0755, conffiles 0644

# Read by cpack when it runs: a package from a build whose units name /usr/local is refused.
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_CURRENT_BINARY_DIR}/CPackProjectConfig.cmake)
file(WRITE ${CPACK_PROJECT_CONFIG_FILE} "
if(NOT \"${CMAKE_INSTALL_PREFIX}\" STREQUAL \"/usr\")
  message(FATAL_ERROR \"rdmablk: the Debian package needs a build configured with -DCMAKE_INSTALL_PREFIX=/usr \"
    \"(this one has ${CMAKE_INSTALL_PREFIX}, and its units name ${CMAKE_INSTALL_FULL_BINDIR}): run scripts/package, \"
    \"or reconfigure: cmake -B ${CMAKE_BINARY_DIR} -DCMAKE_INSTALL_PREFIX=/usr\")
endif()
")
include(CPack)

# What the package installs, without the test suites that `all` (and so the `package` target) also builds:
# scripts/package builds this, then runs cpack. Filled in once the top-level directory has defined them.
add_custom_target(package-binaries)
function(rdmablk_package_binaries)
  add_dependencies(package-binaries rdmablk-target rdmablk)
  if(TARGET fio-rdmablk)
    add_dependencies(package-binaries fio-rdmablk)
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL rdmablk_package_binaries)

# shellcheck shell=bash
# Debian packages the tests and benchmarks need, installed when missing.
# Sourced by scripts/test and benches/compare-peers (one place for the
# rules, including qemu-block-extra's version pin).

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if ! as_root apt-get install -y -q "$@" </dev/null; then
    as_root apt-get update -q </dev/null
    as_root apt-get install -y -q "$@" </dev/null
  fi
}

# libiscsi's tools and test suite, sg3-utils' sg_vpd (decodes a VPD page
# read from a file, tests/e2e/alua.rs), qemu-img with its iSCSI driver, tgt
# and istgt (the peer targets), iperf3 (the loopback wire rate), fio (the disk's
# own rate, benches/compare-local), mkfs.xfs (the target study's FILEIO rows
# serve a file on XFS on a loop device), systemd-analyze (the unit in dist/,
# tests/e2e/service.rs), what cargo deb runs (objcopy and strip to
# split off the debug symbols, dpkg-shlibdeps for the dependencies), and
# headless Chromium with a font (the HTML report rendered and
# screenshotted, tests/e2e/report.rs; without its recommends, which are
# desktop packages).
install_peer_tools() {
  local need=()
  command -v iscsi-test-cu >/dev/null || need+=(libiscsi-bin)
  command -v sg_vpd >/dev/null || need+=(sg3-utils)
  command -v systemd-analyze >/dev/null || need+=(systemd)
  command -v objcopy >/dev/null || need+=(binutils)
  command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
  command -v qemu-img >/dev/null || need+=(qemu-utils)
  command -v tgtd >/dev/null || need+=(tgt)
  command -v istgt >/dev/null || need+=(istgt)
  command -v iperf3 >/dev/null || need+=(iperf3)
  command -v fio >/dev/null || need+=(fio)
  command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
  if [ ${#need[@]} -gt 0 ]; then
    echo "installing: ${need[*]}"
    apt_install "${need[@]}"
  fi
  if ! command -v chromium >/dev/null || [ ! -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
    echo "installing: chromium fonts-dejavu-core"
    apt_install --no-install-recommends chromium fonts-dejavu-core
  fi
  # qemu-img's iSCSI driver lives in qemu-block-extra, which must be the
  # very same version as qemu-utils. Some machines carry a newer
  # qemu-utils than their apt sources offer qemu-block-extra for; pin both
  # to the version of qemu-block-extra that can be installed.
  if ! qemu-img --help 2>/dev/null | grep -q . || \
     qemu-img info iscsi://127.0.0.1:1/iqn.x/0 2>&1 | grep -q "Unable to load module iscsi"; then
    local v
    v=$(apt-cache policy qemu-block-extra 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [ -z "$v" ] || [ "$v" = "(none)" ]; then
      as_root apt-get update -q </dev/null
      v=$(apt-cache policy qemu-block-extra | awk '/Candidate:/ {print $2}')
    fi
    echo "installing qemu-utils and qemu-block-extra $v (iSCSI driver for qemu-img)"
    apt_install --allow-downgrades "qemu-utils=$v" "qemu-block-extra=$v"
  fi
  local p
  for p in tgt istgt libiscsi-bin sg3-utils qemu-utils qemu-block-extra iperf3 fio systemd chromium; do
    printf '%s %s  ' "$p" "$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo '?')"
  done
  echo
}

# QEMU for the kernel-initiator VM tests (crate ironlun-vm); the guest
# itself is built from Debian packages by `apt-get download`, nothing is
# installed for it. e2fsprogs gives the host e2fsck and debugfs, which
# check the guest's file system from the LUN file. Returns non-zero, with
# the reason on stderr, when QEMU cannot be installed.
install_vm_tools() {
  local need=()
  command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
  command -v debugfs >/dev/null || [ -x /usr/sbin/debugfs ] || [ -x /sbin/debugfs ] || need+=(e2fsprogs)
  if [ ${#need[@]} -gt 0 ]; then
    echo "installing: ${need[*]}"
    if ! apt_install --no-install-recommends "${need[@]}" >/tmp/ironlun-vm-apt.log 2>&1; then
      echo "could not install ${need[*]}: $(tail -3 /tmp/ironlun-vm-apt.log)" >&2
      return 1
    fi
  fi
  printf 'qemu-system-x86 %s\n' "$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null || echo '?')"
}

# cargo-deb, which builds the Debian package (cargo deb; the package tier
# of scripts/test). Built from crates.io once, at this version, into
# ~/.cargo/bin, which later runs on this machine reuse (about two minutes
# on two cores otherwise). Returns non-zero, with the reason on stderr,
# when it cannot be installed.
CARGO_DEB_VERSION=3.8.0
install_cargo_deb() {
  if [ "$(cargo-deb --version 2>/dev/null)" = "cargo-deb $CARGO_DEB_VERSION" ]; then
    echo "cargo-deb $CARGO_DEB_VERSION"
    return 0
  fi
  echo "installing cargo-deb $CARGO_DEB_VERSION (cargo install --locked)"
  if ! cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked >/tmp/ironlun-cargo-deb.log 2>&1; then
    echo "cargo install cargo-deb failed: $(tail -3 /tmp/ironlun-cargo-deb.log)" >&2
    return 1
  fi
}

# A single-node Ceph for the RBD tests and the lab (scripts/ceph-cluster):
# Debian 12's Ceph 16 daemons, the ceph and rbd commands, librbd's
# headers (the rbd: LUN kind links -lrbd -lrados) and tgt's rbd backing
# store (the peer for RBD). Recommends are left out (they pull in
# ceph-base's extras, python tooling and more). Returns non-zero, with
# the reason on stderr, when they cannot be installed.
install_ceph() {
  local need=()
  command -v ceph-mon >/dev/null || need+=(ceph-mon)
  command -v ceph-mgr >/dev/null || need+=(ceph-mgr)
  command -v ceph-osd >/dev/null || need+=(ceph-osd)
  command -v rbd >/dev/null || need+=(ceph-common)
  [ -e /usr/include/rbd/librbd.h ] || need+=(librbd-dev)
  [ -e /usr/lib/tgt/backing-store/bs_rbd.so ] || need+=(tgt-rbd)
  if [ ${#need[@]} -gt 0 ]; then
    echo "installing: ${need[*]}"
    if ! apt_install --no-install-recommends "${need[@]}" >/tmp/ironlun-ceph-apt.log 2>&1; then
      echo "could not install ${need[*]}: $(tail -3 /tmp/ironlun-ceph-apt.log)" >&2
      return 1
    fi
  fi
  printf 'ceph %s\n' "$(dpkg-query -W -f='${Version}' ceph-osd 2>/dev/null || echo '?')"
}

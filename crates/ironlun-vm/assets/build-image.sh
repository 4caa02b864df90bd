#!/usr/bin/env bash
# Builds the guest image for the kernel-initiator VM from Debian packages:
# a stock Debian kernel and an initramfs holding busybox-static, open-iscsi
# (iscsid, iscsiadm), e2fsprogs, multipath-tools (multipath, multipathd and
# their checker and prioritizer plugins) with udev's daemon and the block
# device rules it needs, dmsetup, the kernel modules the iSCSI and
# dm-multipath paths need and the shared libraries of those programs.
#
#   build-image.sh OUT_DIR
#
# Writes OUT_DIR/vmlinuz, OUT_DIR/base.cpio and OUT_DIR/manifest.txt (the
# package versions used). Nothing is fetched but Debian packages through
# apt; nothing is installed on the host. Run by `ironlun vm build` (crate
# ironlun-vm), which caches the result and decides when to rebuild.
set -euo pipefail

OUT=${1:?usage: build-image.sh OUT_DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK="$OUT/build"
rm -rf "$WORK"
mkdir -p "$WORK/debs" "$WORK/pkgroot" "$WORK/root"
ARCH_LIBS=lib/x86_64-linux-gnu

# --- which packages -------------------------------------------------------
# The kernel: whatever linux-image-amd64 depends on today.
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$KPKG" ]; then
  apt-get update -q </dev/null >/dev/null
  KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
[ -n "$KPKG" ] || { echo "build-image: cannot resolve linux-image-amd64" >&2; exit 1; }
KVER=${KPKG#linux-image-}

# Programs and the libraries they link that a minimal host may lack; any
# other library comes from the host's own (Debian) copy, found by ldd.
PKGS=(
  "$KPKG" busybox-static open-iscsi e2fsprogs
  libisns0 libkmod2 libmount1 libopeniscsiusr libssl3 libsystemd0
  libext2fs2 libcom-err2 libblkid1 libuuid1 libss2
  multipath-tools udev dmsetup libaio1 libdevmapper1.02.1 libedit2
  libjson-c5 libudev1 liburcu8 libsystemd-shared libgcc-s1
)

cd "$WORK/debs"
# apt's download sandbox user cannot write here; download as the caller.
if ! apt-get -q -o APT::Sandbox::User=root download "${PKGS[@]}" </dev/null >/dev/null; then
  apt-get update -q </dev/null >/dev/null
  apt-get -q -o APT::Sandbox::User=root download "${PKGS[@]}" </dev/null >/dev/null
fi
: >"$OUT/manifest.txt.new"
for d in *.deb; do
  dpkg-deb -W --showformat='${Package} ${Version}\n' "$d" >>"$OUT/manifest.txt.new"
  dpkg-deb -x "$d" "$WORK/pkgroot"
done

P="$WORK/pkgroot"
R="$WORK/root"
BB="$P/bin/busybox"

# --- file system skeleton -------------------------------------------------
mkdir -p "$R"/{bin,sbin,etc/iscsi,proc,sys,dev,tmp,run,mnt,var/lock/iscsi,var/lib/iscsi,lib64,"$ARCH_LIBS"}
cp "$BB" "$R/bin/busybox"
ln -s busybox "$R/bin/sh"
cp "$P/etc/mke2fs.conf" "$R/etc/mke2fs.conf"
printf 'root:x:0:0:root:/:/bin/sh\n' >"$R/etc/passwd"
printf 'root:x:0:\n' >"$R/etc/group"

# --- programs and their libraries ------------------------------------------
LDPATH="$P/$ARCH_LIBS:$P/usr/$ARCH_LIBS:$P/usr/$ARCH_LIBS/systemd:$P/lib"
copy_prog() {
  local src=$1 dst=$2 lib path
  mkdir -p "$R/$(dirname "$dst")"
  cp "$src" "$R/$dst"
  # ldd prints "name => /path (addr)" or "/lib64/ld-linux... (addr)".
  while read -r lib path; do
    [ -n "$path" ] || continue
    case "$lib" in
      /*) cp -L "$lib" "$R/lib64/$(basename "$lib")" ;;
      *) cp -L "$path" "$R/$ARCH_LIBS/$lib" ;;
    esac
  done < <(LD_LIBRARY_PATH="$LDPATH" ldd "$src" | awk '
    $2 == "=>" && $3 ~ /^\// {print $1, $3; next}
    $1 ~ /^\// {print $1, $1}')
}
find_prog() {
  local d
  for d in sbin usr/sbin bin usr/bin; do
    if [ -f "$P/$d/$1" ] && [ ! -L "$P/$d/$1" ]; then echo "$P/$d/$1"; return 0; fi
  done
  echo "build-image: $1 not found in the packages" >&2
  exit 1
}
for prog in iscsid iscsiadm mke2fs e2fsck multipath multipathd dmsetup udevadm; do
  copy_prog "$(find_prog "$prog")" "sbin/$prog"
done

# --- dm-multipath ------------------------------------------------------------
# multipathd loads its path checkers and prioritizers (tur, alua, ...) from
# /lib/multipath; udevd is udevadm called systemd-udevd, and scsi_id with
# the persistent-storage rules gives each path the ID_SERIAL multipath
# groups paths by.
mkdir -p "$R/lib/multipath" "$R/lib/udev/rules.d" "$R/etc/multipath"
for so in "$P"/lib/multipath/*.so; do
  copy_prog "$so" "lib/multipath/$(basename "$so")"
done
for lib in libmultipath.so.0 libmpathutil.so.0 libmpathcmd.so.0 libmpathpersist.so.0; do
  [ -e "$R/$ARCH_LIBS/$lib" ] || cp -L "$P/lib/$lib" "$R/$ARCH_LIBS/$lib"
done
# glibc loads libgcc_s for pthread_cancel, which multipathd calls.
cp -L "$P/$ARCH_LIBS/libgcc_s.so.1" "$R/$ARCH_LIBS/"
ln -s udevadm "$R/sbin/systemd-udevd"
copy_prog "$P/lib/udev/scsi_id" lib/udev/scsi_id
for rules in 50-udev-default 60-block 60-persistent-storage; do
  cp "$P/lib/udev/rules.d/$rules.rules" "$R/lib/udev/rules.d/"
done

# --- kernel modules -------------------------------------------------------
# The closure of what the iSCSI path needs under modules.dep. crc32c is a
# soft dependency of ext4 and iscsi_tcp's digests, so it is named here;
# scsi_dh_alua is the ALUA device handler (the alua case); dm_multipath
# and its path selectors are dm-multipath (the multipath case).
MODS=(virtio_pci virtio_net scsi_mod sd_mod scsi_transport_iscsi libiscsi libiscsi_tcp iscsi_tcp crc32c_generic ext4 scsi_dh_alua
  dm_multipath dm_service_time dm_round_robin dm_queue_length)
"$BB" depmod -b "$P" "$KVER"
MD="$P/lib/modules/$KVER"
declare -A want=()
add_mod() {
  local name=$1 line path dep
  line=$(grep -E "(^|/)${name//_/[_-]}\.ko:" "$MD/modules.dep" | head -1) || true
  [ -n "$line" ] || { echo "build-image: module $name not in $KPKG" >&2; exit 1; }
  path=${line%%:*}
  [ -z "${want[$path]:-}" ] || return 0
  want[$path]=1
  for dep in ${line#*:}; do
    dep=$(basename "$dep" .ko)
    add_mod "$dep"
  done
}
for m in "${MODS[@]}"; do add_mod "$m"; done
for path in "${!want[@]}"; do
  mkdir -p "$R/lib/modules/$KVER/$(dirname "${path#/lib/modules/$KVER/}")"
  case "$path" in
    /*) cp "$P$path" "$R$path" ;;
    *) cp "$MD/$path" "$R/lib/modules/$KVER/$path" ;;
  esac
done
cp "$MD/modules.builtin" "$MD/modules.order" "$R/lib/modules/$KVER/"
"$BB" depmod -b "$R" "$KVER"

# --- pack -------------------------------------------------------------------
(cd "$R" && find . | "$BB" cpio -o -H newc 2>/dev/null) >"$OUT/base.cpio.new"
cp "$P/boot/vmlinuz-$KVER" "$OUT/vmlinuz.new"
mv "$OUT/base.cpio.new" "$OUT/base.cpio"
mv "$OUT/vmlinuz.new" "$OUT/vmlinuz"
mv "$OUT/manifest.txt.new" "$OUT/manifest.txt"
rm -rf "$WORK"
echo "build-image: $KPKG, $(wc -l <"$OUT/manifest.txt") packages, initramfs $(du -h "$OUT/base.cpio" | cut -f1)"

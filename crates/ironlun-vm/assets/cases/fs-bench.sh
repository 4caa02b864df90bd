# The file-system rows of the published studies (docs/studies.md),
# through ext4 on the kernel initiator. Timings use the guest's clock.
#   FILE_MB      a FILE_MB MiB file written then read with 512 KiB blocks
#                (0: skip)
#   COPY_SCALE   file copies 1 x 1 GiB, 1024 x 1 MiB and 64 folders x
#                64 x 256 KiB, each divided by COPY_SCALE (0: skip)
#   LUN_COPIES   1: each set copied from the LUN to the LUN (unset: 1)
#   RAM_COPIES   1: each set (random data) copied from a RAM disk (tmpfs)
#                to the LUN and back, as the RAM-disk study's robocopy
#                runs did (see ram_round)
#   RAM_UNCACHED 1: each set also read back after dropping the caches
# Each test reports `test=NAME bytes=N ms=T`; caches are dropped before
# every timed read, and every timed write ends with its data on the LUN.
. /lib.sh
discover
login
DEV=$(disk_of_lun 0)
mkfs_ext4 "$DEV" -E nodiscard
mount -t ext4 "$DEV" /mnt || die "mount failed"

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
timed() {
  name=$1 bytes=$2
  shift 2
  t0=$(now_ms)
  "$@" || die "$name failed"
  t1=$(now_ms)
  kv "test=$name bytes=$bytes ms=$((t1 - t0))"
}
fill() { dd if=/dev/zero of="$1" bs=256k count=$(($2 / 262144)) 2>/dev/null || die "writing $1 failed"; }

if [ "${FILE_MB:-0}" -gt 0 ]; then
  count=$((FILE_MB * 2))
  drop_caches
  timed fs-write-512k $((count * 524288)) dd if=/dev/zero of=/mnt/file bs=512k count=$count conv=fsync
  drop_caches
  timed fs-read-512k $((count * 524288)) dd if=/mnt/file of=/dev/null bs=512k
  rm /mnt/file
  sync
fi

copy() { cp -r /mnt/src /mnt/dst && sync; }
# folder_tree ROOT FILL: the study's folder copy set, 64 folders (64 / s
# of them, at least one) of 64 files of 256 KiB each, written by FILL;
# sets $folders.
folder_tree() {
  mkdir "$1"
  folders=$((64 / s))
  [ "$folders" -gt 0 ] || folders=1
  d=0
  while [ $d -lt $folders ]; do
    mkdir "$1/d$d"
    i=0
    while [ $i -lt 64 ]; do "$2" "$1/d$d/f$i" 262144; i=$((i + 1)); done
    d=$((d + 1))
  done
}
if [ "${COPY_SCALE:-0}" -gt 0 ] && [ "${LUN_COPIES:-1}" = 1 ]; then
  s=$COPY_SCALE
  mkdir /mnt/src
  fill /mnt/src/one $((1073741824 / s))
  drop_caches
  timed "copy-1x1GiB" $((1073741824 / s)) copy
  rm -rf /mnt/src /mnt/dst

  mkdir /mnt/src
  n=$((1024 / s)) i=0
  while [ $i -lt $n ]; do fill /mnt/src/f$i 1048576; i=$((i + 1)); done
  drop_caches
  timed "copy-1024x1MiB" $((n * 1048576)) copy
  rm -rf /mnt/src /mnt/dst

  folder_tree /mnt/src fill
  drop_caches
  timed "copy-64x64x256KiB" $((folders * 64 * 262144)) copy
  rm -rf /mnt/src /mnt/dst
  sync
fi

# One set in /ram/src copied to the LUN and back. ram-to-lun-TAG is the
# copy alone, as robocopy timed it (the page cache takes the data; the
# study saw rates above its link's), -synced adds the sync that puts it
# on the LUN. lun-to-ram-TAG reads it back while it is still cached, as
# the study's reads after its writes (679 MB/s cannot have crossed 1
# Gbit/s); -uncached (RAM_UNCACHED=1) after dropping the caches, so over
# the wire.
ram_round() {
  tag=$1 bytes=$2
  drop_caches
  t0=$(now_ms)
  cp -r /ram/src /mnt/w || die "ram-to-lun-$tag failed"
  t1=$(now_ms)
  sync
  t2=$(now_ms)
  kv "test=ram-to-lun-$tag bytes=$bytes ms=$((t1 - t0))"
  kv "test=ram-to-lun-$tag-synced bytes=$bytes ms=$((t2 - t0))"
  rm -rf /ram/src
  timed "lun-to-ram-$tag" "$bytes" cp -r /mnt/w /ram/r
  rm -rf /ram/r
  if [ "${RAM_UNCACHED:-0}" = 1 ]; then
    drop_caches
    timed "lun-to-ram-$tag-uncached" "$bytes" cp -r /mnt/w /ram/r
    rm -rf /ram/r
  fi
  rm -rf /mnt/w
  sync
}
rfill() { dd if=/dev/urandom of="$1" bs=256k count=$(($2 / 262144)) 2>/dev/null || die "writing $1 failed"; }
if [ "${COPY_SCALE:-0}" -gt 0 ] && [ "${RAM_COPIES:-0}" = 1 ]; then
  s=$COPY_SCALE
  mkdir -p /ram
  mount -t tmpfs -o size=$((1024 / s + 16))m tmpfs /ram || die "tmpfs failed"
  mkdir /ram/src
  rfill /ram/src/one $((1073741824 / s))
  ram_round 1x1GiB $((1073741824 / s))

  mkdir /ram/src
  n=$((1024 / s)) i=0
  while [ $i -lt $n ]; do rfill /ram/src/f$i 1048576; i=$((i + 1)); done
  ram_round 1024x1MiB $((n * 1048576))

  folder_tree /ram/src rfill
  ram_round 64x64x256KiB $((folders * 64 * 262144))
  umount /ram
fi
umount /mnt
fsck_clean "$DEV"
logout

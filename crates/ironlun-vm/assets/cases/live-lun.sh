# Case 6: a LUN added and resized while the kernel has a file system
# mounted on another LUN of the same session. The host acts on two
# evidence lines: on phase=lun0-mounted it adds LUN 1 (LUN1_BYTES) with
# `ironlun admin lun add`, on phase=lun1-written it grows LUN 1 to
# LUN1_RESIZED with `ironlun admin lun resize`. The guest finds each
# change by rescanning, for at most WAIT_S seconds after reporting the
# phase. LUN 0's ext4 stays mounted, and written, throughout.
. /lib.sh
MIB=1048576
discover
login
DEV0=$(disk_of_lun 0)
mkfs_ext4 "$DEV0"
mount -t ext4 "$DEV0" /mnt || die "mount LUN 0 failed"
write_files /mnt 0
sync
# A file written to LUN 0 while LUN 1 is added: the kernel retries the
# command that meets REPORTED LUNS DATA HAS CHANGED (SPC-5 §5.14).
dd if=/dev/urandom of=/mnt/during bs=64k count=64 conv=fsync 2>/dev/null &
writer=$!
kv "phase=lun0-mounted"

# LUN 1 appears after a rescan of the session (REPORT LUNS).
t0=$(now_ms)
rescan_until_lun 1 "$WAIT_S"
t1=$(now_ms)
DEV1=$LUN_DEV
size=$(blockdev --getsize64 "$DEV1")
kv "lun1_device=$DEV1 lun1_bytes=$size lun1_seen_ms=$((t1 - t0)) lun1_rescans=$RESCANS"
[ "$size" = "$LUN1_BYTES" ] || die "LUN 1 has $size bytes, the host added $LUN1_BYTES"
wait $writer || die "writing to LUN 0 while LUN 1 was added failed"
(cd /mnt && sha256sum during) >>/tmp/sums.0
kv "file=/during sha256=$(sha256sum /mnt/during | cut -d' ' -f1) lun=0"

# A pattern in the last MiB of LUN 1 as added.
old_last=$((LUN1_BYTES / MIB - 1))
write_pattern before 1 "$DEV1" "$old_last" 1
kv "phase=lun1-written"

# The new size reaches the kernel when it rescans the device (READ
# CAPACITY again; the target also raised CAPACITY DATA HAS CHANGED).
t0=$(now_ms)
rescan_until_size 1 "$DEV1" "$LUN1_RESIZED" "$WAIT_S"
t1=$(now_ms)
kv "lun1_resized_bytes=$(blockdev --getsize64 "$DEV1") lun1_resize_seen_ms=$((t1 - t0)) lun1_resize_rescans=$RESCANS"
# The new space takes a pattern in its last MiB; the first one is intact.
write_pattern after 1 "$DEV1" $((LUN1_RESIZED / MIB - 1)) 1
[ "$(read_sha256 "$DEV1" "$old_last" 1)" = "$(cat /tmp/pattern.before)" ] \
  || die "the pattern written before the resize changed"
kv "pattern_before=kept"

# LUN 0's file system is still mounted and still takes writes; every
# file is read from the device again (caches dropped), then it is
# unmounted and checked.
grep -q "^$DEV0 /mnt ext4 " /proc/mounts || die "LUN 0 is no longer mounted: $(cat /proc/mounts)"
kv "lun0_mounted=yes"
dd if=/dev/urandom of=/mnt/late bs=1024 count=256 2>/dev/null || die "writing to LUN 0 after the changes failed"
(cd /mnt && sha256sum late) >>/tmp/sums.0
kv "file=/late sha256=$(sha256sum /mnt/late | cut -d' ' -f1) lun=0"
sync
echo 3 >/proc/sys/vm/drop_caches
verify_files /mnt 0
umount /mnt || die "umount LUN 0 failed"
fsck_clean "$DEV0" lun=0
logout

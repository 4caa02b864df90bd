# Case 5: fstrim on a mounted ext4 reaches a thin LUN as UNMAP. The host
# reads the LUN file's allocated size at phase=written and at the end.
. /lib.sh
discover
login
DEV=$(disk_of_lun 0)
for f in provisioning_mode; do
  p=$(ls /sys/class/scsi_disk/*/$f 2>/dev/null | head -1)
  [ -n "$p" ] && kv "$f=$(cat "$p")"
done
kv "discard_max_bytes=$(cat /sys/block/$(basename "$DEV")/queue/discard_max_bytes)"
mkfs_ext4 "$DEV" -E nodiscard
mount -t ext4 "$DEV" /mnt || die "mount failed"
dd if=/dev/urandom of=/mnt/big bs=1M count=${MIB:-48} 2>/dev/null || die "write failed"
sync
kv phase=written
# The host reads the file's allocation on phase=written; give it time.
sleep 2
rm /mnt/big
sync
out=$(fstrim -v /mnt) || die "fstrim failed"
log "$out"
kv "trimmed_bytes=$(echo "$out" | awk '{print $2}')"
sync
umount /mnt
fsck_clean "$DEV"
logout

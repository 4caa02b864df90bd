# Case 4: the target is killed and restarted while files are written.
# Each file is followed by `sync`; a file is reported as synced only once
# sync has returned. The host kills the target (SIGKILL) when it sees
# synced=$KILL_AFTER and restarts it on the same port a few seconds later.
. /lib.sh
discover
login
DEV=$(disk_of_lun 0)
mkfs_ext4 "$DEV"
mount -t ext4 "$DEV" /mnt || die "mount failed"
mkdir -p /mnt/w
: >/tmp/sums.0
i=0
while [ $i -lt "${FILES:-10}" ]; do
  i=$((i + 1))
  dd if=/dev/urandom of=/mnt/w/f$i bs=64k count=32 2>/dev/null || die "write of f$i failed"
  sum=$(sha256sum /mnt/w/f$i | cut -d' ' -f1)
  t0=$(now_ms)
  sync
  t1=$(now_ms)
  echo "$sum  w/f$i" >>/tmp/sums.0
  kv "synced=$i file=/w/f$i sha256=$sum lun=0 sync_ms=$((t1 - t0))"
done
umount /mnt
fsck_clean "$DEV"
mount -t ext4 -o ro "$DEV" /mnt || die "remount failed"
verify_files /mnt 0
umount /mnt
logout

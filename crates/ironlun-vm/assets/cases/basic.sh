# Case 1: discovery, login, mkfs.ext4, mount, files with known SHA-256,
# sync, unmount, e2fsck -fn, remount and verify, raw read, logout.
. /lib.sh
discover
login
DEV=$(disk_of_lun 0)
kv "device=$DEV size=$(blockdev --getsize64 "$DEV") lbs=$(blockdev --getss "$DEV")"
mkfs_ext4 "$DEV"
mount -t ext4 "$DEV" /mnt || die "mount failed"
write_files /mnt 0
sync
umount /mnt
fsck_clean "$DEV"
mount -t ext4 -o ro "$DEV" /mnt || die "remount failed"
verify_files /mnt 0
umount /mnt
raw_read "$DEV"
kv "device_sha256=$(sha256sum "$DEV" | cut -d' ' -f1)"
logout

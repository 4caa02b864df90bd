# Case 3: two LUNs of different backends and block sizes in one session.
# LBS0 and LBS1 are the logical block sizes the host exported.
. /lib.sh
discover
login
for lun in 0 1; do
  dev=$(disk_of_lun $lun)
  lbs=$(blockdev --getss "$dev")
  want=$(eval echo "\$LBS$lun")
  kv "lun=$lun device=$dev size=$(blockdev --getsize64 "$dev") lbs=$lbs"
  [ "$lbs" = "$want" ] || die "LUN $lun: logical block size $lbs, expected $want"
  mkfs_ext4 "$dev"
  mkdir -p /mnt/$lun
  mount -t ext4 "$dev" /mnt/$lun || die "mount LUN $lun failed"
  write_files /mnt/$lun $lun
done
sync
for lun in 0 1; do
  umount /mnt/$lun
  fsck_clean "$(disk_of_lun $lun)" "lun=$lun"
done
for lun in 0 1; do
  mount -t ext4 -o ro "$(disk_of_lun $lun)" /mnt/$lun || die "remount LUN $lun failed"
  verify_files /mnt/$lun $lun
  umount /mnt/$lun
done
logout

# Case snapshot (issue 39): a snapshot of a LUN taken while ext4 on it
# is being written, read through the kernel initiator.
# LUN 0 (a file on a reflink XFS on the host) gets ext4 and a writer:
# files of 64-256 KiB of random data, each written with fsync, and only
# once its fsync returned reported as `file=/w/fN sha256=S lun=0` (the
# host counts these lines as they come). With at least three files
# written the guest reports phase=snapshot; the host takes the snapshot
# (`ironlun admin snapshot create`) while the writer goes on, clones it
# and adds the clone as LUN 1 and the snapshot itself, read-only, as
# LUN 2. The guest rescans until both appear (at most WAIT_S seconds
# each), lets the writer write three more files to LUN 0 and stops it.
# Then:
# - the clone (LUN 1): mount (ext4 replays the journal the snapshot
#   caught), umount, e2fsck -f -n clean, mount read-only, and each file
#   checked against its SHA-256: the host requires every file whose line
#   it had read before asking for the snapshot, and that no file begun
#   after the guest saw LUN 1 is there;
# - the snapshot (LUN 2): a read-only device, whose journal needs
#   recovery: `mount -o ro` must refuse it, `mount -o ro,noload` mounts
#   it without the journal (what that shows is reported, not required);
# - LUN 0: every file verifies, e2fsck clean.
. /lib.sh
discover
login
DEV0=$(disk_of_lun 0)
sysfs_id() { cat "/sys/class/scsi_device/$(hctl_of_lun "$1")/device/$2" 2>/dev/null | tr -d ' \n' | tr -c 'A-Za-z0-9.\n' _; }
# The unit serial number (VPD page 80h: four bytes of header, then it).
serial_of() { tail -c +5 "/sys/class/scsi_device/$(hctl_of_lun "$1")/device/vpd_pg80" | tr -d ' \000\n'; }
kv "lun=0 device=$DEV0 wwid=$(sysfs_id 0 wwid) serial=$(serial_of 0)"
mkfs_ext4 "$DEV0" -E nodiscard
mount -t ext4 "$DEV0" /mnt || die "mount LUN 0 failed"
mkdir -p /mnt/w

# The writer: a file's line goes to the host, and its SHA-256 to
# /tmp/sums.w, only after its fsync returned; /tmp/count is the number
# of the last such file.
writer() {
  n=0
  while [ ! -e /tmp/stop ]; do
    n=$((n + 1))
    kib=$((64 + RANDOM % 193))
    dd if=/dev/urandom of=/tmp/wsrc bs=1024 count=$kib 2>/dev/null
    sum=$(sha256sum /tmp/wsrc | cut -d' ' -f1)
    if ! dd if=/tmp/wsrc of="/mnt/w/f$n" bs=64k conv=fsync 2>/tmp/wdd.err; then
      echo "file $n: $(cat /tmp/wdd.err)" >/tmp/writer.failed
      exit 1
    fi
    echo "$sum  w/f$n" >>/tmp/sums.w
    kv "file=/w/f$n sha256=$sum lun=0"
    echo "$n" >/tmp/count.new && mv /tmp/count.new /tmp/count
  done
}
writer &
WRITER=$!
count() { cat /tmp/count 2>/dev/null || echo 0; }
writer_ok() { [ ! -e /tmp/writer.failed ] || die "the writer failed: $(cat /tmp/writer.failed)"; }
# Until the writer has written $1 files, within WAIT_S seconds.
files_until() {
  deadline=$(($(now_ms) + WAIT_S * 1000))
  while [ "$(count)" -lt "$1" ]; do
    writer_ok
    [ "$(now_ms)" -lt "$deadline" ] || die "the writer is stuck at file $(count), waiting for $1"
    sleep 0.2
  done
}

files_until 3
kv "phase=snapshot files=$(count)"
t0=$(now_ms)
rescan_until_lun 1 "$WAIT_S"
DEV1=$LUN_DEV
rescan_until_lun 2 "$WAIT_S"
DEV2=$LUN_DEV
t1=$(now_ms)
# Every file after this one was begun after the snapshot (the guest saw
# LUN 1, the snapshot's clone, before the writer began it).
SEEN=$(count)
kv "phase=luns-seen seen_files=$SEEN seen_ms=$((t1 - t0))"
for l in 1 2; do
  d=$(eval echo "\$DEV$l")
  kv "lun=$l device=$d wwid=$(sysfs_id $l wwid) serial=$(serial_of $l) ro=$(cat "/sys/block/${d#/dev/}/ro")"
done
# LUN 0 goes on being written after the snapshot.
files_until $((SEEN + 3))
touch /tmp/stop
wait "$WRITER" || true
writer_ok
N=$(count)
[ "$(wc -l </tmp/sums.w)" = "$N" ] || die "$N files written, $(wc -l </tmp/sums.w) sums"
kv "phase=written files=$N"

# Checks the files of /tmp/sums.w under $1 (files 1..N): reports the
# last file of the unbroken run of good ones from f1, the last one
# present at all, and how many are present but differ (a file whose
# fsync had not returned at the snapshot may be cut short).
check_files() {
  ok_through=0 max_present=0 differ=0 good=0 i=0 run=1
  while read -r sum path; do
    i=$((i + 1))
    if [ -e "$1/$path" ]; then
      max_present=$i
      if [ "$(sha256sum "$1/$path" | cut -d' ' -f1)" = "$sum" ]; then
        good=$((good + 1))
        [ "$run" = 1 ] && ok_through=$i
      else
        differ=$((differ + 1))
        run=0
        log "$2: $path differs"
      fi
    else
      run=0
    fi
  done </tmp/sums.w
  kv "$2_ok_through=$ok_through $2_good=$good $2_max_present=$max_present $2_differ=$differ"
}

# The clone: mounting it read-write replays the journal the snapshot
# caught; then it must check clean and hold the files.
mkdir -p /clone
mount -t ext4 "$DEV1" /clone || die "mount of the clone (LUN 1) failed"
if dmesg | grep -q "EXT4-fs (${DEV1#/dev/}): recovery complete"; then
  kv "clone_journal=replayed"
else
  kv "clone_journal=clean"
fi
umount /clone || die "umount of the clone failed"
fsck_clean "$DEV1" lun=1
mount -t ext4 -o ro "$DEV1" /clone || die "read-only mount of the clone failed"
check_files /clone clone
umount /clone

# The snapshot itself, read-only: its journal needs recovery, which a
# read-only device cannot take.
mkdir -p /snap
if mount -t ext4 -o ro "$DEV2" /snap 2>/tmp/mount.err; then
  kv "snap_ro_mount=mounted"
  umount /snap
else
  log "mount -o ro of the snapshot: $(cat /tmp/mount.err)"
  dmesg | grep "EXT4-fs (${DEV2#/dev/})" | tail -3 | sed 's/^/ironlun-vm: dmesg: /'
  kv "snap_ro_mount=refused"
fi
if mount -t ext4 -o ro,noload "$DEV2" /snap 2>/tmp/mount.err; then
  kv "snap_noload_mount=mounted"
  check_files /snap snap_noload
  umount /snap
else
  log "mount -o ro,noload of the snapshot: $(cat /tmp/mount.err)"
  kv "snap_noload_mount=refused"
fi

# LUN 0 holds every file, read from the device again.
sync
echo 3 >/proc/sys/vm/drop_caches
(cd /mnt && sha256sum -c /tmp/sums.w >/tmp/verify.out 2>&1) || { cat /tmp/verify.out; die "files differ on LUN 0"; }
kv "verify=ok lun=0 files=$N"
umount /mnt || die "umount LUN 0 failed"
fsck_clean "$DEV0" lun=0
logout

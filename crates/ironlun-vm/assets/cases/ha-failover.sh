# Case: failover of a gateway group on RBD through dm-multipath (issue
# 37). The host runs scripts/ha-cluster: a single-node Ceph and gateways
# gw1 (preferred, the owner) at PORTAL1 and gw2 at PORTAL2, in network
# namespaces the guest reaches through QEMU's NAT, serving HA_IQN.
# The guest logs in through both with the open-iscsi and dm-multipath
# settings docs/ha.md gives, makes ext4 on the map and starts a writer
# that writes 256 KiB files of random data, each with fsync, and records
# each file's SHA-256 only once its fsync returned (the writes the
# kernel acknowledged). For each of TRIALS trials:
# - phase=kill: the writer is going through gw1; the host kill -9s it;
# - the writer must go on without an error through gw2 once the group
#   has moved the LUN; when dm-multipath's active path is gw2's and five
#   more files are written: phase=failed-over, and the host starts gw1
#   again, which takes the LUN back (failback);
# - when the active path is gw1's again and five more files are written:
#   phase=failed-back.
# TMO (default 3: replacement_timeout and fast_io_fail_tmo) and POLL
# (default 1: polling_interval) vary docs/ha.md's settings for the
# benchmark.
# Then the writer stops; e2fsck on the map must be clean, every file
# must verify, and the host checks the image itself (rbd export).
. /lib.sh
TARGET_IQN=$HA_IQN
PORTAL=$PORTAL1
multipath_prepare

# open-iscsi's settings from docs/ha.md, for each node.
TMO=${TMO:-3}
POLL=${POLL:-1}
NODE_SETTINGS="node.session.timeo.replacement_timeout=$TMO node.conn[0].timeo.noop_out_interval=2 node.conn[0].timeo.noop_out_timeout=2"
discover
# shellcheck disable=SC2086
login $NODE_SETTINGS
# shellcheck disable=SC2086
login_second "$PORTAL2" $NODE_SETTINGS
multipath_map "$TMO" "$POLL"
M="/dev/mapper/$map"

P1=$(disk_via "$PORTAL")
P2=$(disk_via "$PORTAL2")
path() { multipathd show paths raw format '%d %p %t' | awk -v d="$1" '$1 == d { print $2 "/" $3 }'; }
kv "map=$map path1=$P1 path2=$P2 size=$(blockdev --getsize64 "$M") tmo=$TMO poll=$POLL"

mkfs_ext4 "$M" -E nodiscard
mount -t ext4 "$M" /mnt || die "mount of the map failed"
mkdir -p /mnt/w

# The writer: a file's SHA-256 goes to /tmp/sums.w only after its fsync
# returned. /tmp/times has each file's completion time (ms since boot).
writer() {
  n=0
  while [ ! -e /tmp/stop ]; do
    n=$((n + 1))
    dd if=/dev/urandom of=/tmp/wsrc bs=64k count=4 2>/dev/null
    sum=$(sha256sum /tmp/wsrc | cut -d' ' -f1)
    if ! dd if=/tmp/wsrc of="/mnt/w/f$n" bs=64k conv=fsync 2>/tmp/wdd.err; then
      echo "file $n: $(cat /tmp/wdd.err)" >/tmp/writer.failed
      exit 1
    fi
    echo "$sum  w/f$n" >>/tmp/sums.w
    echo "$n $(now_ms)" >>/tmp/times
    echo "$n" >/tmp/count.new && mv /tmp/count.new /tmp/count
  done
}
writer 9>&- &
WRITER=$!
count() { cat /tmp/count 2>/dev/null || echo 0; }
writer_ok() { [ ! -e /tmp/writer.failed ] || die "the writer failed: $(cat /tmp/writer.failed)"; }

# wait_for WHAT DEV: until DEV is the map's active path and five more
# files were written after that, within WAIT_S seconds.
wait_for() {
  deadline=$(($(now_ms) + WAIT_S * 1000))
  while [ "$(active_dev)" != "$2" ]; do
    writer_ok
    [ "$(now_ms)" -lt "$deadline" ] || die "$1: the active path is not $2 after $WAIT_S s: path 1 $(path "$P1"), path 2 $(path "$P2"), active $(active_dev)"
    sleep 0.2
  done
  c=$(($(count) + 5))
  while [ "$(count)" -lt "$c" ]; do
    writer_ok
    [ "$(now_ms)" -lt "$deadline" ] || die "$1: the writer is stuck at file $(count)"
    sleep 0.2
  done
}

t=1
while [ "$t" -le "$TRIALS" ]; do
  wait_for "trial $t, before the kill" "$P1"
  multipathd show map "$map" topology 2>&1 | sed 's/^/ironlun-vm: topology: /'
  t0=$(now_ms)
  kv "phase=kill trial=$t files=$(count) at_ms=$t0"
  wait_for "trial $t, failover" "$P2"
  multipathd show map "$map" topology 2>&1 | sed 's/^/ironlun-vm: topology: /'
  t1=$(now_ms)
  # The longest wait for a file since the kill: the application's view.
  gap=$(awk -v t0="$t0" 'BEGIN { last = t0 } $2 >= t0 { if ($2 - last > g) g = $2 - last; last = $2 } END { print g + 0 }' /tmp/times)
  kv "phase=failed-over trial=$t files=$(count) max_gap_ms=$gap path1=$(path "$P1") path2=$(path "$P2")"
  wait_for "trial $t, failback" "$P1"
  gap=$(awk -v t0="$t1" 'BEGIN { last = t0 } $2 >= t0 { if ($2 - last > g) g = $2 - last; last = $2 } END { print g + 0 }' /tmp/times)
  kv "phase=failed-back trial=$t files=$(count) max_gap_ms=$gap path1=$(path "$P1") path2=$(path "$P2")"
  t=$((t + 1))
done

touch /tmp/stop
wait "$WRITER" || true
writer_ok
N=$(count)
sync
umount /mnt || die "umount failed"
fsck_clean "$M"
mount -t ext4 -o ro "$M" /mnt || die "read-only mount failed"
if ! (cd /mnt && sha256sum -c /tmp/sums.w >/tmp/verify.out 2>&1); then
  grep -v ': OK$' /tmp/verify.out | head -20
  for f in $(grep -v ': OK$' /tmp/verify.out | sed -n 's/^w\/f\([0-9]*\):.*/\1/p'); do
    kv "bad_file=$f written_at_ms=$(awk -v n="$f" '$1 == n { print $2 }' /tmp/times)"
  done
  die "files differ"
fi
[ "$(wc -l </tmp/sums.w)" = "$N" ] || die "$N files written, $(wc -l </tmp/sums.w) sums"
while read -r sum p; do kv "file=/$p sha256=$sum lun=0"; done </tmp/sums.w
kv "verify=ok files=$N"
umount /mnt
kv "device_sha256=$(sha256sum "$M" | cut -d' ' -f1)"
multipath -f "$map" || die "multipath -f $map failed"
multipathd shutdown 2>/dev/null || true
iscsiadm -m node -T "$TARGET_IQN" -p "$PORTAL2" --logout || die "logout of gw2 failed"
logout

# Case: dm-multipath over two gateways (issue 37), with the settings
# docs/ha.md gives for Linux. Gateway 1 (PORTAL_PORT) and gateway 2
# (PORT2) serve one target whose [target.alua] lists group 1 (gateway 1:
# active/optimized, preferred as a gateway group's preferred gateway is)
# and group 2 (gateway 2: standby). Linux's alua prioritizer adds 80 for
# the PREF bit, so gateway 1's path keeps the higher priority (81) as a
# standby; multipathd must still route I/O to the path that is not a
# ghost (docs/ha.md).
# multipathd (prio alua, group_by_prio) must make one map of the two
# paths with gateway 1's in the active path group. A write and read back
# through the map goes to gateway 1. On phase=mpath-seen the host swaps
# the two groups' states on both gateways; the guest keeps writing and
# reading through the map, and no I/O may fail while dm-multipath moves
# to gateway 2's path (for at most WAIT_S seconds). Then a write and read
# back through the map goes to gateway 2. Each gateway serves its own RAM
# LU here, so what was written before the swap is not read after it; the
# data moving with the path is the rbd failover case's.
. /lib.sh
PORTAL2="10.0.2.2:${PORT2}"
multipath_prepare
discover
login
login_second "$PORTAL2"
# The Linux settings of docs/ha.md ("dm-multipath").
multipath_map 3 1
kv "map=$map"

P1=$(disk_via "$PORTAL")
P2=$(disk_via "$PORTAL2")
# A path's priority and dm state (active, failed) as multipathd has them.
path() { multipathd show paths raw format '%d %p %t' | awk -v d="$1" '$1 == d { print $2 "/" $3 }'; }
multipathd show map "$map" topology 2>&1 | sed 's/^/ironlun-vm: topology: /'
kv "path1=$P1 path2=$P2 path1_prio=$(path "$P1") path2_prio=$(path "$P2")"

# Pattern A through the map: written, read back, compared.
M="/dev/mapper/$map"
dd if=/dev/urandom of=/tmp/a bs=1M count=4 2>/dev/null
dd if=/tmp/a of="$M" bs=1M count=4 oflag=direct 2>/dev/null || die "write A through the map failed"
dd if="$M" of=/tmp/a.back bs=1M count=4 iflag=direct 2>/dev/null || die "read A through the map failed"
cmp -s /tmp/a /tmp/a.back || die "A read back differs"
# A path group is active once I/O has gone through it.
kv "writeA=ok active_before=$(active_dev)"
kv "phase=mpath-seen"

# The host swaps the states. Writes and reads through the map go on;
# none may fail. Done when multipathd has path 2's new priority (50,
# active/optimized) and dm-multipath's active group is path 2's.
t0=$(now_ms)
deadline=$((t0 + WAIT_S * 1000))
ios=0
dd if=/dev/urandom of=/tmp/blk bs=64k count=1 2>/dev/null
# (The active group is kept in $act: a reload by multipathd leaves no
# group active until the next I/O.)
moved() {
  act=$(active_dev)
  [ "$(path "$P2")" = 50/active ] && [ "$act" = "$P2" ]
}
until moved; do
  off=$((ios % 64))
  dd if=/tmp/blk of="$M" bs=64k seek=$off count=1 oflag=direct 2>/dev/null || die "write $ios through the map failed during the switch"
  dd if="$M" of=/tmp/blk.back bs=64k skip=$off count=1 iflag=direct 2>/dev/null || die "read $ios through the map failed during the switch"
  ios=$((ios + 1))
  [ "$(now_ms)" -lt "$deadline" ] || die "not moved after $WAIT_S s ($ios I/Os): path 1 $(path "$P1"), path 2 $(path "$P2"), active $(active_dev)"
  sleep 0.2
done
multipathd show map "$map" topology 2>&1 | sed 's/^/ironlun-vm: topology: /'
kv "switch_ms=$(($(now_ms) - t0)) ios_during_switch=$ios path1_prio_after=$(path "$P1") path2_prio_after=$(path "$P2") active_after=$act"

# Pattern B through the map, now gateway 2's.
dd if=/dev/urandom of=/tmp/b bs=1M count=4 2>/dev/null
dd if=/tmp/b of="$M" bs=1M count=4 oflag=direct 2>/dev/null || die "write B through the map failed"
dd if="$M" of=/tmp/b.back bs=1M count=4 iflag=direct 2>/dev/null || die "read B through the map failed"
cmp -s /tmp/b /tmp/b.back || die "B read back differs"
kv writeB=ok

multipath -f "$map" || die "multipath -f $map failed"
multipathd shutdown 2>/dev/null || true
iscsiadm -m node -T "$TARGET_IQN" -p "$PORTAL2" --logout || die "logout of gateway 2 failed"
logout

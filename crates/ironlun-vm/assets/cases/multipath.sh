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
for m in scsi_dh_alua dm_multipath dm_service_time; do
  modprobe "$m" || die "modprobe $m failed"
done
PORTAL2="10.0.2.2:${PORT2}"

# udevd gives the paths the ID_SERIAL multipath groups them by, and
# tells multipathd of paths that come and go. libdevmapper makes the
# /dev/mapper nodes itself (no dm rules in the image to answer it).
export DM_DISABLE_UDEV=1
mkdir -p /run/udev
/sbin/systemd-udevd --daemon 9>&- || die "udevd failed to start"

discover
login
iscsiadm -m node -o new -T "$TARGET_IQN" -p "$PORTAL2" >/dev/null
iscsiadm -m node -T "$TARGET_IQN" -p "$PORTAL2" --login || die "login through gateway 2 failed"
kv login2=ok
udevadm trigger --action=add --subsystem-match=block
udevadm settle --timeout=60 || die "udev did not settle"

# The Linux settings of docs/ha.md ("dm-multipath").
cat >/etc/multipath.conf <<EOF
defaults {
    user_friendly_names yes
    find_multipaths off
    polling_interval 1
}
devices {
    device {
        vendor "IRONLUN"
        product ".*"
        path_grouping_policy group_by_prio
        prio alua
        hardware_handler "1 alua"
        path_checker tur
        path_selector "service-time 0"
        failback immediate
        no_path_retry 12
        fast_io_fail_tmo 3
    }
}
EOF
# In the foreground of a background job, its log on the console.
(multipathd -d -s -v2 9>&- 2>&1 | sed 's/^/ironlun-vm: multipathd: /') &

# The map and its two paths: multipathd may wait for udev's event of
# the map's creation (uev_wait_timeout, 30 s), which a loaded machine
# delays; WAIT_S bounds it.
deadline=$(($(now_ms) + WAIT_S * 1000))
while :; do
  # A map's line is "NAME\t(MAJOR, MINOR)"; none yet is "No devices found".
  map=$(dmsetup ls --target multipath 2>/dev/null | awk '$2 ~ /^\(/ { print $1; exit }')
  if [ -n "$map" ] && [ "$(multipathd show paths raw format '%d' 2>/dev/null | grep -c '^sd')" = 2 ]; then
    break
  fi
  if [ "$(now_ms)" -ge "$deadline" ]; then
    multipath -v3 2>&1 | tail -40 | sed 's/^/ironlun-vm: multipath: /'
    die "no multipath map of two paths after $WAIT_S s"
  fi
  sleep 0.2
done
[ -b "/dev/mapper/$map" ] || die "no /dev/mapper/$map"
kv "map=$map"

# The disk of LUN 0 through portal $1, from iscsiadm's session listing.
disk_via() {
  iscsiadm -m session -P 3 | awk -v p="$1," '
    /Current Portal:/ { cur = (index($3, p) == 1) }
    cur && /Attached scsi disk/ { print $4; exit }'
}
P1=$(disk_via "$PORTAL")
P2=$(disk_via "$PORTAL2")
# A path's priority and dm state (active, failed) as multipathd has them.
path() { multipathd show paths raw format '%d %p %t' | awk -v d="$1" '$1 == d { print $2 "/" $3 }'; }
# The first usable device of the map's active path group, from
# multipathd's topology of the map.
active_dev() {
  multipathd show map "$map" topology 2>/dev/null | awk '
    /status=active/ { on = 1; next }
    /status=/ { on = 0 }
    on && / sd[a-z]+ / && / active / { for (i = 1; i <= NF; i++) if ($i ~ /^sd[a-z]+$/) { print $i; exit } }'
}
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

# Case: ALUA through two gateways (issue 37). Gateway 1 (PORTAL_PORT) and
# gateway 2 (PORT2) serve one target whose [target.alua] lists group 1
# (gateway 1: active/optimized, preferred) and group 2 (gateway 2:
# standby). The kernel's scsi_dh_alua must attach to both paths (TPGS in
# INQUIRY, both port designators in VPD 83h) and read each path's state
# with REPORT TARGET PORT GROUPS; both paths must name one LU (one WWID).
# On phase=alua-seen the host swaps the two groups' states on both
# gateways; reads through path 1 then meet ASYMMETRIC ACCESS STATE
# CHANGED, on which the kernel reads the states again (for at most
# WAIT_S seconds); a read through path 2 then succeeds.
. /lib.sh
modprobe scsi_dh_alua || die "modprobe scsi_dh_alua failed"
PORTAL2="10.0.2.2:${PORT2}"
discover
login
iscsiadm -m node -o new -T "$TARGET_IQN" -p "$PORTAL2" >/dev/null
iscsiadm -m node -T "$TARGET_IQN" -p "$PORTAL2" --login || die "login through gateway 2 failed"
kv login2=ok

# The disk of LUN 0 through portal $1, from iscsiadm's session listing,
# waiting up to 30 s for the SCSI scan.
disk_via() {
  i=0
  while [ $i -lt 300 ]; do
    d=$(iscsiadm -m session -P 3 | awk -v p="$1," '
      /Current Portal:/ { cur = (index($3, p) == 1) }
      cur && /Attached scsi disk/ { print $4; exit }')
    if [ -n "$d" ] && [ -b "/dev/$d" ]; then echo "$d"; return 0; fi
    sleep 0.1
    i=$((i + 1))
  done
  die "no disk through $1"
}
P1=$(disk_via "$PORTAL")
P2=$(disk_via "$PORTAL2")
state() { cat "/sys/block/$1/device/access_state"; }
for n in 1 2; do
  eval d=\$P$n
  s=/sys/block/$d/device
  kv "path${n}=$d path${n}_dh=$(cat "$s/dh_state") path${n}_state=$(state "$d") path${n}_preferred=$(cat "$s/preferred_path") path${n}_wwid=$(cat "$s/wwid" | tr ' ' '_')"
done
dd if="/dev/$P1" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null || die "read through path 1 failed"
kv read1=ok
kv "phase=alua-seen"

# The host swaps the states. A read through path 1 meets the unit
# attention (until then it succeeds); the kernel reads the states again
# and then ends reads to the standby path itself, with an I/O error.
deadline=$(($(now_ms) + WAIT_S * 1000))
reads=0
while [ "$(state "$P1")" != standby ]; do
  # Fails once the kernel has the new states (it holds I/O to a standby
  # path back itself): that is the point.
  dd if="/dev/$P1" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null || true
  reads=$((reads + 1))
  [ "$(now_ms)" -lt "$deadline" ] || die "path 1 still $(state "$P1") after $WAIT_S s ($reads reads)"
  sleep 1
done
kv "path1_state_after=$(state "$P1") path2_state_after=$(state "$P2") reads_to_notice=$reads"
dd if="/dev/$P2" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null || die "read through path 2 failed"
kv read2=ok
iscsiadm -m node -T "$TARGET_IQN" -p "$PORTAL2" --logout || die "logout of gateway 2 failed"
logout

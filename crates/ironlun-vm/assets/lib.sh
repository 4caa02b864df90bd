# Helpers for the case scripts (busybox sh, `set -e`). The host passes
# PORTAL_PORT, TARGET_IQN and the case's own variables in /case.env.
PORTAL="10.0.2.2:${PORTAL_PORT}"
# Busybox sh runs its own applets before $PATH; e2fsprogs by full path.
MKE2FS=/sbin/mke2fs
E2FSCK=/sbin/e2fsck

log() { echo "ironlun-vm: $*"; }
# Evidence for the host, on the evidence channel (fd 9: ttyS1, opened by
# /init), and a copy on the console for whoever reads its log.
kv() {
  echo "IRONLUN-VM-KV $*" >&9
  echo "ironlun-vm: kv $*"
}
die() { log "FAILED: $*"; exit 1; }

# Monotonic milliseconds since boot.
now_ms() { awk '{printf "%d\n", $1 * 1000}' /proc/uptime; }

# SendTargets discovery; the target must be listed. It answers with its own
# listen address (127.0.0.1 on the host), which inside the VM is the VM
# itself, so the node record is made for the 10.0.2.2 portal explicitly.
# SendTargets discovery of the 10.0.2.2 portal; arguments are discovery
# record settings (name=value), e.g. discovery.sendtargets.auth.* for CHAP.
discover() {
  if [ $# -gt 0 ]; then
    iscsiadm -m discoverydb -t sendtargets -p "$PORTAL" -o new >/dev/null || die "discoverydb new failed"
    for kvp in "$@"; do
      iscsiadm -m discoverydb -t sendtargets -p "$PORTAL" -o update -n "${kvp%%=*}" -v "${kvp#*=}" \
        || die "discoverydb update ${kvp%%=*} failed"
    done
    out=$(iscsiadm -m discoverydb -t sendtargets -p "$PORTAL" --discover) || die "discovery failed"
  else
    out=$(iscsiadm -m discovery -t sendtargets -p "$PORTAL") || die "discovery failed"
  fi
  echo "$out" | sed 's/^/ironlun-vm: discovered /'
  echo "$out" | grep -q " ${TARGET_IQN}\$" || die "discovery did not list ${TARGET_IQN}"
  kv discovery=ok
}

# Logs in to the 10.0.2.2 portal; arguments are node settings (name=value).
try_login() {
  iscsiadm -m node -o new -T "$TARGET_IQN" -p "$PORTAL" >/dev/null
  for kvp in "$@"; do
    iscsiadm -m node -T "$TARGET_IQN" -p "$PORTAL" -o update -n "${kvp%%=*}" -v "${kvp#*=}"
  done
  iscsiadm -m node -T "$TARGET_IQN" -p "$PORTAL" --login
}

login() {
  try_login "$@" || die "login failed"
  kv login=ok
  session_params
}

logout() {
  iscsiadm -m node -T "$TARGET_IQN" -p "$PORTAL" --logout || die "logout failed"
  kv logout=ok
}

# The block device of LUN $1, waiting up to 30 s for the SCSI scan.
disk_of_lun() {
  i=0
  while [ $i -lt 300 ]; do
    for d in /sys/class/scsi_device/*:0:0:"$1"/device/block/*; do
      if [ -e "$d" ]; then
        dev=/dev/$(basename "$d")
        if [ -b "$dev" ]; then echo "$dev"; return 0; fi
      fi
    done
    sleep 0.1
    i=$((i + 1))
  done
  die "no block device for LUN $1"
}

# mkfs.ext4 on $1; further arguments go to mke2fs (-E nodiscard ...).
mkfs_ext4() {
  dev=$1
  shift
  "$MKE2FS" -q -F -t ext4 "$@" "$dev" || die "mkfs.ext4 on $dev failed"
}

# e2fsck -fn on the unmounted $1 must be clean; reports fsck=clean with
# any further key=value words.
fsck_clean() {
  dev=$1
  shift
  "$E2FSCK" -fn "$dev" >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; die "e2fsck found errors on $dev"; }
  kv fsck=clean "$@"
}

# Writes files of known content under $1 and records their SHA-256 in
# /tmp/sums.$2 (paths relative to $1); evidence lines carry lun=$2.
write_files() {
  mkdir -p "$1/d"
  n=0
  for kib in 4 64 1024 4096 16384 8192 8 512; do
    n=$((n + 1))
    dd if=/dev/urandom of="$1/d/f$n" bs=1024 count=$kib 2>/dev/null
  done
  (cd "$1" && sha256sum d/f*) >"/tmp/sums.$2"
  while read -r sum path; do kv "file=/$path sha256=$sum lun=$2"; done <"/tmp/sums.$2"
}

# Checks the files of /tmp/sums.$2 under $1.
verify_files() {
  (cd "$1" && sha256sum -c "/tmp/sums.$2" >/tmp/verify.out 2>&1) || { cat /tmp/verify.out; die "files differ after remount (LUN $2)"; }
  kv "verify=ok lun=$2"
}

# What the kernel negotiated for the session (iscsiadm -m session -P 2).
session_params() {
  iscsiadm -m session -P 2 >/tmp/session.out 2>&1 || true
  hd=$(awk '/HeaderDigest:/ {print $2; exit}' /tmp/session.out)
  dd_=$(awk '/DataDigest:/ {print $2; exit}' /tmp/session.out)
  kv "header_digest=${hd:-?} data_digest=${dd_:-?}"
}

# Sequential O_DIRECT read of the whole device with 1 MiB requests.
raw_read() {
  bytes=$(blockdev --getsize64 "$1")
  t0=$(now_ms)
  dd if="$1" of=/dev/null bs=1M iflag=direct 2>/dev/null || die "raw read of $1 failed"
  t1=$(now_ms)
  ms=$((t1 - t0)); [ $ms -gt 0 ] || ms=1
  kv "raw_read_bytes=$bytes raw_read_ms=$ms"
}

# The SCSI address (H:C:T:L) of LUN $1 of the session's target.
hctl_of_lun() {
  for d in /sys/class/scsi_device/*:0:0:"$1"; do
    if [ -e "$d" ]; then basename "$d"; return 0; fi
  done
  die "no SCSI device for LUN $1"
}

# Rescans the session (REPORT LUNS) once a second until LUN $1 has a
# block device, for at most $2 seconds; sets LUN_DEV and RESCANS.
rescan_until_lun() {
  deadline=$(($(now_ms) + $2 * 1000))
  RESCANS=0
  while :; do
    iscsiadm -m session --rescan >/dev/null || die "iscsiadm -m session --rescan failed"
    RESCANS=$((RESCANS + 1))
    for d in /sys/class/scsi_device/*:0:0:"$1"/device/block/*; do
      LUN_DEV=/dev/$(basename "$d")
      if [ -e "$d" ] && [ -b "$LUN_DEV" ]; then return 0; fi
    done
    [ "$(now_ms)" -lt "$deadline" ] || die "LUN $1 did not appear within $2 s ($RESCANS rescans)"
    sleep 1
  done
}

# Rescans LUN $1 (READ CAPACITY again) once a second until its block
# device $2 has $3 bytes, for at most $4 seconds; sets RESCANS.
rescan_until_size() {
  rescan=/sys/class/scsi_device/$(hctl_of_lun "$1")/device/rescan
  deadline=$(($(now_ms) + $4 * 1000))
  RESCANS=0
  while :; do
    echo 1 >"$rescan" || die "writing $rescan failed"
    RESCANS=$((RESCANS + 1))
    size=$(blockdev --getsize64 "$2")
    if [ "$size" = "$3" ]; then return 0; fi
    [ "$(now_ms)" -lt "$deadline" ] || die "$2 still has $size bytes after $4 s ($RESCANS rescans), expected $3"
    sleep 1
  done
}

# SHA-256 of $3 MiB of device $1 from MiB $2, read with O_DIRECT.
read_sha256() {
  dd if="$1" bs=1M skip="$2" count="$3" iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1
}

# Writes $5 MiB of random bytes to device $3 (LUN $2) at MiB $4 with
# O_DIRECT, reads them back the same way, keeps their SHA-256 in
# /tmp/pattern.$1 and reports pattern=$1 with its place and SHA-256.
write_pattern() {
  dd if=/dev/urandom of=/tmp/pattern bs=1M count="$5" 2>/dev/null || die "making pattern $1 failed"
  sum=$(sha256sum /tmp/pattern | cut -d' ' -f1)
  dd if=/tmp/pattern of="$3" bs=1M seek="$4" count="$5" oflag=direct 2>/dev/null \
    || die "writing pattern $1 at MiB $4 of $3 failed"
  got=$(read_sha256 "$3" "$4" "$5")
  [ "$got" = "$sum" ] || die "pattern $1 read back from $3 as $got, written as $sum"
  echo "$sum" >"/tmp/pattern.$1"
  kv "pattern=$1 lun=$2 offset=$(($4 * 1048576)) bytes=$(($5 * 1048576)) sha256=$sum"
}

# --- dm-multipath (the multipath and ha-failover cases) ---------------
# The modules, and udevd: it gives the paths the ID_SERIAL multipath
# groups them by and tells multipathd of paths that come and go.
# libdevmapper makes the /dev/mapper nodes itself (the image has no dm
# rules to answer it).
multipath_prepare() {
  for m in scsi_dh_alua dm_multipath dm_service_time; do
    modprobe "$m" || die "modprobe $m failed"
  done
  export DM_DISABLE_UDEV=1
  mkdir -p /run/udev
  /sbin/systemd-udevd --daemon 9>&- || die "udevd failed to start"
}

# Logs in through a second portal $1 as well; the other arguments are
# node settings (name=value). Then waits for udev to see both disks.
login_second() {
  p2=$1
  shift
  iscsiadm -m node -o new -T "$TARGET_IQN" -p "$p2" >/dev/null
  for kvp in "$@"; do
    iscsiadm -m node -T "$TARGET_IQN" -p "$p2" -o update -n "${kvp%%=*}" -v "${kvp#*=}"
  done
  iscsiadm -m node -T "$TARGET_IQN" -p "$p2" --login || die "login through $p2 failed"
  kv login2=ok
  udevadm trigger --action=add --subsystem-match=block
  udevadm settle --timeout=60 || die "udev did not settle"
}

# docs/ha.md's /etc/multipath.conf ("dm-multipath") with fast_io_fail_tmo
# $1 and polling_interval $2 (find_multipaths off: the guest's wwids
# file is empty), multipathd started in the foreground of a background
# job with its log on the console, and the map of the two paths awaited:
# multipathd may wait for udev's event of the map's creation
# (uev_wait_timeout, 30 s), which a loaded machine delays; WAIT_S bounds
# it. Sets $map.
multipath_map() {
  cat >/etc/multipath.conf <<CONF
defaults {
    user_friendly_names yes
    find_multipaths off
    polling_interval $2
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
        fast_io_fail_tmo $1
    }
}
CONF
  (multipathd -d -s -v2 9>&- 2>&1 | sed 's/^/ironlun-vm: multipathd: /') &
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
}

# The disk of LUN 0 through portal $1, from iscsiadm's session listing.
disk_via() {
  iscsiadm -m session -P 3 | awk -v p="$1," '
    /Current Portal:/ { cur = (index($3, p) == 1) }
    cur && /Attached scsi disk/ { print $4; exit }'
}

# The first usable device of the map's active path group, from
# multipathd's topology of $map.
active_dev() {
  multipathd show map "$map" topology 2>/dev/null | awk '
    /status=active/ { on = 1; next }
    /status=/ { on = 0 }
    on && / sd[a-z]+ / && / active / { for (i = 1; i <= NF; i++) if ($i ~ /^sd[a-z]+$/) { print $i; exit } }'
}

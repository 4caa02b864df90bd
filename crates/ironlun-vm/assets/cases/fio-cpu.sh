# The kernel initiator's CPU per I/O (app-profiles' initiator comparison,
# docs/studies.md section 1): fio, carried in from the host under
# /opt/fio (crate::bundle), runs each access specification on the raw
# LUN, and the guest's own counters are read over a window in the run.
#   LUN         the LUN to log in to and drive
#   SPECS       NAME:SIZE:READ_PCT:RANDOM_PCT:QUEUE_DEPTH, space-separated
#   RAMP_MS     time after the first I/O before the window opens
#   MEASURE_MS  the window
#   CAL_HASH    fio --crctest's checksum, and COPY_JOB fio's options for
#               reads from a tmpfs file: fixed CPU-bound works run
#               CAL_RUNS times first, which the host times with the same fio
# Reports `calibration=HASH|page-cache-read mib_s=RATE` per calibration
# run and, per spec,
# `kinit=NAME ms=T bytes=N ncpu=C user= nice= system= idle= iowait= irq=
# softirq= steal=` (/proc/stat ticks summed over CPUs, USER_HZ; bytes from
# the LUN's sector counters), or `kinit=NAME failed=WHY`.
. /lib.sh
FIO=/opt/fio/run
[ -x "$FIO" ] || die "no fio in the guest (/opt/fio, the host's bundle)"

# The calibration works, each run CAL_RUNS times before any I/O: fio's
# CAL_HASH checksum over 256 MiB (user-space arithmetic), and 64 KiB
# reads of a 64 MiB tmpfs file twice over (the kernel copying page-cache
# pages to user memory, as the initiator copies its data).
mkdir -p /tmp/calfs
mount -t tmpfs -o size=80m tmpfs /tmp/calfs || die "mount tmpfs failed"
i=0
while [ $i -lt "${CAL_RUNS:-2}" ]; do
  out=$("$FIO" --crctest="$CAL_HASH") || die "fio --crctest=$CAL_HASH failed"
  rate=$(echo "$out" | awk -v h="$CAL_HASH:" '$1 == h {print $2; exit}')
  [ -n "$rate" ] || die "fio --crctest printed no rate: $out"
  kv "calibration=$CAL_HASH mib_s=$rate"
  "$FIO" --name=cal --filename=/tmp/calfs/cal $COPY_JOB --output-format=terse --terse-version=3 \
    >/tmp/cal.out 2>&1 || { cat /tmp/cal.out; die "fio page-cache read failed"; }
  rate=$(awk -F';' '$1 == "3" {printf "%.1f", $7 / 1024; exit}' /tmp/cal.out)
  [ -n "$rate" ] || { cat /tmp/cal.out; die "fio printed no page-cache read rate"; }
  kv "calibration=page-cache-read mib_s=$rate"
  i=$((i + 1))
done
umount /tmp/calfs

discover
login
DEV=$(disk_of_lun "${LUN:-0}")
SS=$(blockdev --getss "$DEV")
BLK=$(basename "$DEV")

# user nice system idle iowait irq softirq steal, summed over the CPUs.
cpu_ticks() { awk '$1 == "cpu" {print $2, $3, $4, $5, $6, $7, $8, $9; exit}' /proc/stat; }
# Sectors read and written on the LUN.
sectors() { awk '{print $3 + $7}' "/sys/block/$BLK/stat"; }
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN {printf "%.3f", m / 1000}')"; }

# measure NAME SIZE READ_PCT RANDOM_PCT QD
measure() {
  name=$1
  "$FIO" --name="$name" --filename="$DEV" --direct=1 --ioengine=libaio --thread \
    --rw=randrw --rwmixread="$3" --percentage_random="$4" --bs="$2" --iodepth="$5" \
    --blockalign="$SS" --norandommap --randrepeat=0 --time_based --runtime=3600 \
    --output="/tmp/fio.$name" >/dev/null 2>&1 &
  pid=$!
  # The window opens RAMP_MS after the first I/O: fio's own start-up
  # (loading its libraries under emulation takes seconds) is outside it.
  s0=$(sectors)
  n=0
  while [ "$(sectors)" = "$s0" ]; do
    if ! kill -0 $pid 2>/dev/null || [ $n -ge 600 ]; then
      kill -INT $pid 2>/dev/null || true
      wait $pid || true
      kv "kinit=$name failed=no-io-within-60s"
      return 0
    fi
    sleep 0.1
    n=$((n + 1))
  done
  sleep_ms "$RAMP_MS"
  c0=$(cpu_ticks); b0=$(sectors); t0=$(now_ms)
  sleep_ms "$MEASURE_MS"
  c1=$(cpu_ticks); b1=$(sectors); t1=$(now_ms)
  alive=1
  kill -0 $pid 2>/dev/null || alive=0
  kill -INT $pid 2>/dev/null || true
  wait $pid || true
  cat "/tmp/fio.$name"
  if [ $alive = 0 ] || ! grep -q "err= 0" "/tmp/fio.$name"; then
    kv "kinit=$name failed=fio-stopped-or-erred"
    return 0
  fi
  d=$(echo "$c0 $c1" | awk '{printf "user=%d nice=%d system=%d idle=%d iowait=%d irq=%d softirq=%d steal=%d",
    $9 - $1, $10 - $2, $11 - $3, $12 - $4, $13 - $5, $14 - $6, $15 - $7, $16 - $8}')
  kv "kinit=$name ms=$((t1 - t0)) bytes=$(((b1 - b0) * 512)) ncpu=$(nproc) $d"
}

for spec in $SPECS; do
  IFS=: read -r name size rd rnd qd <<EOF
$spec
EOF
  log "fio $name: $size B, $rd % reads, $rnd % random, queue depth $qd"
  measure "$name" "$size" "$rd" "$rnd" "$qd"
done
logout

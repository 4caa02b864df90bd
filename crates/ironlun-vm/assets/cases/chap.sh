# Case 2 (CHAP): discovery and login with one-way or mutual CHAP, then a
# file round trip. CHAP_USER/CHAP_SECRET are the initiator's credentials;
# MUTUAL_USER/MUTUAL_SECRET, when set, the target's (mutual CHAP). With
# WRONG_SECRET=1 the login must be refused; discovery then uses
# DISCOVERY_SECRET (the right one) so that only the login is at stake;
# with OPEN_IQN set too, the same credentials must then log in to that
# target, which requires no CHAP.
. /lib.sh
set -- node.session.auth.authmethod=CHAP \
  "node.session.auth.username=$CHAP_USER" "node.session.auth.password=$CHAP_SECRET"
if [ -n "${MUTUAL_USER:-}" ]; then
  set -- "$@" "node.session.auth.username_in=$MUTUAL_USER" "node.session.auth.password_in=$MUTUAL_SECRET"
fi
# Discovery needs CHAP too (the target's --chap covers discovery).
DISCOVERY_SECRET=${DISCOVERY_SECRET:-$CHAP_SECRET}
if [ -n "${MUTUAL_USER:-}" ]; then
  discover discovery.sendtargets.auth.authmethod=CHAP \
    "discovery.sendtargets.auth.username=$CHAP_USER" "discovery.sendtargets.auth.password=$DISCOVERY_SECRET" \
    "discovery.sendtargets.auth.username_in=$MUTUAL_USER" "discovery.sendtargets.auth.password_in=$MUTUAL_SECRET"
else
  discover discovery.sendtargets.auth.authmethod=CHAP \
    "discovery.sendtargets.auth.username=$CHAP_USER" "discovery.sendtargets.auth.password=$DISCOVERY_SECRET"
fi
if [ "${WRONG_SECRET:-0}" = 1 ]; then
  if try_login "$@"; then die "login with a wrong secret succeeded"; fi
  kv login=refused
  if [ -n "${OPEN_IQN:-}" ]; then
    # A target that requires no CHAP admits an initiator that offers it,
    # whatever its secret (the target answers AuthMethod=None).
    TARGET_IQN=$OPEN_IQN
    try_login "$@" || die "login offering CHAP to a target without CHAP failed"
    raw_read "$(disk_of_lun 0)"
    logout
    kv open_login=ok
  fi
  exit 0
fi
login "$@"
DEV=$(disk_of_lun 0)
mkfs_ext4 "$DEV"
mount -t ext4 "$DEV" /mnt || die "mount failed"
write_files /mnt 0
sync
umount /mnt
mount -t ext4 -o ro "$DEV" /mnt || die "remount failed"
verify_files /mnt 0
umount /mnt
logout

# shellcheck shell=bash
# What the test scripts count as run, skipped or failed. Sourced by
# scripts/test and scripts/fuzz; tests/e2e/harness.rs runs these functions
# with fabricated inputs (a PATH without QEMU, libFuzzer logs).

# A tier that cannot run fails the run under CI=true or --require-all
# (REQUIRE_ALL=1); otherwise it is skipped, loudly, and the summary says
# so.
if [ "${CI:-}" = true ]; then REQUIRE_ALL=1; fi
REQUIRE_ALL=${REQUIRE_ALL:-0}
SKIPPED_TIERS=()

# Cargo tests that cannot do their work here (Ceph, Chromium, network
# namespaces, O_DIRECT missing) follow tests/support/skip.rs: with
# IRONLUN_REQUIRE_ALL=1 they fail; otherwise each skip is a line in the
# file IRONLUN_SKIP_LOG names (made by the first skip), which summary
# lists. One file for the whole run: scripts the run starts (scripts/fuzz)
# keep the one they got.
if [ "$REQUIRE_ALL" = 1 ]; then export IRONLUN_REQUIRE_ALL=1; fi
if [ -z "${IRONLUN_SKIP_LOG:-}" ]; then
  mkdir -p target
  IRONLUN_SKIP_LOG="$PWD/target/test-skips.$$.txt"
  rm -f "$IRONLUN_SKIP_LOG"
  export IRONLUN_SKIP_LOG
fi

# skip_tier NAME REASON
skip_tier() {
  if [ "$REQUIRE_ALL" = 1 ]; then
    echo "FAILED: $1 cannot run here: $2" >&2
    echo "(CI=true or --require-all: every tier must run; a local run without them skips it and says so)" >&2
    exit 1
  fi
  SKIPPED_TIERS+=("$1: $2")
  printf '\n*** SKIPPED: %s: %s\n' "$1" "$2"
}

# The last lines of a run: everything passed, or what did not run: the
# tiers skipped, then the cargo tests that skipped their work.
summary() {
  local tests=()
  if [ -s "${IRONLUN_SKIP_LOG:-}" ]; then
    mapfile -t tests <"$IRONLUN_SKIP_LOG"
  fi
  if [ ${#SKIPPED_TIERS[@]} -eq 0 ] && [ ${#tests[@]} -eq 0 ]; then
    echo "all tests passed"
    return
  fi
  echo "the tests that ran passed, but not everything ran:"
  if [ ${#SKIPPED_TIERS[@]} -gt 0 ]; then
    echo "${#SKIPPED_TIERS[@]} tier(s) did NOT run:"
    printf '  SKIPPED %s\n' "${SKIPPED_TIERS[@]}"
  fi
  if [ ${#tests[@]} -gt 0 ]; then
    echo "${#tests[@]} cargo test(s) skipped their work:"
    printf '  SKIPPED %s\n' "${tests[@]}"
  fi
}

# The Linux kernel initiator in a QEMU VM (tests/kernel_initiator.rs),
# after installing QEMU (scripts/deps.sh). The guest image is built from
# Debian packages on first use and cached under ~/.cache/ironlun/vm; each
# case boots the VM once with a time budget.
vm_tier() {
  local err
  err=$(mktemp)
  if install_vm_tools 2>"$err"; then
    rm -f "$err"
    # The daemon the guest talks to is the release binary (the one the
    # .deb ships, built once for every later tier); the test harness is
    # the debug build cargo test already made (building it again in
    # release, with the dev-dependencies' features, took ~5 minutes).
    cargo build --release --locked --bin ironlun
    IRONLUN_VM_TESTS=1 IRONLUN_BIN="$PWD/target/release/ironlun" \
      cargo test --locked --test kernel_initiator
  else
    local why
    why=$(cat "$err")
    rm -f "$err"
    skip_tier "kernel initiator VM tests" "qemu-system-x86 is not installable here: $why"
  fi
}

# The Debian package (tests/e2e/service.rs, left out of a plain cargo
# test): cargo deb on the release binary (built here if no earlier tier
# built it), checked with dpkg-deb, unpacked into a scratch root and run
# from there. cargo-deb comes from crates.io (scripts/deps.sh).
deb_tier() {
  local err
  err=$(mktemp)
  if install_cargo_deb 2>"$err"; then
    rm -f "$err"
    cargo build --release --locked --bin ironlun
    cargo test --workspace --locked --test e2e -- --ignored --nocapture service::the_debian_package
  else
    local why
    why=$(cat "$err")
    rm -f "$err"
    skip_tier "Debian package" "cargo-deb is not installable here: $why"
  fi
}

# fuzz_runs LOG: prints how many inputs libFuzzer ran (its final
# stat::number_of_executed_units); fails when the log has no count or
# the count is zero, so a target that ran nothing is not reported as ok.
fuzz_runs() {
  local n
  n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$1" 2>/dev/null | grep -o '[0-9]*$' | tail -n 1 || true)
  if [ -z "$n" ] || [ "$n" -eq 0 ]; then
    return 1
  fi
  echo "$n"
}

# Debian's Ceph for the RBD tests: tests/e2e/ceph_cluster.rs and tests/e2e/rbd.rs start clusters
# with scripts/ceph-cluster during cargo test, so this runs first. Where
# Ceph cannot be installed those tests skip, loudly, and the summary
# lists them; under CI=true or --require-all the run fails here.
ceph_packages() {
  local err
  err=$(mktemp)
  if install_ceph 2>"$err"; then
    rm -f "$err"
    return 0
  fi
  local why
  why=$(cat "$err")
  rm -f "$err"
  skip_tier "Ceph RBD tests (tests/e2e/ceph_cluster.rs, tests/e2e/rbd.rs)" "Ceph is not installable here: $why"
}

#!/usr/bin/env bash
# The flake hunt: runs every test that waits on wall-clock time (pytest marker `wallclock`: ROS 2
# processes, servers, the web viewer's browser, workers, realtime loops) N times while a second
# process keeps the CPUs busy, then prints each test that failed at least once with its failure line,
# and a summary (runs, the load average seen). Run it before you stop; a test it names is redesigned
# (simulated time, events instead of sleeps, margins from the configured limits), never retried.
#   bash scripts/flake_hunt.sh                 # 5 runs under `stress-ng --cpu 2`
#   bash scripts/flake_hunt.sh -n 2 tests/ros2 # 2 runs of the wallclock tests under tests/ros2
# Options: -n N (or PEAR_FLAKE_RUNS, default 5); what follows goes to pytest (paths, -k ...).
# Environment: PEAR_FLAKE_LOAD_CPUS (CPU hogs beside the tests, default 2; 0: none), PEAR_VENV (.venv),
# PEAR_FLAKE_OUT (keep each run's log and JUnit XML in this folder; default a temporary one).
# Load: stress-ng where installed (setup.sh --dev installs it), else busy shell loops. Exit 1 if any
# test failed in any run.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${PEAR_FLAKE_RUNS:-5}"
if [ "${1:-}" = "-n" ]; then
  RUNS="${2:-}"
  shift $(($# > 1 ? 2 : 1))
fi
case "$RUNS" in '' | *[!0-9]* | 0) echo "flake_hunt: the number of runs must be a positive integer, not '$RUNS'" >&2; exit 2 ;; esac
LOAD_CPUS="${PEAR_FLAKE_LOAD_CPUS:-2}"
case "$LOAD_CPUS" in '' | *[!0-9]*) echo "flake_hunt: PEAR_FLAKE_LOAD_CPUS must be a number, not '$LOAD_CPUS'" >&2; exit 2 ;; esac
VENV="${PEAR_VENV:-.venv}"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
OUT="${PEAR_FLAKE_OUT:-$(mktemp -d -t flake_hunt.XXXXXX)}"
mkdir -p "$OUT"

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_all EXIT
trap 'exit 130' INT TERM

if [ "$LOAD_CPUS" -gt 0 ]; then
  if command -v stress-ng >/dev/null 2>&1; then
    LOAD="stress-ng --cpu $LOAD_CPUS"
    stress-ng --cpu "$LOAD_CPUS" --quiet >/dev/null 2>&1 &
    pids+=($!)
  else
    LOAD="$LOAD_CPUS busy shell loops (stress-ng is not installed)"
    for _ in $(seq "$LOAD_CPUS"); do
      (while :; do :; done) &
      pids+=($!)
    done
  fi
else
  LOAD="none"
fi
# the load average every 5 s, for the summary
(while :; do cut -d' ' -f1-3 /proc/loadavg >>"$OUT/loadavg.txt"; sleep 5; done) &
pids+=($!)

echo "flake_hunt: $RUNS runs of the wallclock tests ${*:-(all)}; load beside them: $LOAD; $(nproc) CPUs; logs in $OUT"
t0=$(date +%s)
for i in $(seq "$RUNS"); do
  start=$(date +%s)
  set +e
  # -v: one line a test in the log, so a run stopped half-way still says what failed so far
  "$VENV/bin/python" -m pytest -v -rfE -m wallclock -p no:cacheprovider -o junit_family=xunit1 \
    --junitxml="$OUT/run$i.xml" "$@" >"$OUT/run$i.log" 2>&1
  rc=$?
  set -e
  echo "run $i: exit $rc in $(($(date +%s) - start)) s: $(tail -n 1 "$OUT/run$i.log")"
done
echo "flake_hunt: $RUNS runs in $(($(date +%s) - t0)) s; load beside them: $LOAD"
"$VENV/bin/python" scripts/flake_report.py "$OUT"

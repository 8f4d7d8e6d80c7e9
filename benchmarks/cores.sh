#!/usr/bin/env bash
# The many-core CPU checks in one prepared script (under 10 minutes on 16 cores): one exact layer
# against threads (N = 32768, d = 3; numpy's path, and numba's where it is installed), then
# `verify --quick` on every core, then the full `verify` on every core for at most FULL_S seconds
# (default 330). Every line of verify is stamped with the seconds since its start, so that a run
# cut short still says how far it got. benchmarks/verify_pool.py compares the reports of several
# worker counts; benchmarks/verify_schedule.py predicts the wall time from a serial profile.
# Installs nothing. Usage: bash benchmarks/cores.sh   (from the repository root)
set -uo pipefail
status=0
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "$(uname -m), $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
# layer.py's default threads, 1 to 16, less those above the cores; verify's default --workers, one per core
timeout 120 python3 benchmarks/layer.py --repeat 3 --ratio-threads= || status=$?
if python3 -c 'import numba' 2>/dev/null; then
  timeout 120 python3 benchmarks/layer.py --accelerator numba --repeat 3 --ratio-threads= || status=$?
fi
since() {  # seconds since $1 (nanoseconds), to a tenth
  local tenths=$(( ($(date +%s%N) - $1) / 100000000 ))
  printf '%d.%d' $((tenths / 10)) $((tenths % 10))
}
stamped() {  # each line of stdin, cut to 70 characters, after the seconds since $1
  while IFS= read -r line; do printf '%7s s  %s\n' "$(since "$1")" "${line:0:70}"; done
}
scratch=$(mktemp -d)
for mode in quick full; do
  limit=150; flag=--quick
  if [ "$mode" = full ]; then limit=${FULL_S:-330}; flag=; fi
  echo "verify $mode on $(nproc) workers (at most $limit s):"
  start=$(date +%s%N)
  timeout "$limit" python3 -m proofs_check $flag --out "$scratch/$mode" 2>&1 | stamped "$start"
  code=${PIPESTATUS[0]}
  echo "verify $mode: exit code $code after $(since "$start") s$([ "$code" = 124 ] && echo ' (cut)')"
  [ "$code" = 0 ] || status=$code
done
rm -rf "$scratch"
exit $status

#!/usr/bin/env bash
# The many-core CPU checks in one prepared script (under 10 minutes on 16 cores): what the cores
# deliver together (benchmarks/throughput.py), one exact layer against threads (N = 32768, d = 3;
# numpy's path, and numba's where it is installed; LAYERS=0 skips it), then `verify --quick` on
# every core, then the full `verify` on every core for at most FULL_S seconds (default: what is
# left of BUDGET_S, default 570, less 10 s); VERIFY=quick runs only the first. Both verify runs
# are traced (benchmarks/pool_trace.py: start-up, checks, runs and idle time of every process,
# printed after each run). Every line of verify is stamped with the seconds since its start, so
# that a run cut short still says how far it got. KEEP=DIR keeps the reports and traces there.
# benchmarks/verify_pool.py compares the reports of several worker counts;
# benchmarks/verify_schedule.py predicts the wall time from a serial profile. Installs nothing. Usage: bash benchmarks/cores.sh   (from the repository root)
set -uo pipefail
status=0
begin=$(date +%s%N)
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "$(uname -m), $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
lscpu 2>/dev/null | grep -E '^(Thread|Core|Socket|NUMA node\(s\)|CPU max MHz|L2|L3)' | tr -s ' '
since() {  # seconds since $1 (nanoseconds), to a tenth
  local tenths=$(( ($(date +%s%N) - $1) / 100000000 ))
  printf '%d.%d' $((tenths / 10)) $((tenths % 10))
}
stamped() {  # each line of stdin, cut to 70 characters, after the seconds since $1
  while IFS= read -r line; do printf '%7s s  %s\n' "$(since "$1")" "${line:0:70}"; done
}
timeout 60 python3 benchmarks/throughput.py || status=$?
if [ "${LAYERS:-1}" != 0 ]; then
  # layer.py's default threads, 1 to 16, less those above the cores
  timeout 120 python3 benchmarks/layer.py --repeat 3 --ratio-threads= || status=$?
  if python3 -c 'import numba' 2>/dev/null; then
    timeout 120 python3 benchmarks/layer.py --accelerator numba --repeat 3 --ratio-threads= || status=$?
  fi
fi
keep=${KEEP:-$(mktemp -d)}
mkdir -p "$keep"
for mode in ${VERIFY:-quick full}; do
  limit=150; flag=--quick
  if [ "$mode" = full ]; then
    elapsed=$(( ($(date +%s%N) - begin) / 1000000000 ))
    limit=${FULL_S:-$(( ${BUDGET_S:-570} - elapsed - 10 ))}; flag=
  fi
  echo "verify $mode on $(nproc) workers (at most $limit s):"
  rm -f "$keep/$mode.trace"
  start=$(date +%s%N)
  ATTNEB_POOL_TRACE="$keep/$mode.trace" timeout "$limit" python3 -m attneb verify $flag --out "$keep/$mode" \
    --load benchmarks/pool_trace.py 2>&1 | stamped "$start"
  code=${PIPESTATUS[0]}
  echo "verify $mode: exit code $code after $(since "$start") s$([ "$code" = 124 ] && echo ' (cut)')"
  [ "$code" = 0 ] || status=$code
  python3 benchmarks/pool_trace.py "$keep/$mode.trace" || status=$?
done
[ -n "${KEEP:-}" ] || rm -rf "$keep"
exit $status

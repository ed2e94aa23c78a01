#!/usr/bin/env bash
# The simulated hosts' added latency (scripts/test_cluster.sh --delay-us, ds_netdelay): for each
# one-way delay D and link rate, 2 namespace hosts, the UDP round trip between them (200 probes,
# bench/link_bw.py rtt: expect 2D plus the stacks' and forwarder's overhead, the D=0 row: plain
# veths) and the one-way TCP rate of a 64 MiB transfer against the tbf rate (the userspace delay
# line may cap it below: this says where). Then each delay line's own account: how late it
# released frames on average (the machine's load adds to the delay, never subtracts).
# Usage: bench/netdelay.sh [BUILD_DIR] [OUT_FILE]   (root: namespaces, tc, TAP devices)
#   env: DS_BENCH_DELAYS ("0 50 250 1000" us at DS_BENCH_RTT_RATE, 1gbit),
#        DS_BENCH_RATES ("1gbit 10gbit 25gbit" at DS_BENCH_RATE_DELAY, 250 us; also at 0)
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${1:-build}")
OUT=${2:-bench/results/netdelay.txt}
DELAYS=${DS_BENCH_DELAYS:-"0 50 250 1000"}
RTT_RATE=${DS_BENCH_RTT_RATE:-1gbit}
RATES=${DS_BENCH_RATES:-"1gbit 10gbit 25gbit"}
RATE_DELAY=${DS_BENCH_RATE_DELAY:-250}
# shellcheck source=bench/netns_lib.sh
. bench/netns_lib.sh

rate_gbs() {  # tc rate -> GB/s (1e9 B/s)
  echo "$1" | sed -E 's/^([0-9]+)([kmg]?)bit$/\1 \2/' |
    awk '{m=1; if($2=="k")m=1e3; if($2=="m")m=1e6; if($2=="g")m=1e9; printf "%.4f", $1*m/8e9}'
}

row() {  # DELAY RATE: one line
  DELAY_US=$1
  netns_up "$2" 2 1
  netns_down
  printf '%8s %7s %7s  %-17s %8s %8s %6.2f\n' "$1" "$2" "$(rate_gbs "$2")" "$LINK_RTT" \
    "$LINK_BW" "$(echo "$LINK_RTT" | awk -v d="$1" '{printf "%d", $2 - 2 * d}')" \
    "$(awk -v a="$LINK_BW" -v b="$(rate_gbs "$2")" 'BEGIN{print a / b}')"
  [ "$1" = 0 ] || cat "$CL"/netdelay.h*.log | sed -n 's/.*stopped: /#   delay line: /p' >> "$TMP/late"
}

{
  echo "# bench/netdelay.sh $B $OUT   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
       "$(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# 2 simulated hosts (network namespaces); D = one-way delay added host to host (D/2 on each"
  echo "# host's link; D = 0: plain veths, no delay line); tc tbf RATE on both ends of each link."
  echo "# rtt: min/median/max of 200 UDP round trips (us, Python on both ends); over: median - 2D;"
  echo "# tcp: one 64 MiB one-way transfer (GB/s); of tbf: tcp / RATE. Every host and the delay lines"
  echo "# share this machine's $(nproc) cores with two other helpers' builds and tests."
  echo "# load average (1/5/15 min) at start: $(loadavg)"
  echo "#  D (us)    RATE  tbf GB/s  rtt min/med/max us  tcp GB/s  over us  of tbf"
  for d in $DELAYS; do row "$d" "$RTT_RATE"; done
  for rate in $RATES; do
    [ "$rate" = "$RTT_RATE" ] && echo " $DELAYS " | grep -q " $RATE_DELAY " && continue
    row "$RATE_DELAY" "$rate"
    row 0 "$rate"
  done
  echo "# load average at end:   $(loadavg)"
  echo "# each delay line's account at stop (a->b: bridge to host, b->a: host to bridge):"
  cat "$TMP/late" 2>/dev/null || true
} | tee "$OUT"

#!/usr/bin/env bash
# Allreduce across simulated hosts (issue 18 items 2, 5, 6): HOSTS network-namespace hosts x
# RANKS ranks each (scripts/test_cluster.sh --netns, every host's link shaped by tc tbf to each
# rate in turn), dsrun over ssh into them, dsrt comm-bench allreduce fp32 with the flat gloo ring
# (DS_COMM_HIERARCHICAL=0) and with hierarchical collectives (shared memory within a host, the
# leaders over the link), side by side per rate. The physical limit printed next to them: a
# host's link moves RATE/8 bytes/s each way, and an allreduce must send 2(h-1)/h of the buffer
# over it at best (the leaders' ring), so algbw <= RATE/8 * h / (2(h-1)); tcp_algbw is the same
# bound at the one-way TCP rate measured between two of the hosts in the same run
# (bench/link_bw.py, a 64 MiB socket transfer).
# Sides alternate order per repetition; medians of algbw over repetitions; ratios of medians.
# Usage: bench/comm_multihost.sh [BUILD_DIR] [OUT_FILE]   (root: namespaces and tc)
#   env: DS_BENCH_HOSTS (2), DS_BENCH_RANKS (2 per host), DS_BENCH_RATES ("1gbit 10gbit"),
#        DS_BENCH_SIZES ("4M,16M,64M"), DS_BENCH_REPS (3), DS_BENCH_TARGET_SECONDS (1),
#        DS_BENCH_DELAY_US (0: one-way latency added between hosts, bench/netns_lib.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${1:-build}")
OUT=${2:-bench/results/comm_multihost.txt}
H=${DS_BENCH_HOSTS:-2}
R=${DS_BENCH_RANKS:-2}
RATES=${DS_BENCH_RATES:-"1gbit 10gbit"}
SIZES=${DS_BENCH_SIZES:-4M,16M,64M}
REPS=${DS_BENCH_REPS:-3}
TARGET=${DS_BENCH_TARGET_SECONDS:-1}
port=29900
# shellcheck source=bench/netns_lib.sh
. bench/netns_lib.sh

{
  echo "# bench/comm_multihost.sh $B $OUT   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
       "$(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# allreduce fp32 sum, $H simulated hosts x $R ranks ($LINK_DESC);"
  echo "# every host shares this machine's $(nproc) cores and memory bus. $REPS repetitions per side," \
       "target ${TARGET} s per row; algbw and busbw in GB/s (1e9 B/s)"
  echo "# load average (1/5/15 min) at start: $(loadavg)"
  for rate in $RATES; do
    netns_up "$rate" "$H" "$R"
    echo "$rate $LINK_BW" >> "$TMP/tcp"
    for rep in $(seq "$REPS"); do
      sides="flat hier"
      [ $((rep % 2)) = 0 ] && sides="hier flat"
      for side in $sides; do
        port=$((port + 1))
        hierflag=$([ "$side" = hier ] && echo 1 || echo 0)
        (set -a; . "$CL/env"; set +a
         DS_COMM_HIERARCHICAL=$hierflag "$B/dsrun" --hostfile "$HOSTFILE" --launcher ssh \
           --master_addr "$MASTER" --master_port "$port" "$B/dsrt" comm-bench \
           --comm_backend gloo --sizes "$SIZES" --ops allreduce --target_seconds "$TARGET") \
          2>>"$TMP/stderr" | sed -e 's/^\[[0-9]*\] //' | grep -E '^allreduce ' |
          sed "s/^/$rate $side $rep /" >> "$TMP/rows"
      done
    done
    netns_down
  done
  echo "# load average at end:   $(loadavg)"
  echo
  "$PY" - "$TMP/rows" "$H" "$TMP/tcp" <<'PY'
import re, statistics, sys
h = int(sys.argv[2])
tcp = dict((l.split()[0], float(l.split()[1])) for l in open(sys.argv[3]))
rows = {}
for line in open(sys.argv[1]):
    f = line.split()  # rate side rep | op bytes count iters time_us algbw busbw check
    rows.setdefault((f[0], int(f[4])), {}).setdefault(f[1], []).append((float(f[8]), float(f[9])))
def bits(rate):
    m = re.match(r"(\d+)([kmg]?)bit", rate)
    return int(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
print(f"{'link':>7} {'bytes':>10}  {'flat_algbw':>10} {'hier_algbw':>10}  {'hier/flat':>9}"
      f"  {'limit_algbw':>11} {'hier/limit':>10}  {'tcp_algbw':>9} {'hier/tcp':>8}"
      "   (medians; min-max)")
for (rate, b) in sorted(rows, key=lambda k: (bits(k[0]), k[1])):
    r = rows[(rate, b)]
    med = lambda s: statistics.median(x[0] for x in r[s]) if r.get(s) else float("nan")
    limit = bits(rate) / 8 / 1e9 * h / (2 * (h - 1))
    tlimit = tcp[rate] * h / (2 * (h - 1))  # the same bound at the measured TCP rate
    spread = "  ".join(f"{s} {min(x[0] for x in r[s]):.3f}-{max(x[0] for x in r[s]):.3f}"
                       for s in ("flat", "hier") if r.get(s))
    print(f"{rate:>7} {b:>10}  {med('flat'):>10.4f} {med('hier'):>10.4f}  "
          f"{med('hier') / med('flat'):>9.2f}  {limit:>11.4f} {med('hier') / limit:>10.2f}  "
          f"{tlimit:>9.4f} {med('hier') / tlimit:>8.2f}   {spread}")
PY
  if [ -s "$TMP/stderr" ] && grep -qiE 'error|abort' "$TMP/stderr"; then
    echo; echo "# stderr of the runs (errors):"; grep -iE 'error|abort' "$TMP/stderr" | head -20
  fi
} | tee "$OUT"

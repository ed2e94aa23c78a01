# Shared by the multi-host benchmarks (bench/comm_multihost.sh, bench/zeropp_multihost.sh): a
# scratch dir with a network-namespace cluster (scripts/test_cluster.sh --netns) that is stopped
# on exit, and the link's raw TCP rate. Source it from the repository root.
#   netns_up RATE HOSTS RANKS  starts the cluster with every link shaped to RATE; sets HOSTFILE
#                              (RANKS slots per host), MASTER (the first host), LINK_BW (GB/s
#                              of one 64 MiB TCP transfer between two hosts, bench/link_bw.py)
#                              and LINK_RTT (min/median/max UDP round trip between them, us)
#   netns_down                 stops it (also done on exit)
#   LINK_DESC                  the links in words, for a result's header
#   rank_threads RANKS WHO     compute threads per simulated rank: DS_BENCH_THREADS, else
#                              max(1, cores / RANKS): every simulated host shares this machine's
#                              cores, and dsrt's default (cores / local ranks) would oversubscribe
# DS_BENCH_DELAY_US (0) adds that one-way delay between hosts (test_cluster.sh --delay-us: TAP
# pairs joined by $B/ds_netdelay instead of veths; B is the caller's build dir); DS_BENCH_TAP=1
# takes that path with no delay (the control: same forwarding, nothing held).
TMP=$(mktemp -d)
CL="$TMP/cluster"
PY=${DS_PYTHON:-/usr/bin/python3}
netns_down() { scripts/test_cluster.sh stop "$CL" >/dev/null 2>&1 || true; }
trap 'netns_down; rm -rf "$TMP"' EXIT
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
rank_threads() {
  local t=${DS_BENCH_THREADS:-$(($(nproc) / $1 > 0 ? $(nproc) / $1 : 1))}
  [[ $t =~ ^[1-9][0-9]*$ ]] || { echo "$2: DS_BENCH_THREADS '$t' is not a count >= 1" >&2; return 2; }
  echo "$t"
}
DELAY_US=${DS_BENCH_DELAY_US:-0}
TAP=()
[ "${DS_BENCH_TAP:-0}" = 0 ] || TAP=(--tap)
if [ "$DELAY_US" -gt 0 ] || [ ${#TAP[@]} -gt 0 ]; then
  LINK_DESC="network namespaces, TAP pairs joined by ds_netdelay adding $DELAY_US us one way host to host, tc tbf on both ends of each host's link"
else
  LINK_DESC="network namespaces, veth + bridge, tc tbf on both ends of each host's link, no added latency"
fi

# link_rtt NS_FROM ADDR_TO NS_TO: "min median max" microseconds of 200 UDP round trips.
link_rtt() {
  ip netns exec "$3" timeout 150 "$PY" bench/link_bw.py echo "$2" &
  local srv=$!
  ip netns exec "$1" timeout 150 "$PY" bench/link_bw.py rtt "$2"
  wait "$srv"
}

# tcp_bw NS_FROM ADDR_TO NS_TO: GB/s of a 64 MiB one-way socket transfer.
tcp_bw() {
  ip netns exec "$3" timeout 150 "$PY" bench/link_bw.py srv "$2" &
  local srv=$!
  ip netns exec "$1" timeout 150 "$PY" bench/link_bw.py cli "$2"
  wait "$srv"
}

netns_up() {
  local rate=$1 hosts=$2 ranks=$3 tag
  scripts/test_cluster.sh start "$CL" --netns --hosts "$hosts" --link "$rate" \
    --delay-us "$DELAY_US" "${TAP[@]}" --netdelay "${B:-build}/ds_netdelay" >/dev/null
  tag=$(sed -n 's/^tag=//p' "$CL/netns")
  LINK_BW=$(tcp_bw "ds${tag}h0" "$(sed -n 2p "$CL/hosts")" "ds${tag}h1")
  LINK_RTT=$(link_rtt "ds${tag}h0" "$(sed -n 2p "$CL/hosts")" "ds${tag}h1")
  HOSTFILE="$TMP/hostfile"
  while read -r a; do echo "$a slots=$ranks"; done < "$CL/hosts" > "$HOSTFILE"
  MASTER=$(head -1 "$CL/hosts")
}

#!/usr/bin/env bash
# A local test cluster: one private sshd listening on 127.0.0.2, 127.0.0.3, ... (one address per
# "host") on one port, with generated host and user keys, authorized_keys, known_hosts and an
# ssh_config that ssh -F, pdsh (-R ssh), mpirun (plm_rsh_agent) and MPICH's hydra (DIR/ssh) use. Everything lives in DIR;
# the only change outside DIR is /run/sshd (sshd's privilege-separation directory), created if
# missing. Not a security boundary: for tests on loopback only. See docs/test_cluster.md.
#
#   scripts/test_cluster.sh start DIR [--hosts N] [--port P]   # idempotent; prints DIR/env
#   scripts/test_cluster.sh start DIR --netns [--hosts N] [--link RATE] [--delay-us US] [--tap]
#                                     [--netdelay BIN] [--shm-size SIZE]
#       simulated hosts: each host is a network namespace on a private bridge, with its own sshd,
#       hostname and /dev/shm (so ranks on different hosts talk over the network, never through
#       shared memory), its link shaped by tc tbf to RATE (tc units: 1gbit, 10gbit, 25gbit);
#       --delay-us adds US microseconds one way between two hosts (US/2 on each host's link: a
#       TAP pair joined by the ds_netdelay delay line instead of a veth; BIN defaults to
#       build/ds_netdelay of this checkout); --tap: those links with no delay (a control for
#       comparisons: the same forwarding path, nothing held)
#   scripts/test_cluster.sh stop DIR                           # idempotent
#   scripts/test_cluster.sh status DIR                         # exit 0 when running
#   scripts/test_cluster.sh slurm-start|slurm-stop DIR         # one-host Slurm (see below)
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|status DIR [--hosts N] [--port P] [--netns [--link RATE] [--delay-us US] [--tap] [--netdelay BIN] [--shm-size SIZE]]" >&2
  exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
case "$dir" in /*) ;; *) dir=$PWD/$dir ;; esac  # the --netns names derive from the absolute DIR
shift 2
hosts=2
port=""
netns=0
link=""
delay_us=0
tap=0
netdelay=$(cd "$(dirname "$0")/.." && pwd)/build/ds_netdelay
shm_size=1g
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts=${2:?--hosts needs a number}; shift 2 ;;
    --port) port=${2:?--port needs a number}; shift 2 ;;
    --netns) netns=1; shift ;;
    --link) link=${2:?--link needs a rate such as 1gbit}; shift 2 ;;
    --delay-us) delay_us=${2:?--delay-us needs microseconds such as 250}; shift 2 ;;
    --netdelay) netdelay=${2:?--netdelay needs the ds_netdelay binary}; shift 2 ;;
    --tap) tap=1; shift ;;
    --shm-size) shm_size=${2:?--shm-size needs a size such as 1g}; shift 2 ;;
    *) echo "test_cluster: unknown argument '$1'" >&2; usage ;;
  esac
done
case "$hosts" in '' | *[!0-9]*) echo "test_cluster: --hosts '$hosts' is not a number" >&2; exit 2 ;; esac
[ "$hosts" -ge 1 ] && [ "$hosts" -le 200 ] || { echo "test_cluster: --hosts must be 1..200" >&2; exit 2; }
if [ -n "$link" ]; then
  [ "$netns" = 1 ] || { echo "test_cluster: --link needs --netns (loopback cannot be shaped per host)" >&2; exit 2; }
  case "$link" in
    [0-9]*[kmg]bit | [0-9]*bit) ;;
    *) echo "test_cluster: --link '$link': expected a rate in tc units (100mbit, 1gbit, 10gbit)" >&2; exit 2 ;;
  esac
fi
case "$delay_us" in '' | *[!0-9]*) echo "test_cluster: --delay-us '$delay_us': expected whole microseconds (0 = none)" >&2; exit 2 ;; esac
[ "$delay_us" -eq 0 ] || tap=1
if [ "$tap" = 1 ]; then
  [ "$netns" = 1 ] || { echo "test_cluster: --delay-us and --tap need --netns (loopback cannot be delayed per host)" >&2; exit 2; }
  [ "$delay_us" -le 1000000 ] || { echo "test_cluster: --delay-us $delay_us: expected at most 1000000 (1 s)" >&2; exit 2; }
  [ -x "$netdelay" ] || { echo "test_cluster: --delay-us/--tap need the ds_netdelay binary, not found at $netdelay (cmake --build build --target ds_netdelay, or pass --netdelay BIN)" >&2; exit 2; }
fi
# A cluster started with --netns is stopped and queried as one (DIR/netns records it).
if [ "$cmd" != start ] && [ -f "$dir/netns" ]; then netns=1; fi

SSHD=/usr/sbin/sshd  # sshd re-execs itself and needs an absolute path
tap_mtu=65000        # --delay-us links (a TAP allows up to 65521)

pid_alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

running() {
  if [ "$netns" = 1 ]; then
    [ -f "$dir/netns" ] || return 1
    local i n
    n=$(sed -n 's/^hosts=//p' "$dir/netns")
    for i in $(seq 0 $((n - 1))); do
      pid_alive "$dir/sshd.h$i.pid" || return 1
      [ ! -f "$dir/netdelay.h$i.pidfile" ] || pid_alive "$dir/netdelay.h$i.pidfile" || return 1
    done
    return 0
  fi
  pid_alive "$dir/sshd.pid"
}

# A TCP port P with no listener on P or P + 1 (slurm-start gives slurmd the port after slurmctld's).
pick_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 30000))
    if ! ss -Hltn 2>/dev/null | awk '{print $4}' | grep -qE "[:.]($p|$((p + 1)))\$"; then
      echo "$p"
      return 0
    fi
  done
  echo "test_cluster: no free port found" >&2
  return 1
}

# --netns names and addresses derive from a tag of DIR, so that clusters in different DIRs
# coexist: namespaces ds<tag>h<i>, bridge ds<tag>b, veths ds<tag>v<i>, subnet 10.<a>.<b>.0/24
# with host i at .<i+1> and the bridge (the launcher's side) at .254.
tag=$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
tag=$((tag % 100000))
subnet="10.$((100 + tag % 100)).$(((tag / 100) % 250)).0"
net_prefix=${subnet%.0}
ns_of() { echo "ds${tag}h$1"; }

addr_of() {  # host index 0.. -> 127.0.0.2.. (loopback) or 10.a.b.1.. (--netns)
  if [ "$netns" = 1 ]; then echo "$net_prefix.$(( $1 + 1 ))"; else echo "127.0.0.$(( $1 + 2 ))"; fi
}

# sshd_config HOST_INDICES PIDFILE: a daemon listening on those hosts' addresses.
sshd_config() {
  echo "# generated by scripts/test_cluster.sh"
  echo "Port $port"
  for i in $1; do echo "ListenAddress $(addr_of "$i")"; done
  echo "HostKey $dir/host_ed25519"
  echo "PidFile $2"
  echo "AuthorizedKeysFile $dir/authorized_keys"
  echo "PermitRootLogin prohibit-password"
  echo "PubkeyAuthentication yes"
  echo "PasswordAuthentication no"
  echo "KbdInteractiveAuthentication no"
  echo "UsePAM no"
  echo "StrictModes no"
  echo "MaxStartups 200:30:400"
  echo "MaxSessions 100"
  echo "AcceptEnv DS_JOB_TOKEN"
  echo "PrintMotd no"
  echo "LogLevel VERBOSE"
}

write_files() {
  case "$dir" in *"'"* | *" "*) echo "test_cluster: DIR '$dir' must not hold quotes or spaces" >&2; exit 2 ;; esac
  mkdir -p "$dir"
  chmod 700 "$dir"
  [ -f "$dir/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C dsrun-test-host -f "$dir/host_ed25519"
  [ -f "$dir/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C dsrun-test-user -f "$dir/id_ed25519"
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
  chmod 600 "$dir/authorized_keys"
  local user
  user=$(id -un)
  local hostkey
  hostkey=$(cut -d' ' -f1,2 "$dir/host_ed25519.pub")
  sshd_config "$(seq 0 $((hosts - 1)))" "$dir/sshd.pid" > "$dir/sshd_config"
  if [ "$netns" = 1 ]; then
    for i in $(seq 0 $((hosts - 1))); do sshd_config "$i" "$dir/sshd.h$i.pid" > "$dir/sshd_config.h$i"; done
  fi
  : > "$dir/known_hosts"
  {
    echo "# generated by scripts/test_cluster.sh: use with ssh -F $dir/ssh_config"
    for i in $(seq 0 $((hosts - 1))); do
      echo "Host node$((i + 1))"
      echo "    HostName $(addr_of "$i")"
    done
    echo "Host *"
    echo "    Port $port"
    echo "    User $user"
    echo "    IdentityFile $dir/id_ed25519"
    echo "    IdentitiesOnly yes"
    echo "    UserKnownHostsFile $dir/known_hosts"
    echo "    GlobalKnownHostsFile /dev/null"
    echo "    StrictHostKeyChecking yes"
    echo "    BatchMode yes"
    echo "    ConnectTimeout 10"
    echo "    LogLevel ERROR"
  } > "$dir/ssh_config"
  for i in $(seq 0 $((hosts - 1))); do
    echo "[$(addr_of "$i")]:$port $hostkey" >> "$dir/known_hosts"
  done
  {
    for i in $(seq 0 $((hosts - 1))); do echo "$(addr_of "$i")"; done
  } > "$dir/hosts"
  # MPICH's hydra runs its launcher as one program (no arguments): this wrapper adds -F.
  printf '#!/bin/sh\nexec ssh -F %s/ssh_config "$@"\n' "$dir" > "$dir/ssh"
  chmod 755 "$dir/ssh"
  # Environment for the runners: `set -a; . DIR/env`, or read KEY='VALUE' lines (DIR must not
  # hold a single quote).
  {
    echo "DS_TEST_CLUSTER_DIR='$dir'"
    echo "DS_TEST_CLUSTER_PORT='$port'"
    echo "DS_SSH_CONFIG='$dir/ssh_config'"
    echo "PDSH_RCMD_TYPE='ssh'"
    echo "PDSH_SSH_ARGS_APPEND='-F $dir/ssh_config'"
    echo "OMPI_MCA_plm_rsh_agent='ssh -F $dir/ssh_config'"
    echo "HYDRA_LAUNCHER='ssh'"
    echo "HYDRA_LAUNCHER_EXEC='$dir/ssh'"
    [ "$netns" = 0 ] || echo "DS_TEST_CLUSTER_NETNS='$link'"
    [ "$netns" = 0 ] || echo "DS_TEST_CLUSTER_DELAY_US='$delay_us'"
  } > "$dir/env"
  echo "$port" > "$dir/port"
}

# tbf burst: 1 ms of the rate, at least 128 KiB (a veth GSO packet is up to 64 KiB, and a packet
# larger than the burst would be dropped).
tbf_args() {
  local bits
  bits=$(echo "$link" | sed -E 's/^([0-9]+)([kmg]?)bit$/\1 \2/' | awk '{m=1; if($2=="k")m=1e3; if($2=="m")m=1e6; if($2=="g")m=1e9; printf "%.0f", $1*m}')
  local burst=$((bits / 8 / 1000))
  [ "$burst" -ge 131072 ] || burst=131072
  echo "rate $link burst $burst latency 100ms"
}

# The namespaces, bridge, veths and shaping of --netns. Idempotent per DIR (a leftover from a
# crashed run is removed first).
net_up() {
  [ "$(id -u)" = 0 ] || { echo "test_cluster: --netns needs root (ip netns, tc)" >&2; exit 3; }
  command -v ip >/dev/null && command -v tc >/dev/null ||
    { echo "test_cluster: --netns needs iproute2 (ip, tc)" >&2; exit 3; }
  net_down quiet
  if ip -o -4 addr show | grep -q " $net_prefix\."; then
    echo "test_cluster: subnet $subnet/24 (from DIR's tag $tag) is already in use here; use another DIR" >&2
    exit 3
  fi
  local br="ds${tag}b" i ns v
  ip link add "$br" type bridge
  ip addr add "$net_prefix.254/24" dev "$br"
  ip link set "$br" up
  for i in $(seq 0 $((hosts - 1))); do
    ns=$(ns_of "$i")
    v="ds${tag}v$i"
    ip netns add "$ns"
    if [ "$tap" = 1 ]; then
      # Two persistent TAPs (the host's eth0, the bridge's port) that ds_netdelay joins. Their
      # MTU is large so that a TCP segment is one frame (TAPs get no segmentation offload): the
      # delay line's cost is per frame.
      ip tuntap add dev "$v" mode tap
      ip -n "$ns" tuntap add dev eth0 mode tap
      ip link set "$v" mtu "$tap_mtu" txqueuelen 10000
      ip -n "$ns" link set eth0 mtu "$tap_mtu" txqueuelen 10000
    else
      ip link add "$v" type veth peer name "ds${tag}p$i"
      ip link set "ds${tag}p$i" netns "$ns"
      ip -n "$ns" link set "ds${tag}p$i" name eth0
    fi
    ip -n "$ns" addr add "$(addr_of "$i")/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip link set "$v" master "$br"
    ip link set "$v" up
    if [ -n "$link" ]; then
      # Both directions: the host's egress (inside) and its ingress (the bridge side's egress).
      # shellcheck disable=SC2046
      tc -n "$ns" qdisc add dev eth0 root tbf $(tbf_args)
      # shellcheck disable=SC2046
      tc qdisc add dev "$v" root tbf $(tbf_args)
    fi
  done
  {
    echo "hosts=$hosts"
    echo "tag=$tag"
    echo "subnet=$subnet/24"
    echo "link=${link:-unshaped}"
    echo "delay_us=$delay_us"
    echo "links=$([ "$tap" = 1 ] && echo tap+ds_netdelay || echo veth)"
  } > "$dir/netns"
  [ "$tap" = 0 ] || net_start_delay
}

# One ds_netdelay per host joins its two TAPs, holding each frame delay_us/2 (so host to host,
# two links, adds delay_us one way). It runs inside the host's namespace (stop kills it with the
# rest) as a real-time task (SCHED_FIFO 1; nice -10 where that is refused): it stands for
# hardware, so the ranks' compute must not delay it (measured: frames leave ~15 us after their
# time on average under load, against ~50 us at nice -10; bench/results/netdelay.txt).
net_start_delay() {
  local i log prio=(chrt -f 1)
  chrt -f 1 true 2>/dev/null || prio=(nice -n -10)
  for i in $(seq 0 $((hosts - 1))); do
    log="$dir/netdelay.h$i.log"
    rm -f "$log" "$dir/netdelay.h$i.pidfile"
    setsid "${prio[@]}" "$netdelay" --outer "ds${tag}v$i" --netns "$(ns_of "$i")" --inner eth0 \
      --delay-ns $((delay_us * 500)) < /dev/null > "$log" 2>&1 &
    echo $! > "$dir/netdelay.h$i.pidfile"
  done
  for i in $(seq 0 $((hosts - 1))); do
    for _ in $(seq 1 100); do
      grep -q forwarding "$dir/netdelay.h$i.log" 2>/dev/null && continue 2
      pid_alive "$dir/netdelay.h$i.pidfile" || break
      sleep 0.05
    done
    echo "test_cluster: ds_netdelay for host $i did not start; its log:" >&2
    cat "$dir/netdelay.h$i.log" >&2 || true
    net_down quiet
    exit 3
  done
}

# Ends every process in the namespaces (ranks included), then removes them and the bridge.
net_down() {
  local i ns pids n=$hosts
  if [ -f "$dir/netns" ]; then n=$(sed -n 's/^hosts=//p' "$dir/netns"); fi
  for i in $(seq 0 $((n - 1))); do
    ns=$(ns_of "$i")
    ip netns list 2>/dev/null | grep -q "^$ns\b" || continue
    # The delay line first and gently (SIGTERM), so that its log ends with its counts.
    if pid_alive "$dir/netdelay.h$i.pidfile"; then
      kill -TERM "$(cat "$dir/netdelay.h$i.pidfile")" 2>/dev/null || true
      for _ in $(seq 1 20); do pid_alive "$dir/netdelay.h$i.pidfile" || break; sleep 0.05; done
    fi
    rm -f "$dir/netdelay.h$i.pidfile"
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -f "$dir/sshd.h$i.pid"
  done
  for i in $(seq 0 $((n - 1))); do  # a namespace's end frees its veth pair lazily: do it now
    ip link del "ds${tag}v$i" 2>/dev/null || true
  done
  ip link del "ds${tag}b" 2>/dev/null || true
  rm -f "$dir/netns"
  [ "${1:-}" = quiet ] || echo "test_cluster: namespaces of $dir removed"
}

# One sshd per namespace, each in its own mount and UTS namespace: a private /dev/shm (the shared
# memory transport must see different hosts) and the hostname dsh<i+1>.
net_start_sshd() {
  local i
  for i in $(seq 0 $((hosts - 1))); do
    "$SSHD" -t -f "$dir/sshd_config.h$i"
    ip netns exec "$(ns_of "$i")" unshare --mount --uts --propagation private sh -c \
      "mount -t tmpfs -o size=$shm_size,mode=1777 tmpfs /dev/shm && hostname dsh$((i + 1)) && exec $SSHD -f '$dir/sshd_config.h$i' -E '$dir/sshd.h$i.log'"
  done
}

start() {
  if running; then
    echo "test_cluster: already running in $dir (port $(cat "$dir/port"), pid $(cat "$dir/sshd.pid"))"
    return 0
  fi
  if [ -z "$port" ] && [ -f "$dir/port" ]; then port=$(cat "$dir/port"); fi
  [ -n "$port" ] || port=$(pick_port)
  write_files
  mkdir -p /run/sshd  # privilege-separation dir, mandatory for sshd; absent on fresh machines
  chmod 755 /run/sshd
  if [ "$netns" = 1 ]; then
    net_up
    net_start_sshd
  else
    "$SSHD" -t -f "$dir/sshd_config"
    rm -f "$dir/sshd.pid"
    # Daemonizes; writes its pid to DIR/sshd.pid once listening.
    "$SSHD" -f "$dir/sshd_config" -E "$dir/sshd.log"
  fi
  for _ in $(seq 1 100); do
    if running; then
      if [ "$netns" = 1 ]; then
        echo "test_cluster: $hosts namespace hosts $(head -1 "$dir/hosts")..$(tail -1 "$dir/hosts") port $port, link ${link:-unshaped}, delay ${delay_us} us one way; env in $dir/env"
      else
        echo "test_cluster: sshd on $(head -1 "$dir/hosts")..$(tail -1 "$dir/hosts") port $port, pid $(cat "$dir/sshd.pid"); env in $dir/env"
      fi
      return 0
    fi
    sleep 0.05
  done
  echo "test_cluster: sshd did not start within 5 s; log:" >&2
  tail -20 "$dir"/sshd*.log >&2 || true
  [ "$netns" = 1 ] && net_down quiet
  return 1
}

stop() {
  if [ "$netns" = 1 ]; then
    net_down  # kills the sshds and every rank still running on a simulated host
    return 0
  fi
  if ! running; then
    rm -f "$dir/sshd.pid"
    echo "test_cluster: not running in $dir"
    return 0
  fi
  local pid
  pid=$(cat "$dir/sshd.pid")
  # The listener only; sessions it forked end when their clients go.
  kill -TERM "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$dir/sshd.pid"; echo "test_cluster: stopped"; return 0; }
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$dir/sshd.pid"
  echo "test_cluster: stopped (SIGKILL after 5 s)"
}

# One-host Slurm: munged on a private socket, slurmctld and slurmd with everything under
# DIR/slurm, all as root on 127.0.0.1. Use with SLURM_CONF=DIR/slurm/slurm.conf (DIR/slurm/env).
slurm_start() {
  local s="$dir/slurm"
  if [ -f "$s/slurmd.pid" ] && kill -0 "$(cat "$s/slurmd.pid")" 2>/dev/null; then
    echo "test_cluster: slurm already running in $s"
    return 0
  fi
  for t in munged slurmctld slurmd srun sinfo; do
    command -v "$t" >/dev/null || { echo "test_cluster: $t not installed (apt-get install slurmd slurmctld slurm-client munge)" >&2; return 3; }
  done
  [ -r /etc/munge/munge.key ] || { echo "test_cluster: no readable /etc/munge/munge.key" >&2; return 3; }
  mkdir -p "$s/spool" "$s/state" "$s/munge"
  chmod 700 "$s/munge"
  local node cpus p
  node=$(hostname -s)
  # At least 4 CPUs, whatever this machine has, so that a 4-task step fits (tests run 4 ranks):
  # config_overrides makes slurmd take the configured count instead of draining the node.
  cpus=$(nproc)
  [ "$cpus" -ge 4 ] || cpus=4
  p=$(pick_port)
  {
    echo "# generated by scripts/test_cluster.sh slurm-start"
    echo "ClusterName=dstest"
    echo "SlurmctldHost=$node(127.0.0.1)"
    echo "SlurmctldPort=$p"
    echo "SlurmdPort=$((p + 1))"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$s/munge/sock"
    echo "CredType=cred/munge"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$s/state"
    echo "SlurmdSpoolDir=$s/spool"
    echo "SlurmctldPidFile=$s/slurmctld.pid"
    echo "SlurmdPidFile=$s/slurmd.pid"
    echo "SlurmctldLogFile=$s/slurmctld.log"
    echo "SlurmdLogFile=$s/slurmd.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SchedulerType=sched/builtin"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "MpiDefault=none"
    echo "SlurmdParameters=config_overrides"
    echo "ReturnToService=2"
    echo "JobCompType=jobcomp/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN"
    echo "PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8"
  } > "$s/slurm.conf"
  munged -f --socket="$s/munge/sock" --key-file=/etc/munge/munge.key --log-file="$s/munge/log" \
    --pid-file="$s/munge/pid" --seed-file="$s/munge/seed"
  SLURM_CONF="$s/slurm.conf" slurmctld -f "$s/slurm.conf"
  SLURM_CONF="$s/slurm.conf" slurmd -f "$s/slurm.conf"
  {
    echo "SLURM_CONF='$s/slurm.conf'"
    echo "DS_TEST_SLURM_NODE='$node'"
  } > "$s/env"
  # A deadline, not a count: sinfo itself can take seconds while slurmctld starts, and the caller
  # waits 90 s for this script (tests/support/test_cluster.cc) and should see this message.
  local deadline=$((SECONDS + 20))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if SLURM_CONF="$s/slurm.conf" timeout 5 sinfo -h -o %T 2>/dev/null | grep -q '^idle'; then
      echo "test_cluster: slurm up (node $node, SLURM_CONF=$s/slurm.conf)"
      return 0
    fi
    sleep 0.1
  done
  echo "test_cluster: slurm node not idle within 20 s (ports $p, $((p + 1))); see $s/slurmctld.log $s/slurmd.log" >&2
  tail -n 5 "$s/slurmctld.log" "$s/slurmd.log" >&2 2>/dev/null
  return 1
}

slurm_stop() {
  local s="$dir/slurm" f pid
  for f in slurmd.pid slurmctld.pid munge/pid; do
    [ -f "$s/$f" ] || continue
    pid=$(cat "$s/$f")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$s/$f"
  done
  echo "test_cluster: slurm stopped"
}

case "$cmd" in
  start) start ;;
  slurm-start) slurm_start ;;
  slurm-stop) slurm_stop ;;
  stop) stop ;;
  status)
    if running; then
      echo "test_cluster: running in $dir (port $(cat "$dir/port"), pid $(cat "$dir/sshd.pid"))"
    else
      echo "test_cluster: not running in $dir"
      exit 1
    fi
    ;;
  *) usage ;;
esac

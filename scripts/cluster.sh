#!/usr/bin/env bash
# An emulated cluster on this one machine (docs/cluster.md): H hosts as Linux network namespaces
# joined through a bridge, each with a capped link and an optional one-way latency, and MPI jobs
# run across them with R ranks a host (shared memory within a host, TCP over the capped links
# between hosts).
#
#   scripts/cluster.sh up [--name=N] [--hosts=H] [--ranks=R] [--cap=RATE] [--host-cap=I:RATE]...
#                         [--latency-us=D] [--tcp-cc=ALG] [--owner=PID]
#   scripts/cluster.sh run [--name=N] [--ranks=R] [--timeout=S] [--wire-out=FILE]
#                          [--output-dir=DIR] -- CMD [ARG...]
#   scripts/cluster.sh wire [--name=N]       # bytes each host's link has sent and received
#   scripts/cluster.sh status [--name=N]     # the cluster's settings, or exit 1 if it is not up
#   scripts/cluster.sh check [--name=N]      # what the links carry, by iperf3
#   scripts/cluster.sh down [--name=N]       # removes everything `up` made; idempotent
#   scripts/cluster.sh gc                    # downs every cluster whose --owner has exited
#
# Defaults: name cavs, 2 hosts, 1 rank a host, cap 1gbit, no latency. RATE is a tc rate
# (1gbit, 250mbit, 100mbit, ...): the host's uplink and downlink are each capped to it (tbf on
# both ends of its veth). --host-cap gives host I (from 0) another cap: an uneven cluster.
# --latency-us holds everything a host sends to the others for D microseconds (netem where the
# kernel has it, else scripts/cluster/netdelay.cc through an iptables NFQUEUE rule).
# --tcp-cc: the hosts' TCP congestion control (default cubic, Linux's own default; a namespace
# otherwise inherits this machine's, and BBR's bandwidth and round-trip probing made
# measurements on the capped, delayed links irregular: docs/cluster.md).
# Host I has the address 169.254.10.(I+1) inside the namespaces; nothing outside them changes.
# --owner: the cluster belongs to that process; any later `up` or `gc` removes clusters whose
# owner has exited (a test killed by its timeout strands nothing for long).
#
# `run` starts mpirun in host 0's namespace with an rsh agent that enters each host's namespace,
# every rank unbound (--bind-to none) and yielding when idle, and prints the bytes each host's
# link carried during the job (also to --wire-out as `host I tx_bytes N rx_bytes M` lines).
# --output-dir: each rank's output also goes to DIR/1/rank.N/{stdout,stderr}, written on its own
# host (mpirun's forwarding of a rank cut off by a dead link never arrives). When the job ends,
# whatever it left in the hosts is killed.
# Exit status: the command's, or 2 when a requirement is missing (not root, no namespaces, a
# missing tool), with one line on stderr saying what.
set -uo pipefail

readonly STATE_ROOT="${CAVS_CLUSTER_STATE:-/run/cavs-cluster}"  # debugging override
readonly SUBNET=169.254.10
readonly SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() {  # die <status> <message>
  echo "cluster.sh: $2" >&2
  exit "$1"
}
q() { timeout 20 "$@"; }  # every namespace/link command is bounded in time

need_root() {
  ((EUID == 0)) || die 2 "needs root (network namespaces, veth, tc); run as root or with sudo"
  local t
  for t in ip tc mpirun timeout; do
    command -v "$t" >/dev/null || die 2 "missing '$t' (scripts/setup.sh installs it)"
  done
}

ns_host() { echo "cavs-$1-h$2"; }
ns_bridge() { echo "cavs-$1-br"; }
addr() { echo "$SUBNET.$(($1 + 1))"; }
host_dir() { echo "/dev/shm/cavs-cluster-$1-h$2"; }  # a host's shared memory and MPI session

# load <name>: reads the cluster's settings into HOSTS, RANKS, CAP, LATENCY_US, OWNER.
load() {
  local f="$STATE_ROOT/$1/config"
  [[ -f "$f" ]] || return 1
  # shellcheck disable=SC1090
  source "$f"
}

down_cluster() {  # down_cluster <name>: everything `up` made for it, whatever state it is in
  local name="$1" ns pid
  for pid in "$STATE_ROOT/$name"/netdelay.*.pid; do
    [[ -f "$pid" ]] && kill "$(cat "$pid")" 2>/dev/null
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^cavs-$name-(h[0-9]+|br)$"); do
    # Processes left in the namespace (ranks of a killed job, a netdelay) go first.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    q ip netns del "$ns" 2>/dev/null
  done
  rm -rf "${STATE_ROOT:?}/$name" /dev/shm/cavs-cluster-"$name"-h*
}

gc() {  # downs clusters whose owner has exited
  local dir name
  for dir in "$STATE_ROOT"/*/; do
    [[ -d "$dir" ]] || continue
    name=$(basename "$dir")
    (
      OWNER=""
      load "$name" || exit 0
      if [[ -n "$OWNER" ]] && ! kill -0 "$OWNER" 2>/dev/null; then
        echo "cluster.sh: removing cluster '$name' (owner $OWNER has exited)" >&2
        down_cluster "$name"
      fi
    )
  done
}

# netem where the kernel has it (probed once in a scratch namespace).
has_netem() {
  local ns="cavs-probe-$$" ok=1
  q ip netns add "$ns" 2>/dev/null || return 1
  q ip -n "$ns" link set lo up
  q ip netns exec "$ns" tc qdisc add dev lo root netem delay 1us 2>/dev/null && ok=0
  q ip netns del "$ns"
  return $ok
}

build_netdelay() {  # prints the path of a netdelay binary built from this checkout
  local out="$STATE_ROOT/.netdelay" src="$SCRIPT_DIR/cluster/netdelay.cc"
  if [[ ! -x "$out" || "$src" -nt "$out" ]]; then
    command -v iptables-legacy >/dev/null || die 2 "latency needs iptables-legacy (Debian: iptables)"
    [[ -f /usr/include/libnetfilter_queue/libnetfilter_queue.h ]] ||
      die 2 "latency needs libnetfilter-queue-dev (scripts/setup.sh installs it)"
    mkdir -p "$STATE_ROOT"
    g++ -O2 -std=c++20 -o "$out.tmp.$$" "$src" -lnetfilter_queue >&2 ||
      die 2 "could not build $src"
    mv -f "$out.tmp.$$" "$out"
  fi
  echo "$out"
}

tbf() {  # tbf <netns> <dev> <rate>: caps what <dev> sends
  # burst: 64 KiB (a TSO segment passes whole), queue: 50 ms at the rate.
  q ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst 64kb latency 50ms
}

cmd_up() {
  local name=cavs hosts=2 ranks=1 cap=1gbit latency=0 tcp_cc=cubic owner="" arg
  local -A host_cap=()
  for arg in "$@"; do
    case "$arg" in
      --name=*) name="${arg#*=}" ;;
      --hosts=*) hosts="${arg#*=}" ;;
      --ranks=*) ranks="${arg#*=}" ;;
      --cap=*) cap="${arg#*=}" ;;
      --host-cap=*:*) host_cap["$(cut -d: -f1 <<<"${arg#*=}")"]="${arg#*:}" ;;
      --latency-us=*) latency="${arg#*=}" ;;
      --tcp-cc=*) tcp_cc="${arg#*=}" ;;
      --owner=*) owner="${arg#*=}" ;;
      *) die 2 "up: unknown argument '$arg'" ;;
    esac
  done
  [[ "$name" =~ ^[A-Za-z0-9_]{1,24}$ ]] || die 2 "up: --name must be 1-24 letters, digits or _"
  [[ "$hosts" =~ ^[0-9]+$ ]] && ((hosts >= 1 && hosts <= 250)) || die 2 "up: --hosts in 1..250"
  [[ "$ranks" =~ ^[0-9]+$ ]] && ((ranks >= 1 && ranks <= 64)) || die 2 "up: --ranks in 1..64"
  [[ "$latency" =~ ^[0-9]+$ ]] && ((latency <= 1000000)) ||
    die 2 "up: --latency-us in 0..1000000"
  [[ -z "$owner" || "$owner" =~ ^[0-9]+$ ]] || die 2 "up: --owner must be a process id"
  [[ "$tcp_cc" =~ ^[a-z0-9_]{1,16}$ ]] || die 2 "up: --tcp-cc must be a congestion control name"
  local i
  for i in "${!host_cap[@]}"; do
    [[ "$i" =~ ^[0-9]+$ ]] && ((i < hosts)) || die 2 "up: --host-cap host '$i' is not in 0..$((hosts - 1))"
  done
  need_root
  mkdir -p "$STATE_ROOT" || die 2 "cannot create $STATE_ROOT"
  gc
  # Idempotent: the same settings again leave a running cluster as it is; other settings
  # rebuild it.
  local want="HOSTS=$hosts RANKS=$ranks CAP=$cap HOSTCAPS='$(for i in "${!host_cap[@]}"; do
    echo -n "$i:${host_cap[$i]} "
  done)' LATENCY_US=$latency TCP_CC=$tcp_cc"
  if [[ -f "$STATE_ROOT/$name/settings" && "$(cat "$STATE_ROOT/$name/settings")" == "$want" ]] &&
    ip netns list | grep -q "^$(ns_bridge "$name")\b"; then
    echo "cluster.sh: cluster '$name' is already up ($want)"
    return 0
  fi
  down_cluster "$name"
  local probe="cavs-probe-$$"
  local err
  err=$(q ip netns add "$probe" 2>&1) || die 2 "cannot create network namespaces: $err"
  # The algorithm must be built in or loadable (modprobe tcp_<name>); the namespaces see the
  # machine's list.
  if ! grep -qw "$tcp_cc" /proc/sys/net/ipv4/tcp_available_congestion_control; then
    modprobe "tcp_$tcp_cc" 2>/dev/null
  fi
  # A namespace may set only the algorithms the machine allows (a container's namespaces may
  # not even when root): add it to the machine's allowed list, which only permits its use.
  local allowed
  allowed=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control 2>/dev/null)
  if grep -qw "$tcp_cc" /proc/sys/net/ipv4/tcp_available_congestion_control &&
    ! grep -qw "$tcp_cc" <<<"$allowed"; then
    q sysctl -q -w net.ipv4.tcp_allowed_congestion_control="$allowed $tcp_cc" >/dev/null 2>&1
  fi
  err=$(q ip netns exec "$probe" sysctl -q -w net.ipv4.tcp_congestion_control="$tcp_cc" 2>&1)
  q ip netns del "$probe"
  [[ -z "$err" ]] || die 2 "up: --tcp-cc=$tcp_cc: not available here ($(
    cat /proc/sys/net/ipv4/tcp_available_congestion_control) are)"
  local netem=0 netdelay=""
  if ((latency > 0)); then
    if has_netem; then netem=1; else netdelay=$(build_netdelay) || exit 2; fi
  fi

  mkdir -p "$STATE_ROOT/$name"
  # From here on a failure removes what was made.
  trap 'down_cluster "$name"; die 1 "up failed; nothing left behind"' ERR
  set -e
  local br
  br=$(ns_bridge "$name")
  q ip netns add "$br"
  q ip -n "$br" link add br0 type bridge
  q ip -n "$br" link set br0 up
  q ip -n "$br" link set lo up
  for ((i = 0; i < hosts; i++)); do
    local h rate
    h=$(ns_host "$name" "$i")
    rate="${host_cap[$i]:-$cap}"
    q ip netns add "$h"
    q ip link add eth0 netns "$h" type veth peer name "h$i" netns "$br"
    q ip -n "$br" link set "h$i" master br0
    q ip -n "$br" link set "h$i" up
    q ip -n "$h" addr add "$(addr "$i")/24" dev eth0
    q ip -n "$h" link set eth0 up
    q ip -n "$h" link set lo up
    # A link that goes silent fails TCP connections within about 12 s (Linux's default of 15
    # retries takes about 15 minutes, and Open MPI's launcher waits on it), and idle ones are
    # probed after 10 s of silence (mpirun's own connections too: see `run`): the emulated hosts
    # find a dead peer in seconds, after the ranks' own --comm-timeout of a few seconds.
    q ip netns exec "$h" sysctl -q -w net.ipv4.tcp_retries2=5 net.ipv4.tcp_keepalive_time=10 \
      net.ipv4.tcp_keepalive_intvl=2 net.ipv4.tcp_keepalive_probes=3 \
      net.ipv4.tcp_congestion_control="$tcp_cc"
    tbf "$h" eth0 "$rate"   # uplink
    tbf "$br" "h$i" "$rate" # downlink
    if ((latency > 0 && netem)); then
      q ip netns exec "$h" tc qdisc replace dev eth0 root handle 1: netem delay "${latency}us"
      q ip netns exec "$h" tc qdisc add dev eth0 parent 1: handle 2: tbf rate "$rate" \
        burst 64kb latency 50ms
    elif ((latency > 0)); then
      q ip netns exec "$h" iptables-legacy -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0 \
        --queue-bypass
      local ready="$STATE_ROOT/$name/netdelay.$i.ready"
      ip netns exec "$h" setsid "$netdelay" --queue=0 --delay-us="$latency" --ready="$ready" \
        </dev/null >>"$STATE_ROOT/$name/netdelay.log" 2>&1 &
      echo $! >"$STATE_ROOT/$name/netdelay.$i.pid"
      local waited=0
      until [[ -f "$ready" ]]; do
        ((waited++ < 100)) || false
        sleep 0.05
      done
    fi
  done
  # The rsh agent mpirun uses: `agent <host address> <command...>` runs it in that namespace.
  {
    echo '#!/usr/bin/env bash'
    echo 'h="$1"; shift'
    echo 'case "$h" in'
    echo "  $(addr 0)) ns=$(ns_host "$name" 0); dir=/dev/shm ;;"
    for ((i = 1; i < hosts; i++)); do
      echo "  $(addr "$i")) ns=$(ns_host "$name" "$i"); dir=$(host_dir "$name" "$i") ;;"
    done
    echo '  *) echo "cluster agent: unknown host $h" >&2; exit 1 ;;'
    echo 'esac'
    # The hosts share this machine's name, /dev/shm and /tmp: Open MPI names its shared-memory
    # segments and session directories after the host name, so each host gets its own.
    echo 'export OMPI_MCA_btl_vader_backing_directory="$dir" OMPI_MCA_orte_tmpdir_base="$dir"'
    echo 'exec ip netns exec "$ns" /bin/sh -c "$*"'
  } >"$STATE_ROOT/$name/agent"
  for ((i = 1; i < hosts; i++)); do mkdir -p "$(host_dir "$name" "$i")"; done
  chmod +x "$STATE_ROOT/$name/agent"
  {
    echo "HOSTS=$hosts"
    echo "RANKS=$ranks"
    echo "CAP=$cap"
    echo "LATENCY_US=$latency"
    echo "TCP_CC=$tcp_cc"
    echo "LATENCY_HOW=$( ((latency == 0)) && echo none || ( ((netem)) && echo netem || echo nfqueue))"
    echo "OWNER=$owner"
    for i in "${!host_cap[@]}"; do echo "HOST_CAP_$i=${host_cap[$i]}"; done
  } >"$STATE_ROOT/$name/config"
  echo "$want" >"$STATE_ROOT/$name/settings"
  set +e
  trap - ERR
  echo "cluster.sh: cluster '$name' up: $hosts hosts x $ranks ranks, cap $cap$(for i in "${!host_cap[@]}"; do
    echo -n ", host $i ${host_cap[$i]}"
  done), latency ${latency} us, tcp $tcp_cc"
}

# wire_counts <name>: "I tx rx" per host, from the host's interface counters.
wire_counts() {
  local i
  for ((i = 0; i < HOSTS; i++)); do
    # `ip netns exec` mounts the namespace's own /sys.
    echo "$i" $(q ip netns exec "$(ns_host "$1" "$i")" cat /sys/class/net/eth0/statistics/tx_bytes \
      /sys/class/net/eth0/statistics/rx_bytes) || return 1
  done
}

cmd_wire() {
  local name=cavs arg
  for arg in "$@"; do
    case "$arg" in
      --name=*) name="${arg#*=}" ;;
      *) die 2 "wire: unknown argument '$arg'" ;;
    esac
  done
  need_root
  load "$name" || die 1 "no cluster '$name' is up"
  wire_counts "$name" | while read -r i tx rx; do echo "host $i tx_bytes $tx rx_bytes $rx"; done
}

cmd_run() {
  local name=cavs ranks="" timeout_s=0 wire_out="" output_dir="" arg
  while (($#)); do
    arg="$1"
    shift
    case "$arg" in
      --name=*) name="${arg#*=}" ;;
      --ranks=*) ranks="${arg#*=}" ;;
      --timeout=*) timeout_s="${arg#*=}" ;;
      --wire-out=*) wire_out="${arg#*=}" ;;
      --output-dir=*) output_dir="${arg#*=}" ;;
      --) break ;;
      *) die 2 "run: unknown argument '$arg' (the command goes after --)" ;;
    esac
  done
  (($#)) || die 2 "run: no command (scripts/cluster.sh run [options] -- CMD [ARG...])"
  need_root
  load "$name" || die 2 "no cluster '$name' is up (scripts/cluster.sh up --name=$name)"
  ranks="${ranks:-$RANKS}"
  [[ "$ranks" =~ ^[0-9]+$ ]] && ((ranks >= 1)) || die 2 "run: --ranks must be positive"
  [[ "$timeout_s" =~ ^[0-9]+$ ]] || die 2 "run: --timeout must be whole seconds"
  local hostlist="" i
  for ((i = 0; i < HOSTS; i++)); do hostlist+="${hostlist:+,}$(addr "$i"):$ranks"; done
  local -a before after
  mapfile -t before < <(wire_counts "$name")
  local -a limit=()
  ((timeout_s > 0)) && limit=(timeout --kill-after=10 "$timeout_s")
  # Open MPI: ranks of one host share memory (vader), hosts talk TCP on the emulated subnet
  # only; mpirun's own daemons reach each other there too.
  # Host 0 (mpirun's own) keeps Open MPI's default directories: mpirun would forward these
  # variables to every host, overriding the agent's.
  env -u OMPI_MCA_btl_vader_backing_directory -u OMPI_MCA_orte_tmpdir_base \
    "${limit[@]}" ip netns exec "$(ns_host "$name" 0)" mpirun --allow-run-as-root --oversubscribe \
    -np $((HOSTS * ranks)) --host "$hostlist" --mca plm_rsh_agent "$STATE_ROOT/$name/agent" \
    --mca plm_rsh_no_tree_spawn 1 --bind-to none --mca mpi_yield_when_idle 1 \
    --mca btl tcp,self,vader --mca btl_tcp_if_include "$SUBNET.0/24" \
    --mca oob_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_keepalive_time 10 \
    --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 \
    ${output_dir:+--output-filename "$output_dir"} "$@"
  local rc=$?
  # Whatever a failed job left in the hosts (a rank or daemon cut off from mpirun) goes now;
  # the host's delay (netdelay, by the pid `up` recorded) stays for the next job.
  local ns pid keep
  for ((i = 0; i < HOSTS; i++)); do
    ns=$(ns_host "$name" "$i")
    keep=$(cat "$STATE_ROOT/$name/netdelay.$i.pid" 2>/dev/null)
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      [[ "$pid" == "$keep" ]] || kill -9 "$pid" 2>/dev/null
    done
  done
  mapfile -t after < <(wire_counts "$name")
  local report=""
  for ((i = 0; i < HOSTS; i++)); do
    read -r _ tx0 rx0 <<<"${before[$i]}"
    read -r _ tx1 rx1 <<<"${after[$i]}"
    report+="host $i tx_bytes $((tx1 - tx0)) rx_bytes $((rx1 - rx0))"$'\n'
  done
  printf '%s' "$report" | sed 's/^/cluster.sh: wire: /' >&2
  [[ -n "$wire_out" ]] && printf '%s' "$report" >"$wire_out"
  return $rc
}

# check: what the links of a running cluster carry, by iperf3 (TCP, 3 s each): one way from
# host 0 to host 1, both ways at once, and (with 3 hosts or more) hosts 0 and 1 into host 2.
iperf_mbits() {  # iperf_mbits <from host> <to address> <port> [iperf3 client args...]: Mbit/s
  local from="$1" to="$2" port="$3"
  shift 3
  q ip netns exec "$(ns_host "$NAME" "$from")" iperf3 -c "$to" -p "$port" -t 3 -f m "$@" 2>&1 |
    awk '/receiver/ {for (i = 1; i < NF; i++) if ($(i + 1) == "Mbits/sec") v = v (v ? " " : "") $i}
         END {print v}'
}
cmd_check() {
  local name=cavs arg
  for arg in "$@"; do
    case "$arg" in
      --name=*) name="${arg#*=}" ;;
      *) die 2 "check: unknown argument '$arg'" ;;
    esac
  done
  need_root
  command -v iperf3 >/dev/null || die 2 "check needs iperf3 (Debian: iperf3)"
  load "$name" || die 2 "no cluster '$name' is up"
  ((HOSTS >= 2)) || die 2 "check needs 2 hosts or more"
  NAME="$name"
  local servers=() port
  for port in 5301 5302 5303; do
    q ip netns exec "$(ns_host "$name" $((HOSTS >= 3 && port != 5301 ? 2 : 1)))" \
      iperf3 -s -1 -D -p "$port" >/dev/null 2>&1
  done
  sleep 0.3
  echo "cluster '$name': $HOSTS hosts, cap $CAP, latency ${LATENCY_US} us ($LATENCY_HOW), tcp ${TCP_CC:-inherited}"
  echo "one way, host 0 -> 1: $(iperf_mbits 0 "$(addr 1)" 5301) Mbit/s"
  if ((HOSTS >= 3)); then
    local a b
    a=$(mktemp)
    iperf_mbits 0 "$(addr 2)" 5302 >"$a" &
    b=$(iperf_mbits 1 "$(addr 2)" 5303)
    wait
    echo "two senders into host 2: $(cat "$a") + $b Mbit/s"
    rm -f "$a"
  fi
  q ip netns exec "$(ns_host "$name" 1)" iperf3 -s -1 -D -p 5304 >/dev/null 2>&1
  sleep 0.3
  echo "both ways at once, hosts 0 <-> 1 (sent, received by 0): $(iperf_mbits 0 "$(addr 1)" 5304 --bidir) Mbit/s"
}

cmd_status() {
  local name=cavs arg
  for arg in "$@"; do
    case "$arg" in
      --name=*) name="${arg#*=}" ;;
      *) die 2 "status: unknown argument '$arg'" ;;
    esac
  done
  [[ -f "$STATE_ROOT/$name/config" ]] || { echo "cluster '$name' is not up"; return 1; }
  cat "$STATE_ROOT/$name/config"
}

cmd_down() {
  local name=cavs arg
  for arg in "$@"; do
    case "$arg" in
      --name=*) name="${arg#*=}" ;;
      *) die 2 "down: unknown argument '$arg'" ;;
    esac
  done
  need_root
  down_cluster "$name"
  echo "cluster.sh: cluster '$name' down"
}

sub="${1:-}"
shift || true
case "$sub" in
  up) cmd_up "$@" ;;
  run) cmd_run "$@" ;;
  wire) cmd_wire "$@" ;;
  status) cmd_status "$@" ;;
  check) cmd_check "$@" ;;
  down) cmd_down "$@" ;;
  gc) need_root && gc ;;
  *) die 2 "usage: scripts/cluster.sh up|run|wire|status|check|down|gc [options] (see the header)" ;;
esac

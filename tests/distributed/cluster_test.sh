#!/usr/bin/env bash
# The emulated cluster end to end (docs/cluster.md), as root:
#
#   cluster_test.sh <mode> <source dir> <cavs-train> <distributed_mpi_test> <checkpoint_compare>
#
# mode `train`: 2 hosts at 100mbit with 200 us of latency each way, TCP cubic (an unknown
# --tcp-cc is refused). The synchronizer's and the collectives' MPI tests across the hosts; a
# 2-epoch cavs-train across them and the same over loopback (one machine, shared memory), whose
# parameters must be the same bits (the same reduction algorithms add in the same order); host
# 0's bytes on the wire within 10% of rank 0's payload (CommStats) plus TCP/IP headers; `down`
# leaves no namespace, state, shared-memory directory or process behind.
#
# mode `faults`: 2 hosts training with --comm-timeout=5; after the first checkpoint, host 1's
# link is taken down (`ip link set eth0 down`) in one run and throttled to 8 kbit/s in another.
# Every rank must fail with the synchronizer's DeadlineExceeded naming the operation and its
# rank within the timeout, mpirun must exit, the last checkpoint must load and resume
# (over loopback), and no process may be left in the namespaces.
#
# Exits 77 (ctest's skip) with a reason where it cannot run: not root, or no namespaces.
set -uo pipefail
mode="$1" src="$2" train="$3" mpitest="$4" compare="$5"
cluster="$src/scripts/cluster.sh"
state_root="${CAVS_CLUSTER_STATE:-/run/cavs-cluster}"  # where cluster.sh keeps a cluster's state
name="t$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/cavs_cluster_test.XXXXXX")
cleanup() {
  "$cluster" down --name="$name" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
if ((EUID != 0)); then
  echo "SKIP: the emulated cluster needs root (network namespaces)"
  exit 77
fi
if ! err=$(ip netns add "cavs-probe-$$" 2>&1); then
  echo "SKIP: cannot create network namespaces here: $err"
  exit 77
fi
ip netns del "cavs-probe-$$"

# The bundled synthetic treebank, small model: 2 epochs take seconds.
train_flags=(--epochs=2 --max-train=200 --hidden=16 --embed=16 --batch=20 --seed=3
  --optimizer=adagrad --comm-timeout=30)

latest() { ls -1 "$1"/ckpt-*.cavs 2>/dev/null | sort -V | tail -1; }

mode_train() {
  "$cluster" up --name="$name" --hosts=2 --ranks=1 --cap=100mbit --latency-us=200 --owner=$$ ||
    fail "up"
  # The hosts' TCP congestion control is pinned (cubic), not the machine's, and a missing one is
  # refused before anything is made.
  local h cc
  for h in 0 1; do
    cc=$(ip netns exec "cavs-$name-h$h" sysctl -n net.ipv4.tcp_congestion_control)
    [[ "$cc" == cubic ]] || fail "host $h's TCP congestion control is '$cc', not cubic"
  done
  "$cluster" up --name="${name}x" --tcp-cc=no_such_cc 2>"$work/cc.err" &&
    fail "up accepted --tcp-cc=no_such_cc"
  grep -q "tcp-cc=no_such_cc: not available" "$work/cc.err" ||
    { cat "$work/cc.err"; fail "up's --tcp-cc error"; }
  ip netns list | grep -q "cavs-${name}x-" && fail "a refused up left namespaces behind"
  echo "== MPI tests across 2 hosts"
  "$cluster" run --name="$name" --timeout=300 -- "$mpitest" --gtest_brief=1 \
    --gtest_filter='MpiSyncTest.*:MpiCollectivesTest.*:MpiVerifyTest.*' || fail "MPI tests"

  echo "== cavs-train across the hosts and over loopback"
  local out="$work/cluster.out"
  "$cluster" run --name="$name" --timeout=300 --wire-out="$work/wire" -- "$train" \
    "${train_flags[@]}" --strategy=hybrid --checkpoint-dir="$work/cluster" >"$out" 2>&1 ||
    { cat "$out"; fail "cavs-train across the hosts"; }
  timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader \
    --mca btl_vader_single_copy_mechanism none "$train" "${train_flags[@]}" --strategy=hybrid \
    --checkpoint-dir="$work/loopback" >"$work/loopback.out" 2>&1 ||
    { cat "$work/loopback.out"; fail "cavs-train over loopback"; }
  "$compare" "$(latest "$work/cluster")" "$(latest "$work/loopback")" ||
    fail "the parameters trained across hosts differ from loopback's"

  # Where the latency is a user-space delay (no netem), it outlives the jobs: every job after
  # the first must still see it.
  local pid state
  for h in 0 1; do
    pid=$(cat "$state_root/$name/netdelay.$h.pid" 2>/dev/null) || continue
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
    [[ -n "$state" && "$state" != Z ]] || fail "host $h's delay (netdelay $pid) ended with a job"
  done

  # Host 0's transmitted bytes against rank 0's payload plus Ethernet, IP and TCP headers of
  # full segments (66 bytes for 1448 of payload) and MPI's own (setup, evaluation counts).
  local payload tx
  payload=$(grep -o '"comm_bytes_sent":[0-9]*' "$out" | cut -d: -f2)
  tx=$(awk '$1 == "host" && $2 == 0 {print $4}' "$work/wire")
  [[ -n "$payload" && -n "$tx" ]] || { cat "$out"; fail "no payload ($payload) or wire ($tx) count"; }
  awk -v p="$payload" -v t="$tx" 'BEGIN {
    want = p * (1 + 66 / 1448); r = t / want
    printf "wire: host 0 sent %d bytes; payload %d, with headers %d: ratio %.3f\n", t, p, want, r
    exit !(r >= 0.9 && r <= 1.1) }' || fail "wire bytes are not within 10% of the payload model"

  "$cluster" down --name="$name" || fail "down"
  if ip netns list | grep -q "cavs-$name-"; then fail "namespaces left: $(ip netns list)"; fi
  [[ ! -e "$state_root/$name" ]] || fail "state left in $state_root/$name"
  if compgen -G "/dev/shm/cavs-cluster-$name-*" >/dev/null; then fail "/dev/shm left behind"; fi
  echo "PASS"
}

# One fault: train, and after the first checkpoint run `$1` (a command on host 1's link).
one_fault() {
  local what="$1" fault="$2"
  "$cluster" up --name="$name" --hosts=2 --ranks=1 --cap=100mbit --owner=$$ || fail "up"
  local dir="$work/$what" out="$work/$what.out"
  mkdir -p "$dir"
  local start=$SECONDS
  "$cluster" run --name="$name" --timeout=120 --output-dir="$dir.ranks" -- "$train" \
    --epochs=200 --max-train=200 \
    --hidden=16 --embed=16 --batch=20 --comm-timeout=5 --checkpoint-dir="$dir" >"$out" 2>&1 &
  local job=$!
  local waited=0
  until [[ -n "$(latest "$dir")" ]]; do
    ((waited++ < 600)) || { kill "$job"; cat "$out"; fail "$what: no checkpoint within 60 s"; }
    sleep 0.1
  done
  local ckpt
  ckpt=$(latest "$dir")
  local t_fault=$SECONDS
  eval "$fault" || fail "$what: could not apply the fault"
  wait "$job"
  local rc=$? took=$((SECONDS - t_fault))
  echo "$what: the job exited $rc, $took s after the fault ($((SECONDS - start)) s in all)"
  ((rc != 0)) || { cat "$out"; fail "$what: the job succeeded"; }
  ((took <= 60)) || fail "$what: took $took s to end (timeout 5 s)"
  # Each rank's own output, written on its host (mpirun cannot forward across a dead link):
  # the synchronizer's deadline, naming the rank and what it waited for.
  local r
  for r in 0 1; do
    local err="$dir.ranks/1/rank.$r/stderr"
    grep -h "rank $r: error" "$err" 2>/dev/null | head -1
    # The step's synchronizer, or the evaluation's collective where the fault hit during one.
    grep -q "rank $r: error: .*on rank $r of 2 made no progress for 5s" "$err" 2>/dev/null ||
      { cat "$out" "$err"; fail "$what: rank $r did not report the deadline"; }
  done
  for ns in "cavs-$name-h0" "cavs-$name-h1"; do
    [[ -z "$(ip netns pids "$ns" 2>/dev/null)" ]] || fail "$what: processes left in $ns"
  done
  # The last checkpoint before the fault loads and training resumes from it (one process).
  "$compare" "$ckpt" "$ckpt" >/dev/null || fail "$what: $ckpt does not load"
  local resumed="$work/$what.resume"
  mkdir -p "$resumed"
  cp "$ckpt" "$resumed/"
  timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader \
    --mca btl_vader_single_copy_mechanism none "$train" --epochs=$(($(basename "$ckpt" .cavs | cut -d- -f2) + 1)) \
    --max-train=200 --hidden=16 --embed=16 --batch=20 --checkpoint-dir="$resumed" --resume \
    >"$resumed.out" 2>&1 || { cat "$resumed.out"; fail "$what: resume from $ckpt"; }
  "$cluster" down --name="$name" >/dev/null || fail "down"
}

mode_faults() {
  one_fault "link-down" 'ip -n "cavs-$name-h1" link set eth0 down'
  one_fault "throttled" 'ip netns exec "cavs-$name-h1" tc qdisc replace dev eth0 root tbf \
    rate 8kbit burst 1600 latency 10s && ip netns exec "cavs-$name-br" tc qdisc replace \
    dev h1 root tbf rate 8kbit burst 1600 latency 10s'
  echo "PASS"
}

case "$mode" in
  train) mode_train ;;
  faults) mode_faults ;;
  *) fail "unknown mode '$mode'" ;;
esac

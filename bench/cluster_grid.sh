#!/usr/bin/env bash
# Every strategy builder on the emulated cluster (docs/cluster.md), over a grid of link settings
# and hosts x ranks, for the two models of bench/distributed_benchmark.cc; and the collectives
# against their bound. As root, from the repository root, after a build of build/default:
#
#   bench/cluster_grid.sh [OUT_DIR] [train|collectives|all] [CONFIG_PATTERN]
#
# Writes one log per configuration under OUT_DIR (default bench-out/cluster-<date>) and prints a
# summary. A configuration: CAP (tc rate), UNEVEN (host 0's cap; empty for even), LAT (one-way
# us), HOSTS x RANKS; CONFIG_PATTERN (an extended regular expression, default all) keeps the
# configurations (training and collectives) whose line below it matches, e.g. ' 2 2$' for the
# 2x2 ones. Each training run prints its own single-process baseline, so each row's efficiency
# is measured in the same run. Takes about an hour on the 2-core development machine.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-bench-out/cluster-$(date +%Y%m%d-%H%M)}"
what="${2:-all}"
pattern="${3:-.}"
mkdir -p "$out"
bin=build/default/bench
cluster=scripts/cluster.sh
name=grid
trap '"$cluster" down --name=$name >/dev/null 2>&1' EXIT

# cap uneven latency hosts ranks
configs=(
  "1gbit - 0 2 2"
  "1gbit - 0 4 1"
  "250mbit - 0 2 2"
  "250mbit - 0 4 1"
  "1gbit 250mbit 0 2 2"
  "1gbit 250mbit 0 4 1"
  "1gbit - 500 2 2"
  "1gbit - 500 4 1"
  "1gbit - 0 2 1"
  "1gbit - 0 4 2"
)

up() {  # up <cap> <uneven> <latency> <hosts> <ranks>
  local extra=()
  [[ "$2" != - ]] && extra+=(--host-cap=0:"$2")
  "$cluster" up --name=$name --hosts="$4" --ranks="$5" --cap="$1" --latency-us="$3" \
    "${extra[@]}" --owner=$$ >/dev/null
}

if [[ "$what" == all || "$what" == collectives ]]; then
  for c in "1gbit - 0 2 2" "250mbit - 0 2 2" "1gbit - 0 4 1" "1gbit - 0 2 1" "1gbit - 0 4 2" \
    "250mbit - 0 2 1" "250mbit - 0 4 1" "250mbit - 0 4 2"; do
    [[ "$c" =~ $pattern ]] || continue
    read -r cap uneven lat hosts ranks <<<"$c"
    up "$cap" "$uneven" "$lat" "$hosts" "$ranks"
    mbit=$(echo "$cap" | sed 's/gbit/000/; s/mbit//')
    log="$out/collectives-$cap-${hosts}x$ranks.log"
    echo "== collectives $c" | tee "$log"
    "$cluster" run --name=$name --timeout=900 -- "$bin/collectives_benchmark" \
      --link-mbit="$mbit" --latency-us="$lat" --sizes=4K,256K,4M,32M,64M --reps=3 >>"$log" 2>&1
    for algo in 1 2 4; do  # the allreduce algorithms besides the default (3, Rabenseifner)
      echo "== iallreduce algorithm $algo" >>"$log"
      OMPI_MCA_coll_libnbc_iallreduce_algorithm=$algo "$cluster" run --name=$name --timeout=600 \
        -- "$bin/collectives_benchmark" --link-mbit="$mbit" --latency-us="$lat" \
        --sizes=4K,256K,4M,32M,64M --reps=3 --ops=allreduce >>"$log" 2>&1
    done
    grep -E '^(allreduce|bucket|hier|reduce|allgatherv|exchange|oneway|==)' "$log" | tail -40
  done
fi

if [[ "$what" == all || "$what" == train ]]; then
  for c in "${configs[@]}"; do
    [[ "$c" =~ $pattern ]] || continue
    read -r cap uneven lat hosts ranks <<<"$c"
    up "$cap" "$uneven" "$lat" "$hosts" "$ranks"
    for model in tree-lstm lstm-lm; do
      steps=10
      [[ $model == lstm-lm ]] && steps=6
      log="$out/train-$model-$cap-${uneven}-lat$lat-${hosts}x$ranks.log"
      echo "== $model: cap $cap, uneven $uneven, latency $lat us, $hosts x $ranks" | tee "$log"
      uptime >>"$log"
      "$cluster" run --name=$name --timeout=1800 -- "$bin/distributed_benchmark" \
        --model=$model --steps=$steps --warmup=2 >>"$log" 2>&1
      grep -E '^(plain|allreduce|ps|partitioned|hybrid|hier|cluster.sh: wire)' "$log"
    done
  done
fi

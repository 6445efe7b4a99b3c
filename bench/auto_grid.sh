#!/usr/bin/env bash
# cavs-train --strategy=auto on the emulated cluster (docs/cluster.md) over a grid of link
# settings, hosts x ranks and models: each run probes, profiles, predicts every builder and the
# searched strategies, tries them all for a few steps and prints predicted beside measured
# (docs/distributed.md, "--strategy=auto"). As root, from the repository root, after a build of
# build/default:
#
#   bench/auto_grid.sh [OUT_DIR] [SST train file] [CONFIG_PATTERN] [MODEL_PATTERN] [STEPS] [ROUNDS]
#                      [EPOCHS] [TRIAL_SECONDS] [EXTRA_FLAGS]
#
# CONFIG_PATTERN (an extended regular expression, default all) keeps the configurations whose
# line below matches, e.g. '^250mbit - 0 ' for the even 250 Mbit/s ones without latency;
# MODEL_PATTERN (default all) the models whose name matches, e.g. '^tree-lstm$'. STEPS: the
# counted steps of each trial (cavs-train --auto-steps, default 3; more to measure each
# strategy with less noise). ROUNDS: cavs-train --auto-rounds (default 1), the visits the counted
# steps are split into. EPOCHS: cavs-train --epochs (default 1); trials run on into later epochs,
# so more epochs let more counted steps a strategy finish (a run that ends first says so).
# TRIAL_SECONDS: cavs-train --auto-trial-seconds (default 3: trials of short steps stretched to
# about 3 s a strategy, so more steps than STEPS and more rounds than ROUNDS where the
# predicted step is under a second; 0: STEPS and ROUNDS as given). EXTRA_FLAGS: more cavs-train
# flags for every run, one word each (e.g. '--auto-early=auto').
# One log per configuration and model under OUT_DIR (default bench-out/auto-<date>), with the
# probed cluster and the profile beside it, and each run's table of predicted beside measured
# step times printed as it ends.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-bench-out/auto-$(date +%Y%m%d-%H%M)}"
sst="${2:-../shared/data/sst/train.txt}"
pattern="${3:-.}"
model_pattern="${4:-.}"
steps="${5:-3}"
rounds="${6:-1}"
epochs="${7:-1}"
trial_seconds="${8:-3}"
read -r -a extra_flags <<<"${9:-}"
mkdir -p "$out"
train=build/default/examples/trainer/cavs-train
# The cost model the grid's searches run, for bench/auto_grid_repredict.sh's --then-sim.
cp build/default/examples/sim/cavs-sim "$out/cavs-sim" || exit 1
cluster=scripts/cluster.sh
name=autogrid
trap '"$cluster" down --name=$name >/dev/null 2>&1' EXIT

# cap, host 0's cap (- for even), one-way latency us, hosts, ranks per host
configs=(
  "250mbit - 0 2 2"
  "250mbit - 0 4 1"
  "100mbit - 0 2 2"
  "1gbit - 0 4 1"
  "1gbit 100mbit 0 4 1"
  "250mbit 50mbit 0 2 2"
  "250mbit - 2000 4 1"
  "100mbit - 0 2 1"
)
# model name and its cavs-train flags
source bench/auto_grid_models.sh
mapfile -t models < <(auto_grid_models "$out" "$sst")

for c in "${configs[@]}"; do
  [[ "$c" =~ $pattern ]] || continue
  read -r cap uneven lat hosts ranks <<<"$c"
  extra=()
  [[ "$uneven" != - ]] && extra+=(--host-cap=0:"$uneven")
  "$cluster" up --name=$name --hosts="$hosts" --ranks="$ranks" --cap="$cap" --latency-us="$lat" \
    "${extra[@]}" --owner=$$ >/dev/null || exit 1
  for m in "${models[@]}"; do
    model="${m%%|*}"
    [[ "$model" =~ $model_pattern ]] || continue
    read -r -a flags <<<"${m#*|}"
    tag="$model-$cap-host0_$uneven-lat$lat-${hosts}x$ranks"
    log="$out/$tag.log"
    {
      echo "== $tag"
      uptime
    } >"$log"
    "$cluster" run --name=$name --timeout=1500 -- "$train" "${flags[@]}" --epochs="$epochs" \
      --strategy=auto --auto-steps="$steps" --auto-rounds="$rounds" --auto-trial-seconds="$trial_seconds" --auto-candidates=3 --quiet \
      --profile-out="$out/$tag.profile" --cluster-out="$out/$tag.cluster" "${extra_flags[@]}" >>"$log" 2>&1
    echo "== $tag: exit $?"
    sed -n '/^auto strategy on/,/^auto strategy chosen/p' "$log" | grep -v '^auto strategy chosen'
  done
done

#!/usr/bin/env bash
# cavs-train --strategy=auto on the emulated cluster (docs/cluster.md) over a grid of link
# settings, hosts x ranks and models: each run probes, profiles, predicts every builder and the
# searched strategies, tries them all for a few steps and prints predicted beside measured
# (docs/distributed.md, "--strategy=auto"). As root, from the repository root, after a build of
# build/default:
#
#   bench/auto_grid.sh [OUT_DIR] [SST train file] [CONFIG_PATTERN] [MODEL_PATTERN] [STEPS]
#
# CONFIG_PATTERN (an extended regular expression, default all) keeps the configurations whose
# line below matches, e.g. '^250mbit - 0 ' for the even 250 Mbit/s ones without latency;
# MODEL_PATTERN (default all) the models whose name matches, e.g. '^tree-lstm$'. STEPS: the
# counted steps of each trial (cavs-train --auto-steps, default 3; more to measure each
# strategy with less noise).
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
mkdir -p "$out"
train=build/default/examples/trainer/cavs-train
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
# The language model's data: 1,700 generated sentences of 10 to 34 words over 60,000 words drawn
# Zipf(1), of which about 10,700 occur in the 98% trained on: the vocabulary, and so the output
# layer, is 10,700 x 512 (a PTB-like vocabulary is too small for the 10,000-wide output layer
# asked for).
lm_text="$out/zipf60k.txt"
if [[ ! -f "$lm_text" ]]; then
  awk 'BEGIN {
    srand(7); v = 60000
    for (k = 1; k <= v; k++) { t += 1 / k; cdf[k] = t }
    for (s = 0; s < 1700; s++) {
      n = 10 + int(rand() * 25); line = ""
      for (i = 0; i < n; i++) {
        u = rand() * t; lo = 1; hi = v
        while (lo < hi) { m = int((lo + hi) / 2); if (cdf[m] < u) lo = m + 1; else hi = m }
        line = line (i ? " " : "") "w" lo
      }
      print line
    } }' >"$lm_text"
fi
lm="--model=lstm-lm --train=$lm_text --dev-fraction=0.02 --hidden=512 --embed=512 --batch=16"
# model name and its cavs-train flags
models=(
  "tree-lstm|--model=tree-lstm --train=$sst --dev-fraction=0.02 --max-train=4000 --batch=32"
  "lstm-lm|$lm"
  "lstm-lm-fp16|$lm --allow-compression"
)

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
    "$cluster" run --name=$name --timeout=1500 -- "$train" "${flags[@]}" --epochs=1 \
      --strategy=auto --auto-steps="$steps" --auto-candidates=3 --quiet \
      --profile-out="$out/$tag.profile" --cluster-out="$out/$tag.cluster" >>"$log" 2>&1
    echo "== $tag: exit $?"
    sed -n '/^auto strategy on/,/^auto strategy chosen/p' "$log" | grep -v '^auto strategy chosen'
  done
done

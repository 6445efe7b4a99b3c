#!/usr/bin/env bash
# Measures again, with less noise than a trial's few steps, the two strategies of a
# bench/auto_grid.sh cell that the ranking target compares: the cost model's first (the
# lowest-predicted of the strategies the cell measured) and the best measured. Each is trained
# for whole epochs under its strategy file (cavs-train --strategy-file; the same seed, so both
# see the same batches in the same order), the two alternating, ROUNDS times each, on the cell's
# emulated cluster; the figure is the epoch's training throughput. As root, from the repository
# root, after a build of build/default:
#
#   bench/auto_grid_recheck.sh [--rounds=N] [--all] OUT_DIR [SST train file] [CELL...]
#
# CELL: a log's name without .log (e.g. tree-lstm-100mbit-host0_--lat0-2x1); without any, the
# cells whose first measured more than 5% over their best (--all: every cell). The strategies
# are remade from the cell's profile and probed cluster by the cavs-sim built now (the searched
# ones, auto#N, are its N-th best: right while the cost model is the one the grid ran, checked by
# comparing the predictions) or built by name (a builder). Prints, per cell: each run's
# samples/s, the mean of each, and best/first measured again beside the trials' ratio.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=2
all=0
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --rounds=*) rounds="${1#--rounds=}" ;;
    --all) all=1 ;;
    *) echo "auto_grid_recheck.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[[ $# -ge 1 ]] || { echo "usage: auto_grid_recheck.sh [--rounds=N] [--all] OUT_DIR [SST] [CELL...]" >&2; exit 2; }
out="$1"
sst="${2:-../shared/data/sst/train.txt}"
shift $(($# >= 2 ? 2 : 1))
train=build/default/examples/trainer/cavs-train
sim=build/default/examples/sim/cavs-sim
cluster=scripts/cluster.sh
name=autorecheck
[[ -x "$train" && -x "$sim" ]] || { echo "auto_grid_recheck.sh: build $train and $sim first" >&2; exit 1; }
tmp="$(mktemp -d)"
trap '"$cluster" down --name=$name >/dev/null 2>&1; rm -rf "$tmp"' EXIT
source bench/auto_grid_models.sh
declare -A model_flags
while IFS='|' read -r m f; do model_flags[$m]="$f"; done < <(auto_grid_models "$out" "$sst")

# Per log: "first_name first_predicted first_measured best_name best_measured" (names without
# their "(= builder)" tails; a searched one equal to a builder keeps its auto#N name).
pick() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" | awk -f bench/auto_grid_table.awk | awk '
    {
      name = $1; pred = $2 + 0; meas = $3 + 0
      if (fn == "" || pred < fp) { fn = name; fp = pred; fm = meas }
      if (bn == "" || meas < bm) { bn = name; bm = meas }
    }
    END { if (fn != "") print fn, fp, fm, bn, bm }'
}

cells=("$@")
if [[ ${#cells[@]} -eq 0 ]]; then
  for log in "$out"/*.log; do
    read -r _ _ fm _ bm < <(pick "$log") || continue
    if [[ $all == 1 ]] || awk -v f="$fm" -v b="$bm" 'BEGIN { exit !(f > 1.05 * b) }'; then
      cells+=("$(basename "${log%.log}")")
    fi
  done
fi

up_now=""
for cell in "${cells[@]}"; do
  base="$out/$cell"
  [[ -f "$base.log" && -f "$base.profile" && -f "$base.cluster" ]] || {
    echo "auto_grid_recheck.sh: $base.{log,profile,cluster} missing" >&2; exit 1; }
  [[ "$cell" =~ ^(.+)-([0-9]+[kmg]bit)-host0_(.+)-lat([0-9]+)-([0-9]+)x([0-9]+)$ ]] || {
    echo "auto_grid_recheck.sh: $cell: not a bench/auto_grid.sh cell name" >&2; exit 1; }
  model="${BASH_REMATCH[1]}" cap="${BASH_REMATCH[2]}" uneven="${BASH_REMATCH[3]}"
  lat="${BASH_REMATCH[4]}" hosts="${BASH_REMATCH[5]}" ranks="${BASH_REMATCH[6]}"
  [[ -n "${model_flags[$model]:-}" ]] || { echo "auto_grid_recheck.sh: $cell: no model $model" >&2; exit 1; }
  read -r -a flags <<<"${model_flags[$model]}"
  # A strategy file states its compression; the flag is --strategy=auto's.
  for i in "${!flags[@]}"; do [[ "${flags[$i]}" == --allow-compression ]] && unset 'flags[i]'; done
  read -r fn fp fm bn bm < <(pick "$base.log")
  # The searched strategies as the cavs-sim built now ranks them.
  sim_flags=()
  [[ "$model" == *fp16* ]] && sim_flags+=(--allow-compression)
  "$sim" --profile="$base.profile" --cluster="$base.cluster" --scaling=none --units=false \
    --top=20 --strategy-out="$tmp/auto" "${sim_flags[@]}" >/dev/null || exit 1
  strategy_flag() {  # NAME: cavs-train's flag for it
    if [[ "$1" == auto#* ]]; then
      local f="$tmp/auto.${1#auto#}"
      [[ -f "$f" ]] || { echo "auto_grid_recheck.sh: $cell: cavs-sim made no $1" >&2; return 1; }
      cp "$f" "$tmp/$cell-$1.strategy"
      echo "--strategy-file=$tmp/$cell-$1.strategy"
    else
      echo "--strategy=$1"
    fi
  }
  first_flag="$(strategy_flag "$fn")" && best_flag="$(strategy_flag "$bn")" || exit 1
  # The remade strategy must be the one measured: the same prediction.
  for pair in "$fn $fp $first_flag"; do
    read -r n p f <<<"$pair"
    if [[ "$f" == --strategy-file=* ]]; then
      now="$("$sim" --profile="$base.profile" --cluster="$base.cluster" --scaling=none --units=false \
        --top=1 "${sim_flags[@]}" --strategy-file="${f#--strategy-file=}" | sed 's/\x1b\[[0-9;]*m//g' |
        awk '/^predicted step/ { t = 1; next } t && $1 == "file" { print $2 }')"
      echo "$cell: $n predicted $p ms in the log, ${now:-?} now"
    fi
  done
  want="$cap $uneven $lat $hosts $ranks"
  if [[ "$up_now" != "$want" ]]; then
    extra=()
    [[ "$uneven" != - && "$uneven" != -- ]] && extra+=(--host-cap=0:"$uneven")
    "$cluster" up --name=$name --hosts="$hosts" --ranks="$ranks" --cap="$cap" --latency-us="$lat" \
      "${extra[@]}" --owner=$$ >/dev/null || exit 1
    up_now="$want"
  fi
  declare -A rates=()
  for ((r = 1; r <= rounds; ++r)); do
    for which in first best; do
      flag="$first_flag"
      [[ $which == best ]] && flag="$best_flag"
      "$cluster" run --name=$name --timeout=1500 -- "$train" "${flags[@]}" --epochs=1 --quiet \
        "$flag" >"$tmp/run.log" 2>&1 || { echo "$cell: $which run failed:" >&2; grep -v "^cluster.sh: wire" "$tmp/run.log" | tail -20 >&2; exit 1; }
      rate="$(sed -n 's/^SUMMARY .*"trees_per_sec":\([0-9.e+-]*\).*/\1/p' "$tmp/run.log")"
      rates[$which]+=" $rate"
    done
  done
  awk -v cell="$cell" -v fn="$fn" -v bn="$bn" -v fm="$fm" -v bm="$bm" -v f="${rates[first]}" \
    -v b="${rates[best]}" 'BEGIN {
      nf = split(f, x, " "); nb = split(b, y, " ")
      for (i = 1; i <= nf; ++i) sf += x[i]; for (i = 1; i <= nb; ++i) sb += y[i]
      printf "%s: first %s samples/s%s (mean %.1f), best %s%s (mean %.1f): best/first %.3f " \
        "in epochs, %.3f in the trials (%.1f / %.1f ms)\n", cell, fn, f, sf / nf, bn, b, sb / nb,
        (sb / nb) / (sf / nf), fm / bm, fm, bm }'
done

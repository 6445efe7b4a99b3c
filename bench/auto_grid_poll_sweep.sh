#!/usr/bin/env bash
# Sweeps the cost model's poll_cost_per_mb (docs/distributed.md, "The transport's bytes in the
# polls") over bench/auto_grid.sh's logs: every strategy a log measured is predicted again from
# the log's own profile and probed cluster at each cost, by the cavs-sim built now, and its
# compute, as a ratio to the `allreduce` builder's, set against the measured ratio (the log's
# "compute and its hooks" lines; the ratio takes out what moves a whole run's compute). From
# the repository root, after a build of build/default:
#
#   bench/auto_grid_poll_sweep.sh [COSTS] OUT_DIR...
#
# COSTS: ms a MB, comma-separated (default 0,2,4,6,8,12,16,25,40). The searched strategies a log
# measured (auto#N) are remade by the grid's own cavs-sim (OUT_DIR/cavs-sim) with
# --allow-compression where the cell's name has 'fp16' (bench/auto_grid_models.sh). Prints, per
# cell, the root-mean-square log error of the compute ratios at 0 and at the cost that makes it
# least; last, per cost over every cell: the step's median |error| and largest, and the
# compute's median error.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
costs="0,2,4,6,8,12,16,25,40"
if [[ $# -ge 1 && "$1" =~ ^[0-9.,]+$ ]]; then
  costs="$1"
  shift
fi
[[ $# -ge 1 ]] || { echo "usage: auto_grid_poll_sweep.sh [COSTS] OUT_DIR..." >&2; exit 2; }
sim=build/default/examples/sim/cavs-sim
[[ -x "$sim" ]] || { echo "auto_grid_poll_sweep.sh: build $sim first" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
IFS=, read -r -a cost_list <<<"$costs"

# cavs-sim's table rows: "name step compute" (the strategy file's as "file").
sim_rows() {
  "$@" | awk 'NF > 6 && $2 ~ /^[0-9.]+$/ && $3 ~ /^[0-9.]+$/ { print $1, $2, $3 }'
}

# One line per strategy, cost and cell: "cell cost name predicted_step predicted_compute
# measured_step measured_compute".
for dir in "$@"; do
  then_sim="$dir/cavs-sim"
  [[ -x "$then_sim" ]] || then_sim="$sim"
  for log in "$dir"/*.log; do
    base="${log%.log}"
    cell="$(basename "$base")"
    [[ -f "$base.profile" && -f "$base.cluster" ]] || continue
    flags=(--profile="$base.profile" --cluster="$base.cluster" --scaling=none --units=false)
    [[ "$cell" == *fp16* ]] && flags+=(--allow-compression)
    "$then_sim" "${flags[@]}" --top=3 --strategy-out="$tmp/s" >/dev/null 2>&1 || continue
    # The log's measured step (table) and compute (compute lines), by first name.
    sed 's/\x1b\[[0-9;]*m//g' "$log" | awk -f bench/auto_grid_table.awk | awk '{ print $1, $3 }' \
      >"$tmp/steps"
    sed -n 's/^    \([^ ]*\) .* compute *[0-9.]* \/ *\([0-9.]*\) *hooks.*/\1 \2/p' "$log" >"$tmp/computes"
    for c in "${cost_list[@]}"; do
      mb="$(awk -v c="$c" 'BEGIN { printf "%.6g", c / 1000 }')"
      {
        sim_rows "$sim" "${flags[@]}" --top=1 --poll-cost-per-mb="$mb"
        for n in 1 2 3; do
          [[ -f "$tmp/s.$n" ]] || continue
          sim_rows "$sim" "${flags[@]}" --top=1 --poll-cost-per-mb="$mb" --strategy-file="$tmp/s.$n" |
            awk -v n="$n" '$1 == "file" { print "auto#" n, $2, $3 }'
        done
      } | awk -v cell="$cell" -v c="$c" -v steps="$tmp/steps" -v computes="$tmp/computes" '
        BEGIN {
          while ((getline l < steps) > 0) { split(l, f, " "); ms[f[1]] = f[2] }
          while ((getline l < computes) > 0) { split(l, f, " "); mc[f[1]] = f[2] }
        }
        ($1 in ms) && ($1 in mc) { print cell, c, $1, $2, $3, ms[$1], mc[$1] }'
    done
    rm -f "$tmp"/s.*
  done
done >"$tmp/rows"

awk '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  {
    key = $1 SUBSEP $2
    if (!(key in n)) { n[key] = 0; order[++cells[$1]] = $2; if (!($1 in seen)) { seen[$1] = 1; cell_list[++nc] = $1 } }
    n[key]++; name[key, n[key]] = $3; pc[key, n[key]] = $5; mcomp[key, n[key]] = $7
    if ($3 == "allreduce") { p0[key] = $5; m0[key] = $7 }
    e = ($4 - $6) / $6; step_err[$2, ++ns[$2]] = e < 0 ? -e : e; if (e < 0) e = -e
    if (e > step_max[$2]) step_max[$2] = e
    if ($7 > 0) comp_err[$2, ++nce[$2]] = ($5 - $7) / $7
    if (!($2 in cost_seen)) { cost_seen[$2] = 1; cost_list[++ncost] = $2 }
  }
  END {
    for (i = 1; i <= nc; i++) {
      cell = cell_list[i]; best = ""; at0 = ""
      for (j = 1; j <= cells[cell]; j++) {
        key = cell SUBSEP order[j]
        if (!(key in p0) || m0[key] <= 0) continue
        s = 0; k = 0
        for (r = 1; r <= n[key]; r++) {
          if (name[key, r] == "allreduce" || mcomp[key, r] <= 0) continue
          l = log((pc[key, r] / p0[key]) / (mcomp[key, r] / m0[key])); s += l * l; k++
        }
        if (k == 0) continue
        rms = sqrt(s / k)
        if (order[j] + 0 == 0) at0 = rms
        if (best == "" || rms < best_rms) { best = order[j]; best_rms = rms }
      }
      if (best != "") printf "%-48s compute ratios rms log error %.3f at 0, least %.3f at %s ms/MB\n", cell, at0, best_rms, best
    }
    for (i = 1; i <= ncost; i++) {
      c = cost_list[i]
      for (k = 1; k <= ns[c]; k++) a[k] = step_err[c, k]
      ms = median(a, ns[c])
      for (k = 1; k <= nce[c]; k++) b[k] = comp_err[c, k]
      mc = median(b, nce[c])
      printf "%s ms/MB: step median |error| %.1f%%, largest %.1f%%; compute median error %+.1f%% (%d strategies)\n", c, 100 * ms, 100 * step_max[c], 100 * mc, ns[c]
    }
  }' "$tmp/rows"

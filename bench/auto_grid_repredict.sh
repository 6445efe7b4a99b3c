#!/usr/bin/env bash
# Predicts again, with the cost model of the cavs-sim built now, every strategy that
# bench/auto_grid.sh's logs measured, from each log's own profile and probed cluster, and prints
# the prediction each log recorded ("then"), the new one ("now") and the measured step time:
# how a change to the cost model does against measurements already taken. From the repository
# root, after a build of build/default:
#
#   bench/auto_grid_repredict.sh [-q] [--then-sim=BIN] [--now-sim=BIN] OUT_DIR... [> table]
#
# -q prints the summary only. The searched strategies (auto#N) a log measured are not in it:
# they are the search's ranking by the model the grid ran, remade here by --then-sim (a cavs-sim
# binary of that model; default OUT_DIR/cavs-sim, the copy bench/auto_grid.sh keeps of the one
# the grid ran with, else the one built now, right while the search's ranking is unchanged),
# and each is predicted by the cavs-sim built now (or --now-sim: e.g. an older model's binary,
# to see how it does on a grid measured since).
# Per strategy: cell, name, then, now, measured (ms), and both errors. Last, per kind of
# strategy (searched, allreduce builders, PS builders): the median error and median absolute
# error then and now, and per cell how the model's first (then and now) measured against the
# cell's best (within 5%: counted). Now's first breaks ties of the printed step (to 10 us) as
# the search does (fewer units, then fewer PS shards on MPI's trees); then's is the log's order.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
sim=build/default/examples/sim/cavs-sim
then_sim=""
quiet=0
while [[ "${1:-}" == -* ]]; do
  case "$1" in
    -q) quiet=1 ;;
    --then-sim=*) then_sim="${1#--then-sim=}" ;;
    --now-sim=*) sim="${1#--now-sim=}" ;;
    *) echo "auto_grid_repredict.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$sim" ]] || { echo "auto_grid_repredict.sh: build $sim first" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for dir in "$@"; do
  dir_sim="${then_sim:-$dir/cavs-sim}"
  [[ -x "$dir_sim" ]] || dir_sim=build/default/examples/sim/cavs-sim
  for log in "$dir"/*.log; do
    base="${log%.log}"
    [[ -f "$base.profile" && -f "$base.cluster" ]] || continue
    flags=()
    [[ "$base" == *fp16* ]] && flags+=(--allow-compression)
    cell="$(basename "$dir")/$(basename "$base")"
    # The log's table (name, predicted, measured), then cavs-sim's predictions, joined by name.
    {
      sed 's/\x1b\[[0-9;]*m//g' "$log" | awk -f bench/auto_grid_table.awk |
        awk -v cell="$cell" '{ print "M", cell, $1, $2, $3 }'
      # The searched strategies as the grid's model ranked them (--then-sim), each predicted
      # by this one.
      "$dir_sim" --profile="$base.profile" --cluster="$base.cluster" --scaling=none \
        --units=false --top=20 --strategy-out="$tmp/auto" "${flags[@]}" >/dev/null
      "$sim" --profile="$base.profile" --cluster="$base.cluster" --scaling=none --units=false \
        --top=1 "${flags[@]}" | sed 's/\x1b\[[0-9;]*m//g' | awk -v cell="$cell" '
        /^predicted step/ { t = 1; next }
        # name, step ms, units, PS shards on the trees (a PS builder: every unit one)
        t && NF >= 8 && $2 ~ /^[0-9.]+$/ && $1 != "auto" { print "P", cell, $1, $2, $6, ($1 ~ /ps/ ? $6 : 0) }
        t && NF == 0 { t = 0 }'
      for ((i = 1; i <= 20; ++i)); do
        # auto#N in FILE.N; a cavs-sim before that wrote the seeded best to FILE, #2 to FILE.2...
        file="$tmp/auto.$i"
        [[ -f "$tmp/auto.1" ]] || { file="$tmp/auto"; ((i > 1)) && file+=".$i"; }
        [[ -f "$file" ]] || break
        # Its PS shards on MPI's trees, for the search's tie-break.
        trees=$(awk '$1 == "param" && $3 == "ps" && !/route=direct/ {
          match($0, /placement=[^ ]*/); t += split(substr($0, RSTART + 10, RLENGTH - 10), a, ",")
        } END { print t + 0 }' "$file")
        "$sim" --profile="$base.profile" --cluster="$base.cluster" --scaling=none --units=false \
          --top=1 --strategy-file="$file" "${flags[@]}" | sed 's/\x1b\[[0-9;]*m//g' |
          awk -v cell="$cell" -v i="$i" -v trees="$trees" \
            '/^file / { print "P", cell, "auto#" i, $2, $6, trees }'
      done
      rm -f "$tmp"/auto*
    }
  done
done | awk -v quiet="$quiet" '
  function abs(x) { return x < 0 ? -x : x }
  function median(a, n,    i, j, t) {
    for (i = 2; i <= n; ++i) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; --j) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  $1 == "M" { key = $2 SUBSEP $3; then_ms[key] = $4; meas[key] = $5; order[++n] = key; next }
  $1 == "P" { now_ms[$2 SUBSEP $3] = $4; now_units[$2 SUBSEP $3] = $5; now_trees[$2 SUBSEP $3] = $6 }
  END {
    for (k = 1; k <= n; ++k) {
      key = order[k]
      if (!(key in now_ms)) continue
      split(key, c, SUBSEP)
      kind = c[2] ~ /^auto#/ ? "searched" : c[2] ~ /ps/ ? "PS builders" : "allreduce builders"
      e0 = (then_ms[key] - meas[key]) / meas[key]; e1 = (now_ms[key] - meas[key]) / meas[key]
      if (!quiet) printf "%-46s %-16s then %9.1f now %9.1f measured %9.1f  %+6.1f%% %+6.1f%%\n", c[1], c[2], then_ms[key], now_ms[key], meas[key], 100 * e0, 100 * e1
      ++m[kind]; t0[kind, m[kind]] = e0; t1[kind, m[kind]] = e1
      ++m["all"]; t0["all", m["all"]] = e0; t1["all", m["all"]] = e1
      if (!(c[1] in best) || meas[key] < best[c[1]]) best[c[1]] = meas[key]
      # The search ranks by step, then fewer units, then fewer PS shards on the trees.
      if (!(c[1] in first) || now_ms[key] < first_ms[c[1]] ||
          (now_ms[key] == first_ms[c[1]] && (now_units[key] < first_units[c[1]] ||
           (now_units[key] == first_units[c[1]] && now_trees[key] < first_trees[c[1]])))) {
        first[c[1]] = c[2]; first_ms[c[1]] = now_ms[key]; first_meas[c[1]] = meas[key]
        first_units[c[1]] = now_units[key]; first_trees[c[1]] = now_trees[key]
      }
      if (!(c[1] in first_then) || then_ms[key] < then_first_ms[c[1]]) { first_then[c[1]] = c[2]; then_first_ms[c[1]] = then_ms[key]; then_first_meas[c[1]] = meas[key] }
    }
    if (!quiet) {
      for (cell in first) {
        printf "%-46s first then %-10s %.3f of the best, now %-10s %.3f\n", cell, first_then[cell], then_first_meas[cell] / best[cell], first[cell], first_meas[cell] / best[cell]
      }
    }
    for (kind in m) {
      for (i = 1; i <= m[kind]; ++i) { a[i] = t0[kind, i]; b[i] = abs(t0[kind, i]); x[i] = t1[kind, i]; y[i] = abs(t1[kind, i]) }
      printf "%-18s %4d measured: then median %+6.1f%% (|.| %5.1f%%), now median %+6.1f%% (|.| %5.1f%%)\n", kind, m[kind], 100 * median(a, m[kind]), 100 * median(b, m[kind]), 100 * median(x, m[kind]), 100 * median(y, m[kind])
    }
    within = cells = 0
    for (cell in first) { ++cells; within += first_meas[cell] <= 1.05 * best[cell] }
    within_then = 0
    for (cell in first_then) within_then += then_first_meas[cell] <= 1.05 * best[cell]
    printf "the model'"'"'s first within 5%% of the measured best: then %d, now %d of %d cells\n", within_then, within, cells
  }'

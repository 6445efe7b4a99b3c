#!/usr/bin/env bash
# The trial correction checked out of sample on bench/auto_grid.sh's logs: per log, the
# strategies it measured go to cavs-sim --measured with the log's own profile and probed
# cluster, which fits the correction to them as --strategy=auto does and predicts each from the
# others. Prints per log the out-of-sample errors (the ridge on each strategy's own scale, as
# --strategy=auto uses it), the model's own, and the ridge on the trials' scale alone; last,
# over the logs, the median of each. From the repository root, after a build of build/default:
#
#   bench/auto_grid_correction.sh OUT_DIR... [> table]
#
# The searched strategies a log measured (auto#N) are the search's ranking, remade by the
# cavs-sim built now: right while the search is unchanged since the grid ran (else point
# SIM at that grid's copy, OUT_DIR/cavs-sim, if it has --measured).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
sim="${SIM:-build/default/examples/sim/cavs-sim}"
[[ -x "$sim" ]] || { echo "auto_grid_correction.sh: build $sim first" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for dir in "$@"; do
  for log in "$dir"/*.log; do
    base="${log%.log}"
    [[ -f "$base.profile" && -f "$base.cluster" ]] || continue
    flags=()
    [[ "$base" == *fp16* ]] && flags+=(--allow-compression)
    # The log's table: the first name of each measured row, its measured ms and se_% (the
    # noise the fit holds the factors to; NOSE=1 leaves it out, as before it was read).
    sed 's/\x1b\[[0-9;]*m//g' "$log" | awk -f bench/auto_grid_table.awk |
      awk -v nose="${NOSE:-0}" '{ print $1, $3, nose == 1 ? "" : $4 }' >"$tmp/measured"
    [[ -s "$tmp/measured" ]] || continue
    line=$("$sim" --profile="$base.profile" --cluster="$base.cluster" --scaling=none \
      --units=false --top=20 --measured="$tmp/measured" "${flags[@]}" |
      grep '^out of sample') || { echo "$(basename "$base"): cavs-sim failed" >&2; continue; }
    echo "$(basename "$dir")/$(basename "$base"): ${line#out of sample (each measured one corrected from the others): }"
  done
done | awk '
  function median(a, n,    i, j, t) {
    for (i = 2; i <= n; ++i) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; --j) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  {
    print
    # Three "median |error| X%, largest Y%": out of sample, the model alone, the trials scale.
    s = $0; k = 0
    while (match(s, /median \|error\| [0-9.]+%, largest [0-9.]+%/)) {
      part = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH); ++k
      split(part, f, /[ %,]+/); med[k, ++n[k]] = f[3]; if (f[5] + 0 > big[k]) big[k] = f[5] + 0
    }
  }
  END {
    if (n[1] == 0) exit
    split("out of sample (the ridge on each strategy), the model alone, the ridge on the trials alone", name, ", ")
    for (k = 1; k <= 3; ++k) {
      for (i = 1; i <= n[k]; ++i) a[i] = med[k, i]
      printf "%-44s median of the logs'"'"' medians %5.1f%%, largest %5.1f%% (%d logs)\n", name[k], median(a, n[k]), big[k], n[k]
    }
  }'

# Summarizes bench/auto_grid.sh's logs: awk [-v md=1] -f bench/auto_grid_summary.awk OUT_DIR/*.log
# (md=1: the per-log lines as the rows of a Markdown table)
#
# Per log (a configuration and model): the best builder measured (the builders, and searched
# strategies equal to one, "(= name)"), the strategy --strategy=auto chose and its measured step,
# their ratio (> 1: auto faster), and the largest prediction error of the cost model (and of the
# model corrected by the trials) over the strategies measured, and (md=1) the search's cost in
# seconds and the builders' comparison's (logs since the report split them). Last, over every
# measured cell: the median and largest absolute prediction error, and per kind of strategy; and
# over the logs, the model's first (of the strategies measured, the one predicted fastest) against
# the best measured, and in how many it is within 5% of it; and (logs since the report has it)
# the correction's error out of sample, each trial predicted from the others; and (logs since the
# report has each measurement's standard error, se_%) which misses of 5% are more than twice the
# ratio's standard error over it: those the trials' noise does not explain (recheck the others
# with bench/auto_grid_recheck.sh); and (logs since the report has them) per kind of strategy the
# error of the predicted compute and how far the measured hooks in it are over the predicted, the
# strategies with the profiled builder's units (`hybrid`, and those equal to it) apart; and (logs
# since the report has its `drift:` line) how far the profiled strategy's trial was from its
# profile: what moves a whole trial, which the standard errors do not count; and (logs since the
# report has its `equal work:` line) the trials' spread at the profile's work beside as measured.
function abs(x) { return x < 0 ? -x : x }
FNR == 1 {
  if (file != "") finish()
  file = FILENAME; sub(/.*\//, "", file); sub(/\.log$/, "", file)
  best_builder = ""; best_ms = 0; chosen = ""; chosen_ms = 0; max_err = 0; max_cerr = 0
  search_s = "-"; compare_s = "-"
  first_pred = ""; first_ms = 0; best_all = 0
  in_table = 0
}
/predicted_ms corrected_ms/ { in_table = 1; se_col = / se_%$/; steps_col = / steps( +se_%)?$/; next }
/trial correction:|cost of the/ { in_table = 0 }
/out of sample \(each trial from the others\)/ {
  # The correction fitted to the other trials (logs since it was reported): per log its median.
  match($0, /median \|error\| [0-9.]+%/); oos[++noos] = substr($0, RSTART + 15, RLENGTH - 16) / 100
  match($0, /largest [0-9.]+%/); v = substr($0, RSTART + 8, RLENGTH - 9) / 100
  if (v > oos_max) oos_max = v
}
# The profiled strategy in the profile and in its trial (logs since the report has it).
/^  drift: / { match($0, /, [-+][0-9.]+%:/); drift[++ndrift] = substr($0, RSTART + 2, RLENGTH - 4) / 100 }
/^  noise: the counted steps spread / { match($0, /spread [0-9.]+%/); spread_now = substr($0, RSTART + 7, RLENGTH - 8) / 100 }
/^  equal work: / {
  match($0, /steps spread [0-9.]+%/); raw[++nequal] = substr($0, RSTART + 13, RLENGTH - 14) / 100
  equal[nequal] = spread_now
}
/cost of the search:/ { match($0, /[0-9.]+ s in all/); search_s = substr($0, RSTART, RLENGTH - 9) }
/cost of the builders' comparison:/ {
  # Its total where the log has one (switching included), else its steps (older logs).
  if (match($0, /[0-9.]+ s in all/)) compare_s = substr($0, RSTART, RLENGTH - 9)
  else { match($0, /comparison: [0-9.]+/); compare_s = substr($0, RSTART + 12, RLENGTH - 12) }
}
# The compute and its hooks, predicted / measured (logs since the report has them): per kind of
# strategy, the error of the predicted compute; the profiled builder's is its own kind.
/^    .* compute +[0-9.]+ \/ +[0-9.]+ +hooks/ {
  cname = $1; for (i = 2; $i != "compute"; ++i) cname = cname " " $i
  cp = $(i + 1); cm = $(i + 3); hp = $(i + 5); hm = $(i + 7)
  ckind = cname ~ /hybrid\)?$/ || cname ~ /^hybrid/ ? "as profiled (hybrid)" : cname ~ /^auto#/ ? "searched" : cname ~ /ps/ ? "PS builders" : "allreduce builders"
  if (cm > 0) { ccomp[ckind, ++nccomp[ckind]] = (cp - cm) / cm; chook[ckind, nccomp[ckind]] = hm - hp }
  next
}
in_table && NF >= 5 {
  line = $0; is_chosen = sub(/  <- chosen$/, "", line)
  n = split(line, f, " ")
  se = "-"
  if (se_col) se = f[n--]  # the measured median's standard error, % (logs since it was added)
  if (steps_col) --n  # the steps a measurement is the median of (logs since it was added)
  measured = f[n]; corrected = f[n - 1]; predicted = f[n - 2]
  name = f[1]; for (i = 2; i <= n - 4; ++i) name = name " " f[i]
  if (measured == "-") next
  if (first_pred == "" || predicted + 0 < first_pred + 0) {
    first_pred = predicted; first_ms = measured; first_se = se
  }
  if (best_all == 0 || measured + 0 < best_all) { best_all = measured + 0; best_se = se }
  err = (predicted - measured) / measured
  cells[++ncells] = abs(err)
  if (abs(err) > abs(max_err)) max_err = err
  if (corrected != "-") {
    cerr = (corrected - measured) / measured
    ccells[++nccells] = abs(cerr)
    if (abs(cerr) > abs(max_cerr)) max_cerr = cerr
  }
  kind = name ~ /^auto#/ ? "searched" : name ~ /ps/ ? "PS builders" : "allreduce builders"
  kcells[kind, ++nk[kind]] = err
  builder = name !~ /^auto#/ || name ~ /\(= /
  if (builder && (best_builder == "" || measured < best_ms)) { best_builder = name; best_ms = measured }
  if (is_chosen) { chosen = name; chosen_ms = measured }
}
function finish() {
  if (chosen == "") { printf "%-48s (no decision in the log)\n", file; return }
  firsts[++nfirsts] = first_ms / best_all
  # The ratio's standard error (the two medians' relative errors, independent), where known.
  first_noise[nfirsts] = first_se != "-" && best_se != "-" ? sqrt((first_se / 100) ^ 2 + (best_se / 100) ^ 2) : -1
  if (md) {
    printf "| %s | %s | %.1f | %s | %.1f | %.2f | %+.0f%% | %+.0f%% | %s | %s |\n", file, best_builder,
           best_ms, chosen, chosen_ms, best_ms / chosen_ms, 100 * max_err, 100 * max_cerr, search_s,
           compare_s
    return
  }
  printf "%-48s best builder %-22s %9.1f ms  auto %-26s %9.1f ms  %5.2fx  max err %+5.0f%% (corrected %+5.0f%%)\n",
         file, substr(best_builder, 1, 22), best_ms, substr(chosen, 1, 26), chosen_ms,
         best_ms / chosen_ms, 100 * max_err, 100 * max_cerr
}
function median(a, n,    i, j, t) {
  for (i = 2; i <= n; ++i) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; --j) a[j + 1] = a[j]; a[j + 1] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
  if (file != "") finish()
  if (ncells > 0) {
    m = 0; for (i = 1; i <= ncells; ++i) if (cells[i] > m) m = cells[i]
    printf "prediction error over %d measured cells: median %.1f%%, max %.1f%%\n", ncells, 100 * median(cells, ncells), 100 * m
  }
  for (kind in nk) {
    n = nk[kind]; m = 0
    for (i = 1; i <= n; ++i) { a[i] = kcells[kind, i]; if (abs(a[i]) > abs(m)) m = a[i] }
    for (i = 1; i <= n; ++i) b[i] = abs(a[i])
    printf "  %-18s %3d measured: median error %+.1f%%, median |error| %.1f%%, largest %+.1f%%\n",
           kind, n, 100 * median(a, n), 100 * median(b, n), 100 * m
  }
  for (kind in nccomp) {
    n = nccomp[kind]
    for (i = 1; i <= n; ++i) { a[i] = ccomp[kind, i]; b[i] = abs(a[i]); h[i] = chook[kind, i] }
    printf "  compute, %-18s %3d measured: median error %+.1f%%, median |error| %.1f%%; hooks measured - predicted median %+.1f ms\n",
           kind, n, 100 * median(a, n), 100 * median(b, n), median(h, n)
  }
  if (nccells > 0) {
    m = 0; for (i = 1; i <= nccells; ++i) if (ccells[i] > m) m = ccells[i]
    printf "corrected by the trials (in-sample): median %.1f%%, max %.1f%%\n", 100 * median(ccells, nccells), 100 * m
  }
  if (noos > 0) {
    printf "corrected, each trial from the others (out of sample): median of the logs' medians %.1f%%, largest %.1f%% (%d logs)\n",
           100 * median(oos, noos), 100 * oos_max, noos
  }
  if (nequal > 0) {
    lower = 0; for (i = 1; i <= nequal; ++i) { a[i] = equal[i]; b[i] = raw[i]; lower += equal[i] < raw[i] }
    printf "the trials' spread at the profile's work: median %.1f%%, as measured %.1f%%; lower in %d of %d logs\n",
           100 * median(a, nequal), 100 * median(b, nequal), lower, nequal
  }
  if (ndrift > 0) {
    m = 0; for (i = 1; i <= ndrift; ++i) { a[i] = abs(drift[i]); if (a[i] > m) m = a[i] }
    printf "the profiled strategy's trial against its profile (drift): median |change| %.1f%%, largest %.1f%% (%d logs)\n",
           100 * median(a, ndrift), 100 * m, ndrift
  }
  if (nfirsts > 0) {
    within = 0; list = ""
    for (i = 1; i <= nfirsts; ++i) {
      within += firsts[i] <= 1.05
      list = list (i > 1 ? ", " : "") sprintf("%.3f", firsts[i])
    }
    printf "the model's first within 5%% of the best measured in %d of %d logs: %s\n", within, nfirsts, list
    # A miss beyond the noise: over 5% by more than twice the ratio's standard error.
    beyond = 0; known = 0; list = ""
    for (i = 1; i <= nfirsts; ++i) {
      if (firsts[i] <= 1.05 || first_noise[i] < 0) continue
      ++known; far = firsts[i] - 1 - 2 * first_noise[i] > 0.05; beyond += far
      list = list (known > 1 ? ", " : "") sprintf("%.3f +- %.3f%s", firsts[i], first_noise[i], far ? " (beyond)" : "")
    }
    if (known > 0)
      printf "  of the misses with standard errors, %d of %d over 5%% by more than 2 standard errors: %s\n", beyond, known, list
  }
}

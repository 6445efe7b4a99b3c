# The measured rows of a --strategy=auto report (a bench/auto_grid.sh log, colours stripped):
# per row the strategy's first name (auto#N or a builder's), its predicted ms, measured ms and
# se_% (the measurement's standard error, % of it).
# awk -f bench/auto_grid_table.awk LOG; for bench/auto_grid_repredict.sh, auto_grid_recheck.sh and
# bench/auto_grid_correction.sh.
/predicted_ms corrected_ms/ { t = 1; next }
/trial correction:|cost of the/ { t = 0 }
t && NF >= 5 {
  line = $0; sub(/  <- chosen$/, "", line); split(line, f, " ")
  i = 2; while (f[i] ~ /^\(=/) { i += 2 }
  if (f[i + 3] != "-") print f[1], f[i + 1], f[i + 3], f[i + 5]
}

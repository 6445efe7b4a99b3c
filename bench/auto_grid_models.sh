# The models bench/auto_grid.sh and bench/auto_grid_recheck.sh train (sourced, not run).
#
# auto_grid_models OUT_DIR SST_FILE: prints one line per model, "name|cavs-train flags", making
# the language model's data under OUT_DIR first where it is not there yet.
auto_grid_models() {
  local out="$1" sst="$2"
  # The language model's data: 1,700 generated sentences of 10 to 34 words over 60,000 words
  # drawn Zipf(1), of which about 10,700 occur in the 98% trained on: the vocabulary, and so the
  # output layer, is 10,700 x 512 (a PTB-like vocabulary is too small for the 10,000-wide output
  # layer asked for).
  local lm_text="$out/zipf60k.txt"
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
  local lm="--model=lstm-lm --train=$lm_text --dev-fraction=0.02 --hidden=512 --embed=512 --batch=16"
  echo "tree-lstm|--model=tree-lstm --train=$sst --dev-fraction=0.02 --max-train=4000 --batch=32"
  echo "lstm-lm|$lm"
  echo "lstm-lm-fp16|$lm --allow-compression"
}

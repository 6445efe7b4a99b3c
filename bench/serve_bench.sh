#!/usr/bin/env bash
# Latency against throughput of cavs-serve on the CPU (docs/serving.md, RESULTS.md "Serving"):
# starts the server on CHECKPOINT, runs bench/serve_load at each rate with single trees of
# TREES, for each batch policy, each again with requests joining running batches (--join=on),
# and then with batching off (--max-batch=1: one request at a time, the serial baseline), each
# server on its own port. Run from the repository root after building
# cavs-serve and serve_load in BUILD (default build/cpu):
#
#   bench/serve_bench.sh ckpt/ ../shared/data/sst/dev.txt "500,1000,2000,4000,max" 10
set -euo pipefail
checkpoint="$1"
trees="$2"
rates="${3:-500,1000,2000,4000,max}"
seconds="${4:-10}"
build="${BUILD:-build/cpu}"
connections="${CONNECTIONS:-64}"

run() {  # run <label> <port> <server flags...>
  local label="$1" port="$2"
  shift 2
  "$build/examples/serve/cavs-serve" --checkpoint="$checkpoint" --port="$port" \
    --http-threads=$((connections + 8)) "$@" >"/tmp/serve_bench_$port.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do
    grep -q "http://" "/tmp/serve_bench_$port.log" && break
    sleep 0.1
  done
  echo "== $label: cavs-serve $* (trees $trees, $seconds s a rate, $connections connections)"
  "$build/bench/serve_load" --port="$port" --trees="$trees" --rates="$rates" \
    --seconds="$seconds" --connections="$connections"
  curl -s "localhost:$port/metrics" | grep -E '^cavs_serve_((batch_size|batch_seconds|queue_wait_seconds)_(sum|count)|joined_samples_total|samples_total)' || true
  kill -TERM "$pid"
  wait "$pid"
}

run "size-or-deadline" 18081 --max-batch=256 --max-wait-us=2000
run "size-or-deadline, joining" 18084 --max-batch=256 --max-wait-us=2000 --join=on
run "eager" 18082 --max-batch=256 --max-wait-us=2000 --batch-policy=eager
run "eager, joining" 18085 --max-batch=256 --max-wait-us=2000 --batch-policy=eager --join=on
run "serial (batching off)" 18083 --max-batch=1 --max-wait-us=0

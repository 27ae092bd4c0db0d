#!/usr/bin/env bash
# Nsight Compute figures for the kernels behind the open performance bars, in one
# call on the GPU machine: per kernel its time, DRAM throughput, instructions,
# issue and occupancy, cache hit rates and the stall reasons per issued
# instruction (what a kernel waits on decides what to change: memory latency,
# throughput, or its own instructions). First launches of each benchmark, clocks
# left as the driver sets them. Uses an existing build (default build/default);
# one log per benchmark in $OUT (default build/gpu-logs), a summary on stdout.
# Usage: scripts/gpu_profile.sh [BUILD]; AETHER_PROFILE_ONLY=BENCH profiles that
# benchmark's kernels only; AETHER_PROFILE_SOURCE=1 also keeps the first matching
# launch's SASS with each instruction's executions and stall samples
# ($OUT/source-*.csv: where a kernel's instructions and waits go, line by line).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
out=${OUT:-build/gpu-logs}
mkdir -p "$out"
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
dram__bytes_write.sum,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,\
sm__warps_active.avg.pct_of_peak_sustained_active,smsp__warps_eligible.avg.per_cycle_active,\
lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,l1tex__throughput.avg.pct_of_peak_sustained_active,\
lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts.sum,sm__inst_executed_pipe_lsu.sum
# The stall reasons go in a second pass: should this ncu not know the pattern, the
# figures above still come back.
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'

profile() {  # profile NAME KERNEL-REGEX COUNT [ARGS...]: the first COUNT matching launches of bench NAME ARGS
  local name=$1 kernels=$2 count=$3
  shift 3
  [[ -z ${AETHER_PROFILE_ONLY:-} || $name == "$AETHER_PROFILE_ONLY" ]] || return 0
  local log="$out/profile-$name${1:+-${1//:/-}}-${kernels//[^a-z_]/}.log"
  echo "== $name $*: $kernels"
  : >"$log"
  for m in "$metrics" "$stalls"; do
    timeout 240 ncu --clock-control none -k "regex:$kernels" -c "$count" --metrics "$m" \
      "$build/bench/$name" "$@" >>"$log" 2>&1 || echo "   (ncu failed on $m: see $log)"
  done
  if [[ -n ${AETHER_PROFILE_SOURCE:-} ]]; then
    timeout 240 ncu --clock-control none -k "regex:$kernels" -c 1 --section SourceCounters \
      -f -o "${log%.log}" "$build/bench/$name" "$@" >>"$log" 2>&1 &&
      ncu -i "${log%.log}.ncu-rep" --page source --print-source sass --csv \
        >"$out/source-$(basename "${log%.log}").csv" 2>>"$log" ||
      echo "   (ncu's source counters failed: see $log)"
  fi
  # the kernel's name, then one line per metric; stall ratios under 0.05 left out
  awk '/^  [a-zA-Z].*\(/ { sub(/\(.*/, ""); print "--" $0; next }
       /^    [a-z]/ { if ($1 ~ /stalled/ && $NF + 0 < 0.05) next; print "   ", $1, $NF }' "$log"
}

profile compress_bench_cuda 'prefill_rows|keep_deferred_positions' 4 prefill:64
profile compress_bench_cuda 'decode_rows' 4 decode:1024
profile compress_bench_cuda 'decode_rows' 4 decode:4096
profile paging_bench_cuda 'convert|describe_refusal' 4 4096
profile paging_bench_cuda 'convert|describe_refusal' 4 16384
profile indexer_bench_cuda 'wide_' 3
profile formats_bench_cuda 'store_rows' 2 main 262144
profile formats_bench_cuda 'gather_rows' 2 main 262144
profile formats_bench_cuda 'store_rows' 2 index 262144
profile formats_bench_cuda 'gather_rows' 2 index 262144

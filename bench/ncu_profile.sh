#!/usr/bin/env bash
# Nsight Compute on one launch of each kernel below (device.sh step `ncu`): speed of light,
# memory, occupancy, warp stall reasons (each reason's warps per issued instruction) and scheduler statistics, as text in $OUT/ncu.txt.
# Clocks are left alone (--clock-control none, METHOD.md). Each target is one line:
#   LABEL | KERNEL-NAME-REGEX | command (onecat bench SPEC --m M --config C, or attention_bench one ...)
# (fields part at " | "; the regex may hold alternatives without spaces: gemv_kernel|mma16816_kernel)
# NCU_TARGETS (a file of such lines, commands relative to the repository root) replaces the list below;
# NCU_EXTRA adds options (e.g. '--section SourceCounters': the SASS lines where warps stall most).
#   bash bench/ncu_profile.sh BIN_DIR
set -uo pipefail
bin=${1:?usage: ncu_profile.sh BUILD_DIR}
out=${OUT:-.}
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "ncu not found"; exit 1; }
targets=${NCU_TARGETS:-}
if [ -z "$targets" ]; then
  targets=$(mktemp)
  cat >"$targets" <<LIST
gemv awq4 28672x4096 M=1 | gemv_kernel | $bin/onecat bench gemm:n=28672,k=4096,fmt=awq4,group=128 --m 1 --config strategy=gemv,mt=1,rows=8,warps=2
gemv awq4 4096x4096 M=1 | gemv_kernel | $bin/onecat bench gemm:n=4096,k=4096,fmt=awq4,group=128 --m 1 --config strategy=gemv,mt=1,rows=4,warps=2
gemv fp8b128 4096x4096 M=1 | gemv_kernel | $bin/onecat bench gemm:n=4096,k=4096,fmt=fp8b128 --m 1
tc_small awq4 28672x4096 M=16 | tc_small_kernel | $bin/onecat bench gemm:n=28672,k=4096,fmt=awq4,group=128 --m 16 --config strategy=tc_small,mt=16,rows=32,warps=4,stages=3
mma f16 28672x4096 M=512 | mma16816_kernel | $bin/onecat bench gemm:n=28672,k=4096,fmt=f16 --m 512
mma awq4 28672x4096 M=512 | mma16816_kernel | $bin/onecat bench gemm:n=28672,k=4096,fmt=awq4,group=128 --m 512
prefill D=128 4K | attention_sm80_kernel | $bin/attention_bench /tmp/one.json one attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16 1 4096 4096
decode e4m3 b8 8K | attention_sm80_kernel | $bin/attention_bench /tmp/one.json one attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=e4m3 8 8192 1
decode f16 b8 8K | attention_sm80_kernel | $bin/attention_bench /tmp/one.json one attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16 8 8192 1
LIST
fi
# Fields part at " | " (space, bar, space), so a regex may hold alternatives: a|b.
while IFS= read -r line; do
  [ -n "${line// /}" ] || continue
  label=${line%% | *} rest=${line#* | }
  regex=${rest%% | *} cmd=${rest#* | }
  label=$(echo $label) regex=$(echo $regex)
  echo "=== $label: $cmd" >>"$out/ncu.txt"
  # Skip the first launches (module load, warm-up), profile one.
  timeout 120 "$ncu" --clock-control none -k "regex:$regex" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' ${NCU_EXTRA:-} \
    $cmd >>"$out/ncu.txt" 2>&1
  echo "=== $label rc=$?" >>"$out/ncu.txt"
done <"$targets"

#!/usr/bin/env bash
# Regenerates the golden export cases the frameworks' own code checks (tests/framework_checks): for each
# case and target, bmpipe plans for the target and writes tests/golden/exports/<case>-<target>/
# with problem.json, plan.json, the target's export and (pipelining targets) schedule.csv.
#
#   scripts/export-goldens.sh [CASE...]   # all cases, or these; needs build/bmpipe (scripts/test.sh builds it)
set -euo pipefail
cd "$(dirname "$0")/.."
bmpipe=build/bmpipe
out=tests/golden/exports

# case name, the plan command's problem arguments: the cases of the benchmark suite
# (bench/compare_suite.cc) but its vision-language one, which only the suite builds
declare -A cases=(
  [llama3-70b-pp4]="--model llama3-70b --device h100-80gb --tp 8 --pp 4 --dp 16 --gbs 512 --seq 8192"
  [llama3-405b-pp16-vpp2]="--model llama3-405b --device h100-80gb --tp 8 --pp 16 --dp 128 --vpp 2 --gbs 2048 --seq 8192 --sequence-parallel --flash-attn --distributed-optimizer"
  [qwen2-7b-pp8]="--model tests/data/hf/qwen2-7b.json --device a100-40gb --tp 1 --pp 8 --dp 1 --gbs 64 --seq 4096 --sequence-parallel --flash-attn --distributed-optimizer"
  [gpt3-175b-pp16]="--model gpt3-175b --device a100-40gb --tp 8 --pp 16 --dp 8 --gbs 1536 --seq 2048"
  [mindformers-demo]="--problem examples/mindformers-demo/problem.yaml"
  [mindformers-demo-vpp3]="--problem examples/mindformers-demo/problem-vpp3.yaml"
  [gpt3-175b-pp16-loose]="--model gpt3-175b --device a100-80gb --tp 8 --pp 16 --dp 8 --gbs 1536 --seq 2048 --sequence-parallel --flash-attn --distributed-optimizer"
  [llama3-70b-pp8]="--model llama3-70b --device h100-80gb --tp 8 --pp 8 --dp 8 --gbs 512 --seq 8192 --sequence-parallel --flash-attn --distributed-optimizer"
  [llama3-405b-pp16]="--model llama3-405b --device h100-80gb --tp 8 --pp 16 --dp 128 --gbs 2048 --seq 8192 --sequence-parallel --flash-attn --distributed-optimizer"
  # the training setups beyond TP x PP x DP (docs/targets.md, "Training setups")
  [mixtral-8x7b-ep8]="--model mixtral-8x7b --device h100-80gb --tp 2 --pp 4 --dp 8 --ep 8 --gbs 256 --seq 4096 --sequence-parallel --flash-attn --distributed-optimizer --moe-capacity-factor 1.25"
  [mixtral-8x7b-ep8-flex]="--model mixtral-8x7b --device h100-80gb --tp 2 --pp 4 --vpp 2 --dp 8 --ep 8 --gbs 256 --seq 4096 --sequence-parallel --flash-attn --distributed-optimizer --moe-dispatcher flex --ep-comm-overlap 0.8 --moe-cuda-graphs"
  # Megatron's combined 1F1B: the MoE all-to-all overlap as overlapped pairs (docs/semantics.md, "Actions")
  [qwen3-30b-a3b-pp4-vpp2-pairs]="--model qwen3-30b-a3b --device h100-80gb --tp 1 --pp 4 --vpp 2 --dp 16 --ep 8 --gbs 512 --seq 4096 --flash-attn --distributed-optimizer --overlap-pairs"
  [llama3-70b-cp2]="--model llama3-70b --device h100-80gb --tp 8 --pp 4 --dp 4 --cp 2 --gbs 256 --seq 16384 --sequence-parallel --flash-attn --distributed-optimizer"
  [llama3-70b-fp8]="--model llama3-70b --device h100-80gb --tp 8 --pp 4 --dp 8 --gbs 256 --seq 8192 --sequence-parallel --flash-attn --distributed-optimizer --precision fp8 --fp8-params --no-fp8-transpose-cache --tp-comm-overlap 0.8"
  [llama3-70b-mxfp8]="--model llama3-70b --device b200-180gb --tp 8 --pp 4 --dp 8 --gbs 256 --seq 8192 --sequence-parallel --flash-attn --distributed-optimizer --precision mxfp8 --fp8-params"
  [llama3-70b-nvfp4]="--model llama3-70b --device gb200 --tp 2 --pp 4 --vpp 5 --dp 8 --gbs 256 --seq 8192 --sequence-parallel --flash-attn --distributed-optimizer --precision nvfp4 --fp8-params --grad-dtype bf16"
  [llama3-70b-bf16-state]="--model llama3-70b --device h100-80gb --tp 8 --pp 4 --dp 8 --gbs 256 --seq 8192 --sequence-parallel --flash-attn --distributed-optimizer --grad-dtype bf16 --optimizer-dtype bf16 --offload optimizer"
  [llama3-70b-bf16-grads]="--model llama3-70b --device h100-80gb --tp 8 --pp 4 --dp 8 --gbs 256 --seq 8192 --sequence-parallel --flash-attn --grad-dtype bf16"
  [llama3-70b-zero3]="--model llama3-70b --device h100-80gb --tp 8 --pp 4 --dp 8 --gbs 256 --seq 8192 --sequence-parallel --flash-attn --zero 3"
  # the schedules beyond (interleaved) 1F1B (docs/semantics.md, "Schedules")
  [llama3-8b-pp8-zb-h1]="--model llama3-8b --device h100-80gb --tp 1 --pp 8 --dp 1 --gbs 32 --seq 4096 --schedule zb-h1"
  [llama3-70b-pp4-vpp2-groups]="--model llama3-70b --device h100-80gb --tp 8 --pp 4 --vpp 2 --dp 16 --gbs 288 --seq 8192 --microbatch-group 6 --sequence-parallel --flash-attn --distributed-optimizer"
  [llama3-8b-pp4-zb-v]="--model llama3-8b --device h100-80gb --tp 1 --pp 4 --vpp 2 --dp 1 --gbs 8 --seq 4096 --schedule zb-v"
  [llama3-8b-pp8-zb-h2]="--model llama3-8b --device h100-80gb --tp 1 --pp 8 --dp 1 --gbs 32 --seq 4096 --schedule zb-h2"
  [llama3-8b-pp4-vpp2-interleaved-zb]="--model llama3-8b --device h100-80gb --tp 1 --pp 4 --vpp 2 --dp 1 --gbs 8 --seq 4096 --schedule interleaved-zb"
  [llama3-8b-pp4-dualpipev]="--model llama3-8b --device h100-80gb --tp 1 --pp 4 --vpp 2 --dp 1 --gbs 8 --seq 4096 --schedule dualpipev"
  # memory-tight: megatron-core's fine-grained activation offloading beats every recomputation setting
  [llama3-8b-pp4-offload]="--model llama3-8b --device h100-80gb --tp 1 --pp 4 --dp 1 --gbs 64 --seq 16384 --flash-attn --offload activations --offload-modules qkv_linear,core_attn,attn_proj"
)
# case name, the targets it is exported for
declare -A targets=(
  [llama3-70b-pp4]="megatron megatron-local torchtitan mindformers torch"
  [llama3-405b-pp16-vpp2]="megatron torchtitan mindformers torch"
  [qwen2-7b-pp8]="megatron deepspeed torchtitan mindformers"
  [gpt3-175b-pp16]="megatron"
  [mindformers-demo]="mindformers"
  [mindformers-demo-vpp3]="mindformers"
  [gpt3-175b-pp16-loose]="megatron torchtitan"
  [llama3-70b-pp8]="megatron deepspeed mindformers"
  [llama3-405b-pp16]="megatron deepspeed torchtitan"
  [mixtral-8x7b-ep8]="megatron"
  [mixtral-8x7b-ep8-flex]="megatron"
  [qwen3-30b-a3b-pp4-vpp2-pairs]="megatron"
  [llama3-70b-cp2]="megatron torchtitan"
  [llama3-70b-fp8]="megatron"
  [llama3-70b-mxfp8]="megatron"
  [llama3-70b-nvfp4]="megatron"
  [llama3-70b-bf16-state]="megatron"
  [llama3-70b-bf16-grads]="deepspeed"
  [llama3-70b-zero3]="megatron torchtitan"
  [llama3-8b-pp8-zb-h1]="torch"
  [llama3-70b-pp4-vpp2-groups]="megatron torch"
  [llama3-8b-pp4-zb-v]="torch torchtitan"
  [llama3-8b-pp8-zb-h2]="torch"
  [llama3-8b-pp4-vpp2-interleaved-zb]="torch torchtitan"
  [llama3-8b-pp4-dualpipev]="torch torchtitan"
  [llama3-8b-pp4-offload]="megatron"
)
declare -A format=([megatron]=megatron [megatron-local]=megatron [deepspeed]=deepspeed [torchtitan]=torchtitan
                   [mindformers]=mindformers [torch]=csv)
declare -A file=([megatron]=megatron.args [deepspeed]=deepspeed.py [torchtitan]=torchtitan.args
                 [mindformers]=mindformers.yaml [csv]=schedule.csv)

selected=("$@")
[[ ${#selected[@]} -gt 0 ]] || mapfile -t selected < <(printf '%s\n' "${!cases[@]}" | sort)
for c in "${selected[@]}"; do
  [[ -n ${cases[$c]:-} ]] || { echo "export-goldens: unknown case $c" >&2; exit 2; }
  for t in ${targets[$c]}; do
    dir=$out/$c-$t
    rm -rf "$dir"
    mkdir -p "$dir"
    f=${format[$t]}
    args=${cases[$c]}
    if [[ $args == --problem* ]]; then
      cp "${args#--problem }" "$dir/problem.yaml"
      problem=$dir/problem.yaml
      # shellcheck disable=SC2086
      "$bmpipe" plan --problem "$problem" --target "$t" --time-limit 30 --out "$dir/plan.json" \
        --export "$f" --export-out "$dir/${file[$f]}" >/dev/null
    else
      problem=$dir/problem.json
      # To the full capacity (--memory-headroom-gb 0): the fixtures check exports, not margins, and
      # were planned before plan kept the cost model's memory error free by default.
      # shellcheck disable=SC2086
      "$bmpipe" plan $args --target "$t" --time-limit 30 --memory-headroom-gb 0 --dump-problem "$problem" --out "$dir/plan.json" \
        --export "$f" --export-out "$dir/${file[$f]}" >/dev/null
    fi
    if [[ $t == torchtitan || $t == torch ]]; then
      "$bmpipe" export --problem "$problem" --plan "$dir/plan.json" --to csv --out "$dir/schedule.csv"
    fi
    echo "wrote $dir"
  done
done

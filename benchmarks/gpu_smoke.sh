#!/usr/bin/env bash
# The GPU path end to end, in about ten minutes on one GPU and with no network: a random Qwen3-shaped model of
# about 300M parameters (evoh model init --size medium) on MiniHouse's procedural games (no data to download),
# through collect (expert) -> refine -> SFT with QLoRA -> GRPO (2 updates) -> eval -> export, printing each
# stage's wall time, peak GPU memory (nvidia-smi, every process on the GPU) and tokens/s where the stage
# records them.
#
#   bash benchmarks/gpu_smoke.sh [WORKSPACE]          # default runs/gpu-smoke (started afresh)
#   VLLM=/path/to/vllm-env/bin/vllm bash benchmarks/gpu_smoke.sh
#
# With VLLM pointing at a vllm executable (an environment of its own: docs/gpu.md, section 1), evaluation
# serves the exported model with vLLM and plays it through --policy openai; without it, evaluation runs the
# local policy in-process. GRPO's rollouts use vLLM in-process only where it can be imported beside evoh
# (grpo.generator = "auto"); the script prints which generator ran. Needs bitsandbytes for QLoRA.
set -euo pipefail

fail() { echo "error: $1" >&2; echo "  hint: $2" >&2; exit 2; }

command -v nvidia-smi >/dev/null 2>&1 || fail "gpu_smoke.sh needs an NVIDIA GPU: nvidia-smi is not on PATH" \
  "run it on a GPU node; on a CPU the test suite (pytest) runs every stage with a tiny model"
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null ||
  fail "gpu_smoke.sh needs a CUDA build of torch that sees a GPU (torch.cuda.is_available() is false)" \
    "install torch for the node's CUDA (docs/gpu.md, section 1)"
python -c "import bitsandbytes" 2>/dev/null || fail "QLoRA needs bitsandbytes" "pip install -e \".[qlora]\""

WS=${1:-runs/gpu-smoke}
MODEL="$WS-model"
export HF_HUB_OFFLINE=1
rm -rf "$WS" "$MODEL"
WORLD=(--kind minihouse)
echo "gpu smoke: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1); workspace $WS"

# run NAME COMMAND...: the command's wall time and the GPU's peak memory while it ran
run() {
  local name=$1 samples peak start
  shift
  samples=$(mktemp)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$samples" &
  local sampler=$!
  start=$(date +%s%N)
  "$@" >"$WS.$name.log" 2>&1 || { kill "$sampler"; echo "$name failed; its log: $WS.$name.log" >&2; tail -20 "$WS.$name.log" >&2; exit 1; }
  kill "$sampler"
  wait "$sampler" 2>/dev/null || true
  peak=$(sort -n "$samples" | tail -1)
  rm -f "$samples"
  printf '%-8s %6d s   peak GPU memory %6s MiB\n' "$name" $((($(date +%s%N) - start) / 1000000000)) "${peak:-?}"
}

run model  evoh model init "${WORLD[@]}" --out "$MODEL" --size medium
run collect evoh collect -w "$WS" "${WORLD[@]}" --policy expert --split train --limit 48
run refine evoh refine -w "$WS"
run sft    evoh sft -w "$WS" --model "$MODEL" --load-in-4bit --max-steps 30 --lr 2e-4 --train-embeddings \
  --set sft.batch_size=8 --set sft.per_device_batch=8 --set sft.max_length=2048 --set sft.save_steps=30 --set sft.eval_steps=30
run grpo   evoh grpo -w "$WS" "${WORLD[@]}" --updates 2 --tasks-per-update 4 --group-size 4 --max-steps 20 --lr 1e-5 \
  --set grpo.max_tokens=64 --set grpo.val_every=0 --set grpo.save_every=1 --set env.max_steps=20 \
  --set model.guided=true  # under the turn grammar, through transformers (grpo.generator = vllm would sample with vLLM)
run export evoh export -w "$WS" --from grpo --out "$WS/export/model" --force
if [[ -n "${VLLM:-}" ]]; then
  "$VLLM" serve "$WS/export/model" --port 8011 --gpu-memory-utilization 0.5 >"$WS.vllm.log" 2>&1 &
  server=$!
  trap 'kill $server 2>/dev/null || true' EXIT
  for _ in $(seq 120); do curl -sf http://localhost:8011/v1/models >/dev/null && break; sleep 2; done
  run eval evoh eval -w "$WS" "${WORLD[@]}" --policy openai --model "$WS/export/model" \
    --base-url http://localhost:8011/v1 --limit 24 --max-steps 20 --name vllm-valid_seen
else
  run eval evoh eval -w "$WS" "${WORLD[@]}" --policy local --model "$WS/export/model" --limit 24 --max-steps 20 \
    --name local-valid_seen
fi

# tokens/s from what the stages recorded
python - "$WS" <<'PY'
import json, sys
from pathlib import Path

ws = Path(sys.argv[1])
sft = [json.loads(line) for line in (ws / "sft" / "metrics.jsonl").read_text().splitlines()]
done = [m for m in sft if "train_runtime" in m]
tokens = max((m.get("num_tokens", 0) for m in sft), default=0)
if done and tokens:
    print(f"sft: {tokens / done[-1]['train_runtime']:,.0f} tokens/s trained")
grpo = [json.loads(line) for line in (ws / "grpo" / "metrics.jsonl").read_text().splitlines()]
generated = sum(m["completion_tokens"] for m in grpo)
print(f"grpo: {generated / sum(m['rollout_seconds'] for m in grpo):,.0f} tokens/s generated in rollouts, "
      f"{sum(m['prompt_tokens'] + m['completion_tokens'] for m in grpo) / sum(m['update_seconds'] for m in grpo):,.0f} "
      "tokens/s trained")
print(f"grpo's rollouts ran through: {json.loads((ws / 'grpo' / 'stage.json').read_text()).get('generator', '?')}")
PY

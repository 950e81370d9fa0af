"""`evoh export`: the trained adapter merged into its base model, as a complete model directory.

The result (sharded safetensors, tokenizer, config, generation config, and a model card) loads in
plain transformers, vLLM or TRL with no evoh and no PEFT. A fully fine-tuned sft model has nothing to
merge and is written in the chosen dtype with its card. The export is verified: the written model is
reloaded from disk and its logits are compared with the trained model's on real prompts from the
refined data; the largest difference is reported and recorded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from evoh.config import Recipe
from evoh.errors import EvohError
from evoh.workspace import Workspace, read_jsonl, share_weights

STAGE = "export"
DTYPES = ("bf16", "fp32")


def _prompts(workspace: Workspace, tokenizer, count: int = 3) -> list[str]:
    from evoh.records import validate_example

    refine = workspace.path("refine")
    fix = f"the file was edited or damaged: rerun `evoh refine -w {workspace.root}` to write it again"
    examples = []
    for name in ("val", "train"):
        file = refine / f"{name}.jsonl"
        if file.exists():
            examples += [validate_example(r, f"{file}:{n}", fix) for n, r in enumerate(read_jsonl(file).records, start=1)]
    if not examples:
        raise EvohError("no refined examples to verify the export on", hint=f"run `evoh refine -w {workspace.root}` first")
    return [
        tokenizer.apply_chat_template(ex["messages"][:2], tokenize=False, add_generation_prompt=True) for ex in examples[:count]
    ]


def _lora(config: dict[str, Any]) -> str:
    base = "QLoRA (NF4 base)" if config.get("load_in_4bit") else "full-precision base"
    return f"LoRA r={config.get('lora_r')}, alpha={config.get('lora_alpha')}, targets {config.get('target')}, {base}"


def _sft_lines(manifest: dict[str, Any]) -> list[str]:
    config = manifest.get("config", {})
    data = ", ".join(f"`{k}` {Path(v['path']).name} (sha256 {v['sha256'][:12]})" for k, v in manifest.get("inputs", {}).items())
    losses = f"final training loss {manifest.get('train_loss', float('nan')):.4f}"
    if manifest.get("eval_loss") is not None:
        losses += f", validation loss {manifest['eval_loss']:.4f}"
    return [
        f"- Stage one, supervised fine-tuning (TRL SFTTrainer) on refined teacher turns: {data or 'no record'}",
        "  - " + ("every weight fine-tuned (no adapter)" if manifest.get("method") == "full" else _lora(config)),
        f"  - lr {config.get('lr')}, {config.get('scheduler')} schedule, batch {config.get('batch_size')}, "
        f"{manifest.get('global_step')} steps; {losses}",
    ]


def _grpo_lines(manifest: dict[str, Any]) -> list[str]:
    c, final = manifest.get("config", {}), manifest.get("final", {})
    reward = c.get("reward", {})
    types = f" ({', '.join(c['task_types'])})" if c.get("task_types") else ""
    bank, updates = manifest.get("start_bank"), manifest.get("updates")
    lines = [
        f"- Stage two, cost-aware multi-turn GRPO: {updates} update{'' if updates == 1 else 's'} "
        f"of {c.get('tasks_per_update')} games "
        f"× {c.get('group_size')} rollouts from ALFWorld `{c.get('split')}`{types}, horizon {c.get('max_steps')} "
        f"with every harness call charged, temperature {c.get('temperature')}",
        f"  - {_lora(c)}; lr {c.get('lr')}, KL {c.get('kl')}, clip {c.get('clip_low')}/{c.get('clip_high')}",
        f"  - reward: success {reward.get('success')}, λ_eff {reward.get('efficiency')}, λ_div {reward.get('diversity_max')} "
        f"({reward.get('diversity')}) annealed to 0 over {reward.get('diversity_horizon')} updates, "
        f"λ_spam {reward.get('spam')}, λ_inv {reward.get('invalid')}"
        + (f", λ_idle {reward['idle_meta']} per harness call that changed nothing" if reward.get("idle_meta") else ""),
        "  - Experience bank: rollouts started from "
        + (f"{Path(bank['path']).name} (sha256 {bank['sha256'][:12]})" if bank else "an empty bank")
        + "; the bank they ended with is the workspace's `grpo/bank.json`, not part of this directory",
    ]
    if final:
        lines.append(
            f"  - last update: training success {final.get('success', 0):.2f}, "
            f"{final.get('meta_actions', 0):.2f} meta-actions per episode, KL {final.get('kl', 0):.3g}"
        )
    return lines


def _measured(summary: dict[str, Any], weights: dict[str, tuple[Path, Path | None]]) -> str:
    """Which training stage's weights an evaluation measured, by their paths: "" where none of them."""
    policy = summary.get("policy") or {}
    used = tuple(Path(p).resolve() if p else None for p in (policy.get("model"), policy.get("adapter")))
    for stage, (model, adapter) in weights.items():
        if used == (model.resolve(), adapter.resolve() if adapter else None):
            return stage
    return ""


def _model_card(workspace: Workspace, source: str, manifest: dict[str, Any], dtype: str, difference: float) -> str:
    adapter = workspace.trained_weights(source)[1]
    sft = workspace.manifest("sft")
    stages = [("sft", sft)] if source == "sft" else []
    if source == "grpo":
        if manifest.get("config", {}).get("start") == "sft" and sft is not None:
            stages.append(("sft", sft))
        stages.append(("grpo", manifest))
    base = stages[0][1]["base_model"]["path"]
    lines = [
        "---",
        "library_name: transformers",
        "tags: [evoh, alfworld, agent]",
        "---",
        "",
        "# An evoh agent model",
        "",
        f"Trained by evoh ({' then '.join(name for name, _ in stages)}); "
        + ("the adapter merged into its base" if adapter is not None else "every weight trained, no adapter")
        + f", saved in {dtype}.",
        "",
        f"- Base model: `{base}`",
    ]
    for name, stage_manifest in stages:
        lines += _sft_lines(stage_manifest) if name == "sft" else _grpo_lines(stage_manifest)
    lines += [
        f"- Verification: largest |logit difference| against the trained model on real prompts: {difference:.3g}",
        "",
        "Prompts are evoh's per-turn harness prompts; answers take the form",
        "`<think>…</think><action>…</action>`.",
    ]
    evals = sorted(workspace.root.glob("eval/*/summary.json"))
    if evals:
        from evoh.inspection import report

        weights = {s: workspace.trained_weights(s) for s in ("sft", "grpo") if workspace.manifest(s) is not None}
        runs = report.load_runs(evals)
        lines += [
            "",
            "## Evaluation",
            "",
            f"Success in % on the workspace's evaluations; rows whose weights are `{source}` measured this model before merging.",
            "",
            "| run | weights | split | " + " | ".join(report.COLUMNS) + " | avg | meta-actions / episode |",
            "|---|---|---|" + "---:|" * (len(report.COLUMNS) + 2),
        ]
        for measured, row in zip(runs, report.rows(runs), strict=True):
            cells = report.success_cells(row)
            lines.append(
                f"| {row['run']} | {_measured(measured['summary'], weights) or '-'} | {row['split']} | "
                + " | ".join(cells)
                + f" | {row['meta']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def settings(recipe: Recipe, workspace: Workspace) -> dict[str, Any]:
    """What the exported model depends on in a recipe (`evoh run`): which stage's weights, in which dtype."""
    return {"from": recipe.run.export_from, "dtype": recipe.run.export_dtype}


def inputs(recipe: Recipe) -> list[str]:
    """The stage whose weights it merges."""
    return [recipe.run.export_from]


def run(
    workspace: Workspace, source: str = "sft", dtype: str = "bf16", out: Path | None = None, force: bool = False
) -> dict[str, Any]:
    if source not in ("sft", "grpo"):
        raise EvohError(f"--from {source!r} is not a training stage", hint="use --from sft or --from grpo")
    if dtype not in DTYPES:
        raise EvohError(f"--dtype {dtype!r} is not supported", hint="use bf16 or fp32")

    manifest = workspace.require(source)
    model_dir, adapter = workspace.trained_weights(source)
    out = Path(out) if out else workspace.path(STAGE) / "model"
    if out.exists() and any(out.iterdir()) and not force:
        raise EvohError(f"{out} is not empty", hint="pick another --out, or pass --force to replace what is there")

    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.time()
    tokenizer = AutoTokenizer.from_pretrained(adapter or model_dir)
    tokenizer.padding_side = "left"
    prompts = _prompts(workspace, tokenizer)  # a damaged refine file is refused before any weights load
    trained = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if adapter is not None:
        trained = PeftModel.from_pretrained(trained, adapter)
    trained.eval()
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode():
        reference = trained(**batch).logits
    merged = trained.merge_and_unload() if adapter is not None else trained
    merged = merged.to(torch.bfloat16 if dtype == "bf16" else torch.float32)
    with workspace.writing(STAGE):
        out.mkdir(parents=True, exist_ok=True)
        for stale in [*out.glob("*.safetensors"), *out.glob("*.safetensors.index.json")]:
            stale.unlink()  # --force: no shard of an earlier export may mix with this one
        merged.save_pretrained(out, safe_serialization=True, max_shard_size="2GB")
        tokenizer.save_pretrained(out)
        share_weights(out)
        reloaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
        with torch.inference_mode():
            logits = reloaded(**batch).logits
        mask = batch["attention_mask"].bool()
        difference = float((logits - reference).abs()[mask].max())
        (out / "README.md").write_text(_model_card(workspace, source, manifest, dtype, difference))
        result = {"out": str(out), "from": source, "dtype": dtype, "max_logit_difference": difference, "prompts": len(prompts)}
        workspace.finish(STAGE, {**result, "base_model": manifest["base_model"], "seconds": time.time() - started})
    return result

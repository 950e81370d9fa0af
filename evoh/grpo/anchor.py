"""refine's SFT examples in stage two, encoded as rollout turns are: the anchor that ``grpo.sft_weight`` holds the
policy to, and (see :mod:`evoh.grpo.validation`) the held-out responses the drift is measured on."""

from __future__ import annotations

from pathlib import Path

from evoh.errors import EvohError
from evoh.grpo.objective import Sample, forward_logprobs, micro_batches
from evoh.grpo.state import TrainState
from evoh.records import validate_example
from evoh.workspace import read_jsonl


def sft_examples(path: Path, tokenizer, limit: int = 0) -> list[Sample]:
    """SFT examples (chat messages ending with the response) as (prompt, response) token ids, encoded as the
    rollouts' turns are; with ``limit``, that many spread evenly over the file (its episodes' turns follow each
    other). Examples whose response does not extend their prompt are left out."""
    hint = f"the file was edited or damaged: rerun `evoh refine` to write {path} again"
    rows = [validate_example(r, f"{path}:{n}", hint) for n, r in enumerate(read_jsonl(path).records, start=1)]
    if limit and len(rows) > limit:
        rows = [rows[i * len(rows) // limit] for i in range(limit)]
    examples = []
    for row in rows:
        messages = row["messages"]
        prompt = tokenizer(
            tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True), add_special_tokens=False
        )["input_ids"]
        whole = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False), add_special_tokens=False)["input_ids"]
        if len(whole) > len(prompt) and whole[: len(prompt)] == prompt:  # the response extends its prompt token for token
            examples.append(Sample(prompt, whole[len(prompt) :], 0.0))
    return examples


def sft_loss(state: TrainState, examples: list[Sample]) -> float:
    """Backward of ``sft_weight`` × the mean negative log-likelihood of the examples' response tokens (at
    temperature 1, unguided, as stage one trained them), left unsynchronised for the step's last policy
    micro-batch to all-reduce; returns that mean."""
    g, accelerator = state.g, state.accelerator
    nll, tokens = 0.0, sum(len(s.completion) for s in examples)
    with accelerator.no_sync(state.model):
        for batch in micro_batches(examples, g.micro_batch_tokens):
            logp, _, mask = forward_logprobs(state.model, batch, state.pad_id, 1.0, accelerator.device)
            total = -(logp * mask).sum()
            accelerator.backward(total * (g.sft_weight / tokens))
            nll += float(total.detach())
    return nll / tokens


def anchor_examples(path: Path | None, tokenizer) -> list[Sample]:
    """The anchor's examples (none without ``path``); refused when not one of them can be trained on."""
    examples = sft_examples(path, tokenizer) if path else []
    if path and not examples:
        raise EvohError(
            f"no example in {path} ends with a response the chat template appends to its prompt", hint="set grpo.sft_weight = 0"
        )
    return examples

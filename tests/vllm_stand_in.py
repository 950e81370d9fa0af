"""A stand-in for the ``vllm`` package: what evoh asks of its engine, recorded, answered with one fixed reply.
Its fixture ``stand_in_vllm`` (in conftest.py) installs it and lets evoh believe vLLM can serve here."""

from __future__ import annotations

import sys
import types

import pytest

REPLY = "<think>\nlook around first.\n</think>\n<action>look</action>"


class StandInEngine:
    """What evoh asks of ``vllm.LLM``: built once with its settings, then ``generate`` calls, recorded."""

    built: list[dict] = []
    calls: list[dict] = []

    def __init__(self, **settings):
        StandInEngine.built.append(settings)
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(settings["tokenizer"])

    def generate(self, prompts, params, lora_request=None, use_tqdm=True):
        StandInEngine.calls.append({"prompts": prompts, "params": params, "lora": lora_request})
        reply = self.tokenizer(REPLY, add_special_tokens=False).input_ids
        return [
            types.SimpleNamespace(
                prompt_token_ids=self.tokenizer(p, add_special_tokens=False).input_ids,
                outputs=[types.SimpleNamespace(text=REPLY, token_ids=reply)],
            )
            for p in prompts
        ]


def install(monkeypatch: pytest.MonkeyPatch):
    """A ``vllm`` module whose engine records what it is asked, and a machine where it can serve."""
    vllm = types.ModuleType("vllm")
    vllm.LLM = StandInEngine
    vllm.SamplingParams = lambda **params: params
    lora = types.ModuleType("vllm.lora.request")
    lora.LoRARequest = lambda name, version, path: {"name": name, "id": version, "path": path}
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = lambda **params: {"structured": params}
    modules = {"vllm": vllm, "vllm.lora": types.ModuleType("vllm.lora"), "vllm.lora.request": lora}
    for name, module in {**modules, "vllm.sampling_params": sampling}.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr("evoh.policy.vllm_engine.can_serve", lambda adapter, guided=False: (True, ""))
    StandInEngine.built, StandInEngine.calls = [], []
    return StandInEngine

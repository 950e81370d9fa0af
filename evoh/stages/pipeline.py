"""`evoh run`: the stages a recipe's ``[run]`` names, in order, so one command reproduces an experiment.

A stage is skipped when its ``stage.json`` is the one this pipeline wrote for the same settings: each
stage's key is a fingerprint of the recipe sections it reads and of the keys of the stages it reads
from, so changing ``[sft]`` reruns sft and everything after it, and nothing before. ``WS/pipeline.json``
holds, per stage, the key and the hash of the ``stage.json`` it produced; a stage rerun by hand with
other settings no longer matches. An interrupted stage resumes (episodes by fingerprint, training from
its last checkpoint).
"""

from __future__ import annotations

import copy
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evoh.config import Recipe
from evoh.errors import EvohError
from evoh.memory import release_freed_memory
from evoh.models.hub import model_directory, names_hub_model
from evoh.runs.key import key_id, run_key
from evoh.runs.summary import errored_run
from evoh.tracking import check_trackers
from evoh.workspace import MANIFEST, Workspace, atomic_write_json, file_sha256, fingerprint, weights_identity

STAGES = ("model", "collect", "refine", "sft", "grpo", "eval", "export")
SOURCES = ("base", "sft", "grpo")
STATE_FILE = "pipeline.json"


@dataclass
class Hooks:
    """How the caller watches: a stage starting (name, will it run) and the progress callbacks stages take."""

    on_stage: Callable[[str, bool], None] | None = None
    episodes: Callable[[str], Any] | None = None  # name -> context manager yielding episode Callbacks
    updates: Callable[[], Any] | None = None  # -> context manager yielding GRPO Callbacks
    on_done: Callable[[str, float], None] | None = None  # a stage that ran has finished (name, seconds)


def _check(recipe: Recipe) -> None:
    r = recipe.run
    unknown = [s for s in r.stages if s not in STAGES]
    if unknown:
        raise EvohError(
            f"run.stages names unknown stages: {', '.join(unknown)}", hint=f"use some of {', '.join(STAGES)}, in that order"
        )
    order = [STAGES.index(s) for s in r.stages]
    if order != sorted(order):
        raise EvohError("run.stages is out of order", hint=f"list them in pipeline order: {', '.join(STAGES)}")
    bad = [s for s in r.eval_from if s not in SOURCES]
    if bad:
        raise EvohError(f"run.eval_from names {', '.join(bad)}", hint="use base, sft or grpo")
    if "sft" in r.stages and not recipe.sft.model:
        raise EvohError(
            "the recipe runs sft but sets no sft.model", hint='set [sft] model = "DIR" (the model stage builds it there)'
        )
    if "sft" in r.stages:
        check_trackers(recipe.sft.report_to, "sft.report_to")
    if "grpo" in r.stages:
        from evoh.stages.grpo import check_settings

        check_settings(recipe)


def until(recipe: Recipe, last: str) -> Recipe:
    """The recipe with its stages cut after ``last``: e.g. train now and evaluate later, with the same keys."""
    if last not in recipe.run.stages:
        raise EvohError(
            f"--until {last}: the recipe's run.stages are {', '.join(recipe.run.stages)}", hint="name one of those stages"
        )
    cut = copy.deepcopy(recipe)
    cut.run.stages = cut.run.stages[: cut.run.stages.index(last) + 1]
    return cut


class Pipeline:
    def __init__(self, recipe: Recipe, workspace: Workspace, hooks: Hooks | None = None) -> None:
        _check(recipe)
        self.recipe = recipe
        self.workspace = workspace
        self.hooks = hooks or Hooks()
        self.file = workspace.root / STATE_FILE
        self.state: dict[str, Any] = orjson.loads(self.file.read_bytes()) if self.file.exists() else {}
        self.keys: dict[str, str] = {}

    # -- bookkeeping -----------------------------------------------------------------------------------

    def _finished_with(self, stage: str, key: str) -> bool:
        manifest = self.workspace.path(stage) / MANIFEST
        entry = self.state.get(stage, {})
        return manifest.exists() and entry.get("key") == key and entry.get("manifest_sha256") == file_sha256(manifest)

    def _save(self) -> None:
        self.workspace.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.file, self.state)

    def _step(
        self,
        stage: str,
        settings: dict[str, Any],
        inputs: list[str],
        action: Callable[[bool], dict[str, Any]],
        extendable: tuple[str, ...] = (),
        compute_only: tuple[str, ...] = (),
        measures: bool = False,
        plays: bool = False,
    ) -> dict[str, Any]:
        """Run ``action(resume)`` unless the stage already finished with this key; record what happened.

        ``extendable`` and ``compute_only`` name settings (``key`` or ``section.key``) a run may change and continue:
        those that only make it longer, and those that change how it computes, not what it learns. A stage whose
        other settings are unchanged continues from its checkpoints instead of starting over. A stage that ``measures``
        (an evaluation) starts over when its settings or inputs changed: its old episodes measured other weights.
        A stage that ``plays`` episodes and ends with some in errors is not recorded as finished: the pipeline stops
        there (exit 1), and the next run resumes it, retrying them, before anything is built on its output."""
        inputs_keys = [self._input_key(i) for i in inputs]
        key = key_id(run_key(stage, settings, inputs_keys))  # this exact run: finished, it is skipped
        identity = key_id(run_key(stage, settings, inputs_keys, extendable + compute_only))  # the same run, made longer
        # how an evoh that knew no compute-only settings named the same run, so that its runs resume too
        earlier = key_id(run_key(stage, settings, inputs_keys, extendable))
        self.keys[stage] = key
        skip = self._finished_with(stage, key)
        if self.hooks.on_stage:
            self.hooks.on_stage(stage, not skip)
        if skip:
            return {"stage": stage, "ran": False, "seconds": 0.0}
        resume = self.state.get(stage, {}).get("identity") in (identity, earlier)  # the same run, interrupted or longer
        if measures and not resume and self.workspace.path(stage).is_dir():
            shutil.rmtree(self.workspace.path(stage))
        checkpoints = self.workspace.path(stage) / "checkpoints"
        if not resume and checkpoints.is_dir() and any(checkpoints.iterdir()):
            raise EvohError(
                f"{self.workspace.path(stage)} holds a training run made with other settings",
                hint=f"delete {self.workspace.path(stage)} to train it again with this recipe, or use a new workspace (-w)",
            )
        self.state[stage] = {"key": key, "identity": identity}
        self._save()
        started = time.time()
        result = action(resume)
        failure = errored_run(result, stage) if plays else None
        if failure:
            failure.hint = f"rerun the same command to retry them; the stages after {stage} run once it has none"
            raise failure
        manifest = file_sha256(self.workspace.path(stage) / MANIFEST)
        self.state[stage] = {"key": key, "identity": identity, "manifest_sha256": manifest, "finished_at": time.time()}
        self._save()
        if self.hooks.on_done:
            self.hooks.on_done(stage, time.time() - started)
        return {"stage": stage, "ran": True, "seconds": time.time() - started, "result": result}

    def _input_key(self, stage: str) -> str:
        """An upstream stage's key: from this run, else (a stage this recipe does not run) its stage.json."""
        if stage in self.keys:
            return self.keys[stage]
        if stage == "model":  # hashing the weights is costly for a large model: once per run
            self.keys["model"] = fingerprint(weights_identity(model_directory(self.recipe.sft.model, "sft.model")))
            return self.keys["model"]
        # a stage this pipeline finished earlier and left as it was: the key it ran with, so that a recipe
        # naming fewer stages keys the later ones as the whole recipe does, and neither measures them again
        key = self.state.get(stage, {}).get("key")
        if key and self._finished_with(stage, key):
            return key
        manifest = self.workspace.path(stage) / MANIFEST
        return file_sha256(manifest) if manifest.exists() else "absent"

    def _episodes(self, name: str):
        import contextlib

        return self.hooks.episodes(name) if self.hooks.episodes else contextlib.nullcontext(None)

    # -- the stages ------------------------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        done = []
        for stage in self.recipe.run.stages:
            done += getattr(self, f"_{stage}")()
            release_freed_memory()  # one process runs every stage: what one freed should not stay with the next
        return done

    def _model(self) -> list[dict[str, Any]]:
        from evoh.models.tiny import build

        name = self.recipe.sft.model
        path = Path(name)
        if names_hub_model(name):  # a Hub model is fetched (or refused with the reason), never built in its place
            try:
                model_directory(name, "sft.model")
            except EvohError as exc:
                exc.hint += f'; to have the model stage build a new model there, write sft.model = "./{name}"'
                raise
        ran = not (path / "config.json").exists() and not names_hub_model(name)
        if self.hooks.on_stage:
            self.hooks.on_stage("model", ran)
        started = time.time()
        if ran:
            if path.exists() and any(path.iterdir()):
                raise EvohError(
                    f"{path} is not empty and holds no model", hint="point sft.model at a model directory or an empty folder"
                )
            build(path, self.recipe.env, self.recipe.run.model_size, self.recipe.sft.seed)
            if self.hooks.on_done:
                self.hooks.on_done("model", time.time() - started)
        return [{"stage": "model", "ran": ran, "seconds": time.time() - started}]

    # each stage module declares what its result depends on (``settings``, ``inputs``): the key, and what stage.json records

    def _collect(self) -> list[dict[str, Any]]:
        from evoh.stages import collect

        r, ws = self.recipe, self.workspace

        def action(resume: bool) -> dict[str, Any]:
            with self._episodes("collect") as callbacks:
                return collect.run(r, ws, callbacks)

        return [self._step("collect", collect.settings(r, ws), collect.inputs(r), action, plays=True)]

    def _refine(self) -> list[dict[str, Any]]:
        from evoh.stages import refine

        r, ws = self.recipe, self.workspace
        return [self._step("refine", refine.settings(r, ws), refine.inputs(r), lambda resume: refine.run(r, ws))]

    def _sft(self) -> list[dict[str, Any]]:
        from evoh.stages import sft

        r, ws = self.recipe, self.workspace
        action = lambda resume: sft.run(r, ws, resume=resume)
        return [
            self._step(
                "sft", sft.settings(r, ws), sft.inputs(r), action, extendable=sft.EXTENDABLE, compute_only=sft.COMPUTE_ONLY
            )
        ]

    def _grpo(self) -> list[dict[str, Any]]:
        import contextlib

        from evoh.stages import grpo

        r = self.recipe
        settings, inputs = grpo.settings(r, self.workspace), grpo.inputs(r)

        def action(resume: bool) -> dict[str, Any]:
            with self.hooks.updates() if self.hooks.updates else contextlib.nullcontext(None) as callbacks:
                result = grpo.run(
                    r,
                    self.workspace,
                    resume=resume and grpo.latest_checkpoint(self.workspace.path("grpo")) is not None,
                    callbacks=callbacks,
                )
            from evoh.inspection import plot

            result["plots"] = plot.run(self.workspace)
            return result

        return [self._step("grpo", settings, inputs, action, extendable=grpo.EXTENDABLE, compute_only=grpo.COMPUTE_ONLY)]

    def _eval(self) -> list[dict[str, Any]]:
        from evoh.stages import evaluate

        done = []
        for source in self.recipe.run.eval_from:
            for split in self.recipe.run.eval_splits:
                r = copy.deepcopy(self.recipe)
                name = f"{source}-{split}"
                r.eval.policy, r.eval.split, r.eval.name = "local", split, name
                r.model.temperature = r.run.eval_temperature
                if source == "base":
                    r.model.model, r.model.adapter = r.sft.model, ""
                    inputs = ["model"]
                else:
                    model, adapter = self.workspace.trained_weights(source)
                    r.model.model, r.model.adapter = str(model), str(adapter or "")
                    inputs = [source]
                bank = "grpo" if source == "grpo" else "collect"
                if r.run.eval_stage_banks and self.workspace.manifest(bank) is not None:
                    r.eval.bank = bank
                    inputs = sorted({*inputs, bank})
                settings = evaluate.settings(r, self.workspace)  # the weights themselves are keyed by their stage

                def action(resume: bool, r: Recipe = r, name: str = name) -> dict[str, Any]:
                    with self._episodes(f"eval/{name}") as callbacks:
                        return evaluate.run(r, self.workspace, callbacks)

                done.append(self._step(f"eval/{name}", settings, inputs, action, measures=True, plays=True))
        return done

    def _export(self) -> list[dict[str, Any]]:
        from evoh.stages import export

        r, ws = self.recipe, self.workspace
        action = lambda resume: export.run(ws, r.run.export_from, r.run.export_dtype, force=True)
        return [self._step("export", export.settings(r, ws), export.inputs(r), action)]


def eval_runs(workspace: Workspace, recipe: Recipe) -> list[Path]:
    """The eval folders this recipe's pipeline writes, in table order."""
    return [
        workspace.path(f"eval/{source}-{split}")
        for source in recipe.run.eval_from
        for split in recipe.run.eval_splits
        if (workspace.path(f"eval/{source}-{split}") / "summary.json").exists()
    ]

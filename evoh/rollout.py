"""Lock-step rollout: many episodes over the engine pool, one policy call per step for all active episodes.

This is the one loop collection, evaluation and GRPO drive, so a model is trained on exactly the turns
it is evaluated with. Finished episodes are handed to ``on_finish`` as records, in finishing order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from evoh.env.pool import EnvPool
from evoh.env.types import Task
from evoh.harness.episode import Episode, EpisodeSettings
from evoh.harness.experience import Bank
from evoh.policy.base import Policy


def rollout(
    jobs: Iterable[tuple[Hashable, Task]],
    policy: Policy,
    pool: EnvPool,
    settings: EpisodeSettings,
    bank: Bank,
    on_finish: Callable[[Episode, dict[str, Any]], None],
    max_active: int = 16,
) -> None:
    """Play every (key, task) job to the end; ``on_finish(episode, usage)`` receives each finished one."""
    waiting = deque(jobs)
    active: dict[Hashable, Episode] = {}
    usage: dict[Hashable, dict[str, int]] = {}

    def finish(key: Hashable) -> None:
        episode = active.pop(key)
        pool.release([key])
        policy.forget(key)
        on_finish(episode, usage.pop(key))

    while waiting or active:
        starting = {}
        while waiting and len(active) + len(starting) < max_active:
            key, task = waiting.popleft()
            starting[key] = task
        if starting:
            for key, step in pool.reset(starting).items():
                episode = Episode(key, starting[key], settings, bank)
                episode.start(step)
                active[key] = episode
                usage[key] = {"prompt_tokens": 0, "completion_tokens": 0, "policy_calls": 0}
        for key in [k for k, e in active.items() if e.done]:
            finish(key)
        if not active:
            continue
        episodes = list(active.values())
        completions = policy.act([e.view() for e in episodes])
        commands = {}
        for episode, completion in zip(episodes, completions, strict=True):
            counted = usage[episode.key]
            counted["prompt_tokens"] += completion.prompt_tokens
            counted["completion_tokens"] += completion.completion_tokens
            counted["policy_calls"] += 1
            if completion.truncated:  # only then: records of every other episode keep their old fields
                counted["truncated_replies"] = counted.get("truncated_replies", 0) + 1
            if completion.error:
                episode.error = f"policy: {completion.error}"
                continue
            command = episode.act(completion.text, completion.label, completion.tokens)
            if command is not None:
                commands[episode.key] = command
        if commands:
            for key, step in pool.step(commands).items():
                active[key].observe(step)
        for key in [k for k, e in active.items() if e.done]:
            finish(key)

"""Expert collection speed, and what the harness itself adds to each step.

    ALFWORLD_DATA=../shared/alfworld python benchmarks/collect_throughput.py [--games 16]

1. Episodes per minute for expert collection through the pool with 1 and 2 engine workers (the
   rollout and episode code `evoh collect` runs, without its file writing).
2. In one process, per turn: the harness's time (prompt render + turn parse + Belief/Progress update)
   against the engine's time for the same step. Target: the harness adds under 5% to a step.
"""

from __future__ import annotations

import argparse
import time

from evoh.env.engine import GameEngine
from evoh.env.games import load_tasks
from evoh.env.pool import EnvPool
from evoh.harness.episode import Episode, EpisodeSettings
from evoh.harness.experience import Bank
from evoh.policy.expert import ExpertPolicy
from evoh.policy.search_prior import SearchPrior
from evoh.rollout import rollout


def episodes_per_minute(tasks, prior: SearchPrior, workers: int) -> tuple[float, int]:
    won = 0

    def finish(episode, usage) -> None:
        nonlocal won
        won += episode.won

    with EnvPool(workers, max_steps=50) as pool:
        warm = {f"w{i}": tasks[0] for i in range(workers)}
        pool.reset(warm)  # workers started and the engine imported before the clock starts
        pool.release(list(warm))
        started = time.perf_counter()
        rollout([(t.id, t) for t in tasks], ExpertPolicy(prior), pool, EpisodeSettings(), Bank(), finish, max_active=8)
        elapsed = time.perf_counter() - started
    return len(tasks) / elapsed * 60, won


def harness_overhead(tasks, prior: SearchPrior) -> dict[str, float]:
    policy = ExpertPolicy(prior)
    harness = engine_time = 0.0
    turns = steps = 0
    for task in tasks:
        engine = GameEngine(task.game_file, 50)
        episode = Episode(task.id, task, EpisodeSettings(), Bank())
        episode.start(engine.reset())
        while not episode.done:
            t0 = time.perf_counter()
            view = episode.view()
            t1 = time.perf_counter()
            response = policy.act([view])[0].text
            t2 = time.perf_counter()
            command = episode.act(response)
            t3 = time.perf_counter()
            harness += (t1 - t0) + (t3 - t2)
            turns += 1
            if command is None:
                continue
            step = engine.step(command)
            t4 = time.perf_counter()
            episode.observe(step)
            harness += time.perf_counter() - t4
            engine_time += t4 - t3
            steps += 1
    return {
        "turns": turns,
        "env_steps": steps,
        "harness_ms_per_turn": 1000 * harness / turns,
        "engine_ms_per_step": 1000 * engine_time / steps,
        "harness_share_of_a_step": harness / steps / (engine_time / steps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--split", default="valid_seen")
    args = parser.parse_args()
    prior = SearchPrior.from_games(load_tasks("train"))
    tasks = load_tasks(args.split)[:: max(1, len(load_tasks(args.split)) // args.games)][: args.games]
    print(f"{len(tasks)} {args.split} games spread over the split, expert teacher, inline harness")
    for workers in (1, 2):
        rate, won = episodes_per_minute(tasks, prior, workers)
        print(f"  {workers} worker{'s' if workers > 1 else ''}: {rate:6.1f} episodes/min  (won {won}/{len(tasks)})")
    figures = harness_overhead(tasks, prior)
    print(
        f"  harness {figures['harness_ms_per_turn']:.2f} ms per turn over {figures['turns']} turns; "
        f"engine {figures['engine_ms_per_step']:.1f} ms per step over {figures['env_steps']} steps"
    )
    print(f"  harness time per env step = {100 * figures['harness_share_of_a_step']:.1f}% of the engine's step time")


if __name__ == "__main__":
    main()

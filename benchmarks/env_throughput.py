"""Engine throughput per world: one process, the EnvPool, and threads (sharing one lock for TextWorld, which
is not thread-safe; free for MiniHouse), and the size of a turn's prompt in each world.

    ALFWORLD_DATA=../shared/alfworld python benchmarks/env_throughput.py [--kind alfworld minihouse] [--games 8] [--steps 40]
        [--engine textworld native]

Every mode plays the same games with the same seeded random admissible commands. "resets/s" counts
loading a game and resetting it (what starting an episode of a new game costs); "steps/s" counts
commands. Process start-up and library imports are paid before the clock starts. The prompt figure is
the mean length of the expert's turn prompts (system prompt and turn) on the same games. ``--engine`` picks
the ALFWorld engines to time on the same games: TextWorld, the native engine (evoh/env/native), or both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import threading
import time
from statistics import fmean

from evoh.config import load_recipe
from evoh.env.pool import EnvPool
from evoh.env.world import load_games, make_engine, make_native_engine, open_pool

BIG = 10_000  # no episode ends on its step budget during the benchmark


def _command(rng: random.Random, admissible) -> str:
    return rng.choice([c for c in admissible if c not in ("look", "inventory")] or list(admissible))


def _advance(engine, rng: random.Random, state):
    """One command, or a fresh episode where a random walk has won its game (MiniHouse's small rooms allow it)."""
    return engine.reset() if state.done else engine.step(_command(rng, state.admissible))


ENGINES = {"textworld": make_engine, "native": make_native_engine}


def one_process(tasks, steps: int, make_engine=make_engine) -> tuple[float, float]:
    make_engine(tasks[0].game_file, BIG).reset()  # imports and caches out of the measurement
    started = time.perf_counter()
    engines = [make_engine(t.game_file, BIG) for t in tasks]
    states = [e.reset() for e in engines]
    reset_time = time.perf_counter() - started
    rngs = [random.Random(i) for i in range(len(tasks))]
    started = time.perf_counter()
    for _ in range(steps):
        states = [_advance(e, r, s) for e, r, s in zip(engines, rngs, states)]
    return reset_time, time.perf_counter() - started


def pool(tasks, steps: int, workers: int, make_engine=make_engine) -> tuple[float, float]:
    with EnvPool(workers, max_steps=BIG, engine=make_engine) as envs:
        envs.reset({"warm": tasks[0]})
        envs.release(["warm"])
        warm_others = {f"w{i}": tasks[0] for i in range(workers)}
        envs.reset(warm_others)  # every worker has imported the engine
        envs.release(list(warm_others))
        started = time.perf_counter()
        states = envs.reset(dict(enumerate(tasks)))
        reset_time = time.perf_counter() - started
        rngs = {i: random.Random(i) for i in range(len(tasks))}
        started = time.perf_counter()
        for _ in range(steps):
            won = {i: tasks[i] for i, s in states.items() if s.done}
            states = envs.step({i: _command(rngs[i], s.admissible) for i, s in states.items() if not s.done})
            states.update(envs.reset(won) if won else {})
        return reset_time, time.perf_counter() - started


def threads_(tasks, steps: int, threads: int, locked: bool, make_engine=make_engine) -> tuple[float, float]:
    make_engine(tasks[0].game_file, BIG).reset()
    lock = threading.Lock() if locked else contextlib.nullcontext()
    shares = [list(range(len(tasks)))[i::threads] for i in range(threads)]
    engines: dict[int, object] = {}
    states: dict = {}

    def start(indices):
        for i in indices:
            with lock:
                engines[i] = make_engine(tasks[i].game_file, BIG)
                states[i] = engines[i].reset()

    def play(indices):
        rngs = {i: random.Random(i) for i in indices}
        for _ in range(steps):
            for i in indices:
                with lock:
                    states[i] = _advance(engines[i], rngs[i], states[i])

    timings = []
    for phase in (start, play):
        started = time.perf_counter()
        pool_threads = [threading.Thread(target=phase, args=(share,)) for share in shares]
        for t in pool_threads:
            t.start()
        for t in pool_threads:
            t.join()
        timings.append(time.perf_counter() - started)
    return timings[0], timings[1]


def prompt_chars(kind: str, games: int) -> float:
    """Mean characters of the expert's turn prompts (system + turn) on ``games`` valid_seen games of ``kind``."""
    from evoh.harness.experience import Bank
    from evoh.policy.factory import build_policy
    from evoh.rollout import rollout
    from evoh.runs.episodes import episode_settings

    recipe = load_recipe(None, [f"env.kind={kind}", "harness.system_prompt=brief"])
    tasks = load_games(recipe.env, "valid_seen", games, spread=True)
    records = []
    with open_pool(recipe.env, recipe.env.max_steps) as envs:
        rollout(
            [(t.id, t) for t in tasks],
            build_policy("expert", recipe),
            envs,
            episode_settings(recipe),
            Bank(),
            lambda e, _: records.append(e.record()),
        )
    return fmean(len(r["system"]) + len(turn["user"]) for r in records for turn in r["trace"])


def _modes(kind: str, engine: str, tasks, args) -> dict:
    make = ENGINES[engine] if kind == "alfworld" else make_engine
    label = f"{engine}, " if kind == "alfworld" and len(args.engine) > 1 else ""
    # TextWorld is not thread-safe; MiniHouse and the native engine keep all their state per engine
    locked = kind == "alfworld" and engine == "textworld"
    return {
        f"{label}one process": lambda: one_process(tasks, args.steps, make),
        f"{label}EnvPool, {args.workers} workers": lambda: pool(tasks, args.steps, args.workers, make),
        f"{label}{args.workers} threads, {'one lock' if locked else 'no lock'}": lambda: threads_(
            tasks, args.steps, args.workers, locked, make
        ),
    }


def measure(kind: str, args) -> dict:
    env = load_recipe(None, [f"env.kind={kind}"]).env
    tasks = load_games(env, args.split, args.games, spread=True)
    modes = {}
    for engine in args.engine if kind == "alfworld" else ["minihouse"]:
        modes.update(_modes(kind, engine, tasks, args))
    rows = {}
    for name, run in modes.items():
        reset_time, step_time = run()
        rows[name] = {"resets_per_s": len(tasks) / reset_time, "steps_per_s": len(tasks) * args.steps / step_time}
    base = next(iter(rows.values()))
    for row in rows.values():
        row["reset_speedup"] = row["resets_per_s"] / base["resets_per_s"]
        row["step_speedup"] = row["steps_per_s"] / base["steps_per_s"]
    prompts = float("nan") if args.no_prompts else prompt_chars(kind, args.games)
    return {"games": len(tasks), "steps_per_game": args.steps, "modes": rows, "prompt_chars": prompts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", nargs="+", default=["alfworld", "minihouse"], choices=["alfworld", "minihouse"])
    parser.add_argument("--engine", nargs="+", default=["textworld"], choices=list(ENGINES), help="ALFWorld engines to time")
    parser.add_argument("--no-prompts", action="store_true", help="skip the expert prompt-length figure")
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40, help="commands per game")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--split", default="valid_seen")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    results = {kind: measure(kind, args) for kind in args.kind}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for kind, result in results.items():
        prompts = "" if args.no_prompts else f"; expert turn prompts {result['prompt_chars']:.0f} characters on average"
        print(f"{kind}: {result['games']} {args.split} games, {args.steps} random admissible commands each{prompts}")
        print(f"{'mode':<37}{'resets/s':>10}{'steps/s':>10}{'reset x':>9}{'step x':>8}")
        for name, row in result["modes"].items():
            print(
                f"{name:<37}{row['resets_per_s']:>10.2f}{row['steps_per_s']:>10.1f}{row['reset_speedup']:>9.2f}{row['step_speedup']:>8.2f}"
            )
    if len(results) == 2:
        a, m = results["alfworld"], results["minihouse"]
        a_one, m_one = next(iter(a["modes"].values())), next(iter(m["modes"].values()))
        print(
            f"minihouse / alfworld ({args.engine[0]}), one process: steps/s x{m_one['steps_per_s'] / a_one['steps_per_s']:.0f}, "
            f"resets/s x{m_one['resets_per_s'] / a_one['resets_per_s']:.0f}, "
            f"prompt length x{m['prompt_chars'] / a['prompt_chars']:.2f}"
        )


if __name__ == "__main__":
    main()

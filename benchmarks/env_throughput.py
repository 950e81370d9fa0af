"""Engine throughput: one process, the EnvPool, and threads sharing one lock (what TextWorld forces on threads).

    ALFWORLD_DATA=../shared/alfworld python benchmarks/env_throughput.py [--games 8] [--steps 40] [--workers 2]

Every mode plays the same games with the same seeded random admissible commands. "resets/s" counts
loading a game and resetting it (what starting an episode of a new game costs); "steps/s" counts
commands. Process start-up and library imports are paid before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time

from evoh.env.engine import GameEngine
from evoh.env.games import load_tasks
from evoh.env.pool import EnvPool

BIG = 10_000  # no episode ends on its step budget during the benchmark


def _command(rng: random.Random, admissible) -> str:
    return rng.choice([c for c in admissible if c not in ("look", "inventory")] or list(admissible))


def one_process(tasks, steps: int) -> tuple[float, float]:
    GameEngine(tasks[0].game_file, BIG).reset()  # imports and caches out of the measurement
    started = time.perf_counter()
    engines = [GameEngine(t.game_file, BIG) for t in tasks]
    states = [e.reset() for e in engines]
    reset_time = time.perf_counter() - started
    rngs = [random.Random(i) for i in range(len(tasks))]
    started = time.perf_counter()
    for _ in range(steps):
        states = [e.step(_command(r, s.admissible)) for e, r, s in zip(engines, rngs, states)]
    return reset_time, time.perf_counter() - started


def pool(tasks, steps: int, workers: int) -> tuple[float, float]:
    with EnvPool(workers, max_steps=BIG) as envs:
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
            states = envs.step({i: _command(rngs[i], s.admissible) for i, s in states.items()})
        return reset_time, time.perf_counter() - started


def locked_threads(tasks, steps: int, threads: int) -> tuple[float, float]:
    GameEngine(tasks[0].game_file, BIG).reset()
    lock = threading.Lock()
    shares = [list(range(len(tasks)))[i::threads] for i in range(threads)]
    engines: dict[int, GameEngine] = {}
    states: dict = {}

    def start(indices):
        for i in indices:
            with lock:
                engines[i] = GameEngine(tasks[i].game_file, BIG)
                states[i] = engines[i].reset()

    def play(indices):
        rngs = {i: random.Random(i) for i in indices}
        for _ in range(steps):
            for i in indices:
                command = _command(rngs[i], states[i].admissible)
                with lock:
                    states[i] = engines[i].step(command)

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40, help="commands per game")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--split", default="valid_seen")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    tasks = load_tasks(args.split)[: args.games]
    modes = {
        "one process": lambda: one_process(tasks, args.steps),
        f"EnvPool, {args.workers} workers": lambda: pool(tasks, args.steps, args.workers),
        f"{args.workers} threads, one lock": lambda: locked_threads(tasks, args.steps, args.workers),
    }
    rows = {}
    for name, run in modes.items():
        reset_time, step_time = run()
        rows[name] = {"resets_per_s": len(tasks) / reset_time, "steps_per_s": len(tasks) * args.steps / step_time}
    base = rows["one process"]
    for row in rows.values():
        row["reset_speedup"] = row["resets_per_s"] / base["resets_per_s"]
        row["step_speedup"] = row["steps_per_s"] / base["steps_per_s"]
    if args.json:
        print(json.dumps({"games": len(tasks), "steps_per_game": args.steps, "modes": rows}, indent=2))
        return
    print(f"{len(tasks)} {args.split} games, {args.steps} random admissible commands each")
    print(f"{'mode':<26}{'resets/s':>10}{'steps/s':>10}{'reset x':>9}{'step x':>8}")
    for name, row in rows.items():
        print(
            f"{name:<26}{row['resets_per_s']:>10.2f}{row['steps_per_s']:>10.1f}"
            f"{row['reset_speedup']:>9.2f}{row['step_speedup']:>8.2f}"
        )


if __name__ == "__main__":
    main()

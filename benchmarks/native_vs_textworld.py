"""The native ALFWorld engine against TextWorld, step by step on real games: the proof that they answer alike.

    ALFWORLD_DATA=../shared/alfworld python benchmarks/native_vs_textworld.py --split valid_seen --games 20 --walks 3

Per game both engines run in lockstep and are compared after the reset and after every step (observation,
admissible commands in order, won, done): (a) one episode of evoh's expert teacher, (b) ``--walks`` seeded
random walks of ``--length`` admissible commands, with (c) an inadmissible or malformed command before every
fifth one. Prints the games and steps compared and the mismatches (the first difference of a few), and exits
non-zero on any mismatch or on a game one engine could not play.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field

from evoh.env.engine import GameEngine
from evoh.env.games import load_tasks
from evoh.env.native import NativeEngine

BAD_COMMANDS = ["", "fly to the moon", "take unicorn 1 from bed 1", "go to desk 99", "look around", "put", "  ", "open"]


@dataclass
class Tally:
    games: int = 0
    steps: int = 0
    expert_episodes: int = 0
    expert_won: int = 0
    mismatches: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def _difference(a, b) -> str | None:
    """The first field in which two steps differ, as a line to print."""
    for name in ("observation", "admissible", "won", "done", "valid", "steps"):
        x, y = getattr(a, name), getattr(b, name)
        if x != y:
            if name == "admissible":
                only_tw, only_native = sorted(set(x) - set(y)), sorted(set(y) - set(x))
                return f"admissible: textworld only {only_tw[:5]}, native only {only_native[:5]}, same set: {set(x) == set(y)}"
            return f"{name}: textworld {x!r} | native {y!r}"
    return None


class Lockstep:
    """Both engines behind the engine interface: every answer is compared, TextWorld's is returned."""

    def __init__(self, game_file: str, max_steps: int, tally: Tally, label: str) -> None:
        self.tally, self.label = tally, label
        self.textworld = GameEngine(game_file, max_steps)
        self.native = NativeEngine(game_file, max_steps)
        self.history: list[str] = []

    def _compare(self, a, b, command: str | None):
        self.tally.steps += 1
        if command is not None:
            self.history.append(command)
        difference = _difference(a, b)
        if difference:
            self.tally.mismatches.append(f"{self.label} after {self.history[-6:]!r}: {difference}")
        return a

    def reset(self):
        self.history = []
        return self._compare(self.textworld.reset(), self.native.reset(), None)

    def step(self, command: str):
        return self._compare(self.textworld.step(command), self.native.step(command), command)

    def close(self) -> None:
        self.textworld.close()


def expert_episode(task, tally: Tally, max_steps: int) -> None:
    from evoh.env.inprocess import InProcessPool
    from evoh.harness.episode import EpisodeSettings
    from evoh.harness.experience import Bank
    from evoh.policy.expert import ExpertPolicy
    from evoh.policy.search_prior import SearchPrior
    from evoh.rollout import rollout

    def engine(game_file: str, steps: int) -> Lockstep:
        return Lockstep(game_file, steps, tally, f"{task.id} expert")

    won = []
    with InProcessPool(engine, max_steps=max_steps) as pool:
        settings = EpisodeSettings(max_steps=max_steps)
        rollout([(task.id, task)], ExpertPolicy(SearchPrior()), pool, settings, Bank(), lambda e, _: won.append(e.record()))
    tally.expert_episodes += 1
    tally.expert_won += bool(won and won[0].get("won"))
    if won and won[0].get("error"):
        tally.failures.append(f"{task.id} expert: {won[0]['error']}")


def random_walks(task, tally: Tally, walks: int, length: int, seed: int) -> None:
    engines = Lockstep(task.game_file, 10 * length, tally, f"{task.id} walks")
    try:
        for walk in range(walks):
            rng = random.Random(f"{seed}/{task.id}/{walk}")
            engines.label = f"{task.id} walk {walk}"
            state = engines.reset()
            for i in range(length):
                if state.won:
                    break
                if i % 5 == 4:
                    command = rng.choice(state.admissible)
                    bad = rng.choice([*BAD_COMMANDS, command + " please", command.upper()])
                    state = engines.step(bad)
                    if state.won:
                        break
                state = engines.step(rng.choice(state.admissible))
    finally:
        engines.close()


def _round_robin(tasks: list) -> list:
    """The games one task type after another in turn, so that a run cut short has still seen every type."""
    by_type: dict[str, list] = {}
    for task in tasks:
        by_type.setdefault(task.task_type, []).append(task)
    queues = list(by_type.values())
    return [queue[i] for i in range(max(map(len, queues))) for queue in queues if i < len(queue)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="valid_seen")
    parser.add_argument("--games", type=int, default=None, help="games of the split (all when left out)")
    parser.add_argument("--skip", type=int, default=0, help="games of the split to leave out first")
    parser.add_argument("--spread", action="store_true", help="take the games one task type after another in turn")
    parser.add_argument("--walks", type=int, default=3)
    parser.add_argument("--length", type=int, default=50, help="admissible commands per random walk")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-expert", action="store_true", help="random walks only")
    parser.add_argument("--show", type=int, default=5, help="mismatches to print")
    args = parser.parse_args()

    tasks = load_tasks(args.split)
    if args.spread:
        tasks = _round_robin(tasks)
    tasks = tasks[args.skip :]
    tasks = tasks[: args.games] if args.games is not None else tasks
    tally = Tally()
    started = time.perf_counter()
    for n, task in enumerate(tasks, 1):
        before = len(tally.mismatches)
        try:
            if not args.no_expert:
                expert_episode(task, tally, 50)
            random_walks(task, tally, args.walks, args.length, args.seed)
        except Exception as error:  # a game one engine cannot play is a failure of the comparison, not of the script
            tally.failures.append(f"{task.id}: {type(error).__name__}: {error}")
        tally.games += 1
        print(
            f"[{n}/{len(tasks)}] {task.id}: {len(tally.mismatches) - before} mismatches "
            f"({tally.steps} steps, {len(tally.mismatches)} mismatches, expert won {tally.expert_won}/{tally.expert_episodes} "
            f"so far, {time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    print(
        f"split {args.split}: games compared {tally.games}, steps compared {tally.steps}, mismatches {len(tally.mismatches)} "
        f"(expert episodes won {tally.expert_won} of {tally.expert_episodes})"
    )
    for line in tally.mismatches[: args.show]:
        print("  mismatch:", line)
    for line in tally.failures[: args.show]:
        print("  failure:", line)
    if tally.failures:
        print(f"games that failed: {len(tally.failures)}")
    sys.exit(1 if tally.mismatches or tally.failures else 0)


if __name__ == "__main__":
    main()

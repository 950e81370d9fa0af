"""The process pool: parallel episodes, and failures that stay with the one episode that caused them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evoh.env.engine import GameEngine
from evoh.env.games import load_tasks
from evoh.env.pool import EnvPool
from tests.fakes import FaultyEngine
from tests.subprocesses import interrupt, interruptible

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def tasks(alfworld_data: Path):
    return load_tasks("valid_seen", alfworld_data, limit=4)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split()[2] != "Z"


def _first_moves(steps):
    return {key: next(c for c in step.admissible if c.startswith("go to ")) for key, step in steps.items()}


def test_pool_results_equal_the_engine_in_process(tasks):
    with EnvPool(2, max_steps=50) as pool:
        pooled = pool.reset(dict(enumerate(tasks)))
        moves = _first_moves(pooled)
        pooled_next = pool.step(moves)
    for key, task in enumerate(tasks):
        engine = GameEngine(task.game_file, 50)
        assert engine.reset() == pooled[key]
        assert engine.step(moves[key]) == pooled_next[key]


def test_answers_come_in_the_order_asked_whichever_worker_answers_first(tasks):
    """The rollout batches episodes in this order, so sampling must not depend on which worker was quicker."""
    asked = [3, 2, 1, 0]  # keys 3 and 1 go to one worker, 2 and 0 to the other: drained per worker, they would interleave
    with EnvPool(2, max_steps=50) as pool:
        steps = pool.reset({key: tasks[key] for key in asked})
        assert list(steps) == asked
        moves = _first_moves(steps)
        assert list(pool.step({key: moves[key] for key in reversed(asked)})) == list(reversed(asked))


def test_a_worker_killed_between_calls_loses_nothing(tasks):
    with EnvPool(2, max_steps=50) as pool:
        steps = pool.reset(dict(enumerate(tasks)))
        moves = _first_moves(steps)
        steps = pool.step(moves)
        victim = pool.worker_of(0)
        os.kill(victim, signal.SIGKILL)
        time.sleep(0.3)
        after = pool.step({key: "look" for key in steps})
        assert all(s.error is None and s.valid for s in after.values())
        assert pool.replaced_workers == 1 and victim not in pool.worker_pids()
        # the rebuilt episodes continue from where they were: two steps taken, same place
        assert all(s.steps == 2 for s in after.values())
        engine = GameEngine(tasks[0].game_file, 50)
        engine.reset()
        engine.step(moves[0])
        assert after[0] == engine.step("look")


def test_a_worker_dying_mid_step_fails_only_that_episode(tasks):
    with EnvPool(2, max_steps=50, engine=FaultyEngine) as pool:
        pool.reset(dict(enumerate(tasks)))
        same_worker = [k for k in range(1, 4) if pool.worker_of(k) == pool.worker_of(0)]
        assert same_worker, "round-robin placement puts two episodes on each worker"
        result = pool.step({0: "crash!", 1: "look", 2: "look", 3: "look"})
        assert result[0].error and "died" in result[0].error and result[0].done
        assert all(result[k].error is None and result[k].valid for k in (1, 2, 3))
        assert pool.replaced_workers == 1
        # the neighbour that shared the dead worker goes on as if nothing happened
        assert pool.step({same_worker[0]: "look"})[same_worker[0]].steps == 2
        with pytest.raises(KeyError):
            pool.step({0: "look"})  # the failed episode is gone until it is reset


def test_a_hung_worker_times_out_and_is_replaced(tasks):
    with EnvPool(2, max_steps=50, step_timeout=120.0, engine=FaultyEngine) as pool:
        # starting the workers and loading the games may take long on a busy machine; only the hang is timed
        assert all(step.error is None for step in pool.reset(dict(enumerate(tasks))).values())
        pool.step_timeout = 5.0
        started = time.monotonic()
        result = pool.step({0: "hang!", 1: "look", 2: "look", 3: "look"})
        assert time.monotonic() - started < 60
        assert "did not answer within 5 s" in result[0].error
        assert all(result[k].error is None for k in (1, 2, 3))
        pool.step_timeout = 120.0
        assert pool.reset({0: tasks[0]})[0].error is None  # the key can be reused


def test_an_engine_exception_fails_only_its_episode_and_keeps_the_worker(tasks):
    with EnvPool(1, max_steps=50, engine=FaultyEngine) as pool:
        pool.reset(dict(enumerate(tasks[:2])))
        result = pool.step({0: "raise!", 1: "look"})
        assert "ValueError: the engine refused" in result[0].error
        assert result[1].valid and pool.replaced_workers == 0


def test_the_pool_reuses_loaded_games(tasks):
    with EnvPool(1, max_steps=50) as pool:
        first = pool.reset({"a": tasks[0]})["a"]
        pool.release(["a"])
        again = pool.reset({"b": tasks[0]})["b"]
        assert first == again


_INTERRUPTED_SCRIPT = textwrap.dedent(
    """
    import sys
    from evoh.env.games import load_tasks
    from evoh.env.pool import EnvPool

    if __name__ == "__main__":
        tasks = load_tasks("valid_seen", limit=2)
        with EnvPool(2, max_steps=100000) as pool:
            pool.reset(dict(enumerate(tasks)))
            print(*pool.worker_pids(), flush=True)
            while True:
                pool.step({0: "look", 1: "inventory"})
    """
)


def test_ctrl_c_stops_the_pool_and_its_workers(alfworld_data: Path, tmp_path: Path):
    script = tmp_path / "loop.py"
    script.write_text(_INTERRUPTED_SCRIPT)
    env = {**os.environ, "ALFWORLD_DATA": str(alfworld_data), "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        preexec_fn=interruptible,
    )
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    time.sleep(1.0)  # mid-stepping
    err = interrupt(proc, pids)
    assert "KeyboardInterrupt" in err
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)

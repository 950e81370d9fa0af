"""Many ALFWorld games at once, on worker processes, behind one batched call.

TextWorld's PDDL engine is not thread-safe, so parallelism comes from processes. Each worker hosts
several games; ``reset`` and ``step`` take a mapping ``episode key -> task/command`` and return
``episode key -> Step``, sending one message per worker and gathering the answers as they come.

Failures stay local. An engine exception fails only its episode. A worker that dies or stops
answering within ``step_timeout`` is killed and replaced; the episode whose request it was serving
fails with the error recorded, and every other episode it hosted is rebuilt on the replacement by
replaying its commands (the engine is deterministic), so callers never notice.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from evoh.env.engine import GameEngine
from evoh.env.types import Step, Task
from evoh.errors import RUN_FAILED, EvohError

EngineFactory = Callable[[str, int], Any]  # (game_file, max_steps) -> an object with reset() and step(command)
_IDLE_ENGINES_PER_WORKER = 8  # loaded games kept for reuse: resetting one skips loading it, most of a reset's cost


def _serve(conn: Connection, make_engine: EngineFactory, max_steps: int) -> None:
    """A worker's loop: run each batch of (op, key, argument) in order, answering every reset/step/replay."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the pool's to handle; it shuts workers down
    preload = getattr(make_engine, "preload", None)
    if preload is not None:
        preload()
    active: dict[Hashable, Any] = {}
    idle: dict[str, list[Any]] = {}

    def fresh(game_file: str) -> Any:
        stock = idle.get(game_file)
        return stock.pop() if stock else make_engine(game_file, max_steps)

    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return  # the pool is gone
        if batch is None:
            return
        for op, key, arg in batch:
            if op == "release":
                engine = active.pop(key, None)
                if engine is not None and sum(map(len, idle.values())) < _IDLE_ENGINES_PER_WORKER:
                    idle.setdefault(engine.game_file, []).append(engine)
                continue
            try:
                if op == "step":
                    step = active[key].step(arg)
                else:  # reset, or replay = reset then the commands already played
                    game_file, commands = arg
                    active[key] = engine = fresh(game_file)
                    step = engine.reset()
                    for command in commands:
                        step = engine.step(command)
                conn.send((key, step, None))
            except Exception as exc:  # the engine failed this episode only
                active.pop(key, None)
                conn.send((key, None, f"{type(exc).__name__}: {exc}"))


@dataclass
class _Request:
    op: str
    key: Hashable
    arg: Any
    timeout: float
    answer: bool = True  # False: a replay only restoring state; its step is not the caller's answer


@dataclass
class _Worker:
    process: Any
    conn: Connection
    episodes: set = field(default_factory=set)
    pending: deque = field(default_factory=deque)
    deadline: float = 0.0
    served: int = 0  # answers sent; a worker that fails before its first one cannot start at all


class EnvPool:
    """A pool of engine processes; use it as a context manager so workers always stop."""

    def __init__(
        self,
        workers: int = 2,
        *,
        max_steps: int = 50,
        step_timeout: float = 60.0,
        engine: EngineFactory = GameEngine,
    ) -> None:
        if workers < 1:
            raise ValueError("an EnvPool needs at least one worker")
        self.max_steps = max_steps
        self.step_timeout = step_timeout
        self.replaced_workers = 0
        self._engine = engine
        self._ctx = mp.get_context("spawn")  # no fork of a parent that may hold torch threads
        self._workers = [self._spawn() for _ in range(workers)]
        self._home: dict[Hashable, _Worker] = {}
        self._played: dict[Hashable, tuple[Task, list[str]]] = {}
        self._broken: dict[Hashable, str] = {}

    # -- public API -------------------------------------------------------------------------------

    def reset(self, tasks: Mapping[Hashable, Task]) -> dict[Hashable, Step]:
        """Start (or restart) an episode of each task under its key; the key names it in later calls. Answers
        come in the order of ``tasks``, whichever worker finished first."""
        requests = []
        for key, task in tasks.items():
            if key in self._home or key in self._broken:
                self.release([key])
            worker = min(self._workers, key=lambda w: len(w.episodes))
            worker.episodes.add(key)
            self._home[key] = worker
            self._played[key] = (task, [])
            requests.append((worker, _Request("reset", key, (task.game_file, []), self.step_timeout)))
        return self._run(requests)

    def step(self, commands: Mapping[Hashable, str]) -> dict[Hashable, Step]:
        """Send one command to each named episode, all workers at once; answers in the order of ``commands``."""
        results: dict[Hashable, Step] = {}
        requests = []
        for key, command in commands.items():
            if key in self._broken:
                results[key] = self._failed(key, self._broken.pop(key))
                continue
            if key not in self._home:
                raise KeyError(f"no running episode {key!r}: reset it first")
            requests.append((self._home[key], _Request("step", key, command, self.step_timeout)))
        results.update(self._run(requests))
        for key, step in results.items():
            if step.error is None:
                self._played[key][1].append(commands[key])
        return {key: results[key] for key in commands if key in results}

    def release(self, keys) -> None:
        """Forget finished episodes; their loaded games stay in the worker for the next reset."""
        for key in keys:
            self._broken.pop(key, None)
            self._played.pop(key, None)
            worker = self._home.pop(key, None)
            if worker is not None:
                worker.episodes.discard(key)
                if worker.process.is_alive():
                    try:
                        worker.conn.send([("release", key, None)])
                    except OSError:
                        pass  # found dead at the next call, and replaced there

    def worker_pids(self) -> list[int]:
        return [w.process.pid for w in self._workers]

    def worker_of(self, key: Hashable) -> int:
        """The pid of the process hosting an episode (for tests and diagnostics)."""
        return self._home[key].process.pid

    def close(self) -> None:
        for worker in self._workers:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + 2.0
        for worker in self._workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self._workers = []

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- machinery --------------------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_serve, args=(child, self._engine, self.max_steps), daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent)

    def _failed(self, key: Hashable, error: str) -> Step:
        self.release([key])
        return Step("", (), won=False, done=True, steps=0, valid=False, error=error)

    def _send(self, worker: _Worker, requests: list[_Request]) -> None:
        worker.pending.extend(requests)
        worker.deadline = time.monotonic() + worker.pending[0].timeout
        worker.conn.send([(r.op, r.key, r.arg) for r in requests])

    def _run(self, requests: list[tuple[_Worker, _Request]]) -> dict[Hashable, Step]:
        results: dict[Hashable, Step] = {}
        batches: dict[int, list[_Request]] = {}
        for worker, request in requests:
            batches.setdefault(id(worker), []).append(request)
        busy: list[_Worker] = []
        for worker in list(self._workers):
            batch = batches.get(id(worker))
            if not batch:
                continue
            if not worker.process.is_alive():  # died between calls: nothing in flight, rebuild everything
                worker = self._replace(worker, culprit=None, reason="", results=results, resend=batch)
            else:
                try:
                    self._send(worker, batch)
                except OSError:
                    worker = self._replace(worker, culprit=None, reason="", results=results, resend=batch)
            busy.append(worker)
        while any(w.pending for w in busy):
            waiting = [w for w in busy if w.pending]
            timeout = max(0.0, min(w.deadline for w in waiting) - time.monotonic())
            wait([w.conn for w in waiting] + [w.process.sentinel for w in waiting], timeout)
            for worker in waiting:
                failure = self._drain(worker, results)
                if failure is None and worker.pending and time.monotonic() > worker.deadline:
                    failure = f"engine did not answer within {worker.pending[0].timeout:.0f} s; its worker was replaced"
                if failure is not None:
                    culprit = worker.pending.popleft()
                    busy.append(self._replace(worker, culprit, failure, results, resend=list(worker.pending)))
                    busy.remove(worker)
        # in the order asked, not the order the workers answered: a caller that batches by this order (the
        # rollout's rows, and so which sampled tokens each episode gets) must not depend on timing
        return {request.key: results[request.key] for _, request in requests if request.key in results}

    def _drain(self, worker: _Worker, results: dict[Hashable, Step]) -> str | None:
        """Take every answer the worker has sent; a string if it has died (its pipe reads as closed)."""
        try:
            while worker.pending and worker.conn.poll():
                key, step, error = worker.conn.recv()
                request = worker.pending.popleft()
                worker.served += 1
                worker.deadline = time.monotonic() + (worker.pending[0].timeout if worker.pending else 0.0)
                if error is not None:
                    self._broken[key] = error
                if request.answer:
                    results[key] = step if error is None else self._failed(key, self._broken.pop(key))
        except (EOFError, OSError):
            worker.process.join(1.0)
            return f"engine worker died (exit code {worker.process.exitcode}); it was replaced"
        return None

    def _replace(
        self,
        worker: _Worker,
        culprit: _Request | None,
        reason: str,
        results: dict[Hashable, Step],
        resend: list[_Request],
    ) -> _Worker:
        """Swap a dead or hung worker for a new one, rebuild its other episodes there, re-send what it owed."""
        if not worker.served and (worker.process.exitcode or 0) > 0:
            raise EvohError(
                f"an engine worker exited with code {worker.process.exitcode} before answering anything",
                hint="rerun with EVOH_DEBUG=1 to see its error; a script that starts an EnvPool must guard its "
                "entry point with `if __name__ == '__main__':`",
                exit_code=RUN_FAILED,
            )
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join()
        worker.conn.close()
        self.replaced_workers += 1
        new = self._spawn()
        self._workers[self._workers.index(worker)] = new
        if culprit is not None:  # its episode fails, whether the caller was waiting on it or not
            lost = culprit.key
            if culprit.answer or any(r.key == lost and r.answer for r in resend):
                results[lost] = self._failed(lost, reason)
            else:
                self._broken[lost] = reason
                worker.episodes.discard(lost)
            resend = [r for r in resend if r.key != lost]
        owed = {r.key: r for r in resend if r.answer}
        restore = []
        for key in list(worker.episodes):
            if key not in self._home:
                continue
            self._home[key] = new
            new.episodes.add(key)
            task, commands = self._played[key]
            wanted = owed.get(key)
            as_answer = wanted is not None and wanted.op == "reset"
            timeout = self.step_timeout * (1 + len(commands) / 10)
            restore.append(_Request("replay", key, (task.game_file, list(commands)), timeout, answer=as_answer))
            if wanted is not None and wanted.op == "step":
                restore.append(wanted)
        if restore:
            self._send(new, restore)
        return new

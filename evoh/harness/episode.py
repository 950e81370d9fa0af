"""The episode loop shared by collection, evaluation and GRPO: prompt → act → observe.

An :class:`Episode` owns the harness state of one game (Belief, Progress, the frozen Experience bank),
renders each turn's prompt, parses the policy's response, answers meta-actions itself and hands
environment commands to the caller, who steps the engine and passes the result to ``observe``.

Tokens. A policy that samples from a local model can hand each turn's token ids with its response
(:class:`TurnTokens`); the episode keeps them beside the turn in ``tokens``, outside the JSON record, so
training reads exactly what was sampled from the finished episode.

Budget. With ``charge_meta_actions`` every turn spends one of ``max_steps``. Without it (the published
evaluation), meta-actions are free up to ``free_meta_cap`` per episode (later ones fail), every other turn
spends a step, and the episode stops for good after ``max_steps + free_meta_cap`` turns.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from evoh.env.types import Step, Task
from evoh.harness import trace_stats
from evoh.harness.belief import INVENTORY, Belief
from evoh.harness.experience import Bank, Entry
from evoh.harness.goal import Goal, goal_text, parse_goal
from evoh.harness.progress import Progress
from evoh.harness.prompts import (
    PROMPT_VERSION,
    HarnessModules,
    TurnText,
    system_prompt,
    verb_module,
)
from evoh.harness.turns import META_VERBS, PARSER_VERSION, Turn, parse_turn
from evoh.records import SCHEMAS, EpisodeRecord, TaskRef, TurnRecord

RECORD_SCHEMA = f"episode/{SCHEMAS['episode']}"


@dataclass(frozen=True)
class EpisodeSettings:
    """Everything about the loop that changes what the policy sees or how the budget runs."""

    mode: str = "inline"
    modules: HarnessModules = field(default_factory=HarnessModules)
    max_steps: int = 50
    charge_meta_actions: bool = False
    free_meta_cap: int = 20
    recall_k: int = 3
    demonstrations: str = ""
    system_style: str = "full"  # "full" or "brief": HarnessConfig.system_prompt

    def protocol(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "modules": self.modules.enabled(),
            "max_steps": self.max_steps,
            "charge_meta_actions": self.charge_meta_actions,
            "free_meta_cap": self.free_meta_cap,
            "recall_k": self.recall_k,
            "few_shot": bool(self.demonstrations),
            "system_prompt": self.system_style,
            "parser": PARSER_VERSION,
            "prompt": PROMPT_VERSION,
        }


@dataclass(frozen=True)
class TurnTokens:
    """A response as the model sampled it: the prompt's and the response's token ids, and under guided decoding
    what guidance allowed at each response position it narrowed (position -> the policy's own description)."""

    prompt: list[int]
    completion: list[int]
    choices: dict[int, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnView:
    """What a policy may see on its turn: the prompt text and the harness state behind it (never the game's)."""

    key: Any
    system: str
    user: str
    goal: Goal | None
    observation: str
    admissible: tuple[str, ...]
    belief: Belief
    progress: Progress
    recalled: tuple[Entry, ...]
    last_action: str
    last_result: str
    turn: int
    steps_left: int
    meta_allowed: tuple[str, ...]
    history: tuple[str, ...]


def _outcome(turn: Turn, executed: bool, step: Step | None) -> str:
    if turn.kind == "malformed":
        return "malformed"
    if turn.kind == "meta":
        return "done" if executed else "failed"
    if not turn.valid:
        return "invalid"
    return "won" if step is not None and step.won else "ok"


class Episode:
    """One game under the harness. ``prompt`` → ``act`` → (the caller steps the engine) → ``observe``."""

    def __init__(self, key: Any, task: Task, settings: EpisodeSettings, bank: Bank | None = None) -> None:
        self.key = key
        self.task = task
        self.settings = settings
        self.bank = bank or Bank()
        modules = settings.modules if settings.mode != "env_only" else HarnessModules(False, False, False)
        self.modules = modules
        self.system = system_prompt(
            settings.mode, modules, settings.charge_meta_actions, settings.demonstrations, settings.system_style
        )
        self.belief = Belief()
        self.progress = Progress()
        self.goal: Goal | None = None
        self.objective = ""
        self.observation = ""
        self.admissible: tuple[str, ...] = ()
        self.won = False
        self.error: str | None = None
        self.turns = 0
        self.spent = 0  # budget used
        self.env_steps = 0
        self.invalid_actions = 0
        self.meta = {verb: Counter() for verb in META_VERBS}  # verb -> attempted/executed/failed
        self.idle_meta = Counter()  # verb -> harness calls that changed nothing and told nothing new
        self._answers: dict[tuple[str, str], str] = {}  # (verb, argument) -> the last answer it got
        self.notes: list[str] = []
        self.recalled_ids: list[str] = []
        self.recalled: tuple[Entry, ...] = ()
        self.last_result = ""
        self.history: list[str] = []
        self.actions: list[str] = []
        self.trace: list[dict[str, Any]] = []
        self.tokens: list[TurnTokens | None] = []  # beside ``trace``: each turn's tokens, where the policy gave them
        self._pending: tuple[Turn, str, str, str | None, TurnTokens | None] | None = None
        self._user = ""

    # -- the loop ---------------------------------------------------------------------------------

    def start(self, step: Step) -> None:
        if step.error:
            self._fail(step.error)
            return
        self.observation = step.observation
        self.admissible = step.admissible
        self.objective = goal_text(step.observation)
        self.goal = parse_goal(self.objective)
        self.belief = Belief(step.observation)

    @property
    def done(self) -> bool:
        if self.won or self.error:
            return True
        if self.spent >= self.settings.max_steps:
            return True
        return not self.settings.charge_meta_actions and self.turns >= self.settings.max_steps + self.settings.free_meta_cap

    @property
    def steps_left(self) -> int:
        return max(0, self.settings.max_steps - self.spent)

    def view(self) -> TurnView:
        """Render this turn's prompt; the policy answers it."""
        self._user = self._turn_text().render()
        allowed = tuple(v for v in META_VERBS if self.settings.mode == "inline" and getattr(self.modules, verb_module(v)))
        return TurnView(
            self.key,
            self.system,
            self._user,
            self.goal,
            self.observation,
            self.admissible,
            self.belief,
            self.progress,
            self.recalled,
            self.actions[-1] if self.actions else "",
            self.last_result,
            self.turns,
            self.steps_left,
            allowed,
            tuple(self.history),
        )

    def act(self, response: Any, label: str | None = None, tokens: TurnTokens | None = None) -> str | None:
        """Take the policy's response; return the command to send to the engine, or None if handled here.
        ``label`` (another policy's answer to the same view) is kept with the turn for training on, and so are
        the response's ``tokens`` (beside the record, not in it)."""
        turn = parse_turn(response, self.admissible)
        self.turns += 1
        self.actions.append(turn.action)
        response_text = response if isinstance(response, str) else repr(response)
        if turn.kind == "env" and turn.valid:
            command = next(c for c in self.admissible if c.lower() == turn.action)
            self._pending = (turn, response_text, command, label, tokens)
            return command
        executed, result = False, turn.reason
        if turn.kind == "meta":
            executed, result = self._meta(turn)
            charged = self.settings.charge_meta_actions
        else:
            self.invalid_actions += 1
            result = "Nothing happens." if turn.kind == "env" else f"malformed turn: {turn.reason}"
            charged = True
        self.spent += 1 if charged else 0
        self._record(turn, response_text, executed, result, None, label, tokens)
        return None

    def observe(self, step: Step) -> None:
        """The engine's answer to the command ``act`` returned."""
        assert self._pending is not None, "observe() follows an act() that returned a command"
        turn, response_text, command, label, tokens = self._pending
        self._pending = None
        if step.error:
            self._record(turn, response_text, False, step.error, None, label, tokens)
            self._fail(step.error)
            return
        self.spent += 1
        self.env_steps += 1
        self.observation, self.admissible = step.observation, step.admissible
        self.won = step.won
        self.belief.update(command, step.observation, self.env_steps)
        self.progress.absorb(self.belief, self.turns)
        self.last_result = ""
        self._record(turn, response_text, True, step.observation, step, label, tokens)

    def _fail(self, error: str) -> None:
        self.error = error

    # -- meta-actions -----------------------------------------------------------------------------

    def _meta(self, turn: Turn) -> tuple[bool, str]:
        counts = self.meta[turn.verb]
        counts["attempted"] += 1
        before = self._harness_state()
        executed, result = self._run_meta(turn)
        counts["executed" if executed else "failed"] += 1
        if self._idle(turn, executed, result, before):
            self.idle_meta[turn.verb] += 1
        self._answers[(turn.verb, turn.argument)] = result
        self.last_result = f"{turn.verb} [{turn.argument}]: {result}" if turn.argument else result
        return executed, result

    def _harness_state(self) -> tuple:
        """What the harness holds for the policy: the plan, the notes, the recalled entries on show."""
        return (
            tuple((s.text, s.done) for s in self.progress.subgoals),
            frozenset(self.notes),
            tuple(e.id for e in self.recalled),
        )

    def _idle(self, turn: Turn, executed: bool, result: str, before: tuple) -> bool:
        """A call that spent a step for nothing: refused; a write (commit, note, recall, which fills the
        panel) that left the harness as it was; a track whose question got this answer before."""
        if not executed:
            return True
        if turn.verb == "track":
            return self._answers.get((turn.verb, turn.argument)) == result
        return self._harness_state() == before

    def _run_meta(self, turn: Turn) -> tuple[bool, str]:
        if self.settings.mode != "inline":
            return False, f"{turn.verb} is not available in {self.settings.mode} mode."
        if not getattr(self.modules, verb_module(turn.verb)):
            return False, f"the {verb_module(turn.verb)} module is switched off."
        if not turn.valid:
            return False, turn.reason
        if not self.settings.charge_meta_actions:
            used = sum(c["attempted"] for c in self.meta.values())
            if used > self.settings.free_meta_cap:
                return False, f"no free harness actions left ({self.settings.free_meta_cap} per episode)."
        if turn.verb == "track":
            return True, self.belief.track(turn.argument)
        if turn.verb == "commit":
            executed, message = self.progress.commit(turn.argument, self.turns)
            self.progress.absorb(self.belief, self.turns)
            return executed, message
        if turn.verb == "recall":
            entries = tuple(self.bank.recall(turn.argument, self.settings.recall_k))
            self.recalled = entries
            self.recalled_ids += [e.id for e in entries]
            return (
                True,
                f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} recalled."
                if entries
                else "nothing relevant in experience yet.",
            )
        self.notes.append(turn.argument)
        return True, "noted for the next consolidation."

    # -- text and records -------------------------------------------------------------------------

    def _turn_text(self) -> TurnText:
        modules, mode = self.modules, self.settings.mode
        text = TurnText(
            objective=self.objective,
            observation=self.observation,
            admissible=self.admissible,
            history=self.history,
            budget=f"Step {self.spent + 1} of {self.settings.max_steps} ({self.steps_left} left).",
        )
        if mode == "inline":
            if modules.plan:
                text.plan = self.progress.checklist()
            if modules.experience and self.recalled:
                text.recalled = "\n".join(e.render() for e in self.recalled)
            text.last_result = self.last_result or None
        elif mode == "always_on":
            if modules.belief:
                text.belief_panel = self._belief_panel()
            if modules.plan:
                if not self.progress.subgoals and self.goal:
                    for milestone in self.goal.milestones():
                        self.progress.commit(milestone, self.turns)
                    self.progress.absorb(self.belief, self.turns)
                text.plan = self.progress.checklist()
            if modules.experience:
                entries = self._panel_experience()
                text.experience_panel = "\n".join(e.render() for e in entries) if entries else "(nothing yet)"
        return text

    def _belief_panel(self) -> str:
        b = self.belief
        seen = [f"{o.name} ({'in hand' if o.where == INVENTORY else o.where or 'moved'})" for o in b.objects.values()]
        lines = [
            f"at: {b.location or 'start'}; holding: {', '.join(b.inventory) or 'nothing'}",
            "seen: " + (", ".join(seen[-30:]) if seen else "nothing yet"),
            "not yet visited: " + (", ".join(b.unvisited()) or "none"),
        ]
        return "\n".join(lines)

    def _panel_experience(self) -> list[Entry]:
        if not self.goal:
            return []
        entries = self.bank.recall(f"where to find {self.goal.object}", 1)
        entries += self.bank.recall(f"how to do {self.goal.task} task", self.settings.recall_k)
        self.recalled_ids += [e.id for e in entries] if self.turns == 0 else []
        return entries

    def _record(
        self,
        turn: Turn,
        response: str,
        executed: bool,
        result: str,
        step: Step | None,
        label: str | None = None,
        tokens: TurnTokens | None = None,
    ) -> None:
        tag = _outcome(turn, executed, step)
        self.tokens.append(tokens)
        self.history.append(f"{len(self.history) + 1}. {turn.action or '(malformed)'} [{tag}]")
        self.trace.append(
            {
                "user": self._user,
                "response": response,
                "action": turn.action,
                "kind": turn.kind,
                "verb": turn.verb,
                "valid": turn.valid,
                "executed": executed,
                "outcome": tag,
                "result": result,
                "reason": turn.reason,
                **({"label": label} if label is not None else {}),
            }
        )

    def meta_counts(self) -> dict[str, dict[str, int]]:
        return {verb: {k: c.get(k, 0) for k in ("attempted", "executed", "failed")} for verb, c in self.meta.items()}

    def record(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The episode as written to JSONL (DESIGN.md: trace, counts per verb, steps, turns, final state)."""
        return self.typed_record(extra).to_dict()

    def typed_record(self, extra: dict[str, Any] | None = None) -> EpisodeRecord:
        """The episode's record; ``extra`` (a fingerprint, the policy, its usage) is written after its fields."""
        state_done = bool(
            self.goal and self.goal.state and any(self.goal.state in o.states for o in self.belief.objects_of(self.goal.object))
        )
        return EpisodeRecord(
            schema=RECORD_SCHEMA,
            task=TaskRef.from_dict(self.task.to_dict()),
            objective=self.objective,
            goal=self.goal.to_dict() if self.goal else None,
            protocol=self.settings.protocol(),
            bank=self.bank.digest(),
            won=self.won,
            error=self.error,
            turns=self.turns,
            env_steps=self.env_steps,
            spent=self.spent,
            invalid_actions=self.invalid_actions,
            meta=self.meta_counts(),
            meta_actions=sum(c["attempted"] for c in self.meta.values()),
            idle_meta={verb: self.idle_meta[verb] for verb in META_VERBS},
            repeats=trace_stats.repeats(self.actions),
            max_repeat=trace_stats.max_repeat(self.actions),
            revisits=trace_stats.revisits(self.trace),
            notes=self.notes,
            recalled=self.recalled_ids,
            found_at=trace_stats.found_at(self.belief.first_seen),
            state_done=state_done,
            procedure=trace_stats.procedure(self.goal, self.won, self.trace),
            belief=self.belief.to_dict(),
            plan=self.progress.to_dict(),
            system=self.system,
            trace=tuple(TurnRecord.from_dict(turn) for turn in self.trace),
            extra=dict(extra or {}),
        )

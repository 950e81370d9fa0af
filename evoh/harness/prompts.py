"""The words the policy reads: a system prompt per harness mode and module set, and the text of each turn.

Every prompt is rebuilt from scratch each turn (objective, observation, admissible commands, previous
actions with outcome tags, harness views), so its size stays flat over a long episode.
"""

from __future__ import annotations

from dataclasses import dataclass

from evoh.harness.turns import META_VERBS

PROMPT_VERSION = "prompt/1"
MODES = ("env_only", "always_on", "inline")

_INTRO = (
    "You are an agent in a household text world. Each turn you see your objective, what you just observed, "
    "the commands you may type, and the actions you took so far. Answer with one or two short sentences of "
    "thought and exactly one action, in this form:\n<think>your thought</think><action>one action</action>"
)
_ENV = "An environment action must be one of the admissible commands, copied exactly. Anything else is invalid and wastes a step."
_VERBS = {
    "belief": "track [object or receptacle]: what you have seen of it (where, its state) and the places not yet visited.",
    "plan": "commit [subgoal]: add a subgoal to your plan, or mark a subgoal on it as done.",
    "experience": (
        'recall [query]: ask your experience from earlier episodes: "where to find X", "how to do <task> task", or "mistakes".\n'
        "- note [insight]: keep a lesson for future episodes."
    ),
}
_PANELS = {
    "belief": "a Belief panel with what you have seen this episode",
    "plan": "a Plan panel with the subgoals of your objective",
    "experience": "an Experience panel with lessons from earlier episodes",
}


@dataclass(frozen=True)
class HarnessModules:
    """Which harness parts are present: a switched-off module leaves the prompt and its verbs fail."""

    belief: bool = True
    plan: bool = True
    experience: bool = True

    def enabled(self) -> list[str]:
        return [name for name in ("belief", "plan", "experience") if getattr(self, name)]


def verb_module(verb: str) -> str:
    return {"track": "belief", "commit": "plan", "recall": "experience", "note": "experience"}[verb]


def system_prompt(
    mode: str, modules: HarnessModules, charge_meta_actions: bool, demonstrations: str = "", style: str = "full"
) -> str:
    """The rules of the game, in words (``full``) or in one line (``brief``: only what varies between settings,
    the verbs, the panels, the budget rule). A model trained from scratch learns the rules from its examples,
    and the full text would be two fifths of every example it computes."""
    rules = _brief_rules if style == "brief" else _full_rules
    parts = rules(mode, modules.enabled(), charge_meta_actions)
    if demonstrations:
        parts.append("Examples of finished episodes:\n" + demonstrations)
    return "\n\n".join(parts)


def _full_rules(mode: str, enabled: list[str], charge_meta_actions: bool) -> list[str]:
    parts = [_INTRO, _ENV]
    if mode == "inline" and enabled:
        cost = "costs one step, like any action" if charge_meta_actions else "does not use up your step budget"
        verbs = "\n".join(f"- {_VERBS[m]}" for m in enabled)
        parts.append(
            "You also have a harness that keeps state for you. Its actions do not change the world; their result "
            f"appears in your next turn, and each one {cost}:\n{verbs}"
        )
    elif mode == "always_on" and enabled:
        panels = ", ".join(_PANELS[m] for m in enabled)
        parts.append(f"Each turn also shows {panels}. Only environment actions are available.")
    return parts


def _brief_rules(mode: str, enabled: list[str], charge_meta_actions: bool) -> list[str]:
    line = "Household agent. Reply <think>thought</think><action>one action</action>."
    if mode == "inline" and enabled:
        verbs = [v for v in META_VERBS if verb_module(v) in enabled]
        cost = "each costs one step" if charge_meta_actions else "free"
        line += f" Harness actions: {', '.join(verbs)} ({cost})."
    elif mode == "always_on" and enabled:
        line += f" Panels: {', '.join(enabled)}."
    return [line]


@dataclass
class TurnText:
    """The pieces of one turn's prompt; ``render`` joins the ones that are present."""

    objective: str
    observation: str
    admissible: tuple[str, ...]
    history: list[str]
    budget: str
    plan: str | None = None
    recalled: str | None = None
    last_result: str | None = None
    belief_panel: str | None = None
    experience_panel: str | None = None

    def render(self) -> str:
        lines = [f"Objective: {self.objective}", self.budget, f"Observation: {self.observation}"]
        if self.belief_panel is not None:
            lines.append(f"Belief:\n{self.belief_panel}")
        if self.plan is not None:
            lines.append(f"Plan:\n{self.plan}")
        if self.experience_panel is not None:
            lines.append(f"Experience:\n{self.experience_panel}")
        if self.recalled:
            lines.append(f"Recalled:\n{self.recalled}")
        if self.last_result:
            lines.append(f"Harness result: {self.last_result}")
        lines.append("Previous actions: " + ("; ".join(self.history[-60:]) if self.history else "none"))
        lines.append("Admissible commands: " + ", ".join(self.admissible))
        return "\n".join(lines)


def demonstrations(records: list[dict], count: int) -> str:
    """Few-shot examples made from recorded expert episodes (won ones, one per task type first)."""
    won = [r for r in records if r.get("won")]
    chosen, seen_types = [], set()
    for record in won:
        kind = (record.get("goal") or {}).get("task")
        if kind not in seen_types:
            chosen.append(record)
            seen_types.add(kind)
    chosen += [r for r in won if r not in chosen]
    blocks = []
    for record in chosen[:count]:
        turns = "\n".join(t["response"] for t in record["trace"])
        blocks.append(f"Objective: {record['objective']}\n{turns}")
    return "\n\n".join(blocks)

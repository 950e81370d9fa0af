"""`evoh view`: one self-contained HTML page of one or more runs' episodes, game by game.

The page needs no server and no network: its style and script are inline and every piece of recorded
text is escaped. A list of games on the left (filtered by outcome, task type and text); on the right the
chosen game as each run played it, side by side, one card per turn: the thought, the action, its result,
the Belief/Progress/Experience panels as the turn's prompt showed them, and what the prompt showed that
the previous turn's did not. The filters live in the page's address (``#game=…&outcome=lost&type=heat``),
so a link opens the page as it was left.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from evoh.errors import EvohError
from evoh.inspection.episodes import (
    Episodes,
    belief_text,
    outcome,
    panels,
    plan_text,
    prompt_change,
    prompt_sections,
    read_episodes,
    short_type,
    thought,
)

MAX_RUNS = 4


def e(value: Any) -> str:
    """Text as HTML: every character that could open a tag or end an attribute escaped."""
    return escape(str(value), quote=True)


def load_runs(paths: list[Path]) -> list[Episodes]:
    if not paths:
        raise EvohError(
            "no run to view", hint="give an eval run folder (WS/eval/<name>) or an episodes.jsonl, and a second one to compare"
        )
    if len(paths) > MAX_RUNS:
        raise EvohError(
            f"{len(paths)} runs given; the page puts at most {MAX_RUNS} side by side", hint="view fewer runs at a time"
        )
    runs = [read_episodes(p) for p in paths]
    labels = [r.label for r in runs]
    for run in runs:
        if labels.count(run.label) > 1:  # two workspaces' eval/sft-seen: name each by its workspace too
            folder = run.file.resolve().parent
            run.label = f"{folder.parent.parent.name}/{folder.name}" if folder.parent.name == "eval" else str(run.file)
    if len({r.label for r in runs}) < len(runs):
        for number, run in enumerate(runs, start=1):
            run.label = f"{number}: {run.label}"
    return runs


def games(runs: list[Episodes]) -> list[tuple[str, list[dict[str, Any] | None]]]:
    """Each game any run played, by task id, with each run's (last) episode of it or None."""
    by_run = []
    for run in runs:
        played: dict[str, dict[str, Any]] = {}
        for i in run.current:
            played[run.records[i]["task"]["id"]] = run.records[i]
        by_run.append(played)
    ids = sorted({i for played in by_run for i in played})
    return [(i, [played.get(i) for played in by_run]) for i in ids]


def render(runs: list[Episodes], prompts: bool = False) -> str:
    table = games(runs)
    title = "evoh view: " + " vs ".join(r.label for r in runs)
    types = sorted({short_type(rec["task"]["task_type"]) for _, recs in table for rec in recs if rec})
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{STYLE}</style></head>",
        f'<body class="show-env show-meta show-invalid" style="--runs: {len(runs)}">',
        f"<header><h1>{e(title)}</h1>{_run_summaries(runs)}",
        _filters(runs, types),
        "</header><main>",
        '<nav id="games" aria-label="games"><ol>',
    ]
    for number, (task_id, records) in enumerate(table):
        first = next(r for r in records if r)
        outcomes = " ".join(outcome(r) if r else "none" for r in records)
        badges = "".join(_badge(outcome(r) if r else "none", run.label) for r, run in zip(records, runs))
        parts.append(
            f'<li data-game="{e(task_id)}" data-type="{e(short_type(first["task"]["task_type"]))}" data-outcomes="{e(outcomes)}" '
            f'data-text="{e((task_id + " " + first["objective"]).lower())}"><a href="#game={number}">{badges}'
            f'<span class="id">{e(task_id)}</span><span class="objective">{e(first["objective"])}</span></a></li>'
        )
    parts.append('</ol></nav><div id="view">')
    parts.append('<p id="empty" hidden>No game matches the filters.</p>')
    for number, (task_id, records) in enumerate(table):
        parts.append(
            f'<section class="game" id="game-{number}" data-game="{e(task_id)}" hidden><h2>{e(task_id)}</h2><div class="columns">'
        )
        for record, run in zip(records, runs):
            parts.append(_episode(record, run.label, prompts))
        parts.append("</div></section>")
    parts.append(f"</div></main><script>{SCRIPT}</script></body></html>")
    return "\n".join(parts)


def write(paths: list[Path], out: Path, prompts: bool = False) -> dict[str, Any]:
    runs = load_runs(paths)
    page = render(runs, prompts)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
    except OSError as error:
        raise EvohError(f"cannot write {out}: {error.strerror}", hint="give --out a path in a folder you can write to") from None
    return {
        "page": str(out),
        "bytes": len(page.encode()),
        "games": len(games(runs)),
        "runs": [{"label": r.label, "file": str(r.file), "episodes": len(r.current)} for r in runs],
    }


def _badge(result: str, label: str) -> str:
    text = {"won": "won", "lost": "lost", "error": "error", "none": "not played"}[result]
    return f'<span class="badge {result}" title="{e(label)}: {text}">{text[0].upper() if result != "none" else "·"}</span>'


def _run_summaries(runs: list[Episodes]) -> str:
    items = []
    for run in runs:
        current = run.current_records
        won = sum(outcome(r) == "won" for r in current)
        finished = sum(outcome(r) != "error" for r in current)
        policy = current[0].get("policy") or {}
        who = " ".join(str(v) for v in (policy.get("policy"), policy.get("model"), policy.get("adapter")) if v)
        rate = f"{100 * won / finished:.1f}%" if finished else "-"
        items.append(
            f"<li><b>{e(run.label)}</b>: {won} won of {finished} finished ({rate}), {len(current) - finished} errors"
            f'{f"; policy {e(who)}" if who else ""} <span class="file">{e(run.file)}</span></li>'
        )
    return f'<ul class="runs">{"".join(items)}</ul>'


def _filters(runs: list[Episodes], types: list[str]) -> str:
    several = len(runs) > 1
    outcomes = [
        ("all", "all games"),
        ("won", "won" + (" by every run" if several else "")),
        ("lost", "lost" + (" by a run" if several else "")),
    ]
    if several:
        outcomes.append(("differ", "runs differ"))
    outcomes.append(("error", "errors"))
    options = "".join(f'<option value="{v}">{e(t)}</option>' for v, t in outcomes)
    type_options = '<option value="all">all types</option>' + "".join(f'<option value="{e(t)}">{e(t)}</option>' for t in types)
    kinds = "".join(
        f'<label><input type="checkbox" name="kind" value="{k}" checked> {k} turns</label>' for k in ("env", "meta", "invalid")
    )
    return (
        '<form id="filters" onsubmit="return false">'
        f'<select id="outcome" aria-label="outcome">{options}</select>'
        f'<select id="type" aria-label="task type">{type_options}</select>'
        '<input id="search" type="search" placeholder="game id or objective" aria-label="search">'
        f"{kinds}"
        '<span id="count"></span><span class="keys">n / p: next / previous game</span></form>'
    )


def _episode(record: dict[str, Any] | None, label: str, prompts: bool) -> str:
    if record is None:
        return f'<div class="episode missing"><h3>{e(label)}</h3><p>This run did not play this game.</p></div>'
    result = outcome(record)
    meta = record.get("meta") or {}
    usage = ", ".join(f"{verb} {(meta.get(verb) or {}).get('attempted', 0)}" for verb in meta)
    parts = [
        f'<div class="episode {result}"><h3>{e(label)} {_badge(result, label)} <span class="result">{e(result)}</span></h3>',
        f'<p class="stats">{record["env_steps"]} env steps, {record["turns"]} turns, {record["invalid_actions"]} invalid, '
        f"{record['meta_actions']} meta-actions ({e(usage)})</p>",
        f'<p class="objective">{e(record["objective"])}</p>',
    ]
    if record.get("error"):
        parts.append(f'<p class="error">error: {e(record["error"])}</p>')
    parts.append(f"<details><summary>system prompt</summary><pre>{e(record['system'])}</pre></details>")
    before: dict[str, str] | None = None
    shown_before: dict[str, str | None] = {}
    for number, turn in enumerate(record["trace"], start=1):
        sections = prompt_sections(turn["user"])
        parts.append(_card(number, turn, sections, before, shown_before, prompts or number == 1))
        before, shown_before = sections, panels(sections)
    end = [("Belief", belief_text(record.get("belief"))), ("Progress", plan_text(record.get("plan")))]
    experience = []
    if record.get("recalled"):
        experience.append("recalled: " + ", ".join(record["recalled"]))
    experience += [f"note: {n}" for n in record.get("notes") or []]
    end.append(("Experience", "\n".join(experience)))
    blocks = "".join(f'<div class="panel"><h4>{name}</h4><pre>{e(text) or "(nothing)"}</pre></div>' for name, text in end)
    parts.append(f'<div class="end"><h4>At the end</h4><div class="panels">{blocks}</div></div></div>')
    return "".join(parts)


def _card(
    number: int,
    turn: dict[str, Any],
    sections: dict[str, str],
    before: dict[str, str] | None,
    shown_before: dict[str, str | None],
    whole: bool,
) -> str:
    kind = "invalid" if turn["outcome"] in ("invalid", "malformed") or not turn["valid"] else turn["kind"]
    parts = [
        f'<article class="turn k-{e(kind)} o-{e(turn["outcome"])}">',
        f'<header><b>{number}</b> <span class="kind">{e(turn["kind"])}</span> <span class="outcome">{e(turn["outcome"])}</span>'
        f' <span class="budget">{e(sections.get("Step", ""))}</span></header>',
    ]
    said = thought(turn)
    if said:
        parts.append(f'<p class="thought">{e(said)}</p>')
    parts.append(f'<p class="action"><code>{e(turn["action"] or "(no action)")}</code></p>')
    if turn["outcome"] == "malformed" or not turn["action"]:
        parts.append(f'<pre class="response">{e(turn["response"])}</pre>')
    if turn.get("reason"):
        parts.append(f'<p class="reason">why: {e(turn["reason"])}</p>')
    if "label" in turn:
        parts.append(f'<p class="label">label (trained on): <code>{e(turn["label"])}</code></p>')
    parts.append(f'<pre class="result">{e(turn["result"])}</pre>')
    shown = panels(sections)
    if any(v is not None for v in shown.values()):
        blocks = []
        for name, text in shown.items():
            if text is None:
                continue
            if before is not None and text == shown_before.get(name):
                blocks.append(f'<div class="panel same"><h4>{name}</h4><p>unchanged</p></div>')
            else:
                blocks.append(f'<div class="panel changed"><h4>{name}</h4><pre>{e(text) or "(empty)"}</pre></div>')
        parts.append(f'<div class="panels">{"".join(blocks)}</div>')
    changes = prompt_change(before, sections)
    if changes:
        items = []
        for change in changes:
            lines = "".join(f"<del>− {e(x)}</del>" for x in change["removed"]) + "".join(
                f"<ins>+ {e(x)}</ins>" for x in change["added"]
            )
            items.append(f"<li><b>{e(change['section'])}</b>{lines}</li>")
        parts.append(
            f'<details class="change"><summary>prompt change: {e(", ".join(c["section"] for c in changes))}</summary>'
            f"<ul>{''.join(items)}</ul></details>"
        )
    if whole:
        parts.append(f'<details class="prompt"><summary>whole prompt</summary><pre>{e(turn["user"])}</pre></details>')
    parts.append("</article>")
    return "".join(parts)


# A line that ends in a backslash goes on in the next one: the page gets the same text as one long line,
# and the source stays within the line length.
STYLE = """
:root { --bg: #fafafa; --card: #fff; --line: #ddd; --won: #1a7f37; --lost: #b35900; --error: #c62828; --meta: #6f42c1; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, sans-serif; background: var(--bg); color: #222; }
header { padding: 8px 16px; border-bottom: 1px solid var(--line); background: #fff; position: sticky; top: 0; z-index: 2; }
h1 { font-size: 18px; margin: 0 0 4px; }
ul.runs { margin: 0 0 6px; padding-left: 18px; } .file { color: #777; font-size: 12px; }
#filters { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; }
#count { font-weight: bold; } .keys { color: #888; font-size: 12px; }
main { display: flex; height: calc(100vh - 110px); }
nav { width: 300px; min-width: 220px; overflow-y: auto; border-right: 1px solid var(--line); background: #fff; }
nav ol { list-style: none; margin: 0; padding: 0; }
nav li a { display: block; padding: 4px 8px; color: inherit; text-decoration: none; border-bottom: 1px solid #f0f0f0; }
nav li a:hover { background: #f3f3f3; } nav li.current a { background: #e8f0fe; }
nav .id { font-family: ui-monospace, monospace; font-size: 12px; margin-left: 4px; }
nav .objective { display: block; color: #666; font-size: 12px; }
.badge { display: inline-block; width: 18px; text-align: center; border-radius: 3px; color: #fff; \
font-size: 11px; font-weight: bold; margin-right: 2px; }
.badge.won { background: var(--won); } .badge.lost { background: var(--lost); } \
.badge.error { background: var(--error); } .badge.none { background: #aaa; }
#view { flex: 1; overflow: auto; padding: 8px 16px; }
h2 { font-size: 16px; font-family: ui-monospace, monospace; margin: 4px 0 8px; }
.columns { display: grid; grid-template-columns: repeat(var(--runs), minmax(340px, 1fr)); gap: 12px; align-items: start; }
.episode h3 { margin: 0; font-size: 15px; } .episode .result { font-weight: normal; color: #555; }
.stats, .objective { margin: 2px 0; color: #444; } .objective { font-weight: bold; } .error { color: var(--error); }
.turn { background: var(--card); border: 1px solid var(--line); border-left: 4px solid #888; \
border-radius: 4px; margin: 8px 0; padding: 6px 8px; }
.turn.k-meta { border-left-color: var(--meta); } .turn.k-env { border-left-color: #0969da; } \
.turn.k-invalid { border-left-color: var(--error); }
.turn header { all: unset; display: block; font-size: 12px; color: #555; }
.turn .kind { text-transform: uppercase; font-weight: bold; } .turn .budget { float: right; color: #888; }
.thought { margin: 4px 0; font-style: italic; color: #333; }
.action { margin: 4px 0; } .action code { background: #eef; padding: 1px 4px; border-radius: 3px; font-size: 13px; }
pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0; font-size: 12px; font-family: ui-monospace, monospace; }
.result { background: #f6f8fa; padding: 4px; border-radius: 3px; }
.reason { color: var(--error); margin: 2px 0; } .label { margin: 2px 0; color: #555; }
.panels { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 6px; margin-top: 4px; }
.panel { border: 1px solid #eee; border-radius: 3px; padding: 2px 4px; } \
.panel h4 { margin: 0; font-size: 11px; text-transform: uppercase; color: #666; }
.panel.changed { border-color: #c8b6f0; background: #fbf9ff; } .panel.same p { margin: 0; color: #aaa; font-size: 11px; }
details { margin-top: 4px; font-size: 12px; } summary { cursor: pointer; color: #555; }
.change ul { margin: 2px 0; padding-left: 16px; } \
.change ins, .change del { display: block; text-decoration: none; font-family: ui-monospace, monospace; white-space: pre-wrap; }
.change ins { color: var(--won); } .change del { color: var(--error); }
.end { margin-top: 8px; } .end > h4 { margin: 0; }
body:not(.show-env) .turn.k-env, body:not(.show-meta) .turn.k-meta, body:not(.show-invalid) .turn.k-invalid { display: none; }
"""

SCRIPT = """
(function () {
  const items = Array.from(document.querySelectorAll('#games li'));
  const field = (id) => document.getElementById(id);
  const kinds = Array.from(document.querySelectorAll('input[name=kind]'));
  function state() {
    const s = new URLSearchParams(location.hash.slice(1));
    return { game: s.get('game'), outcome: s.get('outcome') || 'all', type: s.get('type') || 'all', q: s.get('q') || '',
             kinds: s.has('kinds') ? s.get('kinds').split(',').filter(Boolean) : ['env', 'meta', 'invalid'] };
  }
  function keeps(li, s) {
    const outcomes = li.dataset.outcomes.split(' ');
    const played = outcomes.filter((o) => o !== 'none');
    if (s.type !== 'all' && li.dataset.type !== s.type) return false;
    if (s.q && !li.dataset.text.includes(s.q.toLowerCase())) return false;
    if (s.outcome === 'won') return played.every((o) => o === 'won');
    if (s.outcome === 'lost') return played.includes('lost');
    if (s.outcome === 'error') return played.includes('error');
    if (s.outcome === 'differ') return new Set(outcomes).size > 1;
    return true;
  }
  function apply() {
    const s = state();
    field('outcome').value = s.outcome; field('type').value = s.type;
    if (document.activeElement !== field('search')) field('search').value = s.q;
    kinds.forEach((box) => { box.checked = s.kinds.includes(box.value); \
document.body.classList.toggle('show-' + box.value, box.checked); });
    let visible = 0, first = null;
    items.forEach((li, i) => { const keep = keeps(li, s); li.hidden = !keep; \
if (keep) { visible += 1; if (first === null) first = i; } });
    field('count').textContent = visible + ' of ' + items.length + ' games';
    let chosen = s.game !== null && items[Number(s.game)] && !items[Number(s.game)].hidden ? Number(s.game) : first;
    document.querySelectorAll('section.game').forEach((section, i) => { section.hidden = i !== chosen; });
    items.forEach((li, i) => li.classList.toggle('current', i === chosen));
    field('empty').hidden = chosen !== null;
    document.body.dataset.shown = chosen === null ? '' : items[chosen].dataset.game;
    document.body.dataset.visible = String(visible);
  }
  function set(changes) {
    const s = new URLSearchParams(location.hash.slice(1));
    for (const [k, v] of Object.entries(changes)) { if (v === null || v === '' || v === 'all') s.delete(k); else s.set(k, v); }
    location.hash = s.toString();
  }
  items.forEach((li, i) => li.querySelector('a').addEventListener('click', (event) => { \
event.preventDefault(); set({ game: String(i) }); }));
  field('outcome').addEventListener('change', () => set({ outcome: field('outcome').value }));
  field('type').addEventListener('change', () => set({ type: field('type').value }));
  field('search').addEventListener('input', () => set({ q: field('search').value }));
  kinds.forEach((box) => box.addEventListener('change', () => set({ \
kinds: kinds.filter((b) => b.checked).map((b) => b.value).join(',') || ',' })));
  document.addEventListener('keydown', (event) => {
    if (event.target.tagName === 'INPUT' || (event.key !== 'n' && event.key !== 'p')) return;
    const shown = items.map((li, i) => (li.hidden ? -1 : i)).filter((i) => i >= 0);
    const at = shown.indexOf(items.findIndex((li) => li.classList.contains('current')));
    const next = shown[Math.min(shown.length - 1, Math.max(0, at + (event.key === 'n' ? 1 : -1)))];
    if (next !== undefined) set({ game: String(next) });
  });
  window.addEventListener('hashchange', apply);
  apply();
})();
"""

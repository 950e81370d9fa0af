"""The figures: GRPO's annealing and success curves and the report's chart, checked on the figures themselves
(ticks, legends, titles, colours, intervals, marks) before they become PNG files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoh.harness.turns import META_VERBS
from tests.cli_runner import evoh

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def test_wilson_intervals_match_their_closed_form():
    from evoh.inspection.figures import wilson

    assert wilson(0, 0) is None
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(10, 10) == pytest.approx((1 - 0.2775, 1.0), abs=1e-4)
    assert wilson(1, 60)[1] - wilson(1, 60)[0] < wilson(1, 6)[1] - wilson(1, 6)[0]  # more games, a narrower interval


def _inside_axes(fig, legend, axis) -> bool:
    """Whether a legend's box overlaps its panel's data area."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return legend.get_window_extent(renderer).overlaps(axis.get_window_extent(renderer))


def _colors(axis) -> set[str]:
    from matplotlib.colors import to_hex

    found = {to_hex(line.get_color()) for line in axis.get_lines()}
    found |= {to_hex(patch.get_facecolor()) for patch in axis.patches}
    found |= {to_hex(c.get_facecolor()[0]) for c in axis.collections if len(c.get_facecolor())}
    return found - {"#000000", "#1a1a1a", "#262626", "#ffffff"}  # black whiskers, the grey total


# ---- GRPO ----------------------------------------------------------------------------------------


def _metrics(update: int) -> dict:
    share = {"track": 0.5, "commit": 4.0 - 0.5 * update, "recall": 2.0, "note": 0.5}
    return {
        "update": update, "episodes": 16, "errors": 1, "success": [2, 5, 6][update] / 15, "meta_actions": sum(share.values()),
        "meta_per_episode": share, "lambda_div": [1.0, 0.5, 0.0][update], "invalid_rate": 0.0, "reward_mean": 1.0 + update,
        "reward_std": 0.5, "greedy": {"episodes": 4, "errors": 0, "success": 0.25 * update},
    }  # fmt: skip


@pytest.fixture()
def grpo_run(tmp_path: Path) -> Path:
    ws = tmp_path / "trial-7"
    (ws / "grpo").mkdir(parents=True)
    (ws / "grpo" / "metrics.jsonl").write_text("".join(json.dumps(_metrics(u)) + "\n" for u in range(3)))
    validation = [
        {
            "update": u,
            "episodes": 8,
            "errors": 0,
            "success": u / 8,
            "meta_actions": 5.0,
            "drift": {"flips": 0.01 * u, "kl": 0.001 * u},
        }
        for u in (0, 2)
    ]
    (ws / "grpo" / "validation.jsonl").write_text("".join(json.dumps(v) + "\n" for v in validation))
    (ws / "evoh.toml").write_text(
        '[env]\nkind = "minihouse"\n\n'
        "[grpo]\nupdates = 3\ntasks_per_update = 2\ngroup_size = 8\nlr = 1e-05\nmax_steps = 30\nkl = 0.01\n"
    )
    return ws


def test_the_grpo_figures_name_the_run_keep_legends_off_the_data_and_count_updates_in_whole_numbers(
    grpo_run: Path, tmp_path: Path
):
    from evoh.inspection import plot
    from evoh.inspection.figures import VERB_COLORS
    from evoh.workspace import Workspace

    metrics, validation = plot.load_curves(Workspace(grpo_run))
    heading = plot.title(Workspace(grpo_run))
    assert heading == "run trial-7: minihouse, GRPO 3 updates × 2 tasks × 8 rollouts, lr 1e-05, horizon 30, KL 0.01"
    for figure in (plot.annealing_figure(metrics, validation, heading), plot.success_figure(metrics, validation, heading)):
        assert figure._suptitle.get_text() == heading
        panels = [a for a in figure.axes if a.get_legend() is not None]
        twins = figure.axes[3:]  # the drift panel's KL axis: its lines are in the drift panel's legend
        assert [a for a in figure.axes if a.get_legend() is None] == twins
        for axis in panels:
            assert not _inside_axes(figure, axis.get_legend(), axis), axis.get_title()
            figure.canvas.draw()
            ticks = [t for t in axis.get_xticks() if axis.get_xlim()[0] <= t <= axis.get_xlim()[1]]
            assert ticks and all(float(t).is_integer() for t in ticks), (axis.get_title(), ticks)
        colours = [_colors(a) for a in figure.axes]
        for i, mine in enumerate(colours):  # no colour stands for two things in one figure
            for other in colours[i + 1 :]:
                assert not (mine & other) or figure.axes[i].get_title() == "", mine & other

    annealing = plot.annealing_figure(metrics, validation, heading)
    verbs = {line.get_label(): line for line in annealing.axes[0].get_lines()}
    assert all(verbs[v].get_marker() not in ("", "None") for v in META_VERBS)  # a verb under another still shows
    assert {matplotlib.colors.to_hex(verbs[v].get_color()) for v in META_VERBS} == set(VERB_COLORS.values())

    success = plot.success_figure(metrics, validation, heading)
    labels = [line.get_label() for line in success.axes[0].get_lines()]
    assert labels == [
        "training rollouts, n=15 per update",
        "their greedy rollouts, n=4 per update",
        "validation (greedy), n=8 per update",
    ]
    band = success.axes[0].collections[0].get_paths()[0].vertices  # the rollouts' band: Wilson of 2/15 at update 0
    from evoh.inspection.figures import wilson

    assert band[:, 1].min() == pytest.approx(100 * wilson(2, 15)[0]) and band[:, 1].max() == pytest.approx(100 * wilson(6, 15)[1])

    result = evoh("plot", str(grpo_run), "--out", str(tmp_path / "png"), "--json")
    assert result.exit_code == 0, result.stderr
    for name in ("annealing.png", "success.png"):
        assert (tmp_path / "png" / name).read_bytes().startswith(b"\x89PNG")


def test_a_finished_runs_recipe_comes_from_its_stage_record(grpo_run: Path):
    from evoh.inspection.figures import grpo_recipe

    config = {"updates": 150, "tasks_per_update": 16, "group_size": 8, "lr": 1e-6, "max_steps": 70, "kl": 0.01}
    (grpo_run / "grpo" / "stage.json").write_text(json.dumps({"config": config, "data": "/data/alfworld"}))
    (grpo_run / "evoh.toml").unlink()
    assert grpo_recipe(grpo_run) == "alfworld, GRPO 150 updates × 16 tasks × 8 rollouts, lr 1e-06, horizon 70, KL 0.01"
    (grpo_run / "grpo" / "stage.json").unlink()
    assert grpo_recipe(grpo_run) == "recipe not recorded (no grpo/stage.json, grpo/run.json or evoh.toml)"


def test_an_unfinished_runs_recipe_is_the_one_it_started_with_not_the_workspaces(grpo_run: Path):
    """A run stopped before its end has no stage.json; the settings its command line gave are in its key, and the
    workspace's evoh.toml (the recipe without them) would misname it."""
    from evoh.inspection.figures import grpo_recipe

    given = {"tasks_per_update": 32, "group_size": 8, "lr": 1e-4, "max_steps": 30, "kl": 0.0}
    key = {"stage": "grpo", "settings": {"env": {"kind": "minihouse"}, "grpo": given}, "inputs": {}}
    (grpo_run / "grpo" / "run.json").write_text(json.dumps(key))
    assert grpo_recipe(grpo_run) == "minihouse, GRPO 32 tasks × 8 rollouts an update, lr 0.0001, horizon 30, KL 0"


# ---- evoh report ---------------------------------------------------------------------------------


def _summary(name: str, per_type: dict[str, tuple[int, int]], mode: str = "inline") -> dict:
    names = ("pick", "look", "clean", "heat", "cool", "pick2")
    won, finished = sum(w for w, _ in per_type.values()), sum(n for _, n in per_type.values())
    return {
        "name": name, "split": "valid_seen", "episodes": finished, "finished": finished, "won": won, "success": won / finished,
        "per_type": {t: {"episodes": per_type.get(t, (0, 0))[1], "won": per_type.get(t, (0, 0))[0],
                         "success": per_type[t][0] / per_type[t][1] if t in per_type else None} for t in names},
        "env_steps": 12.0, "meta_actions": 3.0 if mode == "inline" else 0.0,
        "meta_per_episode": {v: {"attempted": (0.75 if mode == "inline" else 0.0)} for v in META_VERBS},
        "protocol": {"mode": mode, "max_steps": 50}, "policy": {"policy": "expert"},
    }  # fmt: skip


@pytest.fixture()
def eval_runs(tmp_path: Path) -> list[Path]:
    runs = []
    for name, per_type, mode in (
        ("base", {"pick": (1, 4), "clean": (0, 3)}, "inline"),  # no look, heat, cool or pick2 game
        ("tuned", {"pick": (4, 4), "look": (2, 2), "clean": (3, 3), "heat": (1, 2), "cool": (0, 2), "pick2": (1, 2)}, "env_only"),
    ):
        folder = tmp_path / "ws" / "eval" / name
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps(_summary(name, per_type, mode)))
        (folder / "run.json").write_text(json.dumps({"env": {"kind": "minihouse"}}))
        runs.append(folder)
    return runs


def test_the_report_chart_marks_absent_types_and_gives_each_bar_its_count_and_interval(eval_runs: list[Path], tmp_path: Path):
    from evoh.inspection import report
    from evoh.inspection.figures import VERB_COLORS, wilson

    runs = report.load_runs(eval_runs)
    for run in runs:
        run["outcomes"] = None
    table = report.rows(runs)
    figure = report.chart_figure(table)
    left, right = figure.axes
    assert figure._suptitle.get_text() == (
        "evoh report: base, tuned (workspace ws)\n"
        "base: minihouse valid_seen, inline, horizon 50\n"
        "tuned: minihouse valid_seen, env_only, horizon 50"
    )
    texts = [t.get_text() for t in left.texts]
    assert texts.count("no games") == 4  # base's look, heat, cool and pick2: marked, not drawn as 0%
    counts = [t for t in texts if t != "no games"]
    assert counts == ["1/4", "0/3", "1/7", "4/4", "2/2", "3/3", "1/2", "0/2", "1/2", "11/15"]
    bars = [(round(p.get_x() + p.get_width() / 2, 6), p.get_height()) for p in left.patches]
    assert len(bars) == len(counts) and sorted(h for _, h in bars) == sorted(
        100 * int(c.split("/")[0]) / int(c.split("/")[1]) for c in counts
    )
    whiskers = [c for c in left.collections if c.get_segments()]
    assert len(whiskers) == len(counts)
    ((start, end),) = whiskers[0].get_segments()  # base's pick: 1 of 4
    low, high = wilson(1, 4)
    assert (start[1], end[1]) == pytest.approx((100 * low, 100 * high))
    for axis in (left, right):
        assert not _inside_axes(figure, axis.get_legend(), axis)
    assert not _colors(left) & _colors(right)  # runs in blues, verbs in their own palette
    assert {matplotlib.colors.to_hex(p.get_facecolor()) for p in right.patches} == set(VERB_COLORS.values())
    assert [t.get_text() for t in right.texts] == ["3.00", "0.00"]  # a run without meta-actions reads 0

    result = evoh("report", *map(str, eval_runs), "--out", str(tmp_path / "report"))
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "report" / "report.png").read_bytes().startswith(b"\x89PNG")

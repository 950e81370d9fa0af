"""The house's import direction (DESIGN.md, Architecture): every import inside evoh, function-local ones
included, goes from a layer to the same layer or one below; stage modules never import each other (they talk
through workspace files, and only the pipeline, which runs them in order, imports them); nothing imports the CLI."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import evoh

PACKAGE = Path(evoh.__file__).parent

# bottom to top; a module may import from its own layer and from the layers below it
LAYERS = [
    {"evoh", "errors", "records", "config", "recipe_files", "memory", "distributed", "tracking"},
    {"workspace"},
    {"env"},
    {"harness"},
    {"policy", "models"},
    {"rollout"},
    {"runs"},
    {"sft", "grpo", "inspection"},
    {"stages"},
    {"cli", "__main__"},
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
STAGES = {"collect", "refine", "sft", "grpo", "evaluate", "export"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every absolute evoh import in the file, ``from evoh import x`` as ``evoh.x``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "evoh"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "evoh":
            if node.module == "evoh":
                found += [(node.lineno, f"evoh.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def unit_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] not in RANK and parts[1].startswith("__"):
        return "evoh"  # the package itself and its dunders (__version__)
    return parts[1]


def test_every_module_belongs_to_a_layer():
    units = {unit_of(module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert units - RANK.keys() == set(), "add the new module or package to a layer in LAYERS (and DESIGN.md)"


def test_imports_go_down_the_layers_only():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = unit_of(module_name(path))
        for line, module in imported_modules(path):
            target = unit_of(module)
            if RANK.get(target, -1) > RANK[source]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module} ({source} is below {target})")
    assert wrong == []


def test_stage_modules_do_not_import_each_other():
    wrong = []
    for name in sorted(STAGES):
        path = PACKAGE / "stages" / f"{name}.py"
        for line, module in imported_modules(path):
            parts = module.split(".")
            if parts[:2] == ["evoh", "stages"] and (len(parts) == 2 or parts[2] != name):
                wrong.append(f"stages/{name}.py:{line} imports {module}")
    assert wrong == []


def test_every_name_imported_from_evoh_exists():
    """After a module moves, an import left behind in a function body would fail only when that code runs."""
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "evoh"):
                continue
            try:
                module = importlib.import_module(node.module)
            except ImportError as exc:
                missing.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {exc}")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name) and importlib.util.find_spec(f"{node.module}.{alias.name}") is None:
                    missing.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.module} has no {alias.name}")
    assert missing == []


def test_the_checker_sees_a_wrong_import(tmp_path):
    """The rule has teeth: a function-local import of the CLI from the environment layer is found."""
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from evoh.cli.app import app\n    import evoh.env.games\n")
    assert imported_modules(sample) == [(2, "evoh.cli.app"), (3, "evoh.env.games")]
    assert RANK[unit_of("evoh.cli.app")] > RANK["env"]

"""Shared fixtures. Engine tests read real games from ALFWORLD_DATA; under CI=true its absence is a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.alfworld_helpers import require_alfworld_data


@pytest.fixture(scope="session")
def alfworld_data() -> Path:
    return require_alfworld_data()


@pytest.fixture(scope="session")
def tiny_model(alfworld_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~1M-parameter random Qwen3 with an ALFWorld tokenizer, built once per test session."""
    pytest.importorskip("transformers")
    from evoh.config import EnvConfig
    from evoh.models.tiny import build

    out = tmp_path_factory.mktemp("models") / "tiny"
    build(out, EnvConfig(data=str(alfworld_data)), "tiny", seed=0)
    return out


@pytest.fixture(scope="session")
def minihouse_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Qwen3 with a tokenizer trained on MiniHouse text: needs no ALFWorld data."""
    pytest.importorskip("transformers")
    from evoh.config import EnvConfig
    from evoh.models.tiny import build

    out = tmp_path_factory.mktemp("models") / "minihouse"
    build(out, EnvConfig(kind="minihouse"), "tiny", seed=0)
    return out


@pytest.fixture
def stand_in_vllm(monkeypatch: pytest.MonkeyPatch):
    """A ``vllm`` module whose engine records what it is asked (tests/vllm_stand_in.py), on a machine where it can serve."""
    from tests.vllm_stand_in import install

    return install(monkeypatch)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("EVOH_DEBUG", raising=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # a CI run without the games must fail loudly, not pass by skipping every engine test
    if os.environ.get("CI") == "true" and not os.environ.get("ALFWORLD_DATA"):
        raise pytest.UsageError("CI=true but ALFWORLD_DATA is not set: the engine tests need ../shared/alfworld")

"""Models by name: a setting that takes a model directory also takes a Hugging Face Hub id.

``Qwen/Qwen3-0.6B`` (or ``Qwen/Qwen3-0.6B@REVISION``) is looked up in huggingface_hub's cache, and downloaded
into it where the Hub can be reached; ``HF_HUB_OFFLINE=1`` keeps to the cache. A directory that exists always
wins over an id that happens to spell the same path. The snapshot's folder name is the commit it holds, so the
stage manifests that record a model's path and weights (``weights_identity``) record the revision too.
"""

from __future__ import annotations

import re
from pathlib import Path

from evoh.errors import EvohError

HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")


def model_directory(name: str, setting: str) -> Path:
    """The local directory for ``name``: itself when it is a model directory, else the Hub id's snapshot.
    ``setting`` (``sft.model``, ``--model``) names where the value came from in the error."""
    if not name:
        raise EvohError(f"{setting} names no model", hint="pass a model directory or a Hub id, e.g. --model Qwen/Qwen3-0.6B")
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path
    if path.exists():
        raise EvohError(
            f"{name} is not a model directory (it has no config.json)",
            hint="pass a model directory (evoh model init --out DIR makes one) or a Hub id such as Qwen/Qwen3-0.6B",
        )
    match = HUB_ID.match(name)
    if match is None:
        raise EvohError(
            f"{setting} = {name!r} is not a model directory (nothing is there) nor a Hugging Face Hub id",
            hint="pass a model directory (evoh model init --out DIR makes one) or a Hub id such as Qwen/Qwen3-0.6B",
        )
    return _snapshot(match["repo"], match["revision"], name)


def names_hub_model(name: str) -> bool:
    """Whether ``name`` would be read as a Hub id: ``owner/name[@revision]``, and no such path here."""
    return HUB_ID.match(name) is not None and not Path(name).expanduser().exists()


def _snapshot(repo: str, revision: str | None, name: str) -> Path:
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    wanted = f"{repo}@{revision}" if revision else repo
    download = f"hf download {repo}" + (f" --revision {revision}" if revision else "")
    nothing_here = f"there is no directory {name} here, and "  # a path with one slash reads as an id too
    try:
        return Path(snapshot_download(repo, revision=revision))
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise EvohError(f"{nothing_here}{wanted} is not a model on the Hugging Face Hub", hint="check the path or id") from None
    except LocalEntryNotFoundError:
        offline = "HF_HUB_OFFLINE=1 forbids downloading it" if constants.HF_HUB_OFFLINE else "the Hub was not reachable"
        raise EvohError(
            f"{nothing_here}{wanted} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}): {offline}",
            hint=f"download it where the Hub is reachable ({download}), or pass a model directory",
        ) from None
    except (HfHubHTTPError, OSError) as exc:
        raise EvohError(f"{wanted} could not be downloaded ({exc})", hint=f"retry, or first: {download}") from None
    except ValueError as exc:  # huggingface_hub's own check of the id (HFValidationError)
        raise EvohError(f"{nothing_here}{name!r} is not a valid Hub id ({exc})", hint="check the path or the id") from None

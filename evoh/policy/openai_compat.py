"""A policy behind any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp, Ollama, hosted APIs).

Requests for one rollout step go out concurrently (bounded by ``concurrency``). A request that meets a
429, a 5xx, a timeout, a connection error, a reply that is not JSON or has no choices is retried with
exponential backoff, or after the wait the answer's ``Retry-After`` header asks for (a minute at most);
when the retries run out the episode ends with the error recorded (and a rerun plays it again). A reply
longer than ``max_tokens`` could make is cut before it is parsed, with a warning, and counted in its
episode's ``usage`` as ``truncated_replies``. The API key is read from an environment variable and
never written anywhere.
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timezone
from typing import Any

from evoh.config import ModelConfig
from evoh.errors import EvohError
from evoh.harness.episode import TurnView
from evoh.policy.base import Completion

log = logging.getLogger(__name__)

_MAX_DELAY = 30.0
MAX_RETRY_AFTER = 60.0  # a server asking for a longer wait is retried after this much anyway
# a token is rarely more than a few characters: a reply over max_tokens × this ignored max_tokens, and
# is cut so that no endpoint can hand the parser megabytes
CHARS_PER_TOKEN = 16


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the ``Retry-After`` header asks a client to wait (a number or an HTTP date), at most
    ``MAX_RETRY_AFTER``; None when there is no such header or it cannot be read."""
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)  # HTTP dates are in GMT
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return min(MAX_RETRY_AFTER, max(0.0, seconds))


class OpenAIPolicy:
    def __init__(self, config: ModelConfig, seed: int = 0, sleep: Callable[[float], None] = time.sleep) -> None:
        import openai

        if not config.model or not config.base_url:
            raise EvohError("the openai policy needs a model name and an endpoint", hint="pass --model NAME --base-url URL")
        key = os.environ.get(config.api_key_env, "")
        if not key:
            raise EvohError(
                f"the environment variable {config.api_key_env} holding the API key is not set",
                hint=f"export {config.api_key_env}=... (any value for a local server that ignores keys)",
            )
        self.config = config
        self.seed = seed
        self._sleep = sleep
        self._openai = openai
        self._client = openai.OpenAI(base_url=config.base_url, api_key=key, max_retries=0, timeout=config.timeout)
        self._pool = ThreadPoolExecutor(max_workers=max(1, config.concurrency), thread_name_prefix="evoh-openai")

    def identity(self) -> dict[str, Any]:
        c = self.config
        return {
            "policy": "openai",
            "model": c.model,
            "base_url": c.base_url,
            "sampling": {"temperature": c.temperature, "top_p": c.top_p, "max_tokens": c.max_tokens, "seed": self.seed},
        }

    def forget(self, key: Any) -> None:
        pass

    def act(self, views: list[TurnView]) -> list[Completion]:
        return list(self._pool.map(self._complete, views))

    def _complete(self, view: TurnView) -> Completion:
        c = self.config
        messages = [{"role": "system", "content": view.system}, {"role": "user", "content": view.user}]
        last_error = ""
        asked: float | None = None  # the wait the last answer's Retry-After asked for
        for attempt in range(c.retries + 1):
            if attempt:
                self._sleep(asked if asked is not None else min(_MAX_DELAY, c.backoff * 2 ** (attempt - 1)))
            asked = None
            try:
                reply = self._client.chat.completions.create(
                    model=c.model,
                    messages=messages,
                    temperature=c.temperature,
                    top_p=c.top_p,
                    max_tokens=c.max_tokens,
                    seed=self.seed,
                )
                if not reply.choices:
                    last_error = "the reply had no choices"
                    continue
                usage = reply.usage
                text = reply.choices[0].message.content or ""
                cap = c.max_tokens * CHARS_PER_TOKEN
                if len(text) > cap:
                    log.warning(
                        "a reply of %d characters was cut to %d (model.max_tokens × %d) before parsing",
                        len(text),
                        cap,
                        CHARS_PER_TOKEN,
                    )
                return Completion(
                    text[:cap],
                    prompt_tokens=usage.prompt_tokens if usage else 0,
                    completion_tokens=usage.completion_tokens if usage else 0,
                    truncated=len(text) > cap,
                )
            except self._openai.APIStatusError as exc:
                last_error = f"HTTP {exc.status_code}"
                if exc.status_code != 429 and exc.status_code < 500 and exc.status_code != 408:
                    return Completion("", error=f"{last_error} from the endpoint (not retried)")
                asked = retry_after(exc.response.headers)  # a 503 may carry one too
            except self._openai.APITimeoutError:
                last_error = f"no answer within {c.timeout:g} s"
            except self._openai.APIConnectionError:
                last_error = "could not connect"
            except (ValueError, self._openai.APIResponseValidationError) as exc:  # a reply that is not valid JSON
                last_error = f"unreadable reply ({type(exc).__name__})"
        return Completion("", error=f"openai endpoint failed {c.retries + 1} times; last: {last_error}")

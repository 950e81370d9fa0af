"""A policy behind any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp, Ollama, hosted APIs).

Requests for one rollout step go out concurrently (bounded by ``concurrency``). A request that meets a
429, a 5xx, a timeout, a connection error, a reply that is not JSON or has no choices is retried with
exponential backoff; when the retries run out the episode ends with the error recorded (and a rerun
plays it again). The API key is read from an environment variable and never written anywhere.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from evoh.config import ModelConfig
from evoh.errors import EvohError
from evoh.harness.episode import TurnView
from evoh.policy.base import Completion

_MAX_DELAY = 30.0


class OpenAIPolicy:
    def __init__(self, config: ModelConfig, seed: int = 0) -> None:
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
        for attempt in range(c.retries + 1):
            if attempt:
                time.sleep(min(_MAX_DELAY, c.backoff * 2 ** (attempt - 1)))
            try:
                reply = self._client.chat.completions.create(
                    model=c.model, messages=messages, temperature=c.temperature, top_p=c.top_p,
                    max_tokens=c.max_tokens, seed=self.seed,
                )
                if not reply.choices:
                    last_error = "the reply had no choices"
                    continue
                usage = reply.usage
                return Completion(
                    reply.choices[0].message.content or "",
                    prompt_tokens=usage.prompt_tokens if usage else 0,
                    completion_tokens=usage.completion_tokens if usage else 0,
                )
            except self._openai.APIStatusError as exc:
                last_error = f"HTTP {exc.status_code}"
                if exc.status_code != 429 and exc.status_code < 500 and exc.status_code != 408:
                    return Completion("", error=f"{last_error} from the endpoint (not retried)")
            except self._openai.APITimeoutError:
                last_error = f"no answer within {c.timeout:g} s"
            except self._openai.APIConnectionError:
                last_error = "could not connect"
            except (ValueError, self._openai.APIResponseValidationError) as exc:  # a reply that is not valid JSON
                last_error = f"unreadable reply ({type(exc).__name__})"
        return Completion("", error=f"openai endpoint failed {c.retries + 1} times; last: {last_error}")

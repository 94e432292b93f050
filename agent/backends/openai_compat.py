"""Policy backend for any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp server, OpenAI itself).

It POSTs `{base_url}/chat/completions` with httpx and streams the answer's text chunks from the server-sent
events (read in agent/backends/chat_completions.py). Internal image parts (a PIL image the renderer already
sized) become base64 `image_url` data URLs: the part's own encoded bytes when the protocol made them (the
VimRAG demo's JPEG), else PNG, because page renders carry small text that JPEG smears. Images are sent at the
size the agent chose; the only resize is a safety downscale of anything over `config.max_pixels`.

Tool calls (`config.tool_calling`):
- "text" (default): the model writes `<tool_call>{...}</tool_call>` in its reply, as the VimRAG demo reads it.
- "native": the request carries `tools` (the protocol's schemas, `view.tool_specs`) and `tool_choice: "auto"`
  (vLLM reads tool calls only when it is sent, or with --enable-auto-tool-choice); the server's
  `tool_calls`, from streamed deltas or a whole message, come back rendered as that same `<tool_call>` text,
  so one parser turns both into actions.
- "auto": native, and if the server refuses `tools` (vLLM without --enable-auto-tool-choice answers 400),
  text from then on.
Reasoning a server returns apart from the reply (`reasoning_content`, or `reasoning`) is yielded as
`Reasoning` chunks: kept in the trace, never parsed as the reply; inline `<think>` blocks stay in the text.

Sampling (`generation`, agent/backends/base.py `generation_settings`): each protocol's published settings under
the user's. vimrag sends the VimRAG demo's request: max_tokens 4096, `chat_template_kwargs: {"enable_thinking":
true}`, temperature 0.6 and top_p 0.95 (thinking off: temperature 0); a server that answers 400 to
`chat_template_kwargs` is asked again without it. The other protocols send max_tokens 1024 and temperature 0.

Connection errors, timeouts, 429 and 5xx are retried with exponential backoff (honouring a short
Retry-After), but only while no text has been yielded: a stream that breaks mid-answer raises instead, so a
retry can never repeat text the caller already has. Every failure is a PolicyError naming the endpoint, the
reason and the fix. tenacity runs the attempts; the rules above are ours (`_retryable`, `_attempt`). Not the
`openai` SDK (a test dependency only): its retries differ (408 and 409 too, jitter, Retry-After up to 120 s,
no injectable sleep, so tests would wait for real), and it runs on httpx2, a second HTTP stack beside httpx.

Left out on purpose: sending earlier turns' tool calls back as `tool_calls` / `tool` messages (the history
keeps them as text, which every server accepts in user/assistant turns).

    vllm serve Qwen/Qwen2.5-VL-7B-Instruct --port 8000
    policy = load_policy("openai", model="Qwen/Qwen2.5-VL-7B-Instruct")
"""

from __future__ import annotations

import base64
import functools
import io
import logging
import math
import os
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Iterator

import httpx
import tenacity
from PIL import Image

from agent.backends.base import Policy, PolicyConfig, PolicyError, generation_settings
from agent.backends.chat_completions import choices_of, clip, error_text, parse_json, read_completion

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 30.0  # a longer Retry-After (quota reset, maintenance) is reported, not slept through
MAX_BACKOFF_S = 30.0
SERVE_HINT = "Start a server, e.g. `vllm serve Qwen/Qwen2.5-VL-7B-Instruct --port 8000`, or pass --base-url"
TOOL_CALLING = ("text", "native", "auto")
_AGENT_KEYS = ("ref", "data", "mime", "max_pixels", "time")  # image-part keys for the agent, not the server


def image_data_url(image, max_pixels: int | None = None, image_format: str = "png") -> str:
    """A PIL image as a data URL (PNG, or JPEG at quality 90), downscaled first to at most `max_pixels`."""
    width, height = image.size
    if max_pixels and width * height > max_pixels:
        # floor keeps the product under the limit; the agent should never get here, hence the log line
        scale = math.sqrt(max_pixels / (width * height))
        size = (max(1, math.floor(width * scale)), max(1, math.floor(height * scale)))
        log.debug("image %dx%d is over max_pixels=%d; downscaled to %dx%d", width, height, max_pixels, *size)
        image = image.resize(size, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    if image_format == "jpeg":
        image.convert("RGB").save(buffer, format="JPEG", quality=90)
    else:
        if image.mode not in ("RGB", "RGBA", "L", "LA", "P", "1"):
            image = image.convert("RGBA" if "A" in image.mode else "RGB")
        image.save(buffer, format="PNG", compress_level=3)  # level 3: near level-6 size, much faster
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"data:image/{image_format};base64,{encoded}"


class OpenAIPolicy(Policy):
    """Streams chat completions from an OpenAI-compatible endpoint; see the module docstring."""

    name = "openai"

    def __init__(
        self,
        config: PolicyConfig,
        *,
        image_format: str = "png",
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ):
        base_url = config.base_url.strip().rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise PolicyError(
                f"base_url {config.base_url!r} is not an http(s) URL; pass the server's API root, "
                "e.g. --base-url http://127.0.0.1:8000/v1"
            )
        if image_format.lower() not in ("png", "jpeg", "jpg"):
            raise PolicyError(f"image_format {image_format!r} is not supported; use 'png' (default) or 'jpeg'")
        self.config = config
        self.base_url = base_url
        self.image_format = "jpeg" if image_format.lower() in ("jpeg", "jpg") else "png"
        self.backoff_s = backoff_s
        self._sleep = sleep
        self._api_key = config.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"  # vLLM accepts anything
        self._model = config.model.strip()
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        if config.tool_calling not in TOOL_CALLING:
            raise PolicyError(f"tool_calling {config.tool_calling!r} is not one of {', '.join(TOOL_CALLING)}")
        self.native_tools = config.tool_calling == "native"
        self._tools_refused = False  # auto: the server answered 400 to `tools` once, so text from then on
        self._template_kwargs_refused = False  # the server answered 400 to chat_template_kwargs once
        if self._model:
            self._set_patch(self._model)

    # --- public API ---------------------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The model name sent with each request: config.model, else the first id of GET {base_url}/models."""
        if not self._model:
            self._model = self._first_served_model()
            self._set_patch(self._model)
        return self._model

    def describe(self) -> str:
        try:
            model = self.model
        except PolicyError as exc:  # the UI shows this line before any request; it must not crash
            model = f"unresolved ({exc})"
        return f"openai-compatible endpoint {self.base_url}, model {model}"

    def generation(self, protocol: Any) -> dict[str, Any]:
        return generation_settings(protocol, self.config)

    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str]:
        gen = getattr(view, "generation", None) or generation_settings(None, self.config)
        body = self.request_body(messages, gen)
        read = functools.partial(read_completion, max_new_tokens=gen["max_new_tokens"])
        specs = getattr(view, "tool_specs", None)
        mode = self.config.tool_calling
        if specs and (mode == "native" or (mode == "auto" and not self._tools_refused)):
            try:
                native = {**body, "tools": specs, "tool_choice": "auto"}  # the model may also answer in text
                yield from self._post_chat(native, read)
                return
            except PolicyError as exc:
                if mode == "native" or getattr(exc, "status", None) != 400 or "tool" not in str(exc).lower():
                    raise
                self._tools_refused = True
                log.warning(
                    "%s refused native tools (%s); tool calls are read from the reply text from now on",
                    self.base_url,
                    getattr(exc, "said", exc),
                )
        yield from self._post_chat(body, read)

    def request_body(self, messages: list[dict], gen: dict[str, Any]) -> dict[str, Any]:
        """The streamed chat-completion request for `messages` under the sampling settings `gen` (no tools)."""
        body = {
            "model": self.model,
            "messages": [self._convert_message(m) for m in messages],
            "temperature": gen["temperature"],
            "max_tokens": gen["max_new_tokens"],
            "seed": self.config.seed,
            "stream": True,
        }
        if gen.get("top_p") is not None:
            body["top_p"] = gen["top_p"]
        if gen.get("thinking") is not None and not self._template_kwargs_refused:
            body["chat_template_kwargs"] = {"enable_thinking": bool(gen["thinking"])}  # vLLM, SGLang, DashScope
        return body

    def _post_chat(self, body: dict, read: Callable) -> Iterator:
        """POST a chat completion; a server that refuses `chat_template_kwargs` (OpenAI's own API answers 400 to
        unknown fields) is asked again without it, and never sent it again."""
        try:
            yield from self._request("POST", "/chat/completions", body, read)
        except PolicyError as exc:
            said = str(getattr(exc, "said", ""))
            if "chat_template_kwargs" not in body or getattr(exc, "status", None) != 400:
                raise
            if "chat_template_kwargs" not in said and "enable_thinking" not in said:
                raise
            self._template_kwargs_refused = True
            log.warning("%s refused chat_template_kwargs (%s); thinking is left to the server", self.base_url, said)
            yield from self._request("POST", "/chat/completions", _without(body, "chat_template_kwargs"), read)

    def complete(self, messages: list[dict], **params: Any) -> dict:
        """One non-streamed chat completion: the first choice as the server sent it (message, logprobs,
        finish_reason). `params` go into the request body as they are (sampling settings, server extensions);
        `model` defaults to this policy's model."""
        body = {
            "model": self.model,
            "messages": [self._convert_message(m) for m in messages],
            "stream": False,
            **params,
        }

        def read(response: httpx.Response, url: str) -> Iterator[dict]:
            choices = choices_of(parse_json(response.read().decode("utf-8", errors="replace"), url), url)
            if not choices or not isinstance(choices[0], dict):
                raise PolicyError(f"malformed response from {url}: no choices")
            yield choices[0]

        return list(self._request("POST", "/chat/completions", body, read))[0]

    def post(self, path: str, body: dict) -> str:
        """POST `body` as JSON to `{base_url}{path}` (an admin endpoint, e.g. vLLM's /load_lora_adapter) and
        return the response text; errors are PolicyErrors like every other request's."""

        def read(response: httpx.Response, url: str) -> Iterator[str]:
            yield response.read().decode("utf-8", errors="replace")

        return list(self._request("POST", path, body, read))[0]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # --- messages -----------------------------------------------------------------------------------

    def _convert_message(self, message: dict) -> dict:
        """A copy of `message` in wire form; the caller's message (and its PIL images) is left untouched."""
        content = message.get("content")
        if not isinstance(content, list):
            return dict(message)
        return {**message, "content": [self._convert_part(p) for p in content]}

    def _convert_part(self, part: Any) -> Any:
        if not isinstance(part, dict):
            return part
        data, mime = part.get("data"), part.get("mime")
        part = {k: v for k, v in part.items() if k not in _AGENT_KEYS}  # the agent's own bookkeeping
        if part.get("type") != "image":
            return part
        image = part.get("image")
        if isinstance(image, str) and image.startswith(("data:", "http://", "https://")):
            url = image
        elif (
            data
            and mime
            and hasattr(image, "size")
            and image.width * image.height <= (self.config.max_pixels or float("inf"))
        ):
            url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"  # the protocol's exact bytes
        elif hasattr(image, "save") and hasattr(image, "size"):
            url = self._data_url(image)
        else:
            raise PolicyError(
                f"image part carries {type(image).__name__}, not a PIL image or URL; "
                "the renderer must put the PIL image itself under 'image'"
            )
        return {"type": "image_url", "image_url": {"url": url}}

    def _data_url(self, image) -> str:
        return image_data_url(image, self.config.max_pixels, self.image_format)

    # --- HTTP with retries --------------------------------------------------------------------------

    def _http(self) -> httpx.Client:
        with self._client_lock:  # one client, even when threads share this policy (served rollouts do)
            if self._client is None:
                timeout = httpx.Timeout(self.config.timeout_s, connect=min(self.config.timeout_s, 10.0))
                self._client = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {self._api_key}"})
            return self._client

    def _request(
        self, method: str, path: str, body: dict | None, read: Callable[[httpx.Response, str], Iterator]
    ) -> Iterator:
        """Open `method path`, hand the response to `read` and yield what it yields, retrying only while
        nothing has been yielded (connect errors, timeouts, 429, 5xx)."""
        url = self.base_url + path
        tries = max(0, self.config.retries) + 1
        backoff = tenacity.wait_exponential(multiplier=self.backoff_s, max=MAX_BACKOFF_S)

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception()
            after = _retry_after(exc.response) if isinstance(exc, httpx.HTTPStatusError) else None
            return backoff(state) if after is None else after

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception()
            why = f"HTTP {exc.response.status_code}" if isinstance(exc, httpx.HTTPStatusError) else self._reason(exc)
            retry = (state.attempt_number, tries - 1, state.next_action.sleep)
            log.warning("%s %s: %s; retry %d/%d in %.1f s", method, url, why, *retry)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(tries),
            wait=wait,
            retry=tenacity.retry_if_exception(_retryable),
            sleep=self._sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    yield from self._attempt(method, url, body, read)
        except httpx.HTTPStatusError as exc:
            raise self._status_error(exc.response, url, attempt.retry_state.attempt_number) from None
        except httpx.TransportError as exc:
            raise self._transport_error(exc, url, attempt.retry_state.attempt_number) from exc

    def _attempt(
        self, method: str, url: str, body: dict | None, read: Callable[[httpx.Response, str], Iterator]
    ) -> Iterator:
        """One request: an error status raises HTTPStatusError, and a transport error after the first yielded
        item raises a PolicyError, which is never retried."""
        yielded = 0
        try:
            with self._http().stream(method, url, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    response.raise_for_status()  # an HTTPStatusError, for the retry policy
                for item in read(response, url):
                    yielded += len(item) if isinstance(item, str) else 1
                    yield item
        except httpx.TransportError as exc:
            if yielded:
                raise PolicyError(
                    f"the OpenAI-compatible endpoint at {url} broke off mid-answer after {yielded} "
                    f"characters: {self._reason(exc)}. Not retried, so no text is repeated; "
                    f"{self._timeout_fix(exc)}"
                ) from exc
            raise

    # --- reading responses --------------------------------------------------------------------------

    def _first_served_model(self) -> str:
        def read(response: httpx.Response, url: str) -> Iterator[list]:
            payload = parse_json(response.read().decode("utf-8", errors="replace"), url)
            data = payload.get("data") if isinstance(payload, dict) else None
            if not isinstance(data, list):
                raise PolicyError(
                    f"malformed response from {url}: expected {{'data': [...]}}, got {clip(str(payload))}"
                )
            yield [m.get("id") for m in data if isinstance(m, dict) and m.get("id")]

        ids = list(self._request("GET", "/models", None, read))[0]  # list() closes the response
        if not ids:
            raise PolicyError(
                f"the OpenAI-compatible endpoint at {self.base_url}/models lists no models; "
                "pass --model with the served model's name, or start the server with a model"
            )
        log.debug("no model configured; using %s, the first of %s served at %s", ids[0], ids, self.base_url)
        return ids[0]

    def _set_patch(self, model: str) -> None:
        from agent.coords import convention_for, resolve

        self.coords = resolve(self.config.coords, model)
        self.patch = 32 if convention_for(model) == "relative" else 28  # Qwen3-VL: 32 px patches, Qwen2.5-VL: 28

    # --- error messages -----------------------------------------------------------------------------

    def _status_error(self, response: httpx.Response, url: str, attempts: int) -> PolicyError:
        status = response.status_code
        said = error_text(response)
        where = f"the OpenAI-compatible endpoint at {url}"
        if status in (401, 403):
            return PolicyError(
                f"{where} refused the API key (HTTP {status}: {said}). Pass --api-key or set $OPENAI_API_KEY "
                "to a key the server accepts (for vLLM, the value given to its --api-key)"
            )
        if status == 404:
            served = self._served_hint() if url.endswith("/chat/completions") else ""
            return PolicyError(
                f"{where} answered 404 (not found): {said}. Check --base-url (the API root, usually ending "
                f"in /v1) and --model (GET {self.base_url}/models lists what the server serves){served}"
            )
        if status == 429 or status >= 500:
            after = _retry_after(response)
            waited = f"; it asks to retry after {after:g} s" if after is not None else ""
            kind = "rate-limited the request" if status == 429 else "failed"
            fix = "wait, or lower the request rate" if status == 429 else "check the server's log"
            return PolicyError(
                f"{where} {kind} (HTTP {status}: {said}) after {attempts} attempt(s){waited}. "
                f"Retry later, {fix}, or raise retries"
            )
        hint = ""
        if status in (400, 413, 422):
            hint = (
                ". If the prompt is too long, lower the image pixel budget or max_new_tokens, or start the "
                "server with a larger context (vLLM: --max-model-len)"
            )
        err = PolicyError(f"{where} rejected the request (HTTP {status}): {said}{hint}")
        err.status, err.said = status, said  # read by the tool-calling fallback
        return err

    def _served_hint(self) -> str:
        """'; the server serves: a, b' for a 404 message, or '' when that cannot be learned quickly."""
        try:
            response = self._http().get(self.base_url + "/models", timeout=min(self.config.timeout_s, 5.0))
            ids = [m.get("id") for m in response.json().get("data", []) if isinstance(m, dict)]
        except Exception:  # noqa: BLE001 - only a hint; the 404 itself is the error to report
            return ""
        return f"; the server serves: {', '.join(map(str, ids))}" if ids else ""

    def _transport_error(self, exc: httpx.TransportError, url: str, attempts: int) -> PolicyError:
        tried = f" (after {attempts} attempts)" if attempts > 1 else ""
        if isinstance(exc, httpx.UnsupportedProtocol):
            return PolicyError(f"cannot call {url}: {exc}. Pass --base-url as http(s)://host:port/v1")
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            return PolicyError(
                f"cannot reach the OpenAI-compatible endpoint at {self.base_url}: {self._reason(exc)}{tried}. "
                f"{SERVE_HINT}"
            )
        return PolicyError(
            f"the OpenAI-compatible endpoint at {url} did not answer: {self._reason(exc)}{tried}. "
            f"{self._timeout_fix(exc)}"
        )

    def _reason(self, exc: httpx.TransportError) -> str:
        text = str(exc) or type(exc).__name__
        if isinstance(exc, httpx.ConnectTimeout):
            return f"connect timeout (no connection within {min(self.config.timeout_s, 10.0):g} s)"
        if isinstance(exc, httpx.TimeoutException):
            return f"timeout (no data for {self.config.timeout_s:g} s)"
        if "refused" in text.lower():
            return "connection refused"
        return text

    def _timeout_fix(self, exc: httpx.TransportError) -> str:
        if isinstance(exc, httpx.TimeoutException):
            return (
                "raise timeout_s (--timeout) if the model is slow on long multi-image prompts, "
                "or check the server is not overloaded"
            )
        return "check the server's log; it may have crashed or dropped the connection"


def _without(body: dict, key: str) -> dict:
    return {k: v for k, v in body.items() if k != key}


def _retryable(exc: BaseException) -> bool:
    """Worth another attempt: a dropped or timed-out connection, a 429 or a 5xx, unless the server asks for
    a wait over MAX_RETRY_AFTER_S. Other 4xx mean the request itself is wrong; repeating it cannot help."""
    if isinstance(exc, httpx.HTTPStatusError):
        status, after = exc.response.status_code, _retry_after(exc.response)
        return (status == 429 or status >= 500) and (after is None or after <= MAX_RETRY_AFTER_S)
    return isinstance(exc, (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError))


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds (a number or an HTTP date), or None when absent or unreadable."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None

"""Policy backend for any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp server, OpenAI itself).

It POSTs `{base_url}/chat/completions` with httpx and streams the answer's text chunks from the server-sent
events. Internal image parts (a PIL image the renderer already sized) become base64 `image_url` data URLs:
the part's own encoded bytes when the protocol made them (the VimRAG demo's JPEG), else PNG, because page
renders carry small text that JPEG smears. Images are sent at the size the agent chose; the only resize is a
safety downscale of anything over `config.max_pixels`.

Tool calls (`config.tool_calling`):
- "text" (default): the model writes `<tool_call>{...}</tool_call>` in its reply, as the VimRAG demo reads it.
- "native": the request carries `tools` (the protocol's schemas, `view.tool_specs`); the server's
  `tool_calls`, from streamed deltas or a whole message, come back rendered as that same `<tool_call>` text,
  so one parser turns both into actions.
- "auto": native, and if the server refuses `tools` (vLLM without --enable-auto-tool-choice answers 400),
  text from then on.
Reasoning a server returns apart from the reply (`reasoning_content`, or `reasoning`) is yielded as
`Reasoning` chunks: kept in the trace, never parsed as the reply; inline `<think>` blocks stay in the text.

Connection errors, timeouts, 429 and 5xx are retried with exponential backoff (honouring a short
Retry-After), but only while no text has been yielded: a stream that breaks mid-answer raises instead, so a
retry can never repeat text the caller already has. Every failure is a PolicyError naming the endpoint, the
reason and the fix.

Left out on purpose: sending earlier turns' tool calls back as `tool_calls` / `tool` messages (the history
keeps them as text, which every server accepts in user/assistant turns).

    vllm serve Qwen/Qwen2.5-VL-7B-Instruct --port 8000
    policy = load_policy("openai", model="Qwen/Qwen2.5-VL-7B-Instruct")
"""

from __future__ import annotations

import base64
import io
import json
import logging
import math
import os
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Iterator

import httpx
from PIL import Image

from agent.backends.base import Policy, PolicyConfig, PolicyError, Reasoning

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 30.0  # a longer Retry-After (quota reset, maintenance) is reported, not slept through
MAX_BACKOFF_S = 30.0
SERVE_HINT = "Start a server, e.g. `vllm serve Qwen/Qwen2.5-VL-7B-Instruct --port 8000`, or pass --base-url"
TOOL_CALLING = ("text", "native", "auto")
_AGENT_KEYS = ("ref", "data", "mime", "max_pixels", "time")  # image-part keys for the agent, not the server


def render_tool_call(name: Any, arguments: Any) -> str:
    """A native tool call as the `<tool_call>` text the protocols parse; arguments stay as the server sent them.

    >>> render_tool_call("crop", '{"image": "Picture 1", "bbox": [1, 2, 3, 4]}')
    '<tool_call>\\n{"name": "crop", "arguments": {"image": "Picture 1", "bbox": [1, 2, 3, 4]}}\\n</tool_call>'
    """
    if isinstance(arguments, str):
        try:
            json.loads(arguments)
            args_text = arguments.strip() or "{}"
        except ValueError:  # broken JSON goes through as a string: the parser repairs or rejects it
            args_text = json.dumps(arguments, ensure_ascii=False)
    else:
        args_text = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return f'<tool_call>\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {args_text}}}\n</tool_call>'


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

    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str]:
        body = {
            "model": self.model,
            "messages": [self._convert_message(m) for m in messages],
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_new_tokens,
            "seed": self.config.seed,
            "stream": True,
        }
        specs = getattr(view, "tool_specs", None)
        mode = self.config.tool_calling
        if specs and (mode == "native" or (mode == "auto" and not self._tools_refused)):
            try:
                yield from self._request("POST", "/chat/completions", {**body, "tools": specs}, self._read_completion)
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
        yield from self._request("POST", "/chat/completions", body, self._read_completion)

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
            choices = _choices(_parse_json(response.read().decode("utf-8", errors="replace"), url), url)
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
        width, height = image.size
        limit = self.config.max_pixels
        if limit and width * height > limit:
            # floor keeps the product under the limit; the agent should never get here, hence the log line
            scale = math.sqrt(limit / (width * height))
            size = (max(1, math.floor(width * scale)), max(1, math.floor(height * scale)))
            log.debug("image %dx%d is over max_pixels=%d; downscaled to %dx%d", width, height, limit, *size)
            image = image.resize(size, Image.Resampling.BICUBIC)
        buffer = io.BytesIO()
        if self.image_format == "jpeg":
            image.convert("RGB").save(buffer, format="JPEG", quality=90)
        else:
            if image.mode not in ("RGB", "RGBA", "L", "LA", "P", "1"):
                image = image.convert("RGBA" if "A" in image.mode else "RGB")
            image.save(buffer, format="PNG", compress_level=3)  # level 3: near level-6 size, much faster
        encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
        return f"data:image/{self.image_format};base64,{encoded}"

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
        for attempt in range(1, tries + 1):
            yielded = 0
            try:
                with self._http().stream(method, url, json=body) as response:
                    if response.status_code >= 400:
                        response.read()
                        wait = self._retry_wait(response, attempt) if attempt < tries else None
                        if wait is None:
                            raise self._status_error(response, url, attempt)
                        log.warning(
                            "%s %s: HTTP %d; retry %d/%d in %.1f s",
                            method,
                            url,
                            response.status_code,
                            attempt,
                            tries - 1,
                            wait,
                        )
                        self._sleep(wait)
                        continue
                    for item in read(response, url):
                        yielded += len(item) if isinstance(item, str) else 1
                        yield item
                    return
            except httpx.TransportError as exc:
                if yielded:
                    raise PolicyError(
                        f"the OpenAI-compatible endpoint at {url} broke off mid-answer after {yielded} "
                        f"characters: {self._reason(exc)}. Not retried, so no text is repeated; "
                        f"{self._timeout_fix(exc)}"
                    ) from exc
                if attempt < tries and _retryable(exc):
                    wait = self._backoff(attempt)
                    log.warning(
                        "%s %s: %s; retry %d/%d in %.1f s", method, url, self._reason(exc), attempt, tries - 1, wait
                    )
                    self._sleep(wait)
                    continue
                raise self._transport_error(exc, url, attempt) from exc

    def _backoff(self, attempt: int) -> float:
        return min(self.backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S)

    def _retry_wait(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before retrying this error response, or None when it must not be retried."""
        status = response.status_code
        if status != 429 and status < 500:
            return None  # other 4xx: the request itself is wrong; repeating it cannot help
        after = _retry_after(response)
        if after is None:
            return self._backoff(attempt)
        return after if after <= MAX_RETRY_AFTER_S else None

    # --- reading responses --------------------------------------------------------------------------

    def _read_completion(self, response: httpx.Response, url: str) -> Iterator[str]:
        """Text chunks from an SSE stream, or from one JSON body when the server ignored stream=True."""
        if "event-stream" not in response.headers.get("content-type", ""):
            text = response.read().decode("utf-8", errors="replace")
            if not text.lstrip().startswith("data:"):
                yield from self._message_content(_parse_json(text, url), url)
                return
            lines: Iterator[str] = iter(text.splitlines())
        else:
            lines = response.iter_lines()
        finished = False
        calls: dict[int, dict[str, Any]] = {}  # streamed native tool calls, by index, assembled piece by piece
        for line in lines:
            line = line.strip()
            # blank lines end an event; ":" lines are keep-alive comments; event:/id:/retry: carry nothing we use
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                break
            chunk = _parse_json(data, url)
            if isinstance(chunk, dict) and chunk.get("error"):
                raise PolicyError(
                    f"the OpenAI-compatible endpoint at {url} failed mid-stream: {_error_text(chunk)}. "
                    "Check the server's log"
                )
            for choice in _choices(chunk, url):
                delta = choice.get("delta") or choice.get("message") or {}
                if not isinstance(delta, dict):
                    delta = {}
                thought = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(thought, str) and thought:
                    yield Reasoning(thought)
                text = delta.get("content")
                if text:  # None on role-only and finish chunks
                    yield text
                for tc in delta.get("tool_calls") or []:
                    if not isinstance(tc, dict):
                        continue
                    slot = calls.setdefault(int(tc.get("index", len(calls))), {"name": "", "arguments": ""})
                    fn = tc.get("function") or {}
                    slot["name"] += fn.get("name") or ""
                    args = fn.get("arguments")
                    if isinstance(args, str):
                        slot["arguments"] += args
                    elif args is not None:
                        slot["arguments"] = args
                if choice.get("finish_reason") == "length":
                    log.warning(
                        "answer cut at max_new_tokens=%d; raise it if answers end mid-sentence",
                        self.config.max_new_tokens,
                    )
                finished = finished or bool(choice.get("finish_reason"))
        for i in sorted(calls):
            yield ("\n" if i else "") + render_tool_call(calls[i]["name"], calls[i]["arguments"])
        if not finished:
            log.debug("stream from %s ended without [DONE] or a finish_reason", url)

    def _message_content(self, payload: Any, url: str) -> Iterator[str]:
        """A whole (non-streamed) message: its reasoning, its text, then its native tool calls."""
        choices = _choices(payload, url)
        if not choices:
            raise PolicyError(f"malformed response from {url}: no choices in {_clip(json.dumps(payload))}")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise PolicyError(f"malformed response from {url}: choice without a message: {_clip(str(choices[0]))}")
        if choices[0].get("finish_reason") == "length":
            log.warning(
                "answer cut at max_new_tokens=%d; raise it if answers end mid-sentence", self.config.max_new_tokens
            )
        thought = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(thought, str) and thought:
            yield Reasoning(thought)
        if message.get("content"):
            yield message["content"]
        for i, tc in enumerate(c for c in message.get("tool_calls") or [] if isinstance(c, dict)):
            fn = tc.get("function") or {}
            yield ("\n" if i else "") + render_tool_call(fn.get("name", ""), fn.get("arguments"))

    def _first_served_model(self) -> str:
        def read(response: httpx.Response, url: str) -> Iterator[list]:
            payload = _parse_json(response.read().decode("utf-8", errors="replace"), url)
            data = payload.get("data") if isinstance(payload, dict) else None
            if not isinstance(data, list):
                raise PolicyError(
                    f"malformed response from {url}: expected {{'data': [...]}}, got {_clip(str(payload))}"
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
        said = _error_text(response)
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


def _retryable(exc: httpx.TransportError) -> bool:
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


def _parse_json(text: str, url: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise PolicyError(
            f"malformed response from {url}: not JSON: {_clip(text)!r}. Is that an OpenAI-compatible server?"
        ) from None


def _choices(payload: Any, url: str) -> list[dict]:
    if not isinstance(payload, dict):
        raise PolicyError(f"malformed response from {url}: expected a JSON object, got {_clip(str(payload))}")
    choices = payload.get("choices") or []  # usage-only chunks have an empty list
    if not isinstance(choices, list):
        raise PolicyError(f"malformed response from {url}: 'choices' is {type(choices).__name__}, not a list")
    return [c for c in choices if isinstance(c, dict)]


def _error_text(source: httpx.Response | dict) -> str:
    """The server's own words: OpenAI {'error': {'message'}}, vLLM {'message'}, FastAPI {'detail'}, or the body."""
    if isinstance(source, httpx.Response):
        try:
            payload = source.json()
        except (ValueError, UnicodeDecodeError):
            return _clip(source.text.strip()) or source.reason_phrase
    else:
        payload = source
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return _clip(str(error["message"]))
        for key in ("message", "detail"):
            if payload.get(key):
                return _clip(str(payload[key]))
        if isinstance(error, str) and error:
            return _clip(error)
    return _clip(json.dumps(payload))


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "..."

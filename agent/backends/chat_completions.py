"""OpenAI chat-completion responses read into the chunks a Policy streams: text, `Reasoning`, and native
tool calls rendered as the `<tool_call>` text the protocols parse; plus the server's own words from an error.

An event stream is read by httpx-sse, so any framing the SSE spec allows works (CRLF line ends, comments,
events without data, id:/retry: fields); an event stream sent under another content type (some proxies) is
read the same way, and a whole JSON body (a server that ignored stream=True) as one message. A malformed
response is a PolicyError naming the URL. Left out on purpose: HTTP, retries and requests, which are
agent/backends/openai_compat.py's.

Streamed tool calls are assembled from fragments as servers really send them, two shapes beyond OpenAI's own
included: `index` only on a call's first fragment (continuations carry none), and the function name repeated
in every fragment of a call (it is kept once). See `tool_call_key` and `merge_tool_call`.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterator

import httpx
import httpx_sse

from agent.backends.base import PolicyError, Reasoning

log = logging.getLogger("agent.backends.openai_compat")  # the backend's one logger, whichever module writes


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


def read_completion(response: httpx.Response, url: str, max_new_tokens: int) -> Iterator[str | Reasoning]:
    """Text chunks from an SSE stream, or from one JSON body when the server ignored stream=True."""
    if "event-stream" not in response.headers.get("content-type", ""):
        text = response.read().decode("utf-8", errors="replace")
        if not text.lstrip().startswith("data:"):
            yield from message_chunks(parse_json(text, url), url, max_new_tokens)
            return
        # an event stream under another content type (some proxies): read it as the stream it is
        response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())
    finished = False
    calls: dict[int, dict[str, Any]] = {}  # streamed native tool calls by index (else in order), assembled
    current: int | None = None  # the open call: the one the last fragment went to
    for event in httpx_sse.EventSource(response).iter_sse():  # comments and event:/id:/retry: fields skipped
        data = event.data.strip()
        if data == "[DONE]":
            break
        if not data:  # an event without data (a named keep-alive)
            continue
        chunk = parse_json(data, url)
        if isinstance(chunk, dict) and chunk.get("error"):
            raise PolicyError(
                f"the OpenAI-compatible endpoint at {url} failed mid-stream: {error_text(chunk)}. "
                "Check the server's log"
            )
        for choice in choices_of(chunk, url):
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
                current = tool_call_key(calls, tc, current)
                merge_tool_call(calls.setdefault(current, {"id": "", "name": "", "arguments": ""}), tc)
            if choice.get("finish_reason") == "length":
                log.warning(
                    "answer cut at max_new_tokens=%d; raise it if answers end mid-sentence",
                    max_new_tokens,
                )
            finished = finished or bool(choice.get("finish_reason"))
    for i in sorted(calls):
        yield ("\n" if i else "") + render_tool_call(calls[i]["name"], calls[i]["arguments"])
    if not finished:
        log.debug("stream from %s ended without [DONE] or a finish_reason", url)


def tool_call_key(calls: dict[int, dict[str, Any]], tc: dict, current: int | None) -> int:
    """Which call a streamed fragment belongs to. Its `index` when it has one; without one (some servers send
    it only on a call's first fragment) the open call, unless the fragment plainly starts another: a new `id`,
    or (with no id) a different name after the open call's arguments began, since a name never resumes then."""
    index = tc.get("index")
    if index is not None:
        try:
            return int(index)
        except (TypeError, ValueError):  # a junk index says nothing: read the fragment as if it had none
            pass
    if current is None:
        return max(calls, default=-1) + 1
    open_call, call_id, name = calls[current], tc.get("id"), function_of(tc).get("name")
    new_id = isinstance(call_id, str) and call_id and open_call["id"] and call_id != open_call["id"]
    new_name = not call_id and isinstance(name, str) and name and name != open_call["name"] and begun(open_call)
    return max(calls) + 1 if new_id or new_name else current


def merge_tool_call(slot: dict[str, Any], tc: dict) -> None:
    """Add one fragment to its call. `id` and `type` may repeat in every fragment: the first id is kept.

    The name rule: a fragment's name is appended only while the call's arguments have not begun and it is not
    the whole name assembled so far. So a name some servers repeat in every chunk ("search", "search", ...)
    stays "search", and a name streamed in pieces ("add_search" then "_node") still joins. Names come before
    arguments, so a name after them is a repeat. Left ambiguous: a name made of one piece twice ("ab" + "ab"
    for "abab"), read as a repeat; no protocol's tool is named so.
    """
    call_id = tc.get("id")
    if isinstance(call_id, str) and call_id and not slot["id"]:
        slot["id"] = call_id
    fn = function_of(tc)
    name = fn.get("name")
    if isinstance(name, str) and name and name != slot["name"] and not begun(slot):
        slot["name"] += name
    args = fn.get("arguments")
    if isinstance(args, str):
        slot["arguments"] += args
    elif args is not None:
        slot["arguments"] = args


def function_of(tc: dict) -> dict:
    fn = tc.get("function")
    return fn if isinstance(fn, dict) else {}


def begun(slot: dict[str, Any]) -> bool:
    """Whether a call's arguments have started (an empty or blank string is what servers send before them)."""
    args = slot["arguments"]
    return not isinstance(args, str) or bool(args.strip())


def message_chunks(payload: Any, url: str, max_new_tokens: int) -> Iterator[str | Reasoning]:
    """A whole (non-streamed) message: its reasoning, its text, then its native tool calls."""
    choices = choices_of(payload, url)
    if not choices:
        raise PolicyError(f"malformed response from {url}: no choices in {clip(json.dumps(payload))}")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise PolicyError(f"malformed response from {url}: choice without a message: {clip(str(choices[0]))}")
    if choices[0].get("finish_reason") == "length":
        log.warning("answer cut at max_new_tokens=%d; raise it if answers end mid-sentence", max_new_tokens)
    thought = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(thought, str) and thought:
        yield Reasoning(thought)
    if message.get("content"):
        yield message["content"]
    for i, tc in enumerate(c for c in message.get("tool_calls") or [] if isinstance(c, dict)):
        fn = tc.get("function") or {}
        yield ("\n" if i else "") + render_tool_call(fn.get("name", ""), fn.get("arguments"))


def parse_json(text: str, url: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise PolicyError(
            f"malformed response from {url}: not JSON: {clip(text)!r}. Is that an OpenAI-compatible server?"
        ) from None


def choices_of(payload: Any, url: str) -> list[dict]:
    if not isinstance(payload, dict):
        raise PolicyError(f"malformed response from {url}: expected a JSON object, got {clip(str(payload))}")
    choices = payload.get("choices") or []  # usage-only chunks have an empty list
    if not isinstance(choices, list):
        raise PolicyError(f"malformed response from {url}: 'choices' is {type(choices).__name__}, not a list")
    return [c for c in choices if isinstance(c, dict)]


def error_text(source: httpx.Response | dict) -> str:
    """The server's own words: OpenAI {'error': {'message'}}, vLLM {'message'}, FastAPI {'detail'}, or the body."""
    if isinstance(source, httpx.Response):
        try:
            payload = source.json()
        except (ValueError, UnicodeDecodeError):
            return clip(source.text.strip()) or source.reason_phrase
    else:
        payload = source
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return clip(str(error["message"]))
        for key in ("message", "detail"):
            if payload.get(key):
                return clip(str(payload[key]))
        if isinstance(error, str) and error:
            return clip(error)
    return clip(json.dumps(payload))


def clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "..."

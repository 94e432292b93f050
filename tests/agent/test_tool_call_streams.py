"""Streamed native tool calls and reasoning as real servers send them, read by `read_completion`.

Each body is kept as a server writes it (`data: {...}` lines), fed to the reader as an httpx response; the
calls it renders are read back by the project's parser. The shapes: `index` on a call's first fragment only,
the function name repeated in every chunk, a name split across chunks, two calls told apart by index or by id,
and reasoning under `reasoning_content`, under `reasoning`, or inline as `<think>` in the text.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest

from agent.actions import Action, parse
from agent.backends.base import Reasoning
from agent.backends.chat_completions import read_completion
from agent.protocols import get

URL = "http://127.0.0.1:8000/v1"


def read(body: str, content_type: str = "text/event-stream") -> list[str]:
    response = httpx.Response(200, headers={"content-type": content_type}, content=body.encode())
    return list(read_completion(response, URL, 1024))


def split(chunks: list[str]) -> tuple[str, str]:
    """(the reasoning, the reply text) of a read reply."""
    thought = "".join(c for c in chunks if isinstance(c, Reasoning))
    return thought, "".join(c for c in chunks if not isinstance(c, Reasoning))


def rendered_calls(text: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text, re.S)]


def parsed(text: str, protocol: str) -> Action:
    action = parse(text, get(protocol))
    assert isinstance(action, Action), action
    return action


QUERY = {"query": "revenue by region"}

# --- one call -------------------------------------------------------------------------------------------

# vLLM-like: `index` (and id, type, name) on the first fragment only; the arguments follow in 3 pieces
NO_INDEX_AFTER_FIRST = r"""data: {"id":"chatcmpl-7","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"chatcmpl-tool-a1","type":"function","function":{"name":"search","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{\"query\": "}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"\"revenue by "}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"region\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-7","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""  # noqa: E501 - recorded lines kept whole

# DashScope-like: every chunk repeats index, id, type and the function name beside the next arguments piece
NAME_IN_EVERY_CHUNK = r"""data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_5f1","type":"function","function":{"name":"search","arguments":""}}]},"finish_reason":null}],"object":"chat.completion.chunk"}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_5f1","type":"function","function":{"name":"search","arguments":"{\"query\": \"rev"}}]},"finish_reason":null}],"object":"chat.completion.chunk"}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_5f1","type":"function","function":{"name":"search","arguments":"enue by region"}}]},"finish_reason":null}],"object":"chat.completion.chunk"}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_5f1","type":"function","function":{"name":"search","arguments":"\"}"}}]},"finish_reason":null}],"object":"chat.completion.chunk"}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"object":"chat.completion.chunk"}

data: [DONE]

"""  # noqa: E501 - recorded lines kept whole

# both at once: the name and id repeated in every chunk, and no index at all
NAME_IN_EVERY_CHUNK_NO_INDEX = r"""data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_9","type":"function","function":{"name":"search","arguments":"{\"query\": "}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_9","type":"function","function":{"name":"search","arguments":"\"revenue by region\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""  # noqa: E501 - recorded lines kept whole

# a name streamed in pieces before its arguments (OpenAI's protocol allows it): the pieces join
NAME_SPLIT = r"""data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"add_search"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"_node"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"id\": \"s1\", \"query\": \"revenue by region\", "}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"parent_ids\": [\"root\"]}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""  # noqa: E501 - recorded lines kept whole


@pytest.mark.parametrize(
    "body",
    [NO_INDEX_AFTER_FIRST, NAME_IN_EVERY_CHUNK, NAME_IN_EVERY_CHUNK_NO_INDEX],
    ids=["no-index-after-first", "name-in-every-chunk", "name-in-every-chunk-no-index"],
)
def test_one_streamed_call_comes_out_as_one_call(body):
    thought, text = split(read(body))
    assert thought == ""
    assert rendered_calls(text) == [{"name": "search", "arguments": QUERY}]
    assert text.count("<tool_call>") == 1 and "searchsearch" not in text
    action = parsed(text, "react")
    assert (action.name, action.args, action.warnings) == ("search", QUERY, [])


def test_name_split_across_chunks_still_joins():
    _, text = split(read(NAME_SPLIT))
    args = {"id": "s1", "query": "revenue by region", "parent_ids": ["root"]}
    assert rendered_calls(text) == [{"name": "add_search_node", "arguments": args}]
    action = parsed(text, "vimrag")
    assert (action.name, action.args) == ("add_search_node", args)


# --- two calls ------------------------------------------------------------------------------------------

# both calls indexed, as OpenAI sends them
TWO_INDEXED = r"""data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"search","arguments":""}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"query\": \"revenue\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"crop","arguments":""}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"image\": \"Picture 1\", "}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"bbox\": [1, 2, 3, 4]}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""  # noqa: E501 - recorded lines kept whole

# no index anywhere: a new id starts the second call, fragments without an id continue the open one
TWO_BY_ID = r"""data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","type":"function","function":{"name":"search","arguments":""}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{\"query\": "}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","function":{"arguments":"\"revenue\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"crop","arguments":""}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{\"image\": \"Picture 1\", "}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"\"bbox\": [1, 2, 3, 4]}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""  # noqa: E501 - recorded lines kept whole

# neither index nor id, each call whole in one fragment: once arguments began, a different name is a new call
TWO_WHOLE_NO_INDEX_NO_ID = r"""data: {"choices":[{"index":0,"delta":{"tool_calls":[{"type":"function","function":{"name":"search","arguments":"{\"query\": \"revenue\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"type":"function","function":{"name":"crop","arguments":"{\"image\": \"Picture 1\", \"bbox\": [1, 2, 3, 4]}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""  # noqa: E501 - recorded lines kept whole

TWO_CALLS = [
    {"name": "search", "arguments": {"query": "revenue"}},
    {"name": "crop", "arguments": {"image": "Picture 1", "bbox": [1, 2, 3, 4]}},
]


@pytest.mark.parametrize(
    "body",
    [TWO_INDEXED, TWO_BY_ID, TWO_WHOLE_NO_INDEX_NO_ID],
    ids=["by-index", "by-new-id", "new-name-without-index-or-id"],
)
def test_two_streamed_calls_stay_two(body):
    chunks = read(body)
    assert len(chunks) == 2 and chunks[1].startswith("\n<tool_call>")  # one chunk a call, the second on its line
    assert rendered_calls("".join(chunks)) == TWO_CALLS
    for chunk, call in zip(chunks, TWO_CALLS):
        action = parsed(chunk, "react")
        assert (action.name, action.args) == (call["name"], call["arguments"])


# --- reasoning ------------------------------------------------------------------------------------------

# reasoning apart from the reply (vLLM/DashScope `reasoning_content`, others `reasoning`), then a call
REASONING_THEN_CALL = r"""data: {"choices":[{"index":0,"delta":{"role":"assistant","KEY":"The table "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"KEY":"has regions."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"Searching."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"search","arguments":"{\"query\": \"revenue by region\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""  # noqa: E501 - recorded lines kept whole

# a model that thinks inline: the <think> block is part of the reply text, left to the protocol's parser
INLINE_THINK = r"""data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"<think>"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"The table has regions."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"</think>\n<tool_call>\n{\"name\": \"search\", "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"\"arguments\": {\"query\": \"revenue by region\"}}\n</tool_call>"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

"""  # noqa: E501 - recorded lines kept whole


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_streamed_reasoning_keys_become_reasoning_chunks(key):
    chunks = read(REASONING_THEN_CALL.replace('"KEY"', json.dumps(key)))
    assert [c for c in chunks if isinstance(c, Reasoning)] == ["The table ", "has regions."]
    thought, text = split(chunks)
    assert thought == "The table has regions." and "The table" not in text and "<think>" not in text
    assert text.startswith("Searching.")
    assert rendered_calls(text) == [{"name": "search", "arguments": QUERY}]
    action = parsed(text, "react")
    assert (action.name, action.args) == ("search", QUERY)


def test_inline_think_block_stays_in_the_text():
    chunks = read(INLINE_THINK)
    assert not any(isinstance(c, Reasoning) for c in chunks)
    text = "".join(chunks)
    assert text.startswith("<think>The table has regions.</think>\n<tool_call>\n")
    action = parsed(text, "react")
    assert (action.name, action.args, action.think) == ("search", QUERY, "The table has regions.")


# --- a whole (non-streamed) JSON body -------------------------------------------------------------------

WHOLE_MESSAGE = r"""{"id":"chatcmpl-3","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Searching.","KEY":"The table has regions.","tool_calls":[{"id":"c0","type":"function","function":{"name":"search","arguments":"{\"query\": \"revenue by region\"}"}}]},"finish_reason":"tool_calls"}]}"""  # noqa: E501 - recorded lines kept whole

WHOLE_MESSAGE_INLINE_THINK = r"""{"choices":[{"index":0,"message":{"role":"assistant","content":"<think>The table has regions.</think>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"revenue by region\"}}\n</tool_call>"},"finish_reason":"stop"}]}"""  # noqa: E501 - recorded lines kept whole


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_whole_message_reasoning_keys_become_reasoning_chunks(key):
    chunks = read(WHOLE_MESSAGE.replace('"KEY"', json.dumps(key)), content_type="application/json")
    assert chunks[0] == "The table has regions." and isinstance(chunks[0], Reasoning)
    assert not any(isinstance(c, Reasoning) for c in chunks[1:])
    _, text = split(chunks)
    assert "The table" not in text and text.startswith("Searching.")
    assert rendered_calls(text) == [{"name": "search", "arguments": QUERY}]
    action = parsed(text, "react")
    assert (action.name, action.args) == ("search", QUERY)


def test_whole_message_inline_think_stays_in_the_text():
    chunks = read(WHOLE_MESSAGE_INLINE_THINK, content_type="application/json")
    assert not any(isinstance(c, Reasoning) for c in chunks)
    text = "".join(chunks)
    assert text.startswith("<think>The table has regions.</think>\n<tool_call>\n")
    action = parsed(text, "react")
    assert (action.name, action.args, action.think) == ("search", QUERY, "The table has regions.")

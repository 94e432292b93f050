"""OpenAIPolicy against a real local fake OpenAI-compatible server (tests/agent/openai_fake.py: http.server in a
thread, 127.0.0.1). Native tool calls and reasoning are tests/agent/test_openai_tool_calls.py's.

The server replays a script of canned replies (SSE streams, JSON bodies, error statuses, stalls, hang-ups)
and records every request, so the tests check both what the backend sends (auth, model, data-URL images,
no internal keys) and how it reads, retries and fails.
"""

from __future__ import annotations

import base64
import logging
import time

import pytest
from PIL import Image

from agent.backends.base import PolicyError, load_policy
from agent.backends.openai_compat import OpenAIPolicy
from tests.agent.openai_fake import (
    QUESTION,
    answer,
    body,
    decode_data_url,
    delta,
    free_port,
    hang_up,
    has_key,
    sse,
    vision_messages,
)

# --- what is sent, what is read -------------------------------------------------------------------------


def test_streaming_answer_and_request_shape(server, make_policy):
    server.replies[:] = [sse(delta("Hel"), ": keep-alive\n\n", delta(None), delta("lo"), "\n", delta(" world"))]
    policy = make_policy(temperature=0.3, max_new_tokens=77, seed=5)
    messages = vision_messages()

    assert list(policy.stream(messages)) == ["Hel", "lo", " world"]
    assert policy.generate(messages) == "Hello world"

    request = server.posts()[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    sent = request["json"]
    assert (sent["model"], sent["temperature"], sent["max_tokens"], sent["seed"], sent["stream"]) == (
        "test-vlm",
        0.3,
        77,
        5,
        True,
    )
    assert not has_key(sent, "ref")
    assert sent["messages"][0] == {"role": "system", "content": "You are a careful research agent."}
    parts = sent["messages"][1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "image_url"]
    assert parts[0] == {"type": "text", "text": QUESTION}
    assert parts[2] == {"type": "text", "text": "Picture 2 (crop):"}
    for part, size in ((parts[1], (64, 40)), (parts[3], (30, 18))):
        assert part["image_url"]["url"].startswith("data:image/png;base64,")
        image = decode_data_url(part["image_url"]["url"])
        assert (image.format, image.size) == ("PNG", size)  # sent as the agent sized it
    # the caller's messages are not rewritten
    assert messages[1]["content"][1]["ref"] == "Picture 1"
    assert isinstance(messages[1]["content"][1]["image"], Image.Image)


@pytest.mark.parametrize(
    "reply",
    [
        body(200, answer("Paris")),  # a server that ignores stream=True
        body(200, delta("Par") + delta("is") + "data: [DONE]\n\n"),  # SSE text under a JSON content type
    ],
    ids=["json-body", "sse-as-json"],
)
def test_non_streaming_server(server, make_policy, reply):
    server.replies[:] = [reply]
    assert make_policy().generate([{"role": "user", "content": "Capital of France?"}]) == "Paris"


def test_api_key_from_env_then_empty(server, make_policy, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    make_policy(api_key="").generate([{"role": "user", "content": "hi"}])
    monkeypatch.delenv("OPENAI_API_KEY")
    make_policy(api_key="").generate([{"role": "user", "content": "hi"}])
    assert [r["headers"]["Authorization"] for r in server.posts()] == ["Bearer sk-env", "Bearer EMPTY"]


def test_over_budget_image_is_downscaled_keeping_aspect(server, make_policy, caplog):
    messages = [{"role": "user", "content": [{"type": "image", "image": Image.new("RGB", (100, 50)), "ref": "P"}]}]
    with caplog.at_level(logging.DEBUG, logger="agent.backends.openai_compat"):
        make_policy(max_pixels=1000).generate(messages)
    image = decode_data_url(server.posts()[0]["json"]["messages"][0]["content"][0]["image_url"]["url"])
    assert image.size == (44, 22)  # sqrt(1000 / 5000) scale, floored: under the budget, aspect 2:1
    assert "max_pixels=1000" in caplog.text


def test_jpeg_option(server, make_policy):
    messages = [{"role": "user", "content": [{"type": "image", "image": Image.new("RGBA", (40, 20)), "ref": "P"}]}]
    make_policy(image_format="jpeg").generate(messages)
    url = server.posts()[0]["json"]["messages"][0]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    assert decode_data_url(url).format == "JPEG"


def test_default_model_from_models_endpoint(server, make_policy):
    policy = make_policy(model="")
    assert policy.describe() == f"openai-compatible endpoint {server.url}, model served-model"
    policy.generate([{"role": "user", "content": "hi"}])
    policy.generate([{"role": "user", "content": "hi"}])
    assert [p["json"]["model"] for p in server.posts()] == ["served-model", "served-model"]
    assert sum(r["path"] == "/v1/models" for r in server.requests) == 1  # queried once


def test_no_served_models_is_a_clear_error(server, make_policy):
    server.models[:] = []
    with pytest.raises(PolicyError, match="lists no models.*--model"):
        make_policy(model="").generate([{"role": "user", "content": "hi"}])


def test_describe_and_patch_need_no_request(server, make_policy):
    policy = make_policy(model="Qwen/Qwen3-VL-8B-Instruct")
    assert policy.describe() == f"openai-compatible endpoint {server.url}, model Qwen/Qwen3-VL-8B-Instruct"
    assert policy.patch == 32 and make_policy(model="Qwen/Qwen2.5-VL-7B-Instruct").patch == 28
    assert server.requests == []


def test_load_policy_builds_it_and_close_is_idempotent(server):
    policy = load_policy("openai", base_url=server.url, model="m")
    assert isinstance(policy, OpenAIPolicy)
    assert policy.generate([{"role": "user", "content": "hi"}]) == "ok"
    policy.close()
    policy.close()


def test_sse_framing_crlf_named_events_and_fields_without_data(server, make_policy):
    """Any framing the SSE spec allows: CRLF line ends, events without data, id:/retry: fields, comments."""
    server.replies[:] = [
        sse(
            delta("a").replace("\n", "\r\n"),
            "event: ping\n\n",
            ": comment\nid: 7\nretry: 100\n" + delta("b"),
            "event: message\n" + delta("c"),
        )
    ]
    assert make_policy().generate([{"role": "user", "content": "hi"}]) == "abc"


# --- retries --------------------------------------------------------------------------------------------


def test_retry_after_one_500_then_success(server, make_policy):
    server.replies[:] = [body(500, {"error": {"message": "engine hiccup"}}), sse(delta("fine"))]
    policy = make_policy()
    assert policy.generate([{"role": "user", "content": "hi"}]) == "fine"
    assert len(server.posts()) == 2
    assert make_policy.sleeps == [0.01]


def test_retry_after_dropped_connection(server, make_policy):
    server.replies[:] = [hang_up, sse(delta("fine"))]
    assert make_policy().generate([{"role": "user", "content": "hi"}]) == "fine"
    assert len(server.posts()) == 2


def test_5xx_retries_exhausted(server, make_policy):
    server.replies[:] = [body(503, {"object": "error", "message": "overloaded", "code": 503})]
    with pytest.raises(PolicyError, match=r"HTTP 503: overloaded\) after 3 attempt"):
        make_policy(retries=2).generate([{"role": "user", "content": "hi"}])
    assert len(server.posts()) == 3
    assert make_policy.sleeps == [0.01, 0.02]  # exponential backoff


def test_429_respects_retry_after(server, make_policy):
    server.replies[:] = [body(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}), sse(delta("ok"))]
    assert make_policy().generate([{"role": "user", "content": "hi"}]) == "ok"
    assert len(server.posts()) == 2
    assert make_policy.sleeps == [1.0]


def test_429_with_long_retry_after_is_reported_not_slept(server, make_policy):
    server.replies[:] = [body(429, {"error": {"message": "quota exceeded"}}, {"Retry-After": "3600"})]
    with pytest.raises(PolicyError, match="quota exceeded.*retry after 3600 s"):
        make_policy().generate([{"role": "user", "content": "hi"}])
    assert len(server.posts()) == 1 and make_policy.sleeps == []


def test_429_retry_after_as_an_http_date(server, make_policy, caplog):
    from email.utils import formatdate

    when = formatdate(time.time() + 5, usegmt=True)
    server.replies[:] = [body(429, {"error": {"message": "slow down"}}, {"Retry-After": when}), sse(delta("ok"))]
    with caplog.at_level(logging.WARNING, logger="agent.backends.openai_compat"):
        assert make_policy().generate([{"role": "user", "content": "hi"}]) == "ok"
    assert len(make_policy.sleeps) == 1 and 3.0 < make_policy.sleeps[0] <= 5.0  # the date, not the backoff
    assert "HTTP 429; retry 1/2 in" in caplog.text


def test_no_retry_once_text_was_yielded(server, make_policy):
    server.replies[:] = [sse(delta("Hel"), stall_s=1.0, done=False), sse(delta("Hello again"))]
    chunks = []
    with pytest.raises(PolicyError, match="mid-answer after 3 characters.*no text is repeated"):
        for chunk in make_policy(timeout_s=0.3, retries=2).stream([{"role": "user", "content": "hi"}]):
            chunks.append(chunk)
    assert chunks == ["Hel"]
    assert len(server.posts()) == 1


# --- errors ---------------------------------------------------------------------------------------------


def test_unreachable_endpoint_fails_fast_naming_the_url(make_policy):
    url = f"http://127.0.0.1:{free_port()}/v1"
    policy = make_policy(base_url=url, timeout_s=1.0, retries=1)
    start = time.monotonic()
    with pytest.raises(PolicyError) as error:
        policy.generate([{"role": "user", "content": "hi"}])
    assert time.monotonic() - start < 3.0
    message = str(error.value)
    assert f"cannot reach the OpenAI-compatible endpoint at {url}: connection refused" in message
    assert "vllm serve" in message and "--base-url" in message
    assert "unresolved" in make_policy(base_url=url, model="", retries=0).describe()  # describe never raises


def test_404_names_base_url_model_and_server_message(server, make_policy):
    server.replies[:] = [body(404, {"object": "error", "message": "The model `nope` does not exist.", "code": 404})]
    with pytest.raises(PolicyError) as error:
        make_policy(model="nope").generate([{"role": "user", "content": "hi"}])
    message = str(error.value)
    assert "The model `nope` does not exist." in message
    assert "--base-url" in message and "--model" in message
    assert "served-model, other-model" in message  # what the server does serve
    assert len(server.posts()) == 1  # a 4xx is not retried


def test_400_surfaces_the_server_message(server, make_policy):
    said = "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens."
    server.replies[:] = [body(400, {"object": "error", "message": said, "code": 400})]
    with pytest.raises(PolicyError) as error:
        make_policy().generate([{"role": "user", "content": "hi"}])
    assert said in str(error.value) and "--max-model-len" in str(error.value)
    assert len(server.posts()) == 1


def test_401_points_at_the_key(server, make_policy):
    server.replies[:] = [body(401, {"error": "Unauthorized"})]
    with pytest.raises(PolicyError, match=r"refused the API key \(HTTP 401: Unauthorized\).*OPENAI_API_KEY"):
        make_policy().generate([{"role": "user", "content": "hi"}])
    assert len(server.posts()) == 1


def test_slow_server_times_out(server, make_policy):
    server.replies[:] = [body(200, answer("late"), delay_s=1.0)]
    start = time.monotonic()
    with pytest.raises(PolicyError, match=r"did not answer: timeout \(no data for 0.3 s\).*timeout_s"):
        make_policy(timeout_s=0.3, retries=0).generate([{"role": "user", "content": "hi"}])
    assert time.monotonic() - start < 0.9


@pytest.mark.parametrize(
    "reply, match",
    [
        (body(200, {"unexpected": True}), "malformed response .*no choices"),
        (body(200, "<html>proxy login</html>"), "malformed response .*not JSON"),
        (sse("data: {not json\n\n"), "malformed response .*not JSON"),
        (
            sse(delta("par"), 'data: {"error": {"message": "CUDA out of memory", "code": 500}}\n\n'),
            "failed mid-stream: CUDA out of memory",
        ),
    ],
    ids=["no-choices", "html", "bad-sse", "error-event"],
)
def test_malformed_and_error_responses(server, make_policy, reply, match):
    server.replies[:] = [reply]
    with pytest.raises(PolicyError, match=match):
        make_policy().generate([{"role": "user", "content": "hi"}])
    assert len(server.posts()) == 1


def test_agent_loop_over_the_endpoint_sends_the_rebuilt_context(server, make_policy, mixed_index):
    """The vimrag loop through the fake endpoint: tool calls come back, images go out as data URLs."""
    from agent.call_format import format_call
    from agent.loop import Agent
    from agent.settings import AgentConfig
    from retrieval.retriever import Retriever

    calls = [
        format_call("add_search_node", {"id": "s1", "query": "revenue by region", "parent_ids": ["root"]}),
        format_call("summarize_and_memorize", {"summarize": "page 2 has the table", "memorize": []}),
        format_call("add_answer_node", {"answer": "Europe", "parent_ids": ["s1"]}),
    ]
    server.replies[:] = [sse(delta(c[:20]), delta(c[20:])) for c in calls]
    trace = Agent(Retriever(mixed_index), make_policy(), AgentConfig()).ask("Which region had the most revenue?")
    assert trace.status == "answered" and trace.answer == "Europe"
    bodies = [r["json"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert len(bodies) == 3
    first_user = bodies[0]["messages"][1]["content"]  # all text, so one string, as the demo sends it
    assert isinstance(first_user, str) and "Action graph" in first_user
    # the second request: reply, results (the demo's JPEG data URLs), summary prompt; no agent keys leak
    roles = [m["role"] for m in bodies[1]["messages"]]
    assert roles == ["system", "user", "assistant", "user", "user"]
    response = bodies[1]["messages"][3]["content"]
    urls = [p["image_url"]["url"] for p in response if p["type"] == "image_url"]
    assert urls and all(u.startswith("data:image/jpeg;base64,") for u in urls)
    assert all(len(base64.b64decode(u.split(",", 1)[1])) <= 38_000 for u in urls)
    assert not any(has_key(bodies[1], k) for k in ("ref", "data", "mime", "max_pixels"))
    from agent.media import model_view

    sizes = [model_view(*decode_data_url(u).size, max_pixels=1_003_520) for u in urls]  # the results' cap
    assert sum(w * h for w, h in sizes) == trace.steps[1].image_pixels  # counted as the model will see them
    # after memorizing (nothing kept) the context is rebuilt: system and one user turn again
    assert [m["role"] for m in bodies[2]["messages"]] == ["system", "user"]
    # every request carries the VimRAG demo's sampling (vimrag_agent.py lines 32, 73-85), and the trace says so
    sampling = {k: bodies[0][k] for k in ("max_tokens", "temperature", "top_p", "chat_template_kwargs")}
    assert sampling == {
        "max_tokens": 4096,
        "temperature": 0.6,
        "top_p": 0.95,
        "chat_template_kwargs": {"enable_thinking": True},
    }
    assert all({k: b[k] for k in sampling} == sampling for b in bodies)
    assert trace.config["generation"] == {"max_new_tokens": 4096, "thinking": True, "temperature": 0.6, "top_p": 0.95}


class Gen:
    """A view carrying the sampling settings the loop resolves for a protocol."""

    def __init__(self, policy, protocol: str):
        from agent.protocols import get

        self.generation = policy.generation(get(protocol))


@pytest.mark.parametrize(
    "protocol, settings, sent",
    [
        (
            "vimrag",
            {},
            {"max_tokens": 4096, "temperature": 0.6, "top_p": 0.95, "chat_template_kwargs": {"enable_thinking": True}},
        ),
        (
            "vimrag",
            {"thinking": False},
            {"max_tokens": 4096, "temperature": 0.0, "chat_template_kwargs": {"enable_thinking": False}},
        ),
        (
            "vimrag",
            {"temperature": 0.2, "max_new_tokens": 300, "top_p": 0.5},
            {"max_tokens": 300, "temperature": 0.2, "top_p": 0.5, "chat_template_kwargs": {"enable_thinking": True}},
        ),
        ("react", {}, {"max_tokens": 1024, "temperature": 0.0}),
        (
            "vrag",
            {"thinking": True},
            {"max_tokens": 1024, "temperature": 0.0, "chat_template_kwargs": {"enable_thinking": True}},
        ),
    ],
    ids=["vimrag-demo", "vimrag-no-thinking", "vimrag-overridden", "react", "vrag-thinking-asked"],
)
def test_sampling_follows_the_protocol_under_the_users_settings(server, make_policy, protocol, settings, sent):
    server.replies[:] = [sse(delta("ok"))]
    policy = make_policy(**settings)
    assert policy.generate([{"role": "user", "content": "q"}], view=Gen(policy, protocol)) == "ok"
    got = server.posts()[-1]["json"]
    keys = ("max_tokens", "temperature", "top_p", "chat_template_kwargs")
    assert {k: got[k] for k in keys if k in got} == sent


def test_a_server_refusing_chat_template_kwargs_is_asked_again_without_it(server, make_policy, caplog):
    refusal = {"error": {"message": "Unrecognized request argument supplied: chat_template_kwargs", "code": 400}}
    server.replies[:] = [body(400, refusal), sse(delta("first")), sse(delta("second"))]
    policy = make_policy()
    view = Gen(policy, "vimrag")
    with caplog.at_level(logging.WARNING):
        assert policy.generate([{"role": "user", "content": "q"}], view=view) == "first"
        assert policy.generate([{"role": "user", "content": "q"}], view=view) == "second"
    assert ["chat_template_kwargs" in p["json"] for p in server.posts()] == [True, False, False]
    assert server.posts()[1]["json"]["temperature"] == 0.6  # the rest of the demo's request stays
    assert "refused chat_template_kwargs" in caplog.text

"""The OpenAI-compatible backend against a server nobody here wrote: `transformers serve` on 127.0.0.1, CPU.

Two tiny Qwen2.5-VL folders are served by one server (it loads a model by the request's `model` path):
- a random one, which writes gibberish: vrag and vimrag episodes must run to their step limit cleanly, every
  reply a corrective observation, with images sent as data URLs;
- a scripted one (tests/tiny_vlm.py), which always writes `<think>...</think><tool_call>{add_search_node}
  </tool_call>`. The server's own response parser turns that into `reasoning_content` and native
  `tool_calls`, streamed and whole, so the native round trip is checked against a real parser.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.backends.base import PolicyConfig, Reasoning, load_policy
from agent.backends.chat_completions import message_chunks
from agent.events import ErrorEvent, LimitReached, SearchResults
from agent.loop import Agent
from agent.settings import AgentConfig
from retrieval.retriever import Retriever
from retrieval.server import free_port
from tests.search_server import stop, wait_healthy
from tests.tiny_vlm import build_scripted_qwen2_5_vl, build_tiny_qwen2_5_vl

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("openai") is None or importlib.util.find_spec("fastapi") is None,
        reason="transformers serve needs its [serving] extra (openai, fastapi); scripts/setup.sh test installs it",
    ),
]

SEARCH = {"id": "s1", "query": "revenue by region", "parent_ids": ["root"]}
SCRIPT = [
    "<think>",
    "I look for the table first.",
    "</think>",
    "<tool_call>",
    json.dumps({"name": "add_search_node", "arguments": SEARCH}),
    "</tool_call>",
]
MEM1_SCRIPT = ["<think>", "I need the revenue table.", "</think>", "<search>", "revenue by region", "</search>"]
SMALL = dict(s_total=200_704, max_image_pixels=100_352, max_frame_pixels=50_176, top_k=2)  # fast on CPU


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    return {
        "random": str(build_tiny_qwen2_5_vl(root / "random")),
        "scripted": str(build_scripted_qwen2_5_vl(root / "scripted", SCRIPT)),
        "mem1": str(build_scripted_qwen2_5_vl(root / "mem1", MEM1_SCRIPT)),
    }


@pytest.fixture(scope="module")
def server(models, tmp_path_factory):
    exe = shutil.which("transformers", path=str(Path(sys.executable).parent)) or shutil.which("transformers")
    if exe is None:
        pytest.fail("the transformers CLI is not installed next to this Python")
    port = free_port()
    log = tmp_path_factory.mktemp("serve_log") / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [exe, "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, "transformers serve", lambda: log.read_text()[-2000:], timeout=60)
        yield url + "/v1"
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def retriever(mixed_index):
    return Retriever(mixed_index)


def policy(server, model, **kw):
    return load_policy(
        PolicyConfig(
            **{"backend": "openai", "base_url": server, "model": model, "max_new_tokens": 16, "timeout_s": 120, **kw}
        )
    )


def test_streamed_text_with_an_image_as_a_data_url(server, models):
    from PIL import Image

    p = policy(server, models["random"])
    chunks = list(
        p.stream(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is on this page?"},
                        {"type": "image", "image": Image.new("RGB", (56, 84), "red"), "ref": "Picture 1"},
                    ],
                }
            ]
        )
    )
    p.close()
    assert len(chunks) > 1 and all(isinstance(c, str) for c in chunks)  # streamed, several deltas


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_native_tool_calls_round_trip(server, models, stream):
    from agent.protocols import get, parse
    from agent.protocols.schema import specs

    class View:
        tool_specs = specs(get("vimrag").tools)

    p = policy(server, models["scripted"], tool_calling="native", max_new_tokens=32)
    messages = [{"role": "user", "content": "Which region earned most?"}]
    if stream:
        out = list(p.stream(messages, view=View()))
    else:  # the same request without streaming: the whole message, read the same way
        choice = p.complete(messages, tools=View.tool_specs, max_tokens=32, temperature=0)
        out = list(message_chunks({"choices": [choice]}, server, max_new_tokens=32))
    p.close()
    thoughts = "".join(c for c in out if isinstance(c, Reasoning))
    text = "".join(c for c in out if not isinstance(c, Reasoning))
    assert thoughts == "I look for the table first."  # the server's reasoning_content, kept apart
    assert "<think>" not in text and text.startswith("<tool_call>")  # the server's tool_calls, rendered
    action = parse(text, "vimrag")
    assert action.name == "add_search_node" and action.args == SEARCH


def test_native_vimrag_episode_through_the_server(server, models, retriever):
    p = policy(server, models["scripted"], tool_calling="native", max_new_tokens=32)
    events = list(Agent(retriever, p, AgentConfig(max_steps=3, **SMALL)).stream("Which region earned most?"))
    p.close()
    trace = events[-1].trace
    # the search ran (results with images went back as data URLs); the same call again is refused (its id is
    # taken), and the refusal is what the model reads next
    assert sum(isinstance(e, SearchResults) for e in events) == 1
    errors = [e.message for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 2 and all("'s1' is already used" in m for m in errors)
    assert trace.status == "limit" and len(trace.steps) == 3
    assert all(s.reasoning == "I look for the table first." for s in trace.steps)
    assert trace.steps[1].image_pixels > 0  # the second request carried the results' pictures


@pytest.mark.parametrize("protocol", ["vrag", "vimrag"])
def test_a_random_model_runs_to_the_step_limit_cleanly(server, models, retriever, protocol):
    p = policy(server, models["random"])
    events = list(
        Agent(retriever, p, AgentConfig(protocol=protocol, max_steps=3, **SMALL)).stream("What was revenue in 2025?")
    )
    p.close()
    trace = events[-1].trace
    assert isinstance(events[-2], LimitReached) and trace.status == "limit" and len(trace.steps) == 3
    assert all(s.output for s in trace.steps)  # the server answered every step
    # gibberish replies became corrective observations the model saw on the next turn
    assert sum(isinstance(e, ErrorEvent) for e in events) >= 2


def test_mem1_with_a_random_model_ends_cleanly_through_the_server(server, models, retriever):
    """MEM1's loop against a real server: a random model's reply holds no action, so the episode ends without an
    answer after one call (Mem1/inference/data_pipelines.py lines 160-161), with no error."""
    p = policy(server, models["random"])
    events = list(Agent(retriever, p, AgentConfig(protocol="mem1", **SMALL)).stream("What was revenue in 2025?"))
    p.close()
    trace = events[-1].trace
    assert trace.steps and trace.steps[0].output and not trace.error
    assert trace.status in ("no_answer", "answered") and len(trace.steps) <= 6


def test_mem1_searching_every_turn_runs_to_its_step_limit_through_the_server(server, models, retriever):
    """A model that always searches: each turn's context is the prompt, the last reply and the last observation
    only, until the step limit."""
    p = policy(server, models["mem1"], max_new_tokens=32)
    cfg = AgentConfig(protocol="mem1", max_steps=3, **SMALL)
    events = list(Agent(retriever, p, cfg).stream("What was revenue in 2025?"))
    p.close()
    trace = events[-1].trace
    assert isinstance(events[-2], LimitReached) and trace.status == "limit" and len(trace.steps) == 3
    assert [s.action["name"] for s in trace.steps] == ["search"] * 3
    assert [len(s.messages) for s in trace.steps] == [1, 3, 3]  # the history never grows


def test_memagent_reads_each_result_into_its_memory_through_the_server(server, models, retriever):
    """MemAgent's loop against a server nobody here wrote: every reply of the random model becomes the whole
    memory, one result a call, and the last call answers from the memory alone."""
    p = policy(server, models["random"])
    cfg = AgentConfig(protocol="memagent", max_steps=3, **{**SMALL, "vanilla_k": 2})
    events = list(Agent(retriever, p, cfg).stream("What was revenue in 2025?"))
    p.close()
    trace = events[-1].trace
    assert len(trace.steps) == 3 and all(s.output for s in trace.steps)
    assert [s.action["name"] for s in trace.steps if s.action] in (
        ["update_memory", "update_memory", "answer"],
        ["update_memory", "update_memory"],  # a final reply of nothing but whitespace is asked again
    )
    memory = trace.steps[2].messages[0]["content"]
    memory = memory if isinstance(memory, str) else "".join(x.get("text", "") for x in memory)
    assert trace.steps[1].output.rsplit("</think>", 1)[-1].strip()[:40] in memory  # the last reply is the memory
    assert trace.status in ("answered", "limit") and not trace.error


def test_fold_through_the_server_runs_to_its_step_limit_cleanly(server, models, retriever):
    """DeepAgent's loop against a real server: the scripted model calls a tool fold does not have, so each turn's
    result is `Error calling tool: ...` (src/run_deep_agent.py lines 546-557) and the episode runs to its limit;
    a random model's gibberish, with no call and no fold, is taken as its answer and ends the episode."""
    p = policy(server, models["scripted"], max_new_tokens=32)
    cfg = AgentConfig(protocol="fold", max_steps=3, **SMALL)
    events = list(Agent(retriever, p, cfg).stream("What was revenue in 2025?"))
    p.close()
    trace = events[-1].trace
    assert isinstance(events[-2], LimitReached) and trace.status == "limit" and len(trace.steps) == 3
    assert all(s.output.rstrip().endswith("</tool_call>") for s in trace.steps)
    assert all("add_search_node" in (s.observation or "") for s in trace.steps)
    p = policy(server, models["random"])
    events = list(Agent(retriever, p, cfg).stream("What was revenue in 2025?"))
    p.close()
    trace = events[-1].trace
    assert trace.steps and trace.steps[0].output and not trace.error
    assert trace.status in ("answered", "no_answer", "limit") and len(trace.steps) <= 3


def test_synth_writer_verifier_and_teacher_through_the_server(server, models, tmp_path):
    """`vimrag synth` against a real server and a random model: every reply is nonsense, so nothing is kept, but
    each path runs to its end and every slot or item says why it was dropped."""
    from eval.runner import read_predictions
    from retrieval.ingest import Indexer
    from rl.synth.questions import SynthConfig, synth_questions
    from rl.synth.trajectories import synth_trajectories
    from tests.synth_corpus import make_synth_corpus

    corpus = make_synth_corpus(tmp_path / "corpus")
    idx = tmp_path / "idx"
    Indexer(idx).index([corpus], progress=False)
    endpoint = {"base_url": server, "model": models["random"], "max_tokens": 24}
    writer_run = tmp_path / "writer"
    card = synth_questions(
        SynthConfig.from_dict(
            {"index": str(idx), "out": str(writer_run), "n": 2, "max_slots": 3, "concurrency": 2, "generator": endpoint}
        ),
        progress=False,
    )
    journal = list(read_predictions(writer_run / "journal.jsonl").values())
    assert card["slots"] == len(journal) == 3 and card["kept"] == 0
    assert all(r["note"].startswith("malformed generator reply") for r in journal)  # the random model's words
    verifier_run = tmp_path / "verifier"
    card = synth_questions(
        SynthConfig.from_dict(
            {"index": str(idx), "out": str(verifier_run), "n": 2, "max_slots": 3, "pairs": 0, "verifier": endpoint}
        ),
        progress=False,
    )
    rejected = [json.loads(x) for x in (verifier_run / "rejected.jsonl").read_text().splitlines()]
    assert card["kept"] == 0 and len(rejected) == 3
    assert all(r["reason"].startswith("grounded: the verifier's reply is neither yes nor no") for r in rejected)
    qdir = tmp_path / "questions"
    qdir.mkdir()
    (qdir / "config.json").write_text(json.dumps({"index": str(idx)}))
    (qdir / "questions.jsonl").write_text(
        json.dumps({"id": "q1", "question": "How many stations are there on the northern line?", "answer": ["14"],
                    "evidence": [{"file": "survey.pdf", "page": 3}], "doc": "survey.pdf"}) + "\n"
    )  # fmt: skip
    res = synth_trajectories(
        str(qdir),
        str(tmp_path / "teacher"),
        PolicyConfig(backend="openai", base_url=server, model=models["random"], max_new_tokens=16, timeout_s=120),
        AgentConfig(protocol="vrag", max_steps=2, **SMALL),
        compile="acc",
        progress=False,
    )
    assert res["questions"] == 1 and res["kept"] == 0 and res["dropped"]["wrong"] == 1
    assert (tmp_path / "teacher" / "acc.jsonl").read_text() == ""
    assert (tmp_path / "teacher" / "teacher" / "traces" / "q1.json").is_file()  # the teacher's run is kept whole


def test_mel_through_the_server_skips_every_malformed_reflection_and_trains_on(
    server, models, mixed_corpus, mixed_index, tmp_path, monkeypatch
):
    """MEL (rl/mel.py) with the reflector at the server, serving the tiny random model: its replies are nonsense, so
    every pair is skipped with the reason written, and the two updates finish. The reward alternates within each
    group (a random model never answers) so that every group holds a success and a failure to reflect on."""
    from collections import Counter

    import rl.rollout
    from rl.trainer import Trainer
    from tests.mixed_task import QUESTIONS, write_task
    from tests.rl.tiny_config import tiny_config

    seen: Counter = Counter()

    def alternate(trace, item, reward="vimrag", judge=None) -> float:
        seen[item.id] += 1
        return float(seen[item.id] % 2)

    monkeypatch.setattr(rl.rollout, "score", alternate)
    qs, idx = write_task(tmp_path, QUESTIONS[:2], mixed_index)
    task = {"dataset": f"jsonl:{qs}", "corpus": str(mixed_corpus), "index": str(idx)}
    mel = {"mel": True, "mel_reflector": server, "mel_reflector_model": models["random"], "mel_max_new_tokens": 24}
    cfg = tiny_config(models["random"], task, tmp_path / "run", updates=2, save_every=0, **mel)
    logs = Trainer(cfg).train(progress=False)
    assert [(lg["mel_pairs"], lg["mel_lessons"], lg["mel_skipped"]) for lg in logs] == [(1, 0, 1), (1, 0, 1)]
    reasons = [json.loads(x)["reason"] for x in (tmp_path / "run/mel/skipped.jsonl").read_text().splitlines()]
    said = ("no JSON object", "the reply's JSON does not parse", "`step` must", "step ", "`lesson` must", "the lesson")
    assert len(reasons) == 2 and all(r.startswith(said) for r in reasons), reasons  # malformed, not unreachable
    assert (tmp_path / "run/mel/lessons.jsonl").read_text() == ""

"""The full agent loop over the generated mixed corpus, driven by scripted policies, for every protocol."""

import json

import pytest

from agent.backends.scripted import ScriptedPolicy
from agent.call_format import format_call, format_vrag
from agent.events import (
    AnswerEvent,
    Cropped,
    ErrorEvent,
    Event,
    Finished,
    LimitReached,
    Memorized,
    ModelOutput,
    SearchResults,
    StepStarted,
    ToolCall,
    Trace,
)
from agent.loop import Agent
from agent.settings import AgentConfig
from retrieval.retriever import Retriever


@pytest.fixture(scope="module")
def retriever(mixed_index):
    return Retriever(mixed_index)


def run(retriever, script, **cfg):
    policy = ScriptedPolicy(script=script)
    events = list(Agent(retriever, policy, AgentConfig(**cfg)).stream("How many customers can join the pilot?"))
    assert isinstance(events[-1], Finished)
    return events, events[-1].trace, policy


def first_picture(view, modality="image"):
    """The label ("Picture k") of the first fresh result whose unit has this modality."""
    for i in view.pending:
        if view.evidence.get(i).unit.modality == modality:
            return view.label_of(i)
    raise AssertionError(f"no {modality} among {view.pending}")


def test_vimrag_search_memorize_crop_answer(retriever):
    script = [
        format_call(
            "add_search_node", {"id": "s1", "query": "poster pilot customers footnote", "parent_ids": ["root"]}
        ),
        lambda m, v: format_call(
            "summarize_and_memorize",
            {
                "summarize": "the poster mentions the pilot",
                "memorize": [{"information_id": first_picture(v), "is_useful": True, "priority_score": 4}],
            },
        ),
        lambda m, v: format_call(
            "crop", {"image": first_picture_mem(v), "bbox": [0, 400, 300, 450], "parent_ids": ["s1"]}
        ),
        lambda m, v: format_call(
            "summarize_and_memorize",
            {
                "summarize": "footnote: 12 customers",
                "memorize": [{"information_id": "Picture 1", "is_useful": True, "priority_score": 5}],
            },
        ),
        format_call("add_answer_node", {"answer": "12 customers", "parent_ids": ["crop1"]}),
    ]
    events, trace, policy = run(retriever, script)
    kinds = [type(e) for e in events if not (isinstance(e, ModelOutput) and not e.done)]
    assert kinds.count(StepStarted) == 5 and kinds.count(ToolCall) == 5
    assert SearchResults in kinds and Memorized in kinds and Cropped in kinds and AnswerEvent in kinds
    assert not any(isinstance(e, ErrorEvent) for e in events)
    assert trace.status == "answered" and trace.answer == "12 customers"
    g = trace.memory_graph()
    assert [n.kind for n in g.nodes.values()] == ["root", "search", "crop", "answer"]
    assert g.nodes["crop1"].parents == ["s1"] and g.nodes["answer"].parents == ["crop1"]
    crop = next(e for e in events if isinstance(e, Cropped))
    x1, y1, x2, y2 = crop.bbox_raw
    assert x2 > x1 and y2 > y1 and y1 > 400  # the seen box maps to a larger raw box (seen < raw)
    # the answer cites the zoomed region of the poster, which is on the answer's ancestry
    cites = trace.citations
    assert cites and cites[0]["file"].endswith("logimat_poster.png") and cites[0]["bbox"] == crop.bbox_raw
    # the memory the context was rebuilt with stayed within its budget (results turns come on top)
    assert 0 < trace.steps[2].image_pixels <= AgentConfig().s_total
    # streamed deltas join to the full output
    deltas = "".join(e.delta for e in events if isinstance(e, ModelOutput) and not e.done and e.step == 1)
    assert deltas == trace.steps[0].output
    # the trace survives JSON and rebuilds the identical graph
    again = Trace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again.memory_graph().to_dict() == g.to_dict() and again.to_dict() == trace.to_dict()
    assert [Event.from_dict(d).to_dict() for d in trace.events] == trace.events
    # the rebuilt context shows the question, the action graph and the memory with the crop's pixels
    last = policy.calls[-1]
    assert len(last) == 2  # rebuilt after the memorize step: system, user
    text = " ".join(p["text"] for p in last[1]["content"] if p["type"] == "text")
    assert "How many customers" in text and '"crop1"' in text and "Multimodal Memory" in text
    assert "Node: crop1" in text and "Node: s1" in text
    assert any(p["type"] == "image" for p in last[1]["content"])


def first_picture_mem(view):
    """The label under which s1's results showed the memorized picture."""
    item = next(it for _, it in view.graph.items() if it.modality == "image")
    return view.label_of(item.info_id, "s1")


def test_malformed_outputs_become_observations_and_the_episode_recovers(retriever):
    script = [
        "I think I should search but I forgot the tool call",
        '<tool_call>{"name": "add_search_node", "arguments": {"id": "s1"</tool_call>',
        format_call("fly_to_moon", {"speed": 3}),
        format_call("crop", {"image": "Picture 99", "bbox": [0, 0, 10, 10]}),
        format_call("add_search_node", {"id": "s1", "query": "revenue 2025", "parent_ids": ["nope"]}),
        format_call("add_search_node", {"id": "s1", "query": "revenue 2025", "parent_ids": ["root"]}),
        lambda m, v: format_call("crop", {"image": first_picture(v, "page"), "bbox": [50, 40, 10, 20]}),
        format_call("add_answer_node", {"answer": "48.6 million dollars", "parent_ids": ["s1"]}),
    ]
    events, trace, policy = run(retriever, script)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 6, [e.message for e in errors]
    assert "Picture 99" in errors[3].message and "nope" in errors[4].message
    assert "invert" in errors[5].message or "empty" in errors[5].message
    assert trace.status == "answered" and trace.answer == "48.6 million dollars"
    # each correction was shown to the model on the next turn, after its own reply
    assert policy.calls[1][-2] == {"role": "assistant", "content": script[0]}
    assert errors[0].message[:40] in policy.calls[1][-1]["content"]
    assert set(trace.memory_graph().nodes) == {"root", "s1", "answer"}  # failed calls left no nodes


def test_step_limit_ends_the_episode_with_a_clear_event(retriever):
    events, trace, _ = run(
        retriever,
        [format_call("add_search_node", {"id": "s1", "query": "robots", "parent_ids": ["root"]})],
        max_steps=3,
    )
    limit = [e for e in events if isinstance(e, LimitReached)]
    assert len(limit) == 1 and limit[0].limit == 3 and "3 steps" in limit[0].message
    assert trace.status == "limit" and trace.answer is None and len(trace.steps) == 3


def test_react_history_grows(retriever):
    script = [
        format_call("search", {"query": "revenue by region"}),
        format_call("search", {"query": "robots shipped per quarter"}),
        format_call("answer", {"answer": "Europe"}),
    ]
    events, trace, policy = run(retriever, script, protocol="react")
    assert trace.status == "answered" and trace.answer == "Europe"
    px = [s.image_pixels for s in trace.steps]
    assert px[0] == 0 and 0 < px[1] < px[2]  # every image shown stays in the context
    assert len(policy.calls[2]) == len(policy.calls[0]) + 4  # two (assistant, observation) pairs
    assert [n.kind for n in trace.memory_graph().nodes.values()] == ["root", "search", "search", "answer"]


def test_vrag_tags_one_new_page_per_search_and_bbox_crops_latest(retriever):
    script = [
        format_vrag("search", {"query": "LogiMAT poster footnote"}),
        format_vrag("crop", {"bbox": [10, 300, 400, 420]}),
        "<think>the footnote says 12</think><answer>12</answer>",
    ]
    events, trace, policy = run(retriever, script, protocol="vrag")
    res = next(e for e in events if isinstance(e, SearchResults))
    assert len(res.results) == 1
    crop = next(e for e in events if isinstance(e, Cropped))
    assert crop.source_info_id == res.results[0].info_id
    assert trace.answer == "12"
    imgs = [p for p in policy.calls[1][-1]["content"] if p["type"] == "image"]
    assert imgs and all(0 < i["image"].width * i["image"].height <= 512 * 28 * 28 for i in imgs)


def test_vanilla_one_call_with_top_k_pages(retriever):
    events, trace, policy = run(retriever, ["<answer>48.6 million dollars</answer>"], protocol="vanilla", vanilla_k=3)
    assert len(policy.calls) == 1 and trace.answer == "48.6 million dollars"
    shown = [p for p in policy.calls[0][1]["content"] if p["type"] in ("image", "text")]
    assert len(shown) >= 3 and trace.citations


def test_empty_question_is_refused(retriever):
    with pytest.raises(ValueError, match="empty"):
        list(Agent(retriever, ScriptedPolicy(script=["x"])).stream("  "))


def test_unreachable_backend_ends_the_episode_with_its_message(retriever):
    from agent.backends.base import Policy, PolicyError

    class Down(Policy):
        def stream(self, messages, view=None):
            raise PolicyError("cannot reach the OpenAI-compatible endpoint at http://127.0.0.1:9/v1")
            yield  # pragma: no cover

    events = list(Agent(retriever, Down()).stream("anything?"))
    err = [e for e in events if isinstance(e, ErrorEvent)]
    trace = events[-1].trace
    assert len(err) == 1 and "127.0.0.1:9" in err[0].message
    assert trace.status == "error" and "cannot reach" in trace.error and trace.answer is None


def test_a_vanished_file_becomes_an_observation_not_a_crash(tmp_path):
    from retrieval.units import Hit, Unit

    gone = Unit(
        uid="u1",
        source=str(tmp_path / "deleted.png"),
        root=str(tmp_path),
        modality="image",
        content_hash="x",
        text="a poster that was deleted after indexing",
        width=800,
        height=600,
    )

    class OneHit:
        ocr = None

        def search(self, query, k=3, filters=None, mode="hybrid"):
            return [Hit(gone, 1.0, rank=1)]

    script = [
        format_call("add_search_node", {"id": "s1", "query": "poster", "parent_ids": ["root"]}),
        format_call(
            "summarize_and_memorize",
            {
                "summarize": "a poster",
                "memorize": [{"information_id": "Picture 1", "is_useful": True, "priority_score": 3}],
            },
        ),
        format_call("crop", {"image": "Picture 1", "bbox": [10, 10, 100, 100]}),
        format_call("add_answer_node", {"answer": "Not answerable", "parent_ids": ["s1"]}),
    ]
    policy = ScriptedPolicy(script=script)
    events = list(Agent(OneHit(), policy).stream("What does the poster say?"))
    trace = events[-1].trace
    response = policy.calls[1][-2]["content"]  # the tool response turn
    assert "could not be loaded" in response and "deleted.png" in response
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and "crop" in errors[0].message
    assert trace.status == "answered"

"""Events and their payloads are typed, and serialize to the same JSON shape traces have always had."""

import json

import pytest

from agent.events import (
    AnswerEvent,
    Citation,
    Cropped,
    Event,
    Finished,
    Memorized,
    MemorizedItem,
    ModelOutput,
    NodeEvent,
    SearchHit,
    SearchResults,
    StepRecord,
    Trace,
)


def json_round_trip(ev: Event) -> Event:
    return Event.from_dict(json.loads(json.dumps(ev.to_dict())))


def test_search_results_rebuild_typed_hits_and_keep_the_json_shape():
    hit = SearchHit(
        "abc", label="Picture 1", uid="r:p2", citation="r.pdf p.2", modality="page", score=0.5, source="r.pdf"
    )
    ev = SearchResults(2, node_id="s1", query="revenue", results=[hit])
    assert ev.to_dict() == {
        "type": "search_results",
        "step": 2,
        "node_id": "s1",
        "query": "revenue",
        "by_image": "",
        "results": [
            {
                "info_id": "abc",
                "label": "Picture 1",
                "uid": "r:p2",
                "citation": "r.pdf p.2",
                "modality": "page",
                "score": 0.5,
                "source": "r.pdf",
            }
        ],
    }
    again = json_round_trip(ev)
    assert again == ev and isinstance(again.results[0], SearchHit) and again.results[0].citation == "r.pdf p.2"


def test_memorized_and_answer_payloads_round_trip():
    item = MemorizedItem(
        "Video 1", label="Video 1", citation="talk.mp4", priority=5, in_memory=True, key_timestamps=[3.0]
    )
    mem = Memorized(3, node_id="s1", summary="the talk", items=[item])
    assert mem.to_dict()["items"] == [
        {
            "info_id": "Video 1",
            "label": "Video 1",
            "citation": "talk.mp4",
            "priority": 5,
            "useful": True,
            "in_memory": True,
            "key_timestamps": [3.0],
        }
    ]
    cite = Citation("Crop 1", citation="poster.png", file="poster.png", bbox=[1, 2, 30, 40], modality="image", uid="p")
    ans = AnswerEvent(4, node_id="a1", text="12", citations=[cite], support={"answer": "12"})
    assert ans.to_dict() == {
        "type": "answer",
        "step": 4,
        "node_id": "a1",
        "text": "12",
        "citations": [
            {
                "info_id": "Crop 1",
                "citation": "poster.png",
                "file": "poster.png",
                "page": None,
                "bbox": [1, 2, 30, 40],
                "start": None,
                "end": None,
                "modality": "image",
                "uid": "p",
            }
        ],
        "support": {"answer": "12"},
    }
    for ev in (mem, ans):
        again = json_round_trip(ev)
        assert again == ev and type(again) is type(ev)
    assert isinstance(json_round_trip(ans).citations[0], Citation)


def test_crops_and_node_events_share_their_fields():
    crop = Cropped(5, node_id="c1", info_id="Crop 1", source_info_id="Picture 1", bbox_seen=[0, 0, 9, 9], citation="x")
    assert isinstance(crop, NodeEvent) and json_round_trip(crop) == crop
    assert set(crop.to_dict()) == {
        "type",
        "step",
        "node_id",
        "info_id",
        "source_info_id",
        "bbox_seen",
        "bbox_raw",
        "citation",
    }


def test_model_output_carries_tokens_and_log_probs_but_not_its_inputs():
    plain = ModelOutput(1, done=True, text="hi")
    assert plain.to_dict() == {
        "type": "model_output",
        "step": 1,
        "delta": "",
        "done": True,
        "text": "hi",
        "reasoning": "",
    }
    inputs = {"input_ids": object()}  # tensors in practice: held by reference, never serialized
    ev = ModelOutput(1, done=True, text="hi", token_ids=[5, 7, 2], logprobs=[-0.25, -1.5, -0.125], model_inputs=inputs)
    d = ev.to_dict()
    assert d["token_ids"] == [5, 7, 2] and d["logprobs"] == [-0.25, -1.5, -0.125] and "model_inputs" not in d
    again = json_round_trip(ev)
    assert again == ev and again.token_ids == [5, 7, 2] and again.model_inputs is None
    assert json_round_trip(plain).token_ids is None


def test_a_saved_trace_rebuilds_its_events_by_type():
    hits = [SearchHit("Picture 1", uid="u1")]
    trace = Trace(
        "q",
        "vimrag",
        "scripted",
        steps=[StepRecord(1, [{"role": "user", "content": "q"}], output="call")],
        events=[
            ModelOutput(1, done=True, text="call").to_dict(),
            SearchResults(1, node_id="s1", results=hits).to_dict(),
        ],
    )
    saved = json.loads(json.dumps(Finished(1, trace=trace).to_dict()))
    again = Event.from_dict(saved).trace
    assert again == trace and isinstance(again.steps[0], StepRecord)
    assert again.events_of(SearchResults) == [SearchResults(1, node_id="s1", results=hits)]
    assert again.events_of(Memorized) == []


def test_unknown_fields_are_refused():
    with pytest.raises(TypeError):
        Event.from_dict({"type": "search_results", "step": 1, "results": [{"info_id": "a", "colour": "red"}]})

"""Box conventions per model family, worked by hand: Qwen2.5-VL absolute pixels, Qwen3-VL 0..1000.

The picture is a 2000x1000 raw image. Qwen2.5-VL saw it at 1000x500 (28 px grid); Qwen3-VL at 1024x512 (32 px
grid). A crop pads the box by 28 px in the model's view, scales it to raw pixels (floor the top-left, ceil
the bottom-right) and clamps it to the image.
"""

from __future__ import annotations

import json

import pytest
from PIL import Image

from agent.backends.base import PolicyConfig
from agent.call_format import format_call
from agent.coords import resolve
from agent.protocols import get, make_protocol
from agent.settings import AgentConfig
from agent.state import EpisodeState
from agent.toolbox import Toolbox
from retrieval.units import Unit


@pytest.fixture
def state(tmp_path):
    path = tmp_path / "chart.png"
    Image.new("RGB", (2000, 1000), "white").save(path)
    unit = Unit(
        uid="chart", source=str(path), root=str(tmp_path), modality="image", content_hash="c", width=2000, height=1000
    )
    st = EpisodeState(question="q", config=AgentConfig())
    ev = st.evidence.add_unit(unit, "s1")
    return st, ev


def test_qwen2_5_vl_boxes_are_absolute_pixels_of_the_view(state):
    st, ev = state
    ev.seen_size = (1000, 500)
    crop, box = Toolbox(None, patch=28, coords="absolute").crop(st, ev.info_id, [100, 50, 200, 150], "c1")
    # pad: [72, 22, 228, 178] in the view; x2 raw: 2000 / 1000 -> [144, 44, 456, 356]
    assert box == [144, 44, 456, 356] and crop.crop_box == box


def test_qwen3_vl_boxes_are_relative_to_1000(state):
    st, ev = state
    ev.seen_size = (1024, 512)
    _, box = Toolbox(None, patch=32, coords="relative").crop(st, ev.info_id, [100, 100, 200, 300], "c1")
    # [100, 100, 200, 300] / 1000 of 1024x512 = [102.4, 51.2, 204.8, 153.6]; padded [74.4, 23.2, 232.8, 181.6];
    # x 2000/1024 = 1.953125 -> [145.3, 45.3, 454.7, 354.7] -> floor, floor, ceil, ceil
    assert box == [145, 45, 455, 355]
    # the same numbers read as absolute pixels would land elsewhere: that was the bug
    _, wrong = Toolbox(None, patch=32, coords="absolute").crop(st, ev.info_id, [100, 100, 200, 300], "c2")
    assert wrong != box


def test_a_whole_image_box_is_the_whole_image_in_both_conventions(state):
    st, ev = state
    ev.seen_size = (1024, 512)
    assert Toolbox(None, coords="relative").crop(st, ev.info_id, [0, 0, 1000, 1000], "c1")[1] == [0, 0, 2000, 1000]
    assert Toolbox(None, coords="absolute").crop(st, ev.info_id, [0, 0, 1024, 512], "c2")[1] == [0, 0, 2000, 1000]


@pytest.mark.parametrize(
    "model, expected",
    [
        ("Qwen/Qwen2.5-VL-7B-Instruct", "absolute"),
        ("autumncc/Qwen2.5-VL-7B-VRAG", "absolute"),
        ("Qwen/Qwen3-VL-8B-Instruct", "relative"),
        ("qwen3_vl", "relative"),
        ("qwen2_5_vl", "absolute"),
        ("qwen3.6-plus", "relative"),
    ],
)
def test_the_convention_follows_the_model(model, expected):
    assert resolve("auto", model) == expected
    assert resolve("absolute", model) == "absolute" and resolve("relative", model) == "relative"  # overridable
    with pytest.raises(ValueError, match="coordinate convention"):
        resolve("normalized", model)


def test_the_openai_backend_picks_the_convention_and_grid_from_the_model_name():
    from agent.backends.openai_compat import OpenAIPolicy

    p = OpenAIPolicy(PolicyConfig(backend="openai", model="Qwen/Qwen3-VL-8B-Instruct"))
    assert (p.coords, p.patch) == ("relative", 32)
    p = OpenAIPolicy(PolicyConfig(backend="openai", model="Qwen/Qwen3-VL-8B-Instruct", coords="absolute"))
    assert (p.coords, p.patch) == ("absolute", 32)
    p = OpenAIPolicy(PolicyConfig(backend="openai", model="Qwen/Qwen2.5-VL-7B-Instruct"))
    assert (p.coords, p.patch) == ("absolute", 28)


@pytest.mark.parametrize("protocol", ["vimrag", "vrag", "react"])
def test_the_prompt_and_the_tool_schema_tell_the_model_its_convention(protocol):
    st = EpisodeState(question="q", config=AgentConfig(protocol=protocol))
    text = {}
    for coords in ("absolute", "relative"):
        proto = make_protocol(protocol, Toolbox(None, coords=coords))
        prompts = " ".join(proto.prompt(st, k) for k in get(protocol).PROMPTS)
        text[coords] = prompts + json.dumps(proto.tool_specs())
    assert "1000" in text["relative"] and "1000" not in text["absolute"]
    assert "pixels" in text["absolute"]


def test_a_relative_box_is_checked_against_0_to_1000(state):
    st, ev = state
    ev.seen_size = (1024, 512)
    proto = make_protocol("react", Toolbox(None, coords="relative"))
    ok = proto.parse(format_call("crop", {"image": ev.info_id, "bbox": [500, 600, 900, 950]}), st)
    assert ok.name == "crop"  # (600, 950) lies outside a 1024x512 view but inside 0..1000
    out = proto.parse(format_call("crop", {"image": ev.info_id, "bbox": [1100, 10, 1200, 50]}), st)
    assert out.reason == "bbox_outside" and "1000x1000" in out.observation

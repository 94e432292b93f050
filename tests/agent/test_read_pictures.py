"""AgentConfig.read_pictures: a text-only policy is given what OCR reads in each picture at the size it is shown, in
the tool's own observation (vrag's image, react's result list), and nothing changes when it is off."""

from __future__ import annotations

import shutil

import pytest
from PIL import Image, ImageDraw, ImageFont

from agent.backends.scripted import ScriptedPolicy
from agent.loop import Agent
from agent.settings import AgentConfig
from retrieval.units import Unit
from tests.agent.fakes import Fixed

needs_tesseract = pytest.mark.skipif(
    not shutil.which("tesseract"), reason="reads with tesseract (apt-get install tesseract-ocr; scripts/test.sh does)"
)


@pytest.fixture(scope="module")
def sign(tmp_path_factory):
    """A 1600x600 picture: a headline anyone reads, and a line in 12 px type too small to read once shrunk."""
    folder = tmp_path_factory.mktemp("sign")
    image = Image.new("RGB", (1600, 600), "white")
    draw = ImageDraw.Draw(image)
    draw.text((60, 60), "Harbour gate opens at dawn", font=ImageFont.load_default(size=40), fill="black")
    draw.text((60, 552), "gate code 7315", font=ImageFont.load_default(size=12), fill="black")
    path = folder / "sign.png"
    image.save(path)
    return Unit(uid="sign", source=str(path), root=str(folder), modality="image", content_hash="sign", text="")


def texts(message) -> str:
    return " ".join(p.get("text", "") for p in message["content"] if p.get("type") == "text")


def test_it_is_off_by_default_and_refused_for_vimrag():
    assert AgentConfig().read_pictures == ""
    with pytest.raises(ValueError, match="vimrag"):
        AgentConfig(protocol="vimrag", read_pictures="tesseract")


@needs_tesseract
def test_vrag_shows_the_text_read_as_shown_and_a_crop_makes_small_print_legible(sign):
    script = ["<search>gate</search>", "<bbox>[0, 329, 517, 387]</bbox>", "<answer>7315</answer>"]
    policy = ScriptedPolicy(script=script, is_vlm=False)
    cfg = AgentConfig(protocol="vrag", read_pictures="tesseract", vrag_pad=0)
    list(Agent(Fixed([sign]), policy, cfg).stream("What is the gate code?"))
    page, crop = policy.calls[1][-1], policy.calls[2][-1]  # the observations after the search and the crop
    assert "Harbour gate opens at dawn" in texts(page) and "7315" not in texts(page)
    assert "gate code 7315" in texts(crop)
    assert [p["type"] for p in page["content"]][:1] == ["image"]  # the picture stays; the reading follows it

    off = ScriptedPolicy(script=script[:1] + ["<answer>x</answer>"], is_vlm=False)
    list(Agent(Fixed([sign]), off, AgentConfig(protocol="vrag")).stream("What is the gate code?"))
    assert [p["type"] for p in off.calls[1][-1]["content"]] == ["image"]  # off: the image alone, as published


@needs_tesseract
def test_react_results_carry_their_reading_too(sign):
    from agent.protocols import get

    policy = ScriptedPolicy(script=[get("react").write("search", {"query": "gate"}), "the answer"], is_vlm=False)
    cfg = AgentConfig(protocol="react", read_pictures="tesseract", top_k=1)
    list(Agent(Fixed([sign]), policy, cfg).stream("When does the gate open?"))
    shown = [m for m in policy.calls[1] if m["role"] != "assistant" and not isinstance(m["content"], str)][-1]
    assert "Harbour gate opens at dawn" in texts(shown)


def test_a_missing_engine_is_said_in_the_observation_and_the_episode_goes_on(sign, monkeypatch):
    from collections import OrderedDict

    import agent.toolbox
    import retrieval.ocr
    from retrieval.errors import RetrievalError

    def missing(name):
        raise RetrievalError("tesseract is not installed; install it with: apt-get install tesseract-ocr")

    monkeypatch.setattr(retrieval.ocr, "get_ocr", missing)
    monkeypatch.setattr(agent.toolbox, "_READ", OrderedDict())  # nothing read before this test
    policy = ScriptedPolicy(script=["<search>gate</search>", "<answer>x</answer>"], is_vlm=False)
    cfg = AgentConfig(protocol="vrag", read_pictures="tesseract")
    trace = list(Agent(Fixed([sign]), policy, cfg).stream("What is the gate code?"))[-1].trace
    assert "apt-get install tesseract-ocr" in texts(policy.calls[1][-1]) and trace.answer == "x"

"""Chat messages, gallery pictures and upload checks of the web demo, without a server."""

import numpy as np
import pytest

from agent.backends.base import PolicyConfig
from agent.backends.embedded import EmbeddedPolicy
from agent.events import Trace
from agent.loop import Agent
from app.views import ChatView, answer_markdown, evidence_pictures, graph_picture, step_title, text_card
from app.web import DemoApp
from app.workspace import UploadError, check_upload
from retrieval.retriever import Retriever


@pytest.fixture(scope="module")
def heron_run(mixed_index):
    """(ChatView, episode state, every event) of the embedded policy answering the poster question."""
    agent = Agent(Retriever(mixed_index), EmbeddedPolicy(PolicyConfig(model="keyword")))
    view = ChatView("How many customers can join the Heron drone pilot?")
    events, redraws = [], 0
    for ev in agent.stream(view.messages[0].content):
        redraws += view.apply(ev)
        events.append(ev)
    return view, agent.state, events, redraws


def test_one_message_per_step_titled_by_its_tool(heron_run):
    view, state, events, redraws = heron_run
    steps = [m for m in view.messages if (m.metadata or {}).get("title", "").startswith("Step")]
    assert len(steps) == state.step
    assert steps[0].metadata["title"].startswith("Step 1 · Search: “")
    assert any(m.metadata["title"].startswith(f"Step {i} · Crop Picture") for i, m in enumerate(steps, 1))
    assert all(m.metadata["status"] == "done" and m.metadata["duration"] >= 0 for m in steps)
    assert "px in context" in steps[0].metadata["log"]
    assert "Found:" in steps[0].content and "model output" in steps[0].content
    assert redraws >= 4  # search, memorize, crop, memorize, answer, finished each redraw
    final = view.messages[-1]
    assert final.metadata is None or not final.metadata.get("title")
    assert "**Sources**" in final.content and "region [" in final.content
    # the answer, then the sentence it was read from and the unit that holds it
    assert (
        final.content.startswith("12\n")
        and "> Footnote: pilot places are limited to 12 customers" in final.content
        and "> — *logimat_poster.png" in final.content.split("**Sources**")[0]
    )


def test_answer_markdown_says_when_a_chart_may_hold_the_answer():
    t = Trace(
        question="How many robots shipped in Q3?",
        protocol="vimrag",
        backend="embedded",
        status="answered",
        answer="Not answerable",
        support={
            "answer": "Not answerable",
            "answer_type": "number",
            "sentence": "",
            "note": "the answer may be in a chart on report.pdf p.3; a VLM backend can read it",
        },
    )
    md = answer_markdown(t)
    assert (
        md.startswith("Not answerable")
        and "ℹ️ The answer may be in a chart on report.pdf p.3; a VLM backend can read it." in md
    )


def test_step_titles():
    assert step_title("add_search_node", {"query": " revenue 2025 "}) == "Search: “revenue 2025”"
    assert (
        step_title("add_search_node", {"image": "Picture 2", "bbox": [1, 2, 3, 4]})
        == "Search with a region of Picture 2"
    )
    assert step_title("crop", {"image": "Picture 1", "bbox": [10, 20.5, 30, 40]}) == "Crop Picture 1 [10, 20.5, 30, 40]"
    assert step_title("crop", {"bbox": [1, 2, 3, 4]}) == "Crop the latest image [1, 2, 3, 4]"
    assert step_title("scale", {"image": "Video 1", "factor": 2}) == "Zoom Video 1 ×2"
    assert step_title("update_memory", {"memory": "m"}) == "Update the memory"  # memagent
    assert step_title("fold", {}) == "Fold the history into memory"  # fold's <fold_thought>
    assert step_title("fold", {"part": "working", "memory": "{}"}) == "Write the working memory"
    assert (
        step_title(
            "summarize_and_memorize",
            {
                "memorize": [
                    {"information_id": "Picture 1", "is_useful": True},
                    {"information_id": "Picture 2", "is_useful": False},
                ]
            },
        )
        == "Memorize Picture 1"
    )
    assert step_title("answer", {"answer": "x"}) == "Answer"


def test_gallery_draws_crop_boxes_and_labels_video_frames(heron_run):
    _, state, _, _ = heron_run
    pics = evidence_pictures(state)
    assert len(pics) >= 3
    assert pics[0][1].split(" · ")[-1].startswith("★ memorized")  # memorized evidence comes first
    crop_pic = next(img for img, cap in pics if "region [" in cap)
    a = np.asarray(crop_pic)  # (h, w, 3)
    red = (a[..., 0] > 200) & (a[..., 1] < 80) & (a[..., 2] < 80)
    assert red.sum() > 200  # the crop box drawn on the poster
    video = [cap for _, cap in pics if cap.startswith("Video")]
    assert video and all("t=00:" in cap for cap in video)
    assert graph_picture(state).size[0] > 300


def test_a_vanished_file_becomes_a_card_not_an_error(heron_run, tmp_path):
    _, state, _, _ = heron_run
    from agent.evidence import EvidenceStore

    ev = next(iter(state.evidence.by_id.values()))
    ghost = EvidenceStore()
    moved = ev.unit.to_dict() | {"source": str(tmp_path / "gone.png"), "uid": "gone"}
    from retrieval.units import Unit

    ghost.add_unit(Unit.from_dict(moved), "s1")
    state2 = type(state)(question="q", config=state.config, evidence=ghost)
    ((img, cap),) = evidence_pictures(state2)
    assert "unavailable" in cap and img.size == (640, 480)


def test_text_card_wraps_and_truncates():
    img = text_card("Text 1: notes.md", "word " * 2000)
    assert img.size == (640, 480)


def test_answer_markdown_for_a_failed_backend():
    t = Trace(
        question="q", protocol="vimrag", backend="openai", status="error", error="cannot reach http://127.0.0.1:9/v1"
    )
    md = answer_markdown(t)
    assert "backend failed" in md and "127.0.0.1:9" in md and "Check the settings" in md


def test_stop_closes_pending_steps_and_says_so():
    hist = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "…", "metadata": {"title": "Step 1: thinking", "status": "pending"}},
    ]
    msgs, status = DemoApp.stop(hist)
    assert hist[1]["metadata"]["status"] == "done"
    assert msgs[-1].metadata["title"] == "Stopped" and status == "Stopped."


@pytest.mark.parametrize(
    "name,data,why",
    [
        ("a.exe", b"MZ", "unsupported type .exe"),
        ("a.pdf", b"", "the file is empty"),
        ("a.pdf", b"hello", "not a PDF"),
        ("a.png", b"GIF89a-no", "not a readable image"),
        ("a.mp4", b"\x00" * 64, "not an MP4"),
        ("a.md", b"# x\x00y", "NUL bytes"),
        ("a.md", b"\xff\xfe caf\xe9 " * 10, "not UTF-8"),
        ("big.md", b"x" * (2 * 2**20), "over the 1 MB upload limit"),
    ],
)
def test_uploads_are_type_checked_and_size_limited(tmp_path, name, data, why):
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(UploadError, match=why):
        check_upload(p, max_bytes=2**20)


def test_good_uploads_pass(tmp_path, mixed_corpus):
    assert check_upload(mixed_corpus / "logimat_poster.png", 2**24) == "image"
    assert check_upload(mixed_corpus / "product_update.mp4", 2**24) == "video"
    assert check_upload(mixed_corpus / "aurora_annual_report_2025.pdf", 2**24) == "pdf"
    (tmp_path / "n.md").write_text("Grüße, café")
    assert check_upload(tmp_path / "n.md", 2**20) == "text"


def test_an_unexpected_failure_becomes_a_chat_message(mixed_index, mixed_corpus, tmp_path, monkeypatch):
    import shutil

    from agent.backends.base import Policy
    from app.web import default_settings
    from app.workspace import Workspace

    class Broken(Policy):
        def stream(self, messages, view=None):
            raise RuntimeError("boom in the model")
            yield ""  # a generator, like every backend

    shutil.copytree(mixed_index, tmp_path / "index")
    ws = Workspace(tmp_path, corpus=mixed_corpus)
    monkeypatch.setattr(ws, "policy", lambda cfg: Broken())
    outs = list(DemoApp(ws, questions=[]).ask("What was revenue in 2025?", [], default_settings(), "everything"))
    chat, *_rest, status = outs[-1]
    assert chat[-1].metadata["title"] == "Error" and "boom in the model" in chat[-1].content
    assert status.startswith("Error")
    assert all(m.metadata.get("status") != "pending" for m in chat if m.metadata)


def test_a_table_answer_is_drawn_as_its_table_and_cropped_from_its_page(tmp_path):
    import pypdfium2 as pdfium

    from agent.reader.extract import Passage, read_answer
    from app.table_view import MAX_ROWS, table_crop, table_markdown
    from tests.table_pdf import make_table_pdf

    pdf = make_table_pdf(tmp_path / "northwind.pdf")
    doc = pdfium.PdfDocument(str(pdf))
    text = doc[0].get_textpage().get_text_range()
    doc.close()
    r = read_answer(
        "By how much did gross profit increase from 2024 to 2025?",
        [Passage(text, "n.pdf p.1", page=1, source=str(pdf))],
    )
    drawn = table_markdown(r.table)
    assert drawn.startswith("The difference of the marked cells of *Table 2: Consolidated statement of income")
    assert (
        "| **Gross profit** | <mark>**835**</mark> | <mark>**720**</mark> |" in drawn
        and "(values in millions)" in drawn
    )
    crop = table_crop(r.table, tmp_path)
    from PIL import Image

    img = Image.open(crop)
    assert img.width > 400 and img.height > 150  # the table's region at 144 dpi, not the whole page
    orange = sum(1 for px in img.convert("RGB").getdata() if px[0] > 200 and 90 < px[1] < 150 and px[2] < 40)
    assert orange > 100  # the two cells used are outlined
    # a long table shows the rows around the cells used, and says rows were left out
    long = {
        "table": {"rows": [[f"r{i}", str(i)] for i in range(40)], "header": ["", "v"]},
        "cells": [[30, 1]],
        "op": "cell",
    }
    lines = table_markdown(long).splitlines()
    assert "| **r30** | <mark>**30**</mark> |" in lines and sum(ln.startswith("| r") for ln in lines) <= MAX_ROWS
    assert lines[4].startswith("| …") and table_crop(long, tmp_path) is None  # no box: no picture

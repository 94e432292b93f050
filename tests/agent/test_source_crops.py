"""Crops are cut from the best source the corpus has: an image file at its own size, a PDF page rendered from
the PDF itself (DESIGN.md 4.1; issue 30). Sizes are worked by hand from VRAG-RL's rules (agent/media.py cites
them): the crop a checkpoint sees must be the crop VRAG-RL would have shown it, pixel for pixel where the
source is the same file.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from agent.backends.scripted import ScriptedPolicy
from agent.call_format import format_vrag
from agent.events import Cropped
from agent.evidence import Evidence, EvidenceStore
from agent.loop import Agent
from agent.media import vrag_size
from agent.settings import AgentConfig
from retrieval.units import Unit
from tests.agent.fakes import Fixed


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    """A 5334x3000 JPEG, the size of VRAG's own search_engine/corpus/img/aliyun4_1.jpg (not in this repo)."""
    w, h = 5334, 3000
    x = np.linspace(0, 255, w, dtype=np.float32)[None, :]
    y = np.linspace(0, 255, h, dtype=np.float32)[:, None]
    arr = np.stack([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2).astype(np.uint8)  # (h, w, 3) smooth gradients
    img = Image.fromarray(arr)
    d = ImageDraw.Draw(img)
    for i in range(0, w, 97):  # fine detail: 3 px lines a downscaled copy blurs
        d.line((i, 0, i, h), fill=(0, 0, 0), width=3)
    path = tmp_path_factory.mktemp("vrag") / "aliyun4_1.jpg"
    img.save(path, quality=90)
    return Unit(uid="aliyun4_1", source=str(path), root=str(path.parent), modality="image", content_hash="a")


def run_vrag(unit, bbox):
    script = [format_vrag("search", {"query": "cloud"}), format_vrag("crop", {"bbox": bbox}), "<answer>x</answer>"]
    policy = ScriptedPolicy(script=script)
    events = list(Agent(Fixed([unit]), policy, AgentConfig(protocol="vrag")).stream("What does it say?"))
    return events, policy


def test_vrag_crop_of_a_large_photo_is_cut_from_the_original_file(photo):
    """Acceptance: box [400, 200, 460, 240] in the 844x475 view VRAG-RL makes of the 5334x3000 image is padded
    by 28, mapped with int() to [2351, 1086, 3084, 1692] (733x606 source pixels) and shown at 696x576."""
    events, policy = run_vrag(photo, [400, 200, 460, 240])
    seen = policy.calls[1][-1]["content"][0]["image"]
    assert seen.size == vrag_size(5334, 3000) == (844, 475)  # VRAG-RL's process_image of the file itself
    crop = next(e for e in events if isinstance(e, Cropped))
    assert crop.bbox_raw == [2351, 1086, 3084, 1692]  # int(5334 * 372 / 844), int(3000 * 172 / 475), ...
    shown = policy.calls[2][-1]["content"][0]["image"]
    assert shown.size == (696, 576) == vrag_size(733, 606)
    # VRAG-RL: Image.open(file).crop(area), then resize into [256*28*28, 512*28*28] with Pillow's default filter
    with Image.open(photo.source) as im:
        want = im.convert("RGB").crop((2351, 1086, 3084, 1692)).resize((696, 576))
    assert np.array_equal(np.asarray(shown), np.asarray(want))


@pytest.fixture(scope="module")
def pdf_page(tmp_path_factory):
    """One vector page: small print whose edges stay sharp at any dpi, as real PDF text does."""
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure

    path = tmp_path_factory.mktemp("pdf") / "report.pdf"
    fig = Figure(figsize=(8.5, 11))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    for i in range(40):
        ax.text(0.05, 0.97 - i * 0.024, f"line {i}: revenue 2025 was {i * 7.3:.1f} million", fontsize=5)
    with PdfPages(path) as pdf:
        pdf.savefig(fig)
    return Unit(uid="report#1", source=str(path), root=str(path.parent), modality="page", content_hash="r", page=1)


def test_a_pdf_page_crop_is_rendered_from_the_pdf_not_upscaled(pdf_page):
    """Acceptance: a page's small region is rendered from the PDF at the dpi the view needs, so the pixels shown
    are not an enlargement of the 200 dpi page."""
    events, policy = run_vrag(pdf_page, [60, 40, 120, 60])
    crop = next(e for e in events if isinstance(e, Cropped))
    x1, y1, x2, y2 = crop.bbox_raw  # in pixels of the page at 200 dpi
    target = vrag_size(x2 - x1, y2 - y1)
    assert (x2 - x1) * (y2 - y1) < 256 * 28 * 28 and target[0] > x2 - x1  # VRAG-RL would enlarge this crop
    store = EvidenceStore()
    ev = Evidence("Picture 2", pdf_page, "crop1", crop_box=crop.bbox_raw)
    region = store.raw_image(ev, at_least=target)
    assert region.width >= target[0] and region.height >= target[1]  # the source region, at least as large
    shown = policy.calls[2][-1]["content"][0]["image"]
    assert shown.size == target
    assert np.array_equal(np.asarray(shown), np.asarray(region.resize(target).convert("RGB")))
    # the same box cut from the 200 dpi page and enlarged is a different, blurrier picture
    page = store.source_image(pdf_page)
    assert page.size == store.frame_size(pdf_page) == (1700, 2200)  # letter at 200 dpi
    upscaled = page.crop(tuple(crop.bbox_raw)).resize(target)
    assert _sharpness(shown) > 1.5 * _sharpness(upscaled)  # measured 1.86x


def _sharpness(img) -> float:
    """Variance of the Laplacian: crisp glyph edges score high, edges interpolated from fewer pixels low."""
    a = np.asarray(img.convert("L"), dtype=np.float32)
    lap = 4 * a[1:-1, 1:-1] - a[:-2, 1:-1] - a[2:, 1:-1] - a[1:-1, :-2] - a[1:-1, 2:]
    return float(lap.var())


def test_a_tiny_box_cannot_make_a_huge_render(pdf_page):
    store = EvidenceStore()
    ev = Evidence("Picture 1", pdf_page, "crop1", crop_box=[500, 500, 501, 501])
    img = store.raw_image(ev, at_least=(548, 548))  # 548x enlargement asked; the render stops at 6x (1,200 dpi)
    assert img.width * img.height <= 7 * 7
    big = Evidence("Picture 2", pdf_page, "crop2", crop_box=[0, 0, 1700, 2200])
    img = store.raw_image(big, at_least=(8000, 8000))  # 4.7x asked of a whole page: held to 16 MP
    assert img.width >= 1700 and img.width * img.height <= 16_100_000


def test_crop_boxes_are_drawn_on_the_display_raster(pdf_page):
    store = EvidenceStore()
    ev = Evidence("Picture 1", pdf_page, "crop1", crop_box=[170, 220, 850, 1100])
    assert store.full_image(pdf_page) is store.source_image(pdf_page)  # 3.7 MP at 200 dpi: one render serves both
    assert store.display_box(ev) == [170, 220, 850, 1100]
    small = EvidenceStore(raw_max_pixels=1_000_000)  # a source over the display cap is shown shrunk
    assert small.full_image(pdf_page).size == (879, 1137)  # 1700x2200 scaled by sqrt(1e6 / 3.74e6), truncated
    assert small.display_box(ev) == [88, 114, 440, 568]  # the box scaled with it (879 / 1700, 1137 / 2200)


def test_vrag_pad_is_its_validation_branch_and_zero_reproduces_training(photo):
    """VRAG-RL pads the box by 28 only when is_validation (generation.py lines 138-139); vrag_pad=0 maps it bare."""
    script = [
        format_vrag("search", {"query": "q"}),
        format_vrag("crop", {"bbox": [400, 200, 460, 240]}),
        "<answer>x</answer>",
    ]
    policy = ScriptedPolicy(script=script)
    events = list(Agent(Fixed([photo]), policy, AgentConfig(protocol="vrag", vrag_pad=0)).stream("q"))
    crop = next(e for e in events if isinstance(e, Cropped))
    assert crop.bbox_raw == [int(5334 * 400 / 844), int(3000 * 200 / 475), int(5334 * 460 / 844), int(3000 * 240 / 475)]

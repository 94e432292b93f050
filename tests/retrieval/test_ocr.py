"""OCR engines read rendered text back, in reading order, and fail with install hints.

Text is drawn with Pillow's bundled TrueType font, so nothing depends on system fonts. The tesseract
tests run only where the Debian tesseract-ocr binary is installed.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from retrieval import ocr, ocr_rapid
from retrieval.errors import RetrievalError
from retrieval.ocr import OcrBox, OcrResult, get_ocr
from retrieval.reading_order import layout_text, reading_order

HAS_RAPIDOCR = "rapidocr" in ocr.available_engines()
HAS_TESSERACT = ocr.tesseract_binary() is not None
needs_rapidocr = pytest.mark.skipif(not HAS_RAPIDOCR, reason="rapidocr-onnxruntime is not installed")
needs_tesseract = pytest.mark.skipif(
    not HAS_TESSERACT, reason="the tesseract binary is not installed (apt-get install tesseract-ocr)"
)


def draw(lines: list[tuple[int, int, str]], size=(900, 260), font_size=32) -> Image.Image:
    """A white image with each (x, y, text) drawn in black."""
    font = ImageFont.load_default(size=font_size)
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    for x, y, text in lines:
        d.text((x, y), text, fill="black", font=font)
    return img


def cer(hyp: str, ref: str) -> float:
    """Character error rate on lower-cased, whitespace-collapsed text (a small DP: the strings are short)."""
    h, r = " ".join(hyp.lower().split()), " ".join(ref.lower().split())
    row = list(range(len(r) + 1))
    for i, a in enumerate(h, 1):
        prev, row[0] = row[0], i
        for j, b in enumerate(r, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (a != b))
    return row[-1] / len(r)


SENTENCE = "The quick brown fox jumps over the lazy dog"
SECOND = "Invoice 2024 total due 315 dollars"


# ---------------------------------------------------------------------------------------------------
# Engines


@needs_rapidocr
def test_rapidocr_reads_rendered_text_with_spaces():
    img = draw([(30, 40, SENTENCE), (30, 140, SECOND)])
    result = get_ocr("rapidocr").read(img)
    ref = SENTENCE + "\n" + SECOND
    assert result.engine == "rapidocr"
    assert cer(result.text, ref) < 0.05, result.text
    assert result.text.count(" ") >= ref.count(" ") - 1, result.text  # word gaps kept
    assert result.text.splitlines()[0].lower().startswith("the quick")
    for b in result.boxes:  # boxes in image pixels, inside the image
        x1, y1, x2, y2 = b.box
        assert 0 <= x1 < x2 <= img.width and 0 <= y1 < y2 <= img.height
        assert 0.5 <= b.conf <= 1.0


@needs_rapidocr
def test_rapidocr_reads_two_lines_and_two_columns_in_order():
    # Two prose columns of two lines each, then a short two-cell line: columns are read one after
    # the other, and boxes on the same line are joined left to right.
    font = 24
    left = ["left column first line of text", "left column second line here"]
    right = ["right column first line of text", "right column second line here"]
    img = draw(
        [
            (20, 30, left[0]),
            (20, 70, left[1]),
            (470, 30, right[0]),
            (470, 70, right[1]),
            (20, 170, "alpha"),
            (470, 170, "omega"),
        ],
        size=(900, 230),
        font_size=font,
    )
    text = get_ocr("rapidocr").read(img).text.lower()
    squeeze = lambda s: "".join(s.split())  # noqa: E731 - order is under test here, spaces elsewhere
    lines = text.splitlines()
    assert [squeeze(ln) for ln in lines[:4]] == [squeeze(ln) for ln in left + right], text
    assert lines[4:] == ["alpha omega"], text


@needs_rapidocr
def test_rapidocr_reads_justified_line_with_wide_word_gaps():
    # rapidocr's 180-degree line classifier flips lines like this one and reads garbage (CER 1.0);
    # the engine leaves it off.
    ref = "The alleged TD Bank business practice misstatements only refer to its continued delivery of"
    font = ImageFont.load_default(size=22)
    img = Image.new("RGB", (1500, 60), "white")
    d = ImageDraw.Draw(img)
    x = 20.0
    for word in ref.split():
        d.text((x, 15), word, fill="black", font=font)
        x += d.textlength(word + " ", font=font) + 12  # justified text: wider gaps than a space
    assert cer(get_ocr("rapidocr").read(img).text, ref) < 0.05


@needs_rapidocr
def test_blank_and_tiny_images_give_empty_text():
    engine = get_ocr("rapidocr")
    for img in (
        Image.new("RGB", (640, 480), "white"),
        Image.new("L", (3, 2), 0),
        Image.new("RGBA", (200, 100), (0, 0, 0, 0)),
    ):
        result = engine.read(img)
        assert result.text == "" and result.boxes == [] and result.engine == "rapidocr"


@needs_rapidocr
def test_transparent_image_is_flattened_on_white():
    # Black text on a transparent background: converting straight to RGB would give black on black.
    img = Image.new("RGBA", (900, 120), (0, 0, 0, 0))
    ImageDraw.Draw(img).text((30, 30), SENTENCE, fill=(0, 0, 0, 255), font=ImageFont.load_default(size=32))
    assert cer(get_ocr("rapidocr").read(img).text, SENTENCE) < 0.05


@needs_rapidocr
def test_large_image_is_downscaled_and_boxes_map_back():
    small = draw([(30, 40, SENTENCE)], size=(900, 130), font_size=32)
    big = small.resize((small.width * 3, small.height * 3), Image.BICUBIC)  # 2700 px: above max_side 2000
    engine = get_ocr("rapidocr")
    result = engine.read(big)
    assert cer(result.text, SENTENCE) < 0.05
    # Boxes are in the caller's pixels, not the downscaled copy's: 3x the boxes found in the small image.
    want = np.array(engine.read(small).boxes[0].box) * 3
    got = np.array(result.boxes[0].box)
    assert np.abs(got - want).max() < 0.03 * big.width, (got, want)


@needs_rapidocr
def test_engines_are_cached_per_process():
    assert get_ocr("rapidocr") is get_ocr("rapidocr")
    assert get_ocr("auto") is get_ocr(ocr.available_engines()[0])


@needs_tesseract
def test_tesseract_reads_rendered_text():
    img = draw([(30, 40, SENTENCE), (30, 140, SECOND)])
    result = get_ocr("tesseract").read(img)
    assert result.engine == "tesseract"
    assert cer(result.text, SENTENCE + "\n" + SECOND) < 0.05, result.text
    assert get_ocr("tesseract").read(Image.new("RGB", (300, 200), "white")).text == ""


@needs_tesseract
def test_tesseract_upscales_small_images():
    # 8 px text: tesseract reads next to nothing at native size; the engine upscales small images.
    ref = "Total due 315 dollars"
    img = draw([(2, 2, ref)], size=(100, 14), font_size=8)
    upscaled = cer(get_ocr("tesseract").read(img).text, ref)
    native = cer(ocr.TesseractEngine(min_side=0).read(img).text, ref)
    assert upscaled < 0.3 and upscaled < native


def test_auto_prefers_the_more_accurate_rapidocr():
    names = ocr.available_engines()
    assert names == [n for n in ocr.AUTO_ORDER if n in names]
    if HAS_RAPIDOCR:
        assert names[0] == "rapidocr"


def test_auto_falls_back_to_tesseract_without_rapidocr(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "rapidocr_onnxruntime" else real(name, *a)
    )
    monkeypatch.setattr(ocr, "tesseract_binary", lambda: "/opt/fake/tesseract")  # never run here
    monkeypatch.setattr(ocr, "_CACHE", {})
    assert ocr.available_engines() == ["tesseract"]
    assert get_ocr("auto").name == "tesseract"


# ---------------------------------------------------------------------------------------------------
# Choosing engines and errors


def test_unknown_engine_lists_choices():
    with pytest.raises(ValueError, match="rapidocr.*tesseract"):
        get_ocr("nope")


def test_cer_helper():
    assert cer("kitten", "sitting") == pytest.approx(3 / 7)
    assert cer("A  b", "a b") == 0.0


def test_none_gives_no_engine():
    assert get_ocr("none") is None


def test_missing_tesseract_says_how_to_install(monkeypatch):
    monkeypatch.setattr(ocr, "tesseract_binary", lambda: None)
    monkeypatch.setattr(ocr, "_CACHE", {})
    assert "tesseract" not in ocr.available_engines()
    with pytest.raises(RetrievalError, match="apt-get install tesseract-ocr"):
        get_ocr("tesseract")


def test_missing_rapidocr_says_how_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "rapidocr_onnxruntime" else real(name, *a)
    )
    monkeypatch.setattr(ocr, "tesseract_binary", lambda: None)
    monkeypatch.setattr(ocr, "_CACHE", {})
    with pytest.raises(ImportError, match="pip install"):
        get_ocr("rapidocr")
    with pytest.raises(ImportError, match="tesseract-ocr"):
        get_ocr("auto")


# ---------------------------------------------------------------------------------------------------
# Pure parts: reading order, decoding, serialisation


def box(x1, y1, x2, y2, text):
    return OcrBox((x1, y1, x2, y2), text, 0.9)


def test_boxes_on_a_line_are_joined_left_to_right_and_lines_top_to_bottom():
    boxes = [box(300, 52, 400, 72, "world"), box(10, 100, 120, 120, "second"), box(10, 50, 100, 70, "hello")]
    assert layout_text(boxes) == "hello world\nsecond"


def test_two_column_page_is_read_column_by_column():
    h, w = 20, 400
    left = [box(0, i * 28, w, i * 28 + h, f"left {i}") for i in range(6)]
    right = [box(440, i * 28 + 2, 440 + w, i * 28 + 2 + h, f"right {i}") for i in range(6)]
    title = box(100, -60, 740, -40, "title")
    page_no = box(400, 6 * 28, 440, 6 * 28 + h, "7")  # centred page number crossing the gutter
    boxes = [title, page_no] + right + left
    want = ["title"] + [f"left {i}" for i in range(6)] + [f"right {i}" for i in range(6)] + ["7"]
    assert layout_text(boxes).splitlines() == want
    # Without column detection the aligned lines of both columns merge.
    assert layout_text(boxes, columns=False).splitlines()[1] == "left 0 right 0"


def test_table_is_read_row_by_row():
    rows = [("Revenue", "2020", "500"), ("Costs", "2021", "320"), ("Profit", "2022", "180")]
    boxes = [
        box(x, i * 30, x + 60, i * 30 + 20, cell) for i, row in enumerate(rows) for x, cell in zip((0, 200, 400), row)
    ]
    assert layout_text(boxes).splitlines() == [" ".join(r) for r in rows]


def test_reading_order_ignores_empty_boxes():
    assert reading_order([box(0, 0, 10, 10, "  ")]) == []
    assert layout_text([]) == ""


def test_space_aware_decoding_restores_likely_spaces():
    chars = ["blank", "a", "b", " "]
    dec = ocr_rapid._SpaceAwareCtcDecode(chars, space_prob=0.02)
    frames = [1, 0, 0, 2, 2, 0, 1]  # "a", gap, "b" (repeated frame), gap, "a"
    preds = np.zeros((1, len(frames), 4), dtype=np.float32)  # (batch, frames, classes)
    for t, c in enumerate(frames):
        preds[0, t, c] = 0.9
    preds[0, 1, 3] = 0.05  # the first gap looks a little like a space; the second does not
    assert dec(preds)[0][0] == "a ba"
    stock = ocr_rapid._SpaceAwareCtcDecode(chars, space_prob=1.1)  # threshold never met: plain greedy CTC
    text, conf = stock(preds)[0]
    assert text == "aba" and conf == pytest.approx(0.9)


def test_tesseract_tsv_words_group_into_lines():
    header = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
    rows = [
        "5\t1\t1\t1\t1\t1\t10\t10\t50\t20\t96\tHello",
        '5\t1\t1\t1\t1\t2\t70\t12\t60\t20\t90\t"world"',
        "4\t1\t1\t1\t2\t0\t10\t40\t50\t20\t-1\t",
        "5\t1\t1\t1\t2\t1\t10\t40\t50\t20\t80\tagain",
        "5\t1\t1\t1\t2\t2\t70\t40\t50\t20\t95\t ",
    ]
    lines = ocr._tsv_lines("\n".join([header] + rows) + "\n")
    assert [(b.box, b.text) for b in lines] == [((10, 10, 130, 32), 'Hello "world"'), ((10, 40, 60, 60), "again")]
    assert lines[0].conf == pytest.approx(0.93)


def test_result_round_trips_through_dict():
    r = OcrResult("a b", [box(1, 2, 3, 4, "a b")], "rapidocr")
    d = r.to_dict()
    assert d["boxes"][0]["box"] == [1, 2, 3, 4]
    assert OcrResult.from_dict(d) == r


# ---------------------------------------------------------------------------------------------------
# The split pipeline (issue 15): detection on a reduced copy of the inked area, recognition from
# full-resolution crops in tightly padded batches.


def test_ink_box_finds_the_inked_area_on_light_and_dark_pages():
    page = np.full((400, 600, 3), 255, np.uint8)
    page[100:150, 200:380] = 0  # one dark block
    assert ocr_rapid.ink_box(page, pad=10) == (190, 90, 390, 160)
    slide = np.full((400, 600, 3), 30, np.uint8)  # dark slide with a light title
    slide[20:60, 50:500] = 240
    assert ocr_rapid.ink_box(slide, pad=0) == (50, 20, 500, 60)
    x0, y0, x1, y1 = ocr_rapid.ink_box(np.full((50, 80, 3), 200, np.uint8))
    assert x1 <= x0  # blank: nothing to detect


def test_ink_box_padding_stays_inside_the_image():
    page = np.full((100, 100, 3), 255, np.uint8)
    page[0:5, 95:100] = 0
    assert ocr_rapid.ink_box(page, pad=16) == (79, 0, 100, 21)


class _FakeRec:
    """Stands in for rapidocr's recogniser: records batch shapes, reads every line as its crop width."""

    def __init__(self):
        self.shapes = []

    def session(self, batch):
        self.shapes.append(batch.shape)
        return [batch]

    def postprocess_op(self, preds):
        # The width a crop occupies (non-padding columns) tells which crop it was.
        return [(str(int((p[0] != 0).any(axis=0).sum())), 0.9) for p in preds]


def test_recogniser_batches_by_width_and_pads_only_to_the_widest_crop():
    engine = ocr_rapid.RapidOcrEngine(rec_height=48, rec_batch=2)
    rec = _FakeRec()
    engine._ocr = type("Fake", (), {"text_rec": rec})()
    # Crops 24 px high: widths at 48 px high are twice their own. Ink everywhere (value 0 -> -1.0).
    crops = [np.zeros((24, w, 3), np.uint8) for w in (40, 10, 300, 20)]
    out = engine._recognise(crops)
    assert [t for t, _ in out] == ["80", "20", "600", "40"]  # results in the callers' order
    # Sorted by width, two per batch, each padded to its own widest: not to rapidocr's 320 px minimum.
    assert rec.shapes == [(2, 3, 48, 40), (2, 3, 48, 600)]


def test_unknown_pipeline_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="split.*rapidocr"):
        ocr_rapid.RapidOcrEngine(pipeline="fast")


@needs_rapidocr
def test_split_pipeline_maps_boxes_back_from_a_reduced_detection():
    # A large page with text in one corner: detection runs on a 1024 px copy of the inked corner only,
    # yet boxes come back in the page's pixels and agree with detection at full size.
    page = Image.new("RGB", (2000, 1500), "white")
    ImageDraw.Draw(page).text((1100, 1200), SENTENCE, fill="black", font=ImageFont.load_default(size=40))
    split = ocr_rapid.RapidOcrEngine(det_side=1024).read(page)
    whole = ocr_rapid.RapidOcrEngine(pipeline="rapidocr").read(page)
    assert cer(split.text, SENTENCE) < 0.05, split.text
    assert len(split.boxes) == len(whole.boxes) == 1
    got, want = np.array(split.boxes[0].box), np.array(whole.boxes[0].box)
    assert np.abs(got - want).max() <= 6, (got, want)
    x1, y1, x2, y2 = got
    assert 1080 <= x1 < 1110 and 1180 <= y1 < 1215 and x2 > 1700


@needs_rapidocr
def test_split_pipeline_detects_without_dilation_and_legacy_keeps_it():
    # At a reduced size the detector's 2x2 dilation closed the gutter of a two-column dev page.
    split = ocr_rapid.RapidOcrEngine()._load()
    legacy = ocr_rapid.RapidOcrEngine(pipeline="rapidocr")._load()
    assert split.text_det.postprocess_op.dilation_kernel is None
    assert legacy.text_det.postprocess_op.dilation_kernel is not None


def _quad(x1, y1, x2, y2):
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], np.float32)


def test_line_box_is_cut_at_a_column_gutter_but_not_at_word_spaces():
    page = np.full((60, 700, 3), 255, np.uint8)
    # Strokes every 4 px, so ink is the minority as on a page: three "words" 40 px wide, 10 px apart
    # (a third of the 30 px line), then the next column 150 px (5 line heights) to the right.
    for a, b in ((10, 50), (60, 100), (110, 150), (300, 500)):
        page[15:45, a:b:4] = 0
    pieces = ocr_rapid.split_at_gaps(page, _quad(5, 15, 505, 45), gap=0.8)
    spans = [(int(q[0, 0]), int(q[1, 0])) for q in pieces]
    assert len(spans) == 2, spans
    assert spans[0][0] <= 10 and 150 <= spans[0][1] < 300 and 150 < spans[1][0] <= 300 and spans[1][1] >= 500
    assert all(q[0, 1] == 15 and q[2, 1] == 45 for q in pieces)  # the line's own height
    # One word: the box stays as it is; so does a steeply slanted box.
    assert len(ocr_rapid.split_at_gaps(page, _quad(5, 15, 155, 45), gap=0.8)) == 1
    slanted = np.array([[5, 15], [505, 40], [505, 70], [5, 45]], np.float32)
    assert ocr_rapid.split_at_gaps(page, slanted, gap=0.8)[0] is slanted

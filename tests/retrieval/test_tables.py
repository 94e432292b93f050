"""Tables built from word boxes and from text lines (retrieval/tables.py)."""

from __future__ import annotations

import pytest

from retrieval.ocr_engine import OcrBox
from retrieval.tables import Table, number, page_tables, tables_from_words, text_tables, unit_and_scale
from tests.table_pdf import CAPTION, ROWS, make_table_pdf


def _words(line_y: int, cells: list[tuple[int, str]]) -> list[OcrBox]:
    """Words of one line: each (x, text) cell split into words 6 units per character, a space 4 apart."""
    out = []
    for x, text in cells:
        for w in text.split():
            out.append(OcrBox((x, line_y, x + 6 * len(w), line_y + 12), w, 1.0))
            x += 6 * len(w) + 4
    return out


def test_a_table_without_rules_is_read_from_where_its_words_sit():
    words = _words(0, [(0, "Table 1: Accuracy on two tasks (%)")])
    words += _words(20, [(0, "Method"), (200, "MMLU Physics"), (300, "MMLU Chemistry")])
    words += _words(36, [(0, "Baseline model"), (210, "66.4% (0.8%)"), (310, "70.9% (0.9%)")])
    words += _words(52, [(0, "Step-Back (ours)"), (210, "73.2% (1.9%)"), (310, "81.8% (1.4%)")])
    words += _words(68, [(0, "GPT-4"), (210, "70.3% (2.3%)"), (310, "79.9% (1.0%)")])
    words += _words(120, [(0, "The method improves physics and chemistry alike, as the next section shows.")])
    (t,) = tables_from_words(words)
    assert t.header == ["Method", "MMLU Physics", "MMLU Chemistry"]  # header words go to the column under them
    assert [r[0] for r in t.rows] == ["Baseline model", "Step-Back (ours)", "GPT-4"]
    assert t.rows[1][1] == "73.2% (1.9%)" and t.value_columns() == [1, 2]
    assert t.title == "Table 1: Accuracy on two tasks (%)"
    assert t.box == (0, 36, 380, 80)  # the rows' box, for a crop
    # prose, and a line of words without numbers, is no table
    assert tables_from_words(_words(0, [(0, "Plain prose"), (200, "in two columns")])) == []


def test_a_section_line_and_a_header_above_it_and_a_continued_table():
    words = _words(-16, [(220, "Year ended"), (330, "Year ended")])
    words += _words(0, [(220, "2003"), (330, "2002")])
    words += _words(16, [(0, "INCOME")])
    words += _words(32, [(0, "Sales"), (220, "107734.16"), (330, "94468.90")])
    words += _words(48, [(0, "Other income"), (220, "1904.75"), (330, "1533.08")])
    words += _words(120, [(0, "Proposed dividend"), (220, "1767.80"), (330, "1923.78")])  # after a wide gap
    words += _words(136, [(0, "Corporate dividend tax"), (220, "226.50"), (330, "—")])
    first, second = tables_from_words(words)
    assert first.header[1:] == ["Year ended 2003", "Year ended 2002"]  # read above the section line 'INCOME'
    assert second.header[1:] == first.header[1:]  # the same columns go on under the same header
    assert second.rows[0] == ["Proposed dividend", "1767.80", "1923.78"]


def test_numbers_as_tables_print_them():
    assert number("(1,204.5)") == -1204.5 and number("−3") == -3.0 and number("66.4% (0.8%)") == 66.4
    assert number("2019-20") is None and number("Europe") is None and number("31.3.2003") is None
    assert unit_and_scale("Revenue (million USD)", []) == ("USD", "million")
    assert unit_and_scale("(Rs. in lacs)", []) == ("Rs.", "lacs")
    assert unit_and_scale("Share of sales", [["A", "40%"], ["B", "60%"]])[0] == "%"


def test_text_lines_of_a_label_and_a_number_are_a_one_column_table():
    text = "Revenue by region\nRegion Revenue 2025 (million USD)\nEurope 21.4\nNorth America 15.9\nAsia Pacific 8.7"
    (t,) = text_tables(text)
    assert t.rows == [["Europe", "21.4"], ["North America", "15.9"], ["Asia Pacific", "8.7"]]
    assert "Revenue 2025" in t.header[1] and t.box is None
    # rows that end lines of prose, at most a line apart: only read with tails=True
    ocr = "tweets about the crash\n... of its digital Germanwings 24\nthe airline Lufthansa 12\nand Airbus 5"
    assert text_tables(ocr) == []
    assert [r[0] for r in text_tables(ocr, tails=True)[0].rows] == ["Germanwings", "Lufthansa", "Airbus"]


def test_a_pdf_page_table_with_its_caption_unit_and_scale(tmp_path):
    pdf = make_table_pdf(tmp_path / "report.pdf")
    (t,) = page_tables(str(pdf), 1)
    assert t.header[1:] == ["2025", "2024"] and t.title == CAPTION and t.scale == "millions"
    assert [r[0] for r in t.rows] == [label for label, *_ in ROWS]
    assert t.rows[1] == ["Cost of sales", "(1,210)", "(1,150)"] and t.page == 1 and t.source == str(pdf)
    x1, y1, x2, y2 = t.box  # in points, inside an A4 page
    assert 0 < x1 < x2 < 595 and 0 < y1 < y2 < 842
    assert Table.from_dict(t.to_dict()) == t  # it crosses into traces and back
    assert "| Net sales | 2,045 | 1,870 |" in t.markdown()


def test_an_unreadable_page_has_no_tables(tmp_path):
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 not really")
    assert page_tables(str(bad), 1) == ()
    import pypdfium2 as pdfium

    from retrieval.tables import pdf_words

    with pytest.raises(pdfium.PdfiumError):
        pdf_words(str(bad), 1)


def test_a_scanned_image_keeps_the_tables_its_ocr_boxes_show(tmp_path):
    """Ingest builds tables from the OCR boxes it already has (no text layer to read them from later)."""
    from contextlib import nullcontext

    from PIL import Image

    from retrieval.extract_units import UnitExtractor
    from retrieval.ingest import IngestConfig
    from retrieval.ocr_engine import OcrResult

    class Boxes:  # an OCR engine that reads a table of three rows
        name = "fake"

        def read(self, image):
            words = _words(0, [(0, "Device"), (200, "Sessions"), (300, "Duration")])
            for i, (dev, n, d) in enumerate([("desktop", "15,390", "00:04:14"), ("mobile", "2,872", "00:02:04")]):
                words += _words(16 * (i + 1), [(0, dev), (200, n), (300, d)])
            return OcrResult(" ".join(w.text for w in words), words, "fake")

    img = tmp_path / "slide.png"
    Image.new("RGB", (400, 100), "white").save(img)
    (unit,) = UnitExtractor(IngestConfig(), ocr=Boxes()).extract(img, tmp_path, "ab" * 32, lambda _: nullcontext(), {})
    (t,) = [Table.from_dict(d) for d in unit.tables]
    assert t.header == ["Device", "Sessions", "Duration"] and t.rows[0] == ["desktop", "15,390", "00:04:14"]
    assert number(t.rows[1][2]) == 124.0  # a clock duration is a value: 2 min 4 s


def test_the_table_benchmark_counts_pages_tables_and_seconds(tmp_path):
    from eval.bench_tables import measure, report

    make_table_pdf(tmp_path / "a.pdf")
    m = measure([tmp_path / "a.pdf"])
    assert (m["pages"], m["pages_with_tables"], m["tables"]) == (1, 1, 1) and m["tables_s"] > 0
    assert "| tables | 1 |" in report(m)

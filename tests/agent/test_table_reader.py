"""The reader answers from tables: a cell, one step of arithmetic, an extreme, with its cells and their match."""

from __future__ import annotations

import pytest

from agent.reader.confidence import abstain_below
from agent.reader.extract import Passage, read_answer
from agent.reader.table_reader import printed
from agent.reader.words import NOT_ANSWERABLE
from tests.table_pdf import make_table_pdf


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    pdf = make_table_pdf(tmp_path_factory.mktemp("tables") / "northwind.pdf")
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    text = doc[0].get_textpage().get_text_range()
    doc.close()
    return Passage(text, "northwind.pdf p.1", "Picture 1", "page", page=1, source=str(pdf))


def test_a_cell_named_by_its_row_and_column_with_the_tables_scale(page):
    r = read_answer("What were net sales in 2025?", [page])
    assert (r.answer, r.path) == ("2,045 million", "table")
    assert r.sentence == "Net sales / 2025: 2,045" and r.citation == "northwind.pdf p.1"
    assert r.table["cells"] == [[0, 1]] and r.table["op"] == "cell"
    assert r.table["row_match"] == 1.0 and r.table["column_match"] == 1.0
    assert r.table["table"]["header"][1:] == ["2025", "2024"]  # the table rides along, for the demo to draw
    assert read_answer("What was the operating income in 2024?", [page]).answer == "305 million"
    # the text layer alone reads 'Net sales 2,045 1,870' and cannot tell the years apart
    no_source = Passage(page.text, page.citation, page.info_id, "page", page=1)
    assert read_answer("What were net sales in 2024?", [no_source]).answer != "1,870 million"


def test_one_step_of_arithmetic_over_two_cells(page):
    r = read_answer("By how much did gross profit increase from 2024 to 2025?", [page])
    assert r.answer == "115 million" and r.table["op"] == "difference" and r.table["cells"] == [[2, 1], [2, 2]]
    assert "Gross profit / 2025: 835" in r.sentence and "Gross profit / 2024: 720" in r.sentence
    r = read_answer("What was the percentage change in net income from 2024 to 2025?", [page])
    assert r.answer == "32.5%" and r.table["op"] == "change"  # (318 - 240) / 240
    r = read_answer("What is the ratio of operating income to net sales in 2025?", [page])
    assert r.answer == "0.2" and r.table["op"] == "ratio"  # 412 / 2,045 = 0.201
    # two cells sharing neither a row nor a column: not one step over a table, so not answered from it
    r = read_answer("How much higher was net income in 2025 than operating income in 2024?", [page])
    assert r.path != "table" and r.answer not in ("-94 million", "94 million", "-107 million")


def test_an_extreme_row_of_the_named_column():
    regions = Passage(
        "Revenue by region\nRegion Revenue 2025 (million USD)\nEurope 21.4\nNorth America 15.9\nAsia Pacific 8.7",
        "report.pdf p.2",
    )
    assert read_answer("Which region had the highest revenue?", [regions]).answer == "Europe"
    assert read_answer("What was the lowest revenue among the regions?", [regions]).answer == "8.7 million"
    assert read_answer("Which region has the most employees?", [regions]).answer != "Europe"  # another measure


def test_rows_a_condition_picks_are_named_or_counted():
    """A number condition on the column the question names, a category cell the question names in full (of two
    that fit, the longer), the rows' labels as the answer; and nothing when no condition splits the rows."""
    from retrieval.tables import Table

    rows = [
        ["A. Rao", "Non-Executive & Independent", "7"],
        ["K. Modi", "Executive", "6"],
        ["S. Shah", "Executive", "7"],
        ["L. Bhasin", "Non-Executive & Independent", "5"],
        ["S. Modi", "Executive", "5"],
    ]
    board = Table(rows, ["Director", "Category", "Board meetings attended"], "Attendance", box=(0, 0, 1, 1))
    text = "Attendance of directors\n" + "\n".join(" ".join(r) for r in rows)  # the page's text layer
    p = Passage(text, "annual.pdf p.9", tables=[board.to_dict()])
    got = read_answer("Which executive directors attended more than 6 board meetings?", [p])
    assert (got.answer, got.path) == ("S. Shah", "table") and got.table["op"] == "filter"
    got = read_answer("Who are the non-executive and independent directors?", [p])
    assert got.answer == "A. Rao and L. Bhasin"
    assert read_answer("How many directors attended at least 6 board meetings?", [p]).answer == "3"
    assert read_answer("Which directors attended more than 9 board meetings?", [p]).answer == NOT_ANSWERABLE
    assert read_answer("Who are the directors?", [p]).answer != "A. Rao, K. Modi, S. Shah, L. Bhasin and S. Modi"


def test_a_slides_table_in_capitals_with_its_header_read_as_a_row():
    """OCR reads a slide's header line as the table's first row ('', '2012', ..., 'CAGR'), and its row labels in
    capitals are matched whole: the question's 'television' meets 'TELEVISION' as written, and a word the title
    uses ('digital' of 'DIGITAL AD SPEND') does not pick the row 'DIGITAL'."""
    from retrieval.tables import Table

    rows = [["", "2012", "2014", "CAGR"], ["PRINT", "154", "193", "11.5%"], ["TELEVISION", "130", "170", "14.7%"]]
    rows += [["DIGITAL", "20", "34", "29.9%"], ["RADIO", "13", "20", "20.7%"]]
    slide = Table(rows, ["", "", "", ""], "DIGITAL AD SPEND IN INDIA", box=(0, 0, 1, 1))
    text = "DIGITAL AD SPEND IN INDIA\n" + "\n".join(" ".join(r) for r in rows)
    p = Passage(text, "deck.pdf p.11", tables=[slide.to_dict()])
    assert read_answer("What is the CAGR of television from 2012 to 2014?", [p]).answer == "14.7%"
    assert read_answer("What was the digital ad spend on radio in 2014?", [p]).answer == "20"


def test_it_abstains_when_the_row_or_the_column_is_not_named(page):
    assert read_answer("What were net sales in 2019?", [page]).path != "table"  # no such column
    assert read_answer("What was the research budget in 2025?", [page]).path != "table"  # no such row
    r = read_answer("How many employees did Northwind have in 2025?", [page])
    assert r.answer == NOT_ANSWERABLE or r.path != "table"


def test_the_confidence_counts_the_row_and_column_match(page):
    r = read_answer("What were net sales in 2025?", [page])
    assert r.features["row_match"] == 1.0 and r.features["column_match"] == 1.0 and r.features["structured"] == 1.0
    partial = read_answer("What were the net sales of the robots division in 2025?", [page])
    assert partial.path != "table" or partial.confidence < r.confidence
    assert abstain_below(r, "What were net sales in 2025?", 0.17, [page]).answer == "2,045 million"


def test_computed_values_print_like_their_cells():
    assert printed(12.0, ["24", "12"]) == "12" and printed(16.7, ["52.4%", "35.7%"]) == "16.7%"
    assert printed(1194000.0, ["1,204,000", "10,000"]) == "1,194,000" and printed(115.0, ["835", "(720)"]) == "115"


def test_a_difference_across_two_tables_that_share_a_row_label():
    from retrieval.tables import Table

    box = (0.0, 0.0, 100.0, 40.0)
    stem_tab = Table([["PaLM-2L", "66.4%"], ["GPT-4", "70.3%"]], ["Method", "MMLU Physics"], "Table 1", box=box, page=5)
    qa_tab = Table([["PaLM-2L", "41.5%"], ["GPT-4", "45.6%"]], ["Method", "TimeQA"], "Table 2", box=box, page=6)
    pages = [
        Passage(
            "Method MMLU Physics\nPaLM-2L 66.4%\nGPT-4 70.3%", "paper.pdf p.5", page=5, tables=[stem_tab.to_dict()]
        ),
        Passage("Method TimeQA\nPaLM-2L 41.5%\nGPT-4 45.6%", "paper.pdf p.6", page=6, tables=[qa_tab.to_dict()]),
    ]
    r = read_answer("How much lower is the accuracy of GPT-4 on TimeQA compared to MMLU Physics?", pages)
    assert r.answer == "24.7%" and r.table["op"] == "difference"
    assert [u["table"]["title"] for u in r.table["tables"]] == ["Table 2", "Table 1"]  # each table, its own cell
    assert [u["cells"] for u in r.table["tables"]] == [[[1, 1]], [[1, 1]]]
    # OCR'd tables that read as prose (labels of many lower-case words) are not read
    prose = Table([["and the model was trained for", "3"], ["epochs while the rate was", "5"]], ["", ""], box=box)
    assert (
        read_answer(
            "How many epochs was the model trained for?", [Passage("x", "p.pdf p.1", tables=[prose.to_dict()])]
        ).path
        != "table"
    )


def test_an_answer_of_another_form_than_asked_is_not_given():
    from agent.reader.table_reader import read_table
    from retrieval.tables import Table

    t = Table([["Enemy", "1971", "29"], ["Partner", "1980", "40"]], ["View", "Since", "Republicans"], box=(0, 0, 1, 1))
    p = Passage("View Since Republicans\nEnemy 1971 29\nPartner 1980 40", "poll.pdf p.3", page=3, tables=[t.to_dict()])
    assert read_table("How many Republicans hold the view Enemy?", "number", [p]).value == "29"
    assert read_table("What percentage of Republicans hold the view Enemy?", "percent", [p]) is None  # '29' shows no %
    assert read_table("How many hold the view Enemy since?", "number", [p]) is None  # '1971' is a year, not a count

"""The reader's confidence and its abstentions: what it says it could not do, and where it points."""

from agent.reader.confidence import abstain_below, needs, pointers, type_match
from agent.reader.extract import NOT_ANSWERABLE, Reading
from agent.reader.sentences import Passage

PASSAGES = [
    Passage(
        "In 2025 total revenue reached 48.6 million dollars, up 31 percent from 2024.",
        "report.pdf p.1",
        "Picture 1",
        "page",
        page=1,
    ),
    Passage(
        "North America brought 15.9 million dollars of revenue in 2025.", "report.pdf p.2", "Picture 2", "page", page=2
    ),
    Passage("Europe led with 21.4 million dollars.", "report.pdf p.2 region [1, 2, 3, 4]", "Picture 3", "page", page=2),
]


def reading(answer="31 percent", confidence=0.9, passage=0) -> Reading:
    r = Reading(answer, "percent", PASSAGES[passage].text, PASSAGES[passage].citation, "Picture 1", 1.0, path="span")
    r.passage, r.confidence = passage, confidence
    r.pointers = pointers("What share of Aurora's 2025 revenue came from North America?", PASSAGES, passage)
    return r


def test_a_confident_answer_from_a_passage_naming_the_subject_stands():
    r = abstain_below(
        reading(passage=1, answer="15.9 million"), "How much revenue came from North America?", 0.5, PASSAGES
    )
    assert r.answer == "15.9 million" and r.candidate == ""


def test_an_unsure_answer_becomes_not_answerable_saying_why_and_where():
    r = abstain_below(reading(confidence=0.1), "By what percentage did Aurora's revenue grow?", 0.17, PASSAGES)
    assert r.answer == NOT_ANSWERABLE and r.candidate == "31 percent"
    assert r.note.startswith("not sure enough to answer: its best reading, “31 percent” (report.pdf p.1)")
    assert "likely on report.pdf p.1" in r.note


def test_an_answer_whose_passage_never_names_the_subject_abstains_and_points_elsewhere():
    """The bundled corpus's 'What share of Aurora's 2025 revenue came from North America?' had answered '31
    percent', the growth rate, read from a page that never names North America (issue 31)."""
    q = "What share of Aurora's 2025 revenue came from North America?"
    r = abstain_below(reading(confidence=0.9), q, 0.17, PASSAGES)
    assert r.answer == NOT_ANSWERABLE and "never names North America" in r.note
    assert r.pointers[0]["citation"] == "report.pdf p.2"  # the page that does name it comes first


def test_what_a_question_needs_and_the_form_it_asks_for():
    assert needs("How many figures are in the paper?") == "counting figures across the document"
    assert needs("What is the ratio of A to B?", "number") == "a ratio or share of two values"
    assert needs("List the primary questions asked about the services.") == "listing every item the question asks for"
    assert needs("Who chairs the board?", "person") == ""
    assert (type_match("number", "37%"), type_match("percent", "37 percent"), type_match("date", "May")) == (
        0.0,
        1.0,
        1.0,
    )


def test_pointers_name_each_page_once_the_reading_first():
    out = pointers("How much revenue did Europe bring?", PASSAGES, first=0)
    assert [p["citation"] for p in out] == ["report.pdf p.1", "report.pdf p.2"]  # a crop of p.2 is the same page

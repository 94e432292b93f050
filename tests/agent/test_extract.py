"""The typed, grounded answer reader (agent/reader/extract.py): rules alone, no LM, no encoder."""

import pytest

from agent.reader.answer_types import answer_type, wants_side
from agent.reader.date_format import reformat
from agent.reader.extract import NOT_ANSWERABLE, Passage, read_answer
from agent.reader.sentences import axis_ticks, is_heading

NOTES = Passage(
    "# Field notes: Tampere factory visit\n\nThe Tampere factory opened in June 2025 and employs 85 "
    "people. It assembles the Falcon X2 picker.\n\n## Quality\n\nThe defect rate fell from 2.1 percent "
    "to 0.8 percent after the new calibration rig.",
    "notes.md #0",
    "Text 1",
    "text",
)
REPORT = Passage(
    "Aurora Robotics Annual Report 2025\nAurora Robotics builds autonomous warehouse robots. In 2025 "
    "total revenue\nreached 48.6 million dollars, up 31 percent from 2024. The company shipped 1,240\n"
    "robots. Chief executive Mira Lindqvist said the Falcon X2 picker drove most of the growth.",
    "report.pdf p.1",
    "Picture 1",
    "page",
)
TABLE = Passage(
    "Region Revenue 2025 (million USD)\nEurope 21.4\nNorth America 15.9\nAsia Pacific 8.7\n"
    "Revenue by region\nEurope remained the largest market, with 44 percent of revenue.",
    "report.pdf p.2",
    "Picture 2",
    "page",
)
CHART = Passage(
    "Q1 Q2 Q3 Q4\n0\n50\n100\n150\n200\n250\nrobots shipped\nQuarterly shipments 2025\n"
    "Robots shipped per quarter\nShipments grew every quarter; Q4 set a record.",
    "report.pdf p.3",
    "Picture 3",
    "page",
)


@pytest.mark.parametrize(
    "question,kind",
    [
        ("What defect rate did the factory reach?", "percent"),
        ("How many robots did Aurora ship?", "number"),
        ("How much revenue did Europe bring?", "money"),
        ("How long does the battery last?", "duration"),
        ("When did the factory open?", "date"),
        ("In which year was it founded?", "year"),
        ("Who is the chief executive?", "person"),
        ("What is the name of the governor?", "person"),
        ("In which country is the factory?", "place"),
        ("Which company makes the robot?", "organization"),
        ("Is the factory open?", "yes_no"),
        ("What are the main risks for 2026?", "list"),
        ("How often are the demos?", "frequency"),
        ("What is the e-mail address of the office?", "email"),
        ("What does the factory assemble?", "text"),
        ("What is the color of the icons?", "color"),
        ("WHAT IS ITC LIMITED LOGO COLOR?", "color"),
        ("What temperature does the green color represent?", "text"),
        ("What is the CAGR of television from 2012 to 2016?", "percent"),
    ],
)
def test_answer_type(question, kind):
    assert answer_type(question) == kind


@pytest.mark.parametrize(
    "question,answer",
    [
        ("What defect rate did the Tampere factory reach after the new calibration rig?", "0.8 percent"),
        ("What was the defect rate before the new calibration rig?", "2.1 percent"),
        ("When did the Tampere factory open?", "June 2025"),
        ("How many people does the Tampere factory employ?", "85"),
        ("What does the Tampere factory assemble?", "the Falcon X2 picker"),
    ],
)
def test_reads_the_phrase_not_the_heading(question, answer):
    r = read_answer(question, [NOTES])
    assert r.answer == answer
    assert r.citation == "notes.md #0" and answer in r.sentence
    assert "Field notes" not in r.answer and not r.note


def test_before_and_after_pick_the_right_side_of_a_change():
    r_after = read_answer("What defect rate did the factory reach after the rig?", [NOTES])
    r_before = read_answer("What was the factory's defect rate before the rig?", [NOTES])
    assert (r_before.answer, r_after.answer) == ("2.1 percent", "0.8 percent")
    assert r_before.sentence == r_after.sentence


def test_typed_answers_from_prose_and_table_rows():
    assert read_answer("What was Aurora's total revenue in 2025?", [REPORT]).answer == "48.6 million dollars"
    assert read_answer("By what percentage did revenue grow in 2025?", [REPORT]).answer == "31 percent"
    assert read_answer("Who is the chief executive of Aurora Robotics?", [REPORT]).answer == "Mira Lindqvist"
    assert read_answer("How much revenue did North America bring, in million USD?", [TABLE, REPORT]).answer == "15.9"
    assert read_answer("Which region was the largest market?", [TABLE]).answer == "Europe"


def test_titles_and_headings_never_answer():
    assert is_heading("# Field notes: Tampere factory visit") and is_heading(
        "Aurora Robotics Annual Report 2025", first=True
    )
    assert not is_heading("Europe 21.4") and not is_heading("The defect rate fell from 2.1 to 0.8 percent.")
    for q in ("What is this document about?", "Which report is this?", "What is the title?"):
        r = read_answer(q, [NOTES, REPORT])
        assert r.answer not in ("Field notes: Tampere factory visit", "Aurora Robotics Annual Report 2025"), q


def test_a_chart_the_text_cannot_resolve_is_said_not_guessed():
    assert axis_ticks(CHART.text) == {"0", "50", "100", "150", "200", "250"}
    r = read_answer("How many robots were shipped in Q3?", [CHART])
    assert r.answer == NOT_ANSWERABLE  # never a tick label such as 250
    assert r.note == "the answer may be in a chart on report.pdf p.3; a VLM backend can read it"
    assert read_answer("In which quarter did shipments set a record?", [CHART]).answer == "Q4"


def test_abstains_without_evidence_or_when_a_specific_is_missing():
    assert read_answer("What was revenue in 2025?", []).answer == NOT_ANSWERABLE
    r = read_answer("How many people does the Oulu factory employ?", [NOTES])
    assert r.answer == NOT_ANSWERABLE and "Oulu" in r.note
    # every word of the name is printed, the name is not; a changed month and year, a changed range
    health = Passage("Florida Department of Health, 4052 Bald Cypress Way. Revised May 2016.", "plan.pdf p.1")
    r = read_answer("What is the address of the Florida Department of Science?", [health])
    assert r.answer == NOT_ANSWERABLE and "Florida Department of Science" in r.note
    assert read_answer("What is the address of the Florida Department of Health?", [health]).answered
    assert read_answer("Who revised the plan in May 2018?", [health]).answer == NOT_ANSWERABLE
    ports = Passage("Pins 0-3 of port 1 capture the trigger input; pins 10 and 13 drive the LEDs.", "chip.pdf p.2")
    assert read_answer("Which port captures the trigger from pins 10-13?", [ports]).answer == NOT_ANSWERABLE


def test_lists_dates_and_typed_formats():
    risks = Passage(
        "For 2026 the board expects revenue between 60 and 65 million dollars. The main risks are "
        "battery supply and longer sales cycles in North America.",
        "report.pdf p.4",
    )
    assert (
        read_answer("What are the main risks the board sees?", [risks]).answer
        == "battery supply, longer sales cycles in North America"
    )
    assert (
        read_answer("What revenue does the board expect for 2026?", [risks]).answer
        == "between 60 and 65 million dollars"
    )
    assert reformat("What date is on the cover? Format the date as YYYY-MM-DD", "March 5, 2021", "date") == "2021-03-05"
    mail = Passage("Contact: info@firm.example or lnahmiash@firm.example for Laurent Nahmiash.", "letter.pdf p.1")
    assert read_answer("What is the email of Laurent Nahmiash?", [mail]).answer == "lnahmiash@firm.example"


@pytest.mark.parametrize(
    "q,side",
    [
        ("What did it reach after the upgrade?", "after"),
        ("What was it before the upgrade?", "before"),
        ("What is it?", ""),
    ],
)
def test_wants_side(q, side):
    assert wants_side(q) == side


def test_abbreviations_and_either_or_questions():
    p = Passage(
        "The National Atmospheric Research Laboratory (NARL) at Gadanki runs the radar. In 2025, 320 visitors "
        "came by bus and 140 visitors came by car.",
        "report.pdf p.5",
    )
    narl = "National Atmospheric Research Laboratory"
    assert read_answer("What does NARL stand for?", [p]).answer == narl
    assert read_answer("Which brought more visitors in 2025, bus or car?", [p]).answer == "bus"
    heading = Passage(f"21\n{narl} (NARL)\nNARL at Gadanki is a centre.", "r.pdf p.19")  # spelled out in a heading
    assert read_answer("What is NARL stand for in this document?", [heading]).answer == narl


def test_the_title_the_presenter_and_captions_are_read_from_the_layout():
    slide = Passage("12\nMedical Informatics and\nHIT Systems\nDavid Lubliner, NJIT\nSpring 2024", "deck.pdf p.1")
    body = Passage("Hospitals adopt electronic records at different speeds.", "deck.pdf p.2")
    r = read_answer("What is the title of the slide?", [body, slide])
    assert (r.answer, r.answer_type, r.citation) == ("Medical Informatics and HIT Systems", "doc_title", "deck.pdf p.1")
    assert read_answer("Who is the presenter of this slide?", [body, slide]).answer == "David Lubliner"
    lines = ["Results are shown below.", "Figure 2: Accuracy by model size. Larger models do better."]
    paper = Passage("\n".join(lines + ["Table 1", "Datasets used in training"]), "paper.pdf p.4")
    assert read_answer("What is the title of Figure 2?", [paper]).answer == "Accuracy by model size"
    assert read_answer("What is the caption of table 1?", [paper]).answer == "Datasets used in training"
    scan = Passage("Overview\nFIG . 3 .\nThe gash in the cliff", "scan.pdf p.1")  # a one-word title; 'FIG . 3'
    assert read_answer("What is the title of figure 3?", [scan]).answer == "The gash in the cliff"
    assert read_answer("What is the title of this document?", [scan]).answer == "Overview"
    r = read_answer("What is the title of Figure 7?", [paper])
    assert r.answer == NOT_ANSWERABLE and "VLM" in r.note  # not printed in the text: said, not guessed
    # a heading still never answers a question that does not ask for the title
    assert read_answer("What is this deck about?", [slide]).answer != "Medical Informatics and HIT Systems"


def test_a_definition_is_the_sentence_that_defines_the_term():
    guide = Passage(
        "Design principles\nLaw of proximity. Objects that sit close together are seen as one group, even\n"
        "when they differ in colour or shape. Designers use it to group labels with their fields.\n"
        "A hazard zone is an area where robots and people may share the floor.",
        "guide.pdf p.4",
    )
    r = read_answer("How does the guide define the law of proximity?", [guide])
    assert r.answer_type == "definition"
    assert r.answer.startswith("Objects that sit close together are seen as one group")
    r = read_answer("What is the definition of a hazard zone?", [guide])
    assert r.answer == "A hazard zone is an area where robots and people may share the floor."
    assert answer_type("What does NARL mean?") == "expansion"  # an abbreviation is spelled out, not defined
    # a term the evidence never defines gets no definition
    assert read_answer("What is the definition of a charging dock?", [guide]).answer == NOT_ANSWERABLE


def test_what_follows_from_a_condition_is_the_result_clause_or_the_table_cell():
    manual = Passage(
        "Charging\nUse a USB charger that supplies 2 A or more (if the charger supplies less than 2 A, the\n"
        "charging time will increase and the battery may not reach full charge).\n"
        "Top button\nAction Result\nPress once\nOpen the app list.\nPress and\nhold\nPower off the robot.\n"
        "Side button\nAction Result\nPress once\nShow the battery level.\nPress and\nhold\nCall the operator.",
        "manual.pdf p.7",
    )
    q = "What happens if the charger supplies less than 2 A?"
    assert answer_type(q) == "consequence"
    assert read_answer(q, [manual]).answer.startswith("the charging time will increase")
    # the same row in two tables: the table the question names ('side button') decides
    assert read_answer("What will happen when you press and hold the side button?", [manual]).answer == (
        "Call the operator."
    )
    assert read_answer("What happens when you press twice the side button?", [manual]).answer == NOT_ANSWERABLE


def test_a_key_looks_up_the_name_in_its_row():
    table = Passage(
        "Zone\nWarehouse zone name Code\nFinland (FI)\n1. Tampere North TN01\n2. Tampere South TN02\n"
        "Sweden (SE)\n1. Gothenburg Harbour GH01",
        "sites.pdf p.2",
    )
    # 'Zone Code' is a column header, not a phrase the row prints: the key is what is looked up
    assert read_answer("What is the warehouse zone name for Zone Code TN02?", [table]).answer == "Tampere South"
    assert read_answer("What is the zone name for code GH01?", [table]).answer == "Gothenburg Harbour"
    # a model name is not a key: 'Falcon X2' once answered 'Who said ...?' with the clause before 'X2'
    assert read_answer("Who said the Falcon X2 picker drove most of the growth?", [REPORT]).answer == "Mira Lindqvist"


def test_a_units_or_chapters_title_is_read_from_its_label():
    syllabus = Passage(
        "Course plan\nUNIT 3: Robots in the Warehouse\nStudents map a pick route.\n"
        "Unit-4 Safety on the Shared Floor\nStudents write a hazard checklist.",
        "syllabus.pdf p.2",
    )
    r = read_answer("What's the topic of UNIT 3?", [syllabus])
    assert (r.answer, r.answer_type) == ("Robots in the Warehouse", "section_title")
    assert read_answer("What is the title of unit 4?", [syllabus]).answer == "Safety on the Shared Floor"


def test_the_highest_or_lowest_row_of_the_column_the_question_measures():
    assert read_answer("Which region had the highest revenue?", [TABLE]).answer == "Europe"
    assert read_answer("What was the lowest revenue among the regions?", [TABLE]).answer == "8.7 million"  # the value
    assert read_answer("Which region had the second highest revenue?", [TABLE]).answer == "North America"
    r = read_answer("Which region brought the lowest revenue in 2025?", [TABLE])
    assert (r.answer, r.sentence, r.citation) == ("Asia Pacific", "Asia Pacific 8.7", "report.pdf p.2")
    change = Passage("Site Change in output (%)\nTampere −1.2\nGothenburg 0.4\nOulu −0.3", "sites.pdf p.3")
    assert read_answer("Which site had the lowest change in output?", [change]).answer == "Tampere"  # minus counts
    # a column of another measure is not read for this one
    assert read_answer("Which region has the most employees?", [TABLE]).answer != "Europe"


def test_a_period_the_question_names_must_be_where_the_number_is_read():
    year = Passage("The company shipped 1,240 robots in 2025 and opened a factory in Tampere.", "report.pdf p.1")
    r = read_answer("How many robots were shipped in the third quarter?", [year, CHART])
    assert r.answer == NOT_ANSWERABLE and "chart on report.pdf p.3" in r.note  # the year's total is not Q3's
    quarters = Passage("Shipments were 310 robots in Q3, up from 250 in the second quarter.", "report.pdf p.5")
    assert read_answer("How many robots were shipped in the third quarter?", [year, quarters]).answer == "310"
    assert read_answer("How many robots did the company ship?", [year]).answer == "1,240"


def test_a_described_subject_is_named_from_the_evidence_then_asked_about():
    slides = Passage("[00:00] Heron S4 preview\nScans 9,000 shelf labels per shift", "update.mp4 00:00-00:10")
    plant = Passage(
        "The Oulu plant opened in 2024 and employs 40 people. It builds the Heron S4 scanner.", "plant.md #0"
    )
    r = read_answer("Where is the drone that scans 9,000 shelf labels per shift built?", [slides, plant])
    assert r.answer == "Oulu" and r.citation == "plant.md #0"
    assert r.note.startswith("the drone that scans 9,000 shelf labels per shift is Heron S4")
    assert "update.mp4 00:00-00:10" in r.note  # the sentence that names it, and where it is
    # the description must be the evidence's: another number names nothing, and no second hop is made
    r = read_answer("Where is the drone that scans 7,000 shelf labels per shift built?", [slides, plant])
    assert "Heron S4" not in r.note
    # the clause runs to the end when the verb comes before the description
    r = read_answer("Which plant builds the drone that scans 9,000 shelf labels per shift?", [slides, plant])
    assert r.answer.startswith("Oulu") and "is Heron S4" in r.note


def test_codes_table_cells_and_contents_lines_are_not_answers():
    # a count with a leading zero is a code or a date's part; a thousands marker '(000)' is a unit
    log = Passage("Inspection report 05/10/2015. Inspectors counted 7 alarms.", "log.pdf p.1")
    assert read_answer("How many alarms did the inspectors count?", [log]).answer == "7"
    units = Passage("Album sales by rank, volume (000)\nTotal volume of the top album: 1,204", "sales.pdf p.2")
    assert read_answer("What is the total volume of the top album?", [units]).answer == "1,204"
    # a phone as a device is not a phone number; table cells are not one either
    assert answer_type("How many seniors own a cell phone?") == "number"
    cells = Passage("Household income <$30,000 67 8\nAge 65-69 84 29", "survey.pdf p.9")
    assert read_answer("What is the telephone number of the survey office?", [cells]).answer == NOT_ANSWERABLE
    # a table-of-contents entry is a heading: its title is not what a question about a diagram asks for
    assert is_heading("Data Analysis ................................ 10 Appendix D")


def test_a_number_that_names_a_table_a_section_or_a_list_item_does_not_answer_how_many():
    # the dev set's wrong counts: 'Table 6-2 lists ...' -> '6-2', 'Algorithm 1 ...' -> '1', '4.13 USB' -> '4.13'
    ref = Passage("Table 6-2 lists the common operations supported by each role of OBS.", "obs.pdf p.9")
    assert read_answer("How many common operations are supported by each role of OBS?", [ref]).answer == NOT_ANSWERABLE
    heading = Passage("4.13 USB data exchange\nConnect the cable first.", "manual.pdf p.40")
    assert read_answer("How many steps are there for USB data exchange?", [heading]).answer == NOT_ANSWERABLE
    marker = Passage("Pages with tables\n4.\nThe tables list the results.", "paper.pdf p.2")
    assert read_answer("How many pages contain tables?", [marker]).answer == NOT_ANSWERABLE
    # a share is not a count
    share = Passage("Moreover, 86% of the claims need deep reasoning.", "scitab.pdf p.3")
    assert read_answer("How many claims need deep reasoning?", [share]).answer == NOT_ANSWERABLE
    assert (
        read_answer("How many claims have the highest percentage of deep reasoning?", [share]).answer == NOT_ANSWERABLE
    )
    # a number beside other words counts something else
    isep = Passage("All ISEP students have to fulfil 30 MCs which comprise the 3 compulsory courses.", "isep.pdf p.2")
    assert read_answer("How many areas do the course requirements have?", [isep]).answer == NOT_ANSWERABLE
    assert read_answer("How many compulsory courses do ISEP students take?", [isep]).answer == "3"
    # a question that asks for the number that names something still gets it
    rules = Passage("The manual covers the X2 picker. Safety rules are on page 42 of the guide.", "m.pdf p.1")
    assert read_answer("What is the page number of the safety rules?", [rules]).answer == "42"
    # the count itself still answers, beside a reference
    counted = Passage("Table 6-2 lists the 42 common operations supported by each role of OBS.", "obs.pdf p.9")
    assert read_answer("How many common operations are supported by each role of OBS?", [counted]).answer == "42"


def test_a_difference_is_two_rows_subtracted_or_a_change_the_text_states():
    tweets = Passage("Tweets in the first 24 hours\nGermanwings 24\nLufthansa 12\nAirbus 5\nsource: x", "t.pdf p.4")
    r = read_answer("How many more tweets are attributed to Germanwings than Lufthansa?", [tweets])
    assert (r.answer, r.sentence) == ("12", "Germanwings 24; Lufthansa 12")
    assert read_answer("How many fewer tweets does Airbus have than Lufthansa?", [tweets]).answer == "7"
    shares = Passage("Share of sales by channel\nOnline 52.4%\nStores 35.7%\nPartners 11.9%", "s.pdf p.2")
    assert read_answer("What is the difference in share between Online and Stores?", [shares]).answer == "16.7%"
    # one of the two values alone is not the difference: abstain, and say why
    r = read_answer("How many more tweets are attributed to Germanwings than Boeing?", [tweets])
    assert r.answer == NOT_ANSWERABLE and r.note
    # a change the text states answers it; a number beside the change is not its size
    fleet = Passage("In 2025 the company shipped 1,240 robots, 310 more than in 2024.", "report.pdf p.1")
    assert read_answer("How many more robots were shipped in 2025 than in 2024?", [fleet]).answer == "310"
    r = read_answer("How much higher was revenue in 2025 compared to 2024?", [REPORT])  # '48.6 million, up 31%'
    assert r.answer == NOT_ANSWERABLE


def test_a_contact_is_the_one_printed_by_the_name_asked_for():
    home = Passage(
        "Care at the home was not safe.\nThe Limes Residential Home\nInspection report\n43 Foreland Road\n"
        "Tel: 01983 873655\nThe inspection was unannounced.",
        "inspection.pdf p.1",
    )
    assert read_answer("What is the telephone no for The Limes Residential Home?", [home]).answer == "01983 873655"
    regulator = Passage("Our findings are reported to the Care Quality Commission every month.", "inspection.pdf p.2")
    r = read_answer("What is the telephone no for the Care Quality Commission?", [home, regulator])
    assert r.answer == NOT_ANSWERABLE and "Care Quality Commission" in r.note


def test_a_question_about_a_page_needs_that_page_in_the_evidence():
    cover = Passage("Inspection report 05/10/2015\nThe home has 7 rooms.", "inspection.pdf p.1", page=1)
    rooms = Passage("The east wing has 12 rooms and a garden.", "inspection.pdf p.10", page=10)
    assert read_answer("How many rooms are there on page 10?", [cover, rooms]).answer == "12"
    r = read_answer("How many rooms are there in pages 40-45?", [cover, rooms])
    assert r.answer == NOT_ANSWERABLE and r.note == "the evidence holds no text from page 40-45"
    # evidence without page numbers (notes, video) is read as before
    assert read_answer("How many rooms are on page 10?", [Passage("The wing has 12 rooms.", "notes.md #0")]).answered


def test_a_sum_is_rows_added_or_a_total_the_text_states():
    tweets = Passage("Tweets in the first 24 hours\nGermanwings 24\nLufthansa 12\nAirbus 5\nsource: x", "t.pdf p.4")
    r = read_answer("How many Tweets are attributed to Germanwings, Lufthansa, and Airbus in total?", [tweets])
    assert (r.answer, r.sentence) == ("41", "Germanwings 24; Lufthansa 12; Airbus 5")
    shares = Passage("Share of sales by channel\nOnline 52.4%\nStores 35.7%\nPartners 11.9%", "s.pdf p.2")
    assert read_answer("What is the sum of the shares of Online and Partners?", [shares]).answer == "64.3%"
    # one part's value is not the sum: abstain, and say why
    poll = Passage("61% of customers said Wi-Fi increases loyalty in hospitality.", "wifi.pdf p.3")
    r = read_answer(
        "What is the sum of percentage of customers and employers who said Wi-Fi increases loyalty?", [poll]
    )
    assert r.answer == NOT_ANSWERABLE and "add" in r.note
    # a total the text states answers it
    told = Passage(
        "Germanwings drew 24 tweets, Lufthansa and Airbus fewer; a total of 41 tweets went to the three.", "t.pdf p.5"
    )
    assert read_answer("How many tweets went to Germanwings, Lufthansa and Airbus in total?", [told]).answer == "41"


def test_a_gap_or_change_asked_without_two_sides_needs_a_stated_change():
    survey = Passage(
        "Of adults 65 and older with a college degree, 87% own a cell phone and 31% a tablet.", "pew.pdf p.2"
    )
    r = read_answer("What is the gap of 65+ people with College graduate who own a cell phone and a tablet?", [survey])
    assert r.answer == NOT_ANSWERABLE
    # one of the two values is not the gap (the reader had answered '87%')
    r = read_answer(
        "What is the percentage gap of college graduates aged 65+ who own a cell phone and a tablet?", [survey]
    )
    assert r.answer == NOT_ANSWERABLE and "subtract" in r.note
    views = Passage("Favorable views of China fell 12 points, to 38%, since 2011.", "pew.pdf p.4")
    assert read_answer("How much did the favorable views of China change since 2011?", [views]).answer == "12"


def test_a_colour_is_read_where_the_text_names_one_and_never_guessed():
    legend = Passage("In the loss curve, loss_cls is the blue line and loss_bbox the red one.", "f.pdf p.3")
    assert read_answer("What is the color of the loss_cls line in the loss curve?", [legend]).answer == "blue"
    icons = Passage("Android users touch the icons to move an app up or down the list.", "guide.pdf p.9")
    r = read_answer("What is the color of the icons that the users touch to move the app down?", [icons])
    assert r.answer == NOT_ANSWERABLE and "colour" in r.note
    # a colour the question names that the text never prints: the text cannot tell which thing is meant
    milk = Passage("Green: very cold milk (up to 8 °C). White: chilled milk (8 to 16 °C).", "coffee.pdf p.12")
    r = read_answer("What temperature does the yellow color of the coffee machine represent for the milk?", [milk])
    assert r.answer == NOT_ANSWERABLE and "yellow" in r.note
    assert read_answer("What temperature does the green color represent for the milk?", [milk]).answer != NOT_ANSWERABLE


def test_one_of_several_listed_options_is_picked_only_when_the_text_tells_them_apart():
    survey = Passage(
        "Training-time correction: 12 papers. Generation-time correction: 20 papers. Post-hoc correction: 31 papers.",
        "survey.pdf p.3",
    )
    q = "Among the three correction strategies: training-time correction, generation-time correction, and post-hoc "
    assert read_answer(q + "correction, which one has the most papers?", [survey]).answer == "post-hoc correction"
    # options the evidence never prints cannot be compared: abstain, and say so
    r = read_answer(
        "Among the three generation strategies: training-time generation, generation-time generation, and post-hoc "
        "generation, which one has the most papers?",
        [survey],
    )
    assert r.answer == NOT_ANSWERABLE and r.note
    # 'whose ... in his last year' asks for one of the people listed, not a year
    ratings = Passage("Obama's approval among Democrats was 79% in 2009 and 2016.", "pew.pdf p.9")
    r = read_answer("Among Clinton, Bush, and Obama, whose rating rose by 5% in his last year?", [ratings])
    assert r.answer == NOT_ANSWERABLE


def test_a_street_the_question_names_is_where_to_look_not_the_answer():
    guide = Passage("Audium, a sound theatre on Bush St near Austin St. Fern St has a bakery.", "sf.pdf p.40")
    assert read_answer("What is the sight near Austin St?", [guide]).answer == "Audium"
    # another street is never the sight; with no sentence printing Taylor St, abstain
    assert read_answer("What is the sight on Taylor St?", [guide]).answer == NOT_ANSWERABLE


def test_styles_counts_and_amounts_the_text_cannot_answer():
    page = Passage("QSA: the Quality Services Agency audits the stores twice a year.", "qsa.pdf p.2")
    r = read_answer("What is the text of the underlined italic words on page 2?", [page])
    assert r.answer == NOT_ANSWERABLE and "underlined" in r.note
    # 'how many ... when ...' counts; an amount the evidence never prints ('50 billion') is not looked up
    cards = Passage(
        "Debit card users in India (in millions): 399 by 2016, as e-commerce sales reach $11 billion.", "c.pdf p.5"
    )
    assert read_answer("How many people used a debit card when sales reached 11 billion?", [cards]).answer == "399"
    r = read_answer("How many people used a debit card when sales reached 50 billion?", [cards])
    assert r.answer == NOT_ANSWERABLE and "50 billion" in r.note


def test_a_person_is_not_a_documents_words():
    ruling = Passage("The Commission issued a Final Disposition Opinion on May 13, 2011.", "op.pdf p.7")
    assert read_answer("Who signed the opinion?", [ruling]).answer == NOT_ANSWERABLE


def test_rows_printed_beside_prose_are_still_rows():
    # OCR joined a two-column slide line by line: the table's rows end the lines of the prose beside it
    lines = [
        "During the first 24 hours: Company Tweets",
        "Germanwings focuses the majority of its digital Germanwings 24",
        "activity on Twitter, posting in both English (10) and Lufthansa 12",
        "German (14)",
        "Germanwings and Lufthansa both see significant Airbus 5",
        "spikes in followers on Twitter due to the crash.",
    ]
    slide = Passage("\n".join(lines), "crisis.pdf p.16")
    assert read_answer("How many more Tweets are attributed to Germanwings than Lufthansa?", [slide]).answer == "12"
    total = read_answer("How many Tweets are attributed to Germanwings, Lufthansa, and Airbus in total?", [slide])
    assert (total.answer, total.sentence) == ("41", "Germanwings 24; Lufthansa 12; Airbus 5")


def test_a_clock_duration_is_read_from_the_row_the_question_names():
    table = Passage(
        "Device Category Sessions Bounce Rate Avg. Session Duration\n"
        "19,149,315 38.10% 00:03:51\n"
        "desktop 15,390,335 33.01% 00:04:14\n"
        "mobile 2,872,777 60.26% 00:02:04",
        "audit.pdf p.14",
    )
    assert read_answer("What is the average session duration for desktop?", [table]).answer == "00:04:14"
    assert read_answer("What is the average session duration for mobile?", [table]).answer == "00:02:04"
    # no row names a TV: the total's duration is not the TV's
    assert read_answer("What is the average session duration for TV?", [table]).answer == NOT_ANSWERABLE

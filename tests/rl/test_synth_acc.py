"""`vimrag synth trajectories`' ACC examples (rl/synth/trajectories.py `acc_example`), compiled by hand: the
question and every observation of a trace in order, pictures in place, and the answer as the target."""


def test_acc_holds_the_question_and_every_observation_in_order():
    from rl.synth.trajectories import acc_example

    img = {"type": "image", "ref": "Picture 1", "width": 56, "height": 84}
    trace = {
        "question": "How many stations are on the northern line?",
        "answer": "14",
        "evidence": {
            "Picture 1": {"text": "There are 14 stations on the northern line."},
            "Picture 2": {"text": "The Riverside depot has 40 electric buses."},
        },
        "steps": [
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}, img]}]},
        ],
        "events": [
            {"type": "step_started", "step": 1},
            {"type": "search_results", "query": "northern line stations", "results": [
                {"info_id": "Picture 1", "label": "Picture 1", "citation": "survey.pdf p.3"},
                {"info_id": "Picture 2", "label": "Picture 2", "citation": "depot_notes.md #0"}]},
            {"type": "error", "message": "there is no Picture 9"},
            {"type": "cropped", "info_id": "Picture 3", "source_info_id": "Picture 1", "citation": "survey.pdf p.3"},
            {"type": "answer", "text": "14"},
        ],
    }  # fmt: skip
    ex = acc_example(trace, "q1", "traces/q1.json")
    assert ex["target"] == "14" and ex["observations"] == 3 and ex["trace"] == "traces/q1.json"
    assert ex["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Question: How many stations are on the northern line?\n\n"
                 "A search agent gathered the observations below, in this order."},
                {"type": "text", "text": "\nObservation 1:"},
                {"type": "text", "text": 'Search "northern line stations" returned 2 results.'},
                {"type": "text", "text": "Picture 1 (survey.pdf p.3):"},
                img,
                {"type": "text", "text": "There are 14 stations on the northern line."},
                {"type": "text", "text": "Picture 2 (depot_notes.md #0):"},
                {"type": "text", "text": "The Riverside depot has 40 electric buses."},
                {"type": "text", "text": "\nObservation 2:"},
                {"type": "text", "text": "The agent was told: there is no Picture 9"},
                {"type": "text", "text": "\nObservation 3:"},
                {"type": "text", "text": "A crop of Picture 1: Picture 3 (survey.pdf p.3)."},
                {"type": "text", "text": "\nAnswer the question from these observations alone, in a few words."},
            ],
        }
    ]  # fmt: skip

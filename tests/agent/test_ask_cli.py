"""`vimrag ask` end to end on the generated corpus with the embedded policy: steps, a cited answer, a trace
that reloads into the identical graph, and a drawing of the graph."""

import json

import pytest

from agent.events import Trace
from app.cli import main


def ask(capsys, index, question, *extra):
    code = main(["ask", question, "--index", str(index), *extra])
    return code, capsys.readouterr()


def test_ask_prints_steps_and_a_cited_answer_and_writes_a_reloadable_trace(capsys, mixed_index, tmp_path):
    trace_path, graph_path = tmp_path / "t.json", tmp_path / "g.png"
    code, out = ask(
        capsys,
        mixed_index,
        "How many customers can join the Heron drone pilot?",
        "--model",
        "keyword",
        "--trace",
        str(trace_path),
        "--graph",
        str(graph_path),
    )
    assert code == 0, out.err
    text = out.out
    assert "backend: embedded" in text and "search s1" in text and "memorize s1" in text
    assert "crop Picture" in text  # the footnote is small print, so the controller zooms in
    assert "answer: 12\n" in text and "logimat_poster.png" in text.split("answer:")[1]
    assert 'read from: "Footnote: pilot places are limited to 12 customers' in text  # the sentence, cited
    trace = Trace.from_dict(json.loads(trace_path.read_text()))
    assert trace.status == "answered" and trace.citations
    assert trace.support["answer"] == "12" and trace.support["answer_type"] == "number"
    g = trace.memory_graph()
    assert g.to_dict() == trace.graph and {"root", "s1", "crop1"} <= set(g.nodes)
    crop_text = next(ev["text"] for ev in trace.evidence.values() if ev["crop_box"])
    assert "12 customers" in crop_text  # read from the zoomed region
    from PIL import Image

    assert Image.open(graph_path).size[0] > 300


@pytest.mark.parametrize("protocol", ["react", "vrag", "vanilla"])
def test_ask_every_protocol(capsys, mixed_index, protocol):
    code, out = ask(
        capsys,
        mixed_index,
        "How many people does the Tampere factory employ?",
        "--model",
        "keyword",
        "--protocol",
        protocol,
        "--json",
    )
    assert code == 0, out.err
    res = json.loads(out.out)
    assert res["status"] == "answered" and "85" in res["answer"] and res["citations"]


def test_ask_errors_are_one_clear_line(capsys, tmp_path, mixed_index):
    code, out = ask(capsys, tmp_path / "missing", "anything?")
    assert code == 2 and "does not exist" in out.err and "vimrag index" in out.err
    code, out = ask(capsys, tmp_path, "anything?")
    assert code == 2 and "no index" in out.err
    code, out = ask(
        capsys,
        mixed_index,
        "anything?",
        "--backend",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--timeout",
        "2",
    )
    assert code != 0 and "cannot reach" in (out.err + out.out)


def test_prompt_file_reaches_the_model_where_the_protocol_puts_it(capsys, mixed_index, tmp_path):
    prompt = tmp_path / "vrag.txt"
    prompt.write_text("OFFICIAL INSTRUCTION GOES HERE. Question: {question}")
    trace_path = tmp_path / "t.json"
    code, out = ask(
        capsys,
        mixed_index,
        "How many people does the Tampere factory employ?",
        "--model",
        "keyword",
        "--protocol",
        "vrag",
        "--prompt-file",
        str(prompt),
        "--trace",
        str(trace_path),
    )
    assert code == 0, out.err
    first = Trace.from_dict(json.loads(trace_path.read_text())).steps[0].messages
    assert first == [
        {
            "role": "user",
            "content": "OFFICIAL INSTRUCTION GOES HERE. Question: How many people does the Tampere factory employ?",
        }
    ]
    prompts = tmp_path / "vimrag.json"
    prompts.write_text(json.dumps({"system": "SYS", "user": "Q={query} G={action_graph}", "summary": "SUM"}))
    code, out = ask(
        capsys,
        mixed_index,
        "How many people does the Tampere factory employ?",
        "--model",
        "keyword",
        "--prompt-file",
        str(prompts),
        "--trace",
        str(trace_path),
    )
    assert code == 0, out.err
    first = Trace.from_dict(json.loads(trace_path.read_text())).steps[0].messages
    assert first[0] == {"role": "system", "content": "SYS"} and first[1]["content"].startswith("Q=How many people")
    prompts.write_text(json.dumps({"user": "no placeholders"}))
    code, out = ask(capsys, mixed_index, "anything?", "--prompt-file", str(prompts))
    assert code == 2 and "{query}" in out.err and "{action_graph}" in out.err

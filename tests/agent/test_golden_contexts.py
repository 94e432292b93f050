"""Golden contexts: what the model sees, call by call, in the exact vrag and vimrag layouts.

A scripted 4-step episode over a fixed fake corpus (pages drawn here, a text chunk) is rendered to text, one
line per content part, images replaced by their size, and compared with tests/agent/golden/<protocol>.txt.
The prompts are marker texts (PROMPTS below), so the fixture shows where each prompt goes, whatever its
wording. The fixture's header maps each tag ([A], [B], ...) to the lines of the published code it follows.

To regenerate after an intended change: VIMRAG_UPDATE_GOLDEN=1 pytest tests/agent/test_golden_contexts.py,
then review the diff line by line against the cited code.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from agent.backends.scripted import ScriptedPolicy
from agent.call_format import format_call, format_vrag
from agent.loop import Agent
from agent.settings import AgentConfig
from retrieval.units import Unit
from tests.agent.fakes import Fixed

GOLDEN = Path(__file__).parent / "golden"
QUESTION = "Which region earned the most in 2025?"

# Published sources, as cited: the VRAG repository (Alibaba-NLP/VRAG at 24f8d05, February 2026) and the VimRAG
# demo (demo/vimrag_agent.py, demo/vimrag_utils.py; read through the search index, lines of that copy).
GEN = "VRAG-RL/vrag_agent/generation.py"
CONV = "VRAG-RL/scripts/hf_dataset_convert.py"
VDEMO = "demo/vrag_agent.py"
AGENT = "demo/vimrag_agent.py"
UTILS = "demo/vimrag_utils.py"
MEMA = "recurrent/impls/memory.py"  # BytedTsinghua-SIA/MemAgent at 76b7a65
MEME = "taskutils/memory_eval/utils/recurrent.py"
DP = "Mem1/inference/data_pipelines.py"  # MIT-MI/MEM1 at 6f22061
MD = "Mem1/inference/models.py"
RDA = "src/run_deep_agent.py"  # RUC-NLPIR/DeepAgent at 376a141
PDA = "src/prompts/prompts_deepagent.py"

PROMPTS = {
    "vrag": {
        "user": "<VRAG-RL USER_PROMPT with the question here: {question}>",
        "nudge": "<NUDGE: answer now>",
        "invalid": "<INVALID-ACTION MESSAGE>",
    },
    "mem1": {"user": "<MEM1 prompt; question: {question}>", "hint": "<HINT n={n}>", "last_hint": "<LAST HINT>"},
    "memagent": {  # their TEMPLATE and TEMPLATE_FINAL_BOXED with the instruction replaced by a marker
        "update": "<TEMPLATE instruction>\n\n<problem> \n{prompt}\n</problem>\n\n<memory>\n{memory}\n</memory>"
        "\n\n<section>\n{chunk}\n</section>\n\nUpdated memory:\n",
        "final": "<TEMPLATE_FINAL_BOXED instruction>\n\n<problem> \n{prompt}\n</problem>\n\n<memory>\n{memory}\n"
        "</memory>\n\nYour answer:\n",
    },
    "fold": {  # DeepAgent's prompts with their instructions replaced by markers; the anchor line is theirs
        "user": "<main_reasoning_prompt question={question} tools={tools}>\n"
        'Now, begin your reasoning for question "{question}" with the available tools.\n',
        "episode": "<episode memory instruction task={question}>\n{history}\n",
        "working": "<working memory instruction task={question}>\n{history}\n",
        "tool": "<tool memory instruction task={question}>\n{history}\nTool Call History:\n{calls}\n",
        "fold_limit": "<FOLD LIMIT n={n}>",
        "last_turn": "<LAST TURN>",
    },
    "vimrag": {
        "system": "<SYSTEM_PROMPT>",
        "user": "<USER_PROMPT query={query} action_graph={action_graph}>",
        "summary": "<SUMMARY_PROMPT>",
    },
}

CITES = {
    "mem1": {
        "A": f"{DP} line 157 (the dataset's prompt, one user turn: the instruction and the question; the published "
        "instruction is Mem1/gen_data/data_process/qa_search_train_merge.py lines 56-67)",
        "B": f"{MD} lines 71-98: a reply stops at its first </search> or </answer>; {DP} lines 41-55: a search if it "
        "holds <search>...</search>, else the answer",
        "C": f"{DP} lines 148-151 and 172: every earlier turn is dropped; the context is the prompt, the last reply "
        "and the last observation",
        "D": f"{DP} line 164: <information>, the hint, the docs, </information>; lines 154-158: the hint in "
        "[HINT]...[/HINT] says how many turns are left (ours: the observation is a user turn, MEM1 continues its "
        f"assistant turn with it, {MD} lines 64-69)",
        "E": f"{DP} lines 24-31: a doc a line, `Doc {{i}}(Title: {{title}}) {{text}}`, the top 3 (line 8); ours: a "
        "picture's title is its citation and the picture follows its line",
        "F": f"{MD} lines 78-88: temperature 0.01, top-p 0.95, at most 1,024 new tokens",
    },
    "memagent": {
        "A": f"{MEMA} lines 150-156 and recurrent/impls/async_memory.py lines 123-129: every call is one user turn "
        "and no history; lines 115-130 (TEMPLATE): the instruction, then `<problem> ` / the question / `</problem>`, "
        "`<memory>` / the memory / `</memory>`, `<section>` / the chunk / `</section>`, and `Updated memory:`",
        "B": f"{MEMA} lines 161, 197 and 222: the first memory is `No previous memory`; line 243: a reply replaces "
        f"the memory whole ({MEME} line 80: the text after its last `</think>`)",
        "C": f"{MEMA} lines 132-143 (TEMPLATE_FINAL_BOXED): after the last chunk, the problem and the memory, and "
        "`Your answer:`; the answer is the last `\\boxed{}` (verl/utils/reward_score/hotpotqa.py lines 1-16)",
        "D": "ours: each chunk is one retrieved result, a line naming its source and then its text or its picture "
        "(MemAgent cuts 5,000-token chunks from one given document, text only)",
        "E": "taskutils/memory_eval/ruler_hqa.py line 53 and taskutils/memory_eval/run.py line 278: its evaluation "
        "samples at temperature 0.7 and top-p 0.95, at most 1,024 new tokens a call",
    },
    "fold": {
        "A": f"{PDA} lines 84-137: one user turn, the instruction, the question and the tool list, ending with "
        "`Now, begin your reasoning for question ...`",
        "B": f"{RDA} lines 419 and 604: a reply stops at its first </tool_call> or <fold_thought>, the stop string "
        "kept; lines 426-428: `</think>\\n` is dropped",
        "C": f"{RDA} line 536: a result in <tool_call_result>...</tool_call_result>; lines 495-499: a call repeated "
        f"with the same arguments is not run again (ours: a user turn; DeepAgent continues its assistant turn, "
        f"{RDA} lines 594-606)",
        "D": f"{RDA} lines 292-384: a fold is three calls writing the episode, working and tool memory from the "
        "question and the whole output as `Step i: ...` paragraphs (lines 305-307); the tool memory also gets the "
        "calls and their results, json.dumps(indent=2) (lines 309-317 and 361)",
        "E": f"{RDA} lines 69-80: a memory is its reply's ```json block; lines 580-581: the next context is the "
        "first prompt with `Memory of previous folded thoughts:` and the memories before `Now, begin your "
        "reasoning for`, all else dropped",
        "F": f"{RDA} lines 91-95 and 409: temperature 0.7, top-p 0.8, thinking on (ours: no top-k or repetition "
        "penalty in the request, at most 8,192 new tokens, not 81,920)",
    },
    "vrag": {
        "A": f"{CONV} lines 9, 50 and 71-76: the instruction and `Question: ...` form one user turn, a string; "
        "no system message (the chat template adds its default one)",
        "B": f"{GEN} lines 99-108: the assistant turn keeps only the complete tags, joined by newlines",
        "C": f"{GEN} lines 158-177: a search inserts the first page not inserted before among the results "
        "(search_engine/search_engine.py line 76: the top 10), as a user turn holding the image alone",
        "D": f"{GEN} lines 18-42, 143 and 167: every inserted image is scaled into [256*28*28, 512*28*28] pixels "
        "(sides truncated); the size shown is that image's, the processor then snaps it to the 28 px grid",
        "E": f"{GEN} lines 132-152: <bbox> crops the latest image: padded by 28, scaled with int(), clamped, "
        "then resized as in [D]",
        "F": f"{VDEMO} lines 27 and 170-175: 10 actions, and the last observation also asks for the answer now "
        "(our marker text here; the demo's own words are in those lines)",
        "G": "ours, not the published code's: the demo sends no sampling settings (the server's defaults; "
        f"{VDEMO} lines 85-89) and training samples up to 2,048 tokens a turn (VRAG-RL/train_grpo_qwen2_5_vl_7b.sh "
        "line 37); we send temperature 0 and 1,024 tokens, each overridable",
    },
    "vimrag": {
        "A": f"{AGENT} lines 241-251 (`_build_initial_messages`): a system message, then one user turn holding "
        "USER_PROMPT formatted with the query and the action graph (json.dumps, ensure_ascii=False); "
        f"{UTILS} lines 144-145: an all-text content list is sent as one string",
        "B": f"{AGENT} lines 362-366: the action graph is a list, the root node first, with these keys",
        "C": f"{AGENT} lines 282-293 and 409-415: a search appends the reply, the tool response and SUMMARY_PROMPT; "
        "until the next memorize, another search is refused",
        "D": f"{AGENT} lines 129-176 (`format_search_results`): line 134 opens the response, line 136 orders "
        "texts, pictures, videos; lines 144, 155, 168 label them, numbered within this response; line 172 "
        "closes it",
        "E": f"{UTILS} lines 10-51 and {AGENT} lines 180-203: pictures as JPEG quality 75, shrunk once more "
        "above 38,000 bytes, at most 1,003,520 pixels (line 27 of the agent)",
        "F": f"{AGENT} lines 417-423 and 380-384: after memorizing, the step's arguments plus its summary join the "
        "action graph, and the next turn starts from a rebuilt context",
        "G": f"{AGENT} lines 253-269 and {UTILS} lines 216-269: the `### Multimodal Memory` header (agent lines "
        "265-268), then per node in graph order `Node: <id>` (utils line 252) and the images of its items "
        "among the top 5 by energy (utils lines 156-213, 231-232), bare, each at its share of 2,007,040 "
        "pixels, int(S * (omega / sum)) split over a video's frames with //, and no per-item cap: one item alone "
        "gets all 2,007,040 (utils lines 254-266)",
        "H": f"{AGENT} lines 32 and 73-85 (`_model_generate`): max_tokens 4096, chat_template_kwargs with "
        "enable_thinking (on by default), and in thinking mode temperature 0.6 and top_p 0.95",
    },
}


def page(folder: Path, name: str, size, title: str) -> Unit:
    """A white page with a title bar and grey lines: it compresses well, so the JPEG rule does not shrink it."""
    im = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(im)
    d.rectangle((40, 40, size[0] - 40, 120), fill=(40, 70, 140))
    for y in range(180, size[1] - 60, 48):
        d.rectangle((60, y, size[0] // 2 + (y * 7) % (size[0] // 3), y + 16), fill=(150, 150, 150))
    path = folder / name
    im.save(path)
    return Unit(
        uid=name,
        source=str(path),
        root=str(folder),
        modality="image",
        content_hash=name,
        text=title,
        width=size[0],
        height=size[1],
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("golden")
    text = Unit(
        uid="notes#0",
        source=str(folder / "notes.md"),
        root=str(folder),
        modality="text",
        content_hash="n",
        text="Europe led revenue in 2025 with 41 percent.",
        chunk=0,
    )
    return [
        page(folder, "report_page.png", (1240, 1754), "Revenue by region"),
        page(folder, "poster.png", (900, 600), "Regional poster"),
        text,
    ]


SCRIPTS = {
    "vrag": [
        format_vrag("search", {"query": "revenue by region 2025"}, think="I need the revenue table."),
        format_vrag("crop", {"bbox": [40, 60, 300, 200]}, think="The table is small; zoom in."),
        format_vrag("search", {"query": "regional revenue share"}, think="Check another source."),
        "<think>Europe leads.</think>\n<answer>Europe</answer>",
    ],
    "mem1": [
        "<think>I need the revenue table.</think>\n<search>revenue by region 2025</search> trailing text",
        "<think>Page 2 has the table; the note says Europe led.</think>\n<search>regional revenue share</search>",
        "<think>Europe led with 41 percent.</think>\n<answer>Europe</answer>",
    ],
    "fold": [
        format_call("search", {"query": "revenue by region 2025"}, think="I need the revenue table.") + " trailing",
        format_call("search", {"query": "revenue by region 2025"}),
        format_call("crop", {"image": "Picture 1", "bbox": [40, 60, 300, 200]}),
        "The table is small and the results are thin; I will fold my thoughts.\n\n<fold_thought> more",
        'Here:\n```json\n{"task_description": "find the top region", "key_events": []}\n```',
        '{"immediate_goal": "confirm Europe"}',
        '{"tools_used": [{"tool_name": "search"}], "derived_rules": []}',
        "<think>The memory says Europe.</think>\nEurope led. \\boxed{Europe}",
    ],
    "memagent": [
        "Page 2 holds the revenue table.",
        "<think>a poster too</think>Page 2 holds the revenue table; the poster is regional.",
        "Page 2 holds the revenue table; the note says Europe led with 41 percent.",
        "Europe led. \\boxed{Europe}",
    ],
    "vimrag": [
        format_call(
            "add_search_node",
            {"id": "s1", "query": "revenue by region 2025", "parent_ids": ["root"]},
            think="Find the table.",
        ),
        format_call(
            "summarize_and_memorize",
            {
                "summarize": "Page 2 holds the revenue table; the note says Europe led.",
                "memorize": [
                    {"information_id": "Picture 1", "is_useful": True, "priority_score": 5},
                    {"information_id": "Text 1", "is_useful": True, "priority_score": 4},
                    {"information_id": "Picture 2", "is_useful": False, "priority_score": 1},
                ],
            },
        ),
        format_call("add_search_node", {"id": "s2", "query": "regional revenue share", "parent_ids": ["s1"]}),
        format_call("add_answer_node", {"answer": "Europe", "parent_ids": ["s1"]}),
    ],
}


def render_part(p) -> str:
    if p["type"] == "text":
        return "text  " + json.dumps(p["text"], ensure_ascii=False)
    im = p["image"]
    extra = f", {p['mime'].split('/')[1]}" if p.get("mime") else ", png"
    extra += f", max_pixels {p['max_pixels']}" if p.get("max_pixels") else ""
    return f"image {im.width}x{im.height}{extra}"


def _text_of(content) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def tag_for(protocol: str, i: int, messages: list[dict], part: dict | None = None) -> str:
    """The citation tag of message i (or of one of its parts)."""
    m = messages[i]
    text = _text_of(m["content"])
    if protocol == "mem1":
        if part is not None:
            return (
                "E"
                if part["type"] == "image" or part["text"].startswith("Doc ")
                else ("D" if "<information>" in part["text"] or "</information>" in part["text"] else "")
            )
        return "A" if i == 0 else ("B, C" if m["role"] == "assistant" else "C, D")
    if protocol == "fold":
        if part is not None:
            return "C" if part["type"] == "text" and "tool_call_result>" in part["text"] else ""
        if m["role"] == "assistant":
            return "B"
        if i == 0:
            if "Memory of previous folded thoughts:" in text:
                return "A, E"
            return "D" if "memory instruction" in text else "A"
        return "C"
    if protocol == "memagent":
        if part is not None:
            return "D" if part["type"] == "image" or part["text"].endswith(".png\n") else ""
        return "C" if text.startswith("<TEMPLATE_FINAL") else "A, B"
    if protocol == "vrag":
        if part is not None:
            return "D" if part["type"] == "image" else ("F" if part["text"].startswith("<NUDGE") else "")
        if i == 0:
            return "A"
        if m["role"] == "assistant":
            return "B"
        return "E" if "<bbox>" in _text_of(messages[i - 1]["content"]) else "C"
    if part is not None:
        if part["type"] == "image":
            return "E" if text.startswith("<tool_response>") else "G"
        t = part["text"]
        if t.startswith("### Multimodal Memory") or t.startswith("Node: "):
            return "G"
        return "D" if text.startswith("<tool_response>") and t != _tool_payload(t) else ""
    if i == 0:
        return "A"
    if i == 1:
        return "A, B"
    if m["role"] == "assistant":
        return "C"
    return "D" if text.startswith("<tool_response>") else "C"


def _tool_payload(t: str) -> str:
    """The framing strings of a tool response are format; a result's own text is payload (returned as is)."""
    framing = (
        t.startswith("<tool_response>")
        or t == "\n</tool_response>"
        or t.rstrip(":").split(" ")[0] in ("Text", "Picture", "Video")
    )
    return "" if framing else t


def request_line(protocol: str) -> str:
    """The sampling part of the request the OpenAI-compatible backend sends under this protocol by default."""
    from agent.backends.base import PolicyConfig
    from agent.backends.openai_compat import OpenAIPolicy
    from agent.protocols import get

    policy = OpenAIPolicy(PolicyConfig(backend="openai", model="served-model"))
    body = policy.request_body([], policy.generation(get(protocol)))
    sampling = {k: v for k, v in body.items() if k not in ("model", "messages", "seed", "stream")}
    tag = {"vimrag": "H", "vrag": "G", "memagent": "E", "mem1": "F", "fold": "F"}[protocol]
    return f"=== every request: {json.dumps(sampling)} ===    [{tag}]"


def render(protocol: str, calls: list[list[dict]]) -> str:
    lines = [request_line(protocol)]
    for n, messages in enumerate(calls, start=1):
        rebuilt = protocol == "vimrag" and n > 1 and len(messages) == 2
        lines.append(f"=== model call {n}: {len(messages)} messages ===" + ("    [F] rebuilt" if rebuilt else ""))
        for i, m in enumerate(messages):
            content = m["content"]
            head = f"[{m['role']}] " + ("string" if isinstance(content, str) else f"{len(content)} parts")
            lines.append(f"{head}    [{tag_for(protocol, i, messages)}]")
            if isinstance(content, str):
                lines.append("  " + json.dumps(content, ensure_ascii=False))
                continue
            for p in content:
                tag = tag_for(protocol, i, messages, p)
                lines.append("  " + render_part(p) + (f"    [{tag}]" if tag else ""))
    return "\n".join(lines) + "\n"


def header(protocol: str) -> str:
    out = [
        f"# Golden context: {protocol}, exact layout. Generated by tests/agent/test_golden_contexts.py;",
        "# prompts are marker texts. Each line follows the published code its tag cites:",
    ]
    out += [f"# [{tag}] {text}" for tag, text in CITES[protocol].items()]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("protocol", ["vrag", "vimrag", "memagent", "mem1", "fold"])
def test_golden_context(protocol, corpus):
    policy = ScriptedPolicy(script=SCRIPTS[protocol])
    steps = max(4, len(SCRIPTS[protocol]))  # vrag's last (4th) turn carries its nudge
    cfg = AgentConfig(protocol=protocol, prompts=PROMPTS[protocol], max_steps=steps, vanilla_k=3)
    trace = Agent(Fixed(corpus), policy, cfg).ask(QUESTION)
    assert trace.status == "answered" and trace.answer == "Europe"
    assert not [s for s in trace.steps if s.observation], "the scripted episode must run without a rejection"
    got = header(protocol) + render(protocol, policy.calls)
    path = GOLDEN / f"{protocol}.txt"
    if os.environ.get("VIMRAG_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got, encoding="utf-8")
    want = path.read_text(encoding="utf-8")
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(path), "now"))
        pytest.fail(
            f"the {protocol} context differs from its golden fixture (if intended, regenerate with "
            f"VIMRAG_UPDATE_GOLDEN=1 and review every line against the cited code):\n{diff}"
        )

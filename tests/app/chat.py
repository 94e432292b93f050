"""Reading the demo's chat history (gradio "messages" dicts) in the web tests: the answer and the step titles."""


def last_answer(chat: list[dict]) -> str:
    """The text of the final answer message (the last assistant message without a step title)."""
    for m in reversed(chat):
        if m["role"] == "assistant" and not (m.get("metadata") or {}).get("title"):
            text = content_text(m)
            if not text.strip() or text.startswith("**Where to look:**"):  # an abstention's pointers, after it
                continue
            return text
    return ""


def content_text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if isinstance(p, dict))
    return str(c or "")


def titles(chat: list[dict]) -> list[str]:
    return [(m.get("metadata") or {}).get("title") or "" for m in chat]

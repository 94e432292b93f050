"""A stand-in for a vLLM server, for the served-rollout tests: the same HTTP calls, a tiny causal LM behind them.

It answers POST /v1/chat/completions (non-streamed, with `logprobs` and `return_tokens_as_token_ids`
honoured the way vLLM does: tokens as "token_id:N", the end-of-turn token left out, finish_reason "stop"),
POST /v1/load_lora_adapter and /v1/unload_lora_adapter (runtime LoRA updating), and 404 for a model name it
does not serve. Sampling runs the tiny model with the loaded adapter, so log-probs match the trainer's
exactly when (and only when) the adapter really followed the trainer.
"""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class FakeVLLM:
    def __init__(self, model_dir: str | Path, base_name: str = "base") -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.base = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.models = {base_name: self.base}
        self.calls: list[tuple[str, dict]] = []  # (path, body) of every request
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeVLLM":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- what vLLM does ---------------------------------------------------------------------------------
    def load_adapter(self, name: str, path: str) -> tuple[int, str]:
        from peft import PeftModel

        if not Path(path, "adapter_config.json").is_file():
            return 400, json.dumps({"error": {"message": f"no adapter at {path}"}})
        self.models[name] = PeftModel.from_pretrained(copy.deepcopy(self.base), path).eval()
        return 200, f"Success: LoRA adapter '{name}' added successfully."

    def complete(self, body: dict) -> tuple[int, str]:
        from rl.policy import TextPolicy

        model = self.models.get(body.get("model", ""))
        if model is None:
            return 404, json.dumps({"error": {"message": f"The model `{body.get('model')}` does not exist."}})
        sampler = TextPolicy(
            model, self.tokenizer, float(body.get("temperature", 1.0)), int(body.get("max_tokens", 16))
        )
        gen, logp, _ = sampler.sample(sampler.encode(body["messages"]))
        ids, lps = gen.tolist(), logp.tolist()
        finish = "length"
        if ids and ids[-1] in sampler.stop_ids:  # vLLM reports a stop, and leaves the stop token out
            ids, lps, finish = ids[:-1], lps[:-1], "stop"
        as_ids = body.get("return_tokens_as_token_ids")
        content = (
            [
                {"token": f"token_id:{i}" if as_ids else self.tokenizer.decode([i]), "logprob": lp}
                for i, lp in zip(ids, lps)
            ]
            if body.get("logprobs")
            else None
        )
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": self.tokenizer.decode(ids)},
            "logprobs": {"content": content} if content is not None else None,
            "finish_reason": finish,
        }
        return 200, json.dumps({"object": "chat.completion", "choices": [choice]})

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake.lock:
                    fake.calls.append((self.path, body))
                    if self.path == "/v1/chat/completions":
                        status, text = fake.complete(body)
                    elif self.path == "/v1/load_lora_adapter":
                        status, text = fake.load_adapter(body["lora_name"], body["lora_path"])
                    elif self.path == "/v1/unload_lora_adapter":
                        fake.models.pop(body["lora_name"], None)
                        status, text = 200, f"Success: LoRA adapter '{body['lora_name']}' removed successfully."
                    else:
                        status, text = 404, json.dumps({"error": {"message": "Not Found"}})
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if text.startswith("{") else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

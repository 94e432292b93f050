#!/usr/bin/env bash
# Set up everything (scripts/setup.sh) and serve the web demo on http://127.0.0.1:7860 with the bundled
# corpus (assets/corpus) indexed and the embedded default models. Extra arguments go to `vimrag demo`,
# e.g. scripts/demo.sh --port 7861 --backend openai --base-url http://127.0.0.1:8000/v1 --model Qwen2.5-VL-7B
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 GRADIO_ANALYTICS_ENABLED=False TOKENIZERS_PARALLELISM=false
exec .venv/bin/vimrag demo "$@"

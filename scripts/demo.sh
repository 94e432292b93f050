#!/usr/bin/env bash
# Set up, index the bundled demo corpus (assets/corpus), search it, and ask the agent a question, all with the
# embedded default models. The Gradio web demo replaces this once it lands.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
idx=${VIMRAG_INDEX:-vimrag-index}
.venv/bin/vimrag index assets/corpus --index "$idx"
for q in "revenue in Europe 2025" "how long does the battery last after the upgrade" "pilot application deadline"; do
  echo; echo "== vimrag search \"$q\""
  .venv/bin/vimrag search "$q" --index "$idx" -k 3
done
echo; echo "== vimrag ask (the first run converts the embedded SmolLM2 weights once, about a minute)"
.venv/bin/vimrag ask "How many customers can join the Heron drone pilot?" --index "$idx" --graph memory_graph.png
echo "memory graph drawn to memory_graph.png"

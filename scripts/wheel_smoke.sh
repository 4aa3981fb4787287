#!/usr/bin/env bash
# Install a built wheel alone (the core: no extras, no torch) into a clean venv of the given Python and
# smoke-test it from outside the source tree: the Python API, the README Quick start's memory round trip,
# the console script and `python -m`, and `lmh demo` on the no-LLM path.
# Usage: bash scripts/wheel_smoke.sh PYTHON WHEEL [VENV]   (VENV default: .venv-wheel-<python version>)
set -euo pipefail
unset PYTHONPATH  # the installed wheel, not a source tree
python=$1
wheel=$(realpath "$2")
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv=$(realpath -m "${3:-.venv-wheel-$version}")
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q "$wheel"
for heavy in torch scipy sklearn pandas; do  # none of them is on the default path
  if "$venv/bin/python" -c "import $heavy" 2>/dev/null; then echo "the core install pulled $heavy"; exit 1; fi
done
echo "Python $version: core install $(du -sm "$venv" | cut -f1) MB"
smoke_dir=$(mktemp -d)
trap 'rm -rf "$smoke_dir"' EXIT
cd "$smoke_dir"
"$venv/bin/python" - <<'PY'
import pathlib

from llama_index.core.base.llms.types import ChatMessage

import llama_index_memory_hierarchy
from llama_index_memory_hierarchy import HierarchicalMemory

assert "site-packages" in llama_index_memory_hierarchy.__file__, llama_index_memory_hierarchy.__file__
memory = HierarchicalMemory.from_defaults(user_id="smoke", session_id="s1", persist_dir="data")
memory.put(ChatMessage(role="user", content="My favourite tea is genmaicha."))
memory.close()
memory = HierarchicalMemory.from_defaults(user_id="smoke", session_id="s2", persist_dir="data")
assert "genmaicha" in memory.get(input="Which tea do I like?")[0].content
label = memory.context.embeddings.label
memory.close()
assert label == "multilingual-e5-small-q4", label  # the bundled default, without torch
assert pathlib.Path("data").is_dir()

# the core's own replacements of SciPy-based libraries, and the extras' errors
from PIL import Image

from llama_index_memory_hierarchy.embeddings import HashingEmbedding
from llama_index_memory_hierarchy.knowledge.loaders import DocumentLoadError, load_file
from llama_index_memory_hierarchy.perception.media import image_phash

assert len(HashingEmbedding(dim=16).get_text_embedding("green tea")) == 16
assert image_phash(Image.new("RGB", (40, 30), (200, 120, 40))) == "8000000000000000"
pathlib.Path("report.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
try:
    load_file("report.pdf")
except DocumentLoadError as exc:
    assert "llama-index-memory-hierarchy[docs]" in str(exc), exc
else:
    raise AssertionError("a PDF was read without the docs extra")
print("wheel smoke test passed")
PY
lmh="$venv/bin/lmh"
"$lmh" --version
"$lmh" add "My favourite tea is genmaicha." --tier episodic --user smoke --dir cli-data --json >/dev/null
"$lmh" search "which tea do I like" --user smoke --dir cli-data --json > search.json
grep -q genmaicha search.json
"$lmh" stats --user smoke --dir cli-data
"$venv/bin/python" -m llama_index_memory_hierarchy timeline --last 5 --user smoke --dir cli-data
if "$lmh" search tea --dir no-such-folder 2>/dev/null; then echo "lmh: expected exit 1"; exit 1; fi
"$lmh" demo --dir demo-data --json > demo.json # no extras in this venv: the no-LLM path
"$venv/bin/python" -c "import json; d = json.load(open('demo.json')); assert d['tiers']['episodic']['count']"
echo "wheel CLI smoke test passed on Python $version"

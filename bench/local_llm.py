"""Figures for the offline default LLM (SmolLM2-135M via xllamacpp): load time, speed, sample outputs.

Run: ``python bench/local_llm.py [--threads N]``. Prints the load time, prompt and generation
tokens/s, and the model's answers to the three tasks the package gives it: query rephrasings
(MQE), a hypothetical answer passage (HyDE) and JSON triplet extraction (schema-constrained).
"""

from __future__ import annotations

import argparse
import json
import time

from llama_index.core.llms import ChatMessage

from llama_index_memory_hierarchy.llms.local import LocalLLM

QUESTION = "How does the episodic memory tier decide which memories to forget?"
SENTENCES = [
    "Marie Curie, who was born in Warsaw, won the Nobel Prize in Physics in 1903 with Pierre Curie.",
    "Bob moved to Paris in 2020 and now teaches maths.",
    "The user prefers green tea over coffee.",
]
_TEXT = {"type": "string", "minLength": 1, "maxLength": 40}
TRIPLETS = {
    "type": "object",
    "properties": {
        "triplets": {
            "type": "array",
            "minItems": 1,
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {"subject": _TEXT, "relation": _TEXT, "object": _TEXT},
                "required": ["subject", "relation", "object"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["triplets"],
    "additionalProperties": False,
}
EXAMPLE = [
    ChatMessage(role="system", content="Extract knowledge-graph triplets from the sentence as JSON."),
    ChatMessage(role="user", content="Sentence: Alice works at Acme in Berlin."),
    ChatMessage(
        role="assistant",
        content=json.dumps(
            {
                "triplets": [
                    {"subject": "Alice", "relation": "works at", "object": "Acme"},
                    {"subject": "Acme", "relation": "located in", "object": "Berlin"},
                ]
            }
        ),
    ),
]


def _speed(raw: dict) -> str:
    t = raw.get("timings", {})
    return (
        f"{t.get('predicted_n', 0)} tokens, gen {t.get('predicted_per_second', 0):.0f} tok/s, "
        f"prompt {t.get('prompt_per_second', 0):.0f} tok/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    extra = {} if args.threads is None else {"n_threads": args.threads}
    llm = LocalLLM.from_defaults(max_tokens=160, **extra)
    started = time.perf_counter()
    llm.load()
    print(f"model {llm.model_name}, {llm.n_threads} threads, load {time.perf_counter() - started:.2f} s")

    mqe = [
        ChatMessage(
            role="user",
            content="Rephrase the question in 3 different ways, one per line.\n"
            "Question: What is the boiling point of water at sea level?",
        ),
        ChatMessage(
            role="assistant",
            content="At what temperature does water boil at sea level?\nHow hot must water get to boil at sea "
            "level?\nWhat is water's boiling temperature at sea-level pressure?",
        ),
        ChatMessage(
            role="user", content=f"Rephrase the question in 3 different ways, one per line.\nQuestion: {QUESTION}"
        ),
    ]
    reply = llm.chat(mqe)
    print(f"\n--- MQE (few-shot) [{_speed(reply.raw)}]\n{reply.message.content}")

    hyde = llm.complete(
        f"Write a short passage (2-3 sentences) that answers the question.\nQuestion: {QUESTION}", max_tokens=80
    )
    print(f"\n--- HyDE [{_speed(hyde.raw)}]\n{hyde.text}")

    for sentence in SENTENCES:
        reply = llm.chat([*EXAMPLE, ChatMessage(role="user", content=f"Sentence: {sentence}")], json_schema=TRIPLETS)
        try:
            parsed = json.loads(reply.message.content)
            verdict = f"valid JSON, {len(parsed['triplets'])} triplets"
        except ValueError:
            verdict = f"INVALID JSON (finish_reason={reply.additional_kwargs['finish_reason']})"
        print(f"\n--- extraction [{_speed(reply.raw)}; {verdict}]\n{sentence}\n{reply.message.content}")


if __name__ == "__main__":
    main()

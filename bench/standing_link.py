"""Could a semantic link bring standing facts in only for the requests they bear on? Measured, not assumed.

Usage (from the repository root)::

    python bench/standing_link.py               # the default embedding model
    python bench/standing_link.py --model NAME  # another one (resolve_embed_model)

Standing facts (diet, allergies, health, accessibility, language, time zone, close people) must reach
the LLM for "what should I cook tonight?", which shares no word with "is vegetarian". Two designs:
always on (within a small budget, what ``get()`` does: they rank first in the profile), or a calibrated
link, the cosine of the request to the fact, with a threshold. The pairs below are invented for this
check (English and Chinese): each request is labelled with the facts it bears on; every other pair is
unrelated. Printed: ROC AUC of the cosine over the pairs, and the recall of bearing pairs at thresholds
that let through at most 5% / 10% / 20% of the unrelated ones. A link that misses a bearing pair
drops an allergy from a cooking answer; always on costs the standing lines' tokens on every request.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

from llama_index_memory_hierarchy.embeddings import resolve_embed_model
from llama_index_memory_hierarchy.text import count_tokens

logger = logging.getLogger("bench.standing_link")

FACTS = {
    "en": [
        "is vegetarian", "is allergic to peanuts", "is lactose intolerant", "has type 1 diabetes",
        "uses a wheelchair", "time zone is UTC+9", "prefers answers in Spanish", "Mia is the user's daughter",
    ],
    "zh": [
        "是素食者", "对花生过敏", "乳糖不耐受", "有糖尿病", "坐轮椅", "时区是东八区", "希望用西班牙语回答",
        "米娅是用户的女儿",
    ],
}  # fmt: skip
#: (request, indexes of the facts it bears on); a request bearing on none is unrelated to every fact.
REQUESTS = {
    "en": [
        ("What should I cook tonight?", {0, 1, 2, 3}),
        ("Suggest a dessert for the weekend.", {0, 1, 2, 3}),
        ("Find me a restaurant for Friday.", {0, 1, 2, 4}),
        ("Plan a day out in Lisbon.", {4, 6}),
        ("When should I call the team in Berlin?", {5}),
        ("Set a reminder for tomorrow morning.", {5}),
        ("What gift should I buy for her birthday?", {7}),
        ("Which snacks can I pack for the flight?", {0, 1, 2, 3}),
        ("What's the capital of Peru?", set()),
        ("Explain how a TCP handshake works.", set()),
        ("Why does my Python loop never end?", set()),
        ("Who painted the Night Watch?", set()),
        ("Summarise the plot of a heist film.", set()),
        ("How many moons does Jupiter have?", set()),
    ],
    "zh": [
        ("今晚做什么菜？", {0, 1, 2, 3}),
        ("周末做点什么甜点？", {0, 1, 2, 3}),
        ("帮我找一家周五吃饭的餐厅。", {0, 1, 2, 4}),
        ("帮我安排一天的里斯本行程。", {4, 6}),
        ("什么时候给柏林的同事打电话？", {5}),
        ("明早提醒我开会。", {5}),
        ("她生日送什么礼物好？", {7}),
        ("坐飞机带什么零食？", {0, 1, 2, 3}),
        ("秘鲁的首都是哪里？", set()),
        ("解释一下TCP三次握手。", set()),
        ("我的Python循环为什么停不下来？", set()),
        ("《夜巡》是谁画的？", set()),
        ("木星有几颗卫星？", set()),
        ("讲讲一部盗窃电影的情节。", set()),
    ],
}  # fmt: skip


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """Probability that a bearing pair scores above an unrelated one (ties count half)."""
    wins = (positive[:, None] > negative[None, :]).sum() + 0.5 * (positive[:, None] == negative[None, :]).sum()
    return float(wins / (len(positive) * len(negative)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="default")
    args = parser.parse_args()
    model = resolve_embed_model(args.model)
    print(f"model {getattr(model, 'model_name', type(model).__name__)}")
    for language, facts in FACTS.items():
        requests = REQUESTS[language]
        fact_vectors = np.array(model.get_text_embedding_batch(facts))
        request_vectors = np.array([model.get_query_embedding(text) for text, _ in requests])
        fact_vectors /= np.linalg.norm(fact_vectors, axis=1, keepdims=True)
        request_vectors /= np.linalg.norm(request_vectors, axis=1, keepdims=True)
        scores = request_vectors @ fact_vectors.T
        bearing = np.array([[j in bears for j in range(len(facts))] for _, bears in requests])
        positive, negative = scores[bearing], scores[~bearing]
        line = (
            f"{language}: {len(positive)} bearing / {len(negative)} unrelated pairs, AUC {auc(positive, negative):.3f}"
        )
        for allowed in (0.05, 0.10, 0.20):
            threshold = float(np.quantile(negative, 1 - allowed))
            line += f"; recall {np.mean(positive > threshold):.2f} at {allowed:.0%} unrelated (cos > {threshold:.3f})"
        print(line)
        cook = scores[0]
        print(f"  {requests[0][0]!r}: " + ", ".join(f"{facts[j]} {cook[j]:.3f}" for j in np.argsort(-cook)))
        always = sum(count_tokens(f'- fact (from the user, since 2026-01-01): "{fact}"') + 1 for fact in facts)
        print(f"  always on: {always} tokens for these {len(facts)} standing facts on every request")


if __name__ == "__main__":
    main()

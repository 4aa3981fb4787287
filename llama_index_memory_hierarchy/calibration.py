"""Similarity on one scale whatever the embedding model: cosines calibrated by the model's own unrelated pairs.

Embedding models place unrelated texts at very different cosines: about 0.03 for all-MiniLM-L6-v2,
about 0.77 (English) and 0.85 (Chinese) for multilingual-e5-small. A threshold written as a raw
cosine ("near-duplicate at 0.95", "same entity at 0.88") therefore means something else for each
model. Here every threshold and every dense signal reads a *calibrated* similarity instead:

    calibrated = (cosine - baseline) / (1 - baseline)

where ``baseline`` is the mean cosine the model gives to unrelated pairs of a fixed set of neutral
sentences (:data:`NEUTRAL_EN`, :data:`NEUTRAL_ZH`: parallel translations on unrelated everyday
topics; entity names against :data:`NAMES_EN`, :data:`NAMES_ZH`). Unrelated texts land near 0,
identical texts at 1, so one threshold serves every model. The baseline is measured per language
pair (a model can read one script more densely than another) and per role (stored text against
stored text, a query against stored text for models with query and passage roles such as E5, and
name against name). It is computed once per model at first use (some fifty texts and two dozen
queries) and cached by the embedding space id (model label and dimension), the id the store
records with every vector.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from llama_index_memory_hierarchy.language import detect_language

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.embeddings import EmbeddingService

logger = logging.getLogger(__name__)

#: Neutral sentences: everyday topics that share no subject, so every pair of two is unrelated.
NEUTRAL_EN = (
    "The train to the coast leaves at seven in the morning.",
    "She planted tomatoes and basil in the garden last spring.",
    "My laptop battery drains quickly when I watch videos.",
    "The museum opens a new exhibition about ancient maps.",
    "He runs five kilometres along the river every weekend.",
    "Our team finally fixed the bug in the payment service.",
    "The soup needs more salt and a little lemon juice.",
    "I am reading a novel about a detective in Tokyo.",
    "The kids built a snowman in front of the school.",
    "We are saving money to buy a house next year.",
    "The dentist moved my appointment to Thursday afternoon.",
    "A storm knocked down the old oak tree by the lake.",
)
#: The same sentences in Chinese (the i-th of both lists say the same thing).
NEUTRAL_ZH = (
    "去海边的火车早上七点出发。",
    "她去年春天在花园里种了西红柿和罗勒。",
    "我看视频的时候笔记本电池掉得很快。",
    "博物馆开了一个关于古代地图的新展览。",
    "他每个周末沿着河边跑五公里。",
    "我们团队终于修好了支付服务里的错误。",
    "这个汤需要再加点盐和一点柠檬汁。",
    "我在读一本关于东京侦探的小说。",
    "孩子们在学校门口堆了一个雪人。",
    "我们在攒钱准备明年买房子。",
    "牙医把我的预约改到了星期四下午。",
    "一场暴风雨吹倒了湖边那棵老橡树。",
)
#: Neutral names: short, unrelated entity names (people, places, things). Short texts sit closer in
#: every model than sentences do, so entity names are calibrated on their own baseline.
NAMES_EN = (
    "Paris",
    "guitar",
    "Maria",
    "dentist",
    "Tuesday",
    "Google",
    "coffee",
    "Mount Fuji",
    "Bob",
    "hospital",
    "chess",
    "Berlin",
)
#: The same names in Chinese.
NAMES_ZH = ("巴黎", "吉他", "玛丽亚", "牙医", "星期二", "谷歌", "咖啡", "富士山", "鲍勃", "医院", "国际象棋", "柏林")
#: The calibration groups: texts are compared as Chinese-script or Latin-script.
GROUPS = ("en", "zh")
#: Least room left above a baseline: a degenerate model (every text on one vector) cannot divide by ~0.
_MIN_SPAN = 0.05


def group_of(text: str) -> str:
    """The calibration group of a text: ``"zh"`` for Chinese or Japanese script, else ``"en"``."""
    return "zh" if detect_language(text) in ("zh", "ja") else "en"


Role = Literal["passage", "query", "name"]


@dataclass(frozen=True)
class SimilarityCalibration:
    """Unrelated-pair baselines of one model by role and ``(group, group)``.

    Roles: ``"passage"`` (a stored text against a stored text), ``"query"`` (a query, in the
    model's query role, against a stored text) and ``"name"`` (an entity name against another).
    """

    space: str
    baselines: dict[tuple[Role, str, str], float] = field(default_factory=dict)
    #: The highest cosine of an unrelated pair, by the same keys: what no unrelated text exceeded.
    tops: dict[tuple[Role, str, str], float] = field(default_factory=dict)
    #: The neutral sentences' vectors (stored-text role) by group and form (:func:`aneutral`): what a query is
    #: unrelated to, written as the memories it is compared with are written (``"Ann: ..."`` for a turn of Ann's).
    neutral: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)

    def baseline(self, a: str = "en", b: str = "en", *, role: Role = "passage") -> float:
        """The mean cosine of unrelated texts of groups ``a`` and ``b`` (``a`` the query's for ``"query"``)."""
        return self.baselines.get((role, a, b), self.baselines.get((role, b, a), 0.0))

    def calibrate(self, cosine: Any, a: str = "en", b: str = "en", *, role: Role = "passage") -> Any:
        """``cosine`` (a float or an array) on the calibrated scale: 0 for unrelated texts, 1 for identical ones.

        Not clipped: texts further apart than unrelated ones read below 0.
        """
        base = self.baseline(a, b, role=role)
        return (cosine - base) / max(1.0 - base, _MIN_SPAN)

    def unrelated_top(self, a: str = "en", b: str = "en", *, role: Role = "passage") -> float:
        """The calibrated similarity of the most similar unrelated pair: above it, a text is closer to the query
        than any unrelated text of the calibration set was (0 when not measured)."""
        top = self.tops.get((role, a, b), self.tops.get((role, b, a)))
        return 0.0 if top is None else float(self.calibrate(top, a, b, role=role))

    def unrelated_to(self, query_vector: np.ndarray, query_group: str, group: str, form: str = "") -> float:
        """The calibrated similarity of ``query_vector`` (query role) to the most similar neutral sentence of
        ``group`` written in ``form`` (:func:`aneutral`): a bar of this query's own, since a model may place a
        query (a nonsense one above all) near every text alike (``-inf`` when not measured)."""
        neutral = self.neutral.get((group, form))
        if neutral is None or neutral.shape[1:] != query_vector.shape:
            return float("-inf")
        return float(self.calibrate(float((neutral @ query_vector).max()), query_group, group, role="query"))

    def cosine_at(self, calibrated: float, a: str = "en", b: str = "en", *, role: Role = "passage") -> float:
        """The raw cosine that reads as ``calibrated``: a threshold on the model's own vectors."""
        base = self.baseline(a, b, role=role)
        return base + calibrated * max(1.0 - base, _MIN_SPAN)


#: No calibration: cosines read as they are (what tests of pure functions use).
IDENTITY = SimilarityCalibration(space="identity")

_cache: dict[str, SimilarityCalibration] = {}


def _unrelated(sims: np.ndarray) -> np.ndarray:
    """The off-diagonal cells: pair i with j != i (the diagonal holds translations or the text itself)."""
    return sims[~np.eye(sims.shape[0], dtype=bool)]


async def acalibration(embeddings: EmbeddingService) -> SimilarityCalibration:
    """The calibration of ``embeddings``' model: measured at first use, then cached by its space id.

    Two first searches at once may both measure it: the same figures, so no lock is needed.
    """
    await embeddings.aprobe()
    space = embeddings.space
    cached = _cache.get(space)
    if cached is not None:
        return cached
    texts = {"en": NEUTRAL_EN, "zh": NEUTRAL_ZH}
    names = {"en": NAMES_EN, "zh": NAMES_ZH}
    passages = {g: await embeddings.aembed_texts(list(texts[g]), field="calibration") for g in GROUPS}
    queries: dict[str, np.ndarray] = {}
    for g in GROUPS:  # a loop, not a dict comprehension: Python 3.10 refuses an await nested in two comprehensions
        queries[g] = np.stack([await embeddings.aembed_query(t, field="calibration") for t in texts[g]])
    entities = {g: await embeddings.aembed_texts(list(names[g]), field="calibration") for g in GROUPS}
    baselines: dict[tuple[Role, str, str], float] = {}
    tops: dict[tuple[Role, str, str], float] = {}
    for a in GROUPS:
        for b in GROUPS:
            pairs = {
                "passage": passages[a] @ passages[b].T,
                "query": queries[a] @ passages[b].T,
                "name": entities[a] @ entities[b].T,
            }
            for role, sims in pairs.items():
                unrelated = _unrelated(sims)
                baselines[role, a, b] = float(unrelated.mean())
                tops[role, a, b] = float(unrelated.max())
    neutral = {(g, ""): vectors for g, vectors in passages.items()}
    calibration = SimilarityCalibration(space=space, baselines=baselines, tops=tops, neutral=neutral)
    logger.info(
        "similarity calibration of %s (mean cosine of unrelated pairs): %s",
        space,
        {"/".join(key): round(value, 3) for key, value in baselines.items()},
    )
    _cache[space] = calibration
    return calibration


async def aneutral(
    embeddings: EmbeddingService, calibration: SimilarityCalibration, form: str, write: Callable[[str], str]
) -> None:
    """Embed the neutral sentences as ``write`` writes a memory of ``form`` (say, a turn of one speaker), once per
    model and form, into ``calibration.neutral``: a memory's words around its text (a speaker's name) bring every
    text of that form nearer to any query, so its bar is measured on texts written alike."""
    if all((g, form) in calibration.neutral for g in GROUPS):
        return
    texts = {"en": NEUTRAL_EN, "zh": NEUTRAL_ZH}
    for g in GROUPS:
        calibration.neutral[g, form] = await embeddings.aembed_texts([write(t) for t in texts[g]], field="calibration")

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

The relevance floor reads a second measure (:meth:`SimilarityCalibration.relevance`): how far one cosine
stands above those of unrelated texts *for this query and this memory*, against a larger background
(:data:`BACKGROUND_EN`, :data:`BACKGROUND_ZH`), measured only when the floor first runs (:func:`abackground`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from threadpoolctl import ThreadpoolController

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
#: The relevance floor's background (:func:`abackground`): more everyday statements of varied length, none
#: about another's subject, what a query and a memory are each compared with to learn how near *unrelated* texts
#: sit to them.
BACKGROUND_EN = (
    "The bus was late again this morning.",
    "I bought a new pair of running shoes.",
    "My grandmother bakes bread every Sunday.",
    "The printer on the third floor is broken.",
    "We watched a documentary about whales.",
    "He forgot his umbrella at the cinema.",
    "The rent goes up in January.",
    "She is learning to play the violin.",
    "Our neighbours adopted a small dog.",
    "I prefer window seats on long flights.",
    "The bridge is closed for repairs until May.",
    "My brother works night shifts at a hospital.",
    "The cake needs forty minutes in the oven.",
    "They got married on a beach in Greece.",
    "I lost my keys somewhere in the park.",
    "The new phone has a better camera.",
    "We painted the kitchen light green.",
    "Her flight to Chicago was cancelled.",
    "I usually go to bed around midnight.",
    "The library fines are fifty cents a day.",
    "He collects old stamps from Africa.",
    "The heating in our flat stopped working.",
    "I started a course on accounting.",
    "My daughter scored a goal yesterday.",
    "The concert tickets sold out in an hour.",
    "We are thinking about getting solar panels.",
    "I can't stand loud music in restaurants.",
    "The plumber comes on Monday at nine.",
    "She knitted a scarf for her nephew.",
    "Our car failed its inspection.",
    "I drink green tea in the afternoon.",
    "The hiking trail was muddy after the rain.",
    "He is allergic to cats.",
    "My cousin opened a bicycle shop.",
    "The meeting was moved to the big room.",
    "I want to visit Iceland someday.",
    "Tomatoes are cheap at the market this week.",
    "The baby finally sleeps through the night.",
    "I need to renew my passport.",
    "The chess club meets on Wednesdays.",
    "Nice weather today.",
    "I love spicy food.",
    "Call me after lunch.",
    "The vase fell off the shelf.",
    "We ran out of milk.",
    "My knee hurts when I climb stairs.",
)
#: The same statements in Chinese.
BACKGROUND_ZH = (
    "今天早上公交车又晚点了。",
    "我买了一双新跑鞋。",
    "我奶奶每个星期天都烤面包。",
    "三楼的打印机坏了。",
    "我们看了一部关于鲸鱼的纪录片。",
    "他把雨伞忘在电影院了。",
    "一月份房租要涨。",
    "她在学拉小提琴。",
    "我们的邻居收养了一只小狗。",
    "长途飞行我喜欢靠窗的座位。",
    "这座桥在维修，五月前都不通。",
    "我哥哥在医院上夜班。",
    "这个蛋糕要在烤箱里烤四十分钟。",
    "他们在希腊的海滩上结了婚。",
    "我在公园里把钥匙弄丢了。",
    "新手机的相机更好。",
    "我们把厨房刷成了浅绿色。",
    "她飞芝加哥的航班被取消了。",
    "我一般半夜十二点左右睡觉。",
    "图书馆的罚款是每天五毛钱。",
    "他收集非洲的旧邮票。",
    "我们公寓的暖气坏了。",
    "我开始上一门会计课。",
    "我女儿昨天进了一个球。",
    "音乐会的票一个小时就卖完了。",
    "我们在考虑装太阳能板。",
    "我受不了餐馆里放很吵的音乐。",
    "水管工星期一早上九点来。",
    "她给外甥织了一条围巾。",
    "我们的车年检没通过。",
    "我下午喝绿茶。",
    "下过雨以后登山小路很泥泞。",
    "他对猫过敏。",
    "我表哥开了一家自行车店。",
    "会议改到大会议室了。",
    "我想有一天去冰岛。",
    "这周市场上的西红柿很便宜。",
    "宝宝终于能睡整夜了。",
    "我需要更新护照。",
    "象棋俱乐部每周三聚会。",
    "今天天气不错。",
    "我喜欢吃辣。",
    "午饭后给我打电话。",
    "花瓶从架子上掉下来了。",
    "我们的牛奶喝完了。",
    "我爬楼梯的时候膝盖疼。",
)
#: The calibration groups: texts are compared as Chinese-script or Latin-script.
GROUPS = ("en", "zh")
#: Least room left above a baseline: a degenerate model (every text on one vector) cannot divide by ~0.
_MIN_SPAN = 0.05
#: Least spread of cosines a relevance divides by (a degenerate model).
_MIN_STD = 1e-4


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()  # finds the loaded BLAS libraries once (a few ms: not at import)


def _one_blas_thread() -> Any:
    """BLAS on the calling thread alone while the context is open.

    Why: the background products of :meth:`SimilarityCalibration.relevance` are small (a hundred candidates by
    46 statements), and OpenBLAS ran them on every core, whose threads then spun: an ``aget`` at 10k memories took
    35 ms of CPU instead of 16 ms, doubling its wall time on a 2-core machine (``bench/latency.py``).
    """
    return _blas().limit(limits=1, user_api="blas")


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
    #: The floor's background vectors (:func:`abackground`): its statements in the stored-text role by group and
    #: form (``"Ann: ..."`` for a turn of Ann's), and in the query role by group.
    background: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    background_queries: dict[str, np.ndarray] = field(default_factory=dict)
    #: The mean and standard deviation of :meth:`relevance` over unrelated background pairs, by
    #: ``(query group, memory group)``: what a memory's standing (``retrieval.floor.standing_of``) is measured against.
    floor_nulls: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    def baseline(self, a: str = "en", b: str = "en", *, role: Role = "passage") -> float:
        """The mean cosine of unrelated texts of groups ``a`` and ``b`` (``a`` the query's for ``"query"``)."""
        return self.baselines.get((role, a, b), self.baselines.get((role, b, a), 0.0))

    def calibrate(self, cosine: Any, a: str = "en", b: str = "en", *, role: Role = "passage") -> Any:
        """``cosine`` (a float or an array) on the calibrated scale: 0 for unrelated texts, 1 for identical ones.

        Not clipped: texts further apart than unrelated ones read below 0.
        """
        base = self.baseline(a, b, role=role)
        return (cosine - base) / max(1.0 - base, _MIN_SPAN)

    def relevance(
        self, query_vector: np.ndarray, query_group: str, vectors: np.ndarray, group: str, form: str = ""
    ) -> np.ndarray | None:
        """How far above unrelated texts each of ``vectors`` (memories of ``group`` written in ``form``) sits for
        the query, in standard deviations of unrelated pairs: 0 for a memory as near as unrelated texts are, the
        relevance floor's bar near 3 (``retrieval.floor``). ``None`` when the background is not measured.

        The mean of two standard scores of the cosine (symmetric score normalisation, as speaker verification
        does it): against the query's cosines to the background statements written as the memory is (a
        nonsense query sits near every text alike, so only what stands out from its own spread counts), and
        against the memory's cosines to the background queries (a short memory sits near every query alike).
        """
        passages = self.background.get((group, form))
        queries = self.background_queries.get(query_group)
        if passages is None or queries is None or passages.shape[1:] != query_vector.shape:
            return None
        with _one_blas_thread():
            cosine = vectors @ query_vector
            of_query = passages @ query_vector
            of_memory = vectors @ queries.T
        by_query = (cosine - of_query.mean()) / max(float(of_query.std()), _MIN_STD)
        by_memory = (cosine - of_memory.mean(axis=1)) / np.maximum(of_memory.std(axis=1), _MIN_STD)
        return 0.5 * (by_query + by_memory)

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
    for a in GROUPS:
        for b in GROUPS:
            pairs = {
                "passage": passages[a] @ passages[b].T,
                "query": queries[a] @ passages[b].T,
                "name": entities[a] @ entities[b].T,
            }
            for role, sims in pairs.items():
                baselines[role, a, b] = float(_unrelated(sims).mean())
    calibration = SimilarityCalibration(space=space, baselines=baselines)
    logger.info(
        "similarity calibration of %s (mean cosine of unrelated pairs): %s",
        space,
        {"/".join(key): round(value, 3) for key, value in baselines.items()},
    )
    _cache[space] = calibration
    return calibration


async def abackground(
    embeddings: EmbeddingService, calibration: SimilarityCalibration, form: str, write: Callable[[str], str]
) -> None:
    """Measure the relevance floor's background for memories of ``form`` (``write`` writes a memory of that form,
    say a turn of one speaker), once per model and form, into ``calibration``: the background statements in that
    form, and (first) the background queries and the null of the floor's bars (:attr:`floor_nulls`).

    A memory's words around its text (a speaker's name) bring every text of that form nearer to any query, so the
    query side is measured on texts written alike. The null of ``(a, b)`` is
    :meth:`~SimilarityCalibration.relevance` over every unrelated pair of background query ``i`` of ``a`` and
    statement ``j != i`` of ``b``, each side normalised by the other statements (leaving both out).
    """
    texts = {"en": BACKGROUND_EN, "zh": BACKGROUND_ZH}
    if not calibration.background_queries:
        for g in GROUPS:
            calibration.background_queries[g] = np.stack(
                [await embeddings.aembed_query(t, field="calibration") for t in texts[g]]
            )
    for g in GROUPS:
        if (g, form) not in calibration.background:
            vectors = await embeddings.aembed_texts([write(t) for t in texts[g]], field="calibration")
            calibration.background[g, form] = np.asarray(vectors)
    if not calibration.floor_nulls and form == "":
        for a in GROUPS:
            for b in GROUPS:
                null = _null_relevance(calibration.background_queries[a], calibration.background[b, ""])
                calibration.floor_nulls[a, b] = (float(null.mean()), float(null.std()))
        logger.info("relevance floor nulls of %s (mean, sd): %s", calibration.space, calibration.floor_nulls)


def _null_relevance(queries: np.ndarray, passages: np.ndarray) -> np.ndarray:
    """:meth:`SimilarityCalibration.relevance` of every pair of query ``i`` and passage ``j != i`` (unrelated),
    each side normalised by the background without ``i`` and ``j``."""
    sims = queries @ passages.T  # [i, j]: query i against statement j
    n = sims.shape[0]
    out = []
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            keep = np.ones(n, dtype=bool)
            keep[[i, j]] = False
            of_query, of_memory = sims[i, keep], sims[keep, j]
            by_query = (sims[i, j] - of_query.mean()) / max(float(of_query.std()), _MIN_STD)
            by_memory = (sims[i, j] - of_memory.mean()) / max(float(of_memory.std()), _MIN_STD)
            out.append(0.5 * (by_query + by_memory))
    return np.array(out)

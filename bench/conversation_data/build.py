"""Build the conversation benchmark (``en.json``, ``zh.json``) from the hand-written blocks beside this script.

Usage (from the repository root): ``python bench/conversation_data/build.py``

Per language, four invented users each hold an archive of 105 dated past events (things they told the
assistant in earlier sessions: the 30 topic events, a distractor close in words to each, and 45 everyday
events about none of them). Each user has 30 dialogues, one per topic: an optional greeting, a turn about
the topic, an assistant reply and a last turn about it; neither turn names the event, and the event's id is
the one marked relevant. Which two of a topic's five turns a user gets rotates over the users, so the 120
dialogues of a language use every turn. Deterministic (seeded): rebuilding gives the same files.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType

import topics_en
import topics_zh

HERE = Path(__file__).resolve().parent
#: (earlier turn, last turn) indices into a topic's five turns, one per user in turn.
PAIRS = [(0, 1), (2, 3), (1, 4), (3, 0)]
START = datetime(2025, 6, 1, 9, 0)


def build(language: str, blocks: ModuleType, seed: int) -> dict:
    rng = random.Random(seed)
    users = []
    for u, names in enumerate(blocks.USERS):
        fill = {k: v for k, v in names.items() if k != "user"}
        events = []
        for t, (category, event, distractor, _) in enumerate(blocks.TOPICS):
            events.append({"id": f"t{t:02d}", "kind": "topic", "category": category, "text": event.format(**fill)})
            events.append(
                {"id": f"d{t:02d}", "kind": "distractor", "category": category, "text": distractor.format(**fill)}
            )
        for f, text in enumerate(blocks.FILLERS):
            events.append({"id": f"f{f:02d}", "kind": "filler", "category": "everyday", "text": text.format(**fill)})
        rng.shuffle(events)
        days = sorted(rng.sample(range(360), len(events)))
        for day, event in zip(days, events, strict=True):
            moment = START + timedelta(days=day, hours=rng.randrange(12))
            event["date"] = moment.isoformat()
        dialogues = []
        for t, (_, _, _, turns) in enumerate(blocks.TOPICS):
            first, last = PAIRS[(u + t) % len(PAIRS)]
            dialogue = []
            if rng.random() < 0.5:
                dialogue += [
                    {"role": "user", "text": rng.choice(blocks.OPENERS)},
                    {"role": "assistant", "text": rng.choice(blocks.GREETING_REPLIES)},
                ]
            dialogue += [
                {"role": "user", "text": turns[first].format(**fill)},
                {"role": "assistant", "text": rng.choice(blocks.REPLIES)},
                {"role": "user", "text": turns[last].format(**fill)},
            ]
            dialogues.append({"id": f"{names['user']}-t{t:02d}", "turns": dialogue, "relevant": [f"t{t:02d}"]})
        users.append({"user": names["user"], "events": events, "dialogues": dialogues})
    return {"language": language, "users": users}


def main() -> None:
    for language, blocks, seed in (("en", topics_en, 37), ("zh", topics_zh, 38)):
        data = build(language, blocks, seed)
        path = HERE / f"{language}.json"
        path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"{path.name}: {len(data['users'])} users, {sum(len(u['dialogues']) for u in data['users'])} dialogues")


if __name__ == "__main__":
    main()

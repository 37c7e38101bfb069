"""embedding_texts: an episode's turn with its session neighbours, deterministic from the input."""

from __future__ import annotations

import pytest

from links_helpers import at, memories
from crosstier.transforms.embed.text import embedding_texts

FRAME = memories(
    {"id": "t2", "tier": "episodic", "content": "yes, the staging one", "session_id": "s", "timestamp": at(1)},
    {"id": "t1", "tier": "episodic", "content": "which database?", "session_id": "s", "timestamp": at(0)},
    {"id": "t3", "tier": "episodic", "content": "done", "session_id": "s", "timestamp": at(2)},
    {"id": "o1", "tier": "episodic", "content": "other session", "session_id": "x", "timestamp": at(1)},
    {"id": "f", "tier": "semantic", "content": "a fact", "session_id": "s"},
)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (0, 0, {"t2": "yes, the staging one", "t1": "which database?", "f": "a fact"}),
        (1, 0, {"t2": "yes, the staging one\nwhich database?", "t1": "which database?", "t3": "done\nyes, the staging one"}),
        (1, 1, {"t2": "yes, the staging one\nwhich database? | done", "o1": "other session", "f": "a fact"}),
    ],
)
def test_turns_carry_their_session_neighbours(before, after, expected):
    texts = dict(embedding_texts(FRAME, before=before, after=after).rows())
    assert list(texts) == ["t2", "t1", "t3", "o1", "f"]  # input row order kept
    for mem_id, text in expected.items():
        assert texts[mem_id] == text


def test_texts_do_not_depend_on_row_order():
    forward = dict(embedding_texts(FRAME).rows())
    backward = dict(embedding_texts(FRAME.reverse()).rows())
    assert forward == backward

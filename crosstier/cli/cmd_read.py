"""The read commands: correlations, graph, discover, link, retrieve, report, sql.

Top level imports nothing heavy; each command imports only the retrieval module it calls
(`ctc correlations` never loads polars, Prefect or torch). Errors the caller can fix print
one line on stderr and exit with 2."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

TIER_CHOICES = ("episodic", "semantic", "procedural")


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--as", dest="principal", metavar="PRINCIPAL", help="read as this principal: memories it may not read stay invisible")
    if name != "sql":
        parser.add_argument("--namespace", help="only this namespace (default: every namespace the principal may read)")
    if name == "correlations":
        parser.add_argument("memory_id", metavar="ID")
        parser.add_argument("--max-results", type=int, default=10, help="at most this many (default 10); total_found counts all")
        parser.add_argument("--min-score", type=float, help="only links scoring at least this")
        parser.add_argument("--type", dest="types", action="append", metavar="TYPE", help="only this relationship type, seen from ID (repeatable)")
    elif name == "graph":
        parser.add_argument("memory_ids", metavar="ID", nargs="+")
        parser.add_argument("--depth", type=int, default=2, help="expansion depth (default 2)")
        parser.add_argument("--tier", dest="tiers", action="append", choices=TIER_CHOICES, help="only memories of this tier beyond the seeds (repeatable)")
        parser.add_argument("--min-score", type=float, help="only links scoring at least this")
        parser.add_argument("--type", dest="types", action="append", metavar="TYPE", help="only this relationship type (repeatable)")
        parser.add_argument("--max-nodes", type=int, default=2000, help="stop adding nodes past this many (default 2000)")
    elif name == "discover":
        parser.add_argument("content", help="the new memory's text")
        parser.add_argument("--tier", required=True, choices=TIER_CHOICES, help="the new memory's tier")
        parser.add_argument("--id", dest="memory_id", help="the new memory's id (an existing id is scored as an edit)")
        parser.add_argument("--search-space", action="append", choices=TIER_CHOICES, metavar="TIER", help="only targets of this tier (repeatable)")
        parser.add_argument("--timestamp", help="the new memory's time (ISO-8601)")
        parser.add_argument("--session", dest="session_id", help="the new memory's session id")
        parser.add_argument("--ref", dest="refs", action="append", metavar="ID", help="an id the new memory references (repeatable)")
    elif name == "link":
        parser.add_argument("source_id", metavar="SOURCE")
        parser.add_argument("target_id", metavar="TARGET")
        parser.add_argument("relationship_type", metavar="TYPE")
        parser.add_argument("--score", type=float, help="in [0, 1] (default: full strength)")
        parser.add_argument("--metadata", help="a JSON object kept with the link")
    elif name == "retrieve":
        parser.add_argument("query")
        parser.add_argument("--top-k", type=int, default=5, help="primary hits (default 5)")
        parser.add_argument("--expand", type=int, default=3, help="correlations added per hit (default 3)")
        parser.add_argument("--recency-weight", type=float, default=0.0, help="weight of recency decay in [0, 1] (default 0)")
        parser.add_argument("--tier", dest="tiers", action="append", choices=TIER_CHOICES, help="only hits of this tier (repeatable)")
    elif name == "report":
        parser.add_argument("memory_id", metavar="ID")
        parser.add_argument("--depth", type=int, default=2, help="graph depth (default 2)")
    elif name == "sql":
        parser.add_argument("query", help="one SQL statement (read-only)")
        parser.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format (default table)")


def settings_for(args: argparse.Namespace):
    """Settings from --config (or the default config file); the built-in defaults when there
    is no config file, so `--out DIR` alone is enough for the read commands."""
    from crosstier.core.config import find_config, settings_from_dict, ConfigError
    from crosstier.cli.settings_arg import settings_from_args
    from pathlib import Path

    try:
        find_config(args.config)
    except ConfigError:
        if args.config:
            raise
        settings = settings_from_dict({}, base=Path.cwd())
        return settings.with_output(args.out) if args.out else settings
    return settings_from_args(args)


def dump(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def table(columns: list[str], rows: list[tuple]) -> str:
    """Rows as an aligned text table."""
    cells = [[("" if v is None else str(v)).replace("\n", " ") for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()  # noqa: E731
    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def main(args: argparse.Namespace) -> int:
    from crosstier.retrieval.errors import ReadSideError

    try:
        return COMMANDS[args.command](args, settings_for(args))
    except ReadSideError as exc:
        print(f"ctc {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `ctc graph ... | head`: the reader left; say nothing more.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def correlations(args: argparse.Namespace, settings) -> int:
    from crosstier.retrieval.correlations import find_correlations, span_text

    result = find_correlations(
        args.memory_id, max_results=args.max_results, min_score=args.min_score, relationship_types=args.types,
        principal=args.principal, namespace=args.namespace, settings=settings, out=settings.output_dir,
    )
    if args.json:
        dump(result)
        return 0
    shown = len(result["correlations"])
    print(f"{result['memory_id']} ({result['memory_tier']}): {result['total_found']} correlations" + (f", {shown} shown" if shown < result["total_found"] else ""))
    if result.get("memory_snippet"):
        print(f"  {result['memory_snippet']}")
    if shown:
        # a carried-forward link's reason names its two ends; the group's span is said beside it
        rows = [(c["target_id"], c["target_snippet"], c["target_tier"], c["relationship_type"], c["direction"], f"{c['score']:.2f}",
                 c["reason"] + (f"; {span_text(c['copies'])}" if c.get("copies") else ""))
                for c in result["correlations"]]
        print(table(["target", "text", "tier", "relationship", "dir", "score", "reason"], rows))
    return 0


def graph(args: argparse.Namespace, settings) -> int:
    from crosstier.retrieval.correlations import build_correlation_graph
    from crosstier.retrieval.workspace_report import tree_lines

    result = build_correlation_graph(
        args.memory_ids, include_tiers=args.tiers, max_depth=args.depth, min_score=args.min_score, relationship_types=args.types,
        principal=args.principal, namespace=args.namespace, max_nodes=args.max_nodes, settings=settings, out=settings.output_dir,
    )
    if args.json:
        dump(result)
        return 0
    for seed in dict.fromkeys(args.memory_ids):
        print("\n".join(tree_lines(result, seed, max_children=10**9)))
    print(f"\n{len(result['nodes'])} nodes, {len(result['edges'])} edges" + (" (truncated at --max-nodes)" if result["truncated"] else ""))
    return 0


def discover(args: argparse.Namespace, settings) -> int:
    from datetime import datetime

    from crosstier.retrieval.discover import discover_links
    from crosstier.retrieval.errors import InvalidArgumentError

    when = None
    if args.timestamp:
        try:
            when = datetime.fromisoformat(args.timestamp.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgumentError(f"--timestamp: not an ISO-8601 time: {args.timestamp!r}") from None
    links = discover_links(
        args.content, tier=args.tier, memory_id=args.memory_id, search_space=args.search_space, timestamp=when,
        session_id=args.session_id, refs=args.refs, principal=args.principal, namespace=args.namespace,
        settings=settings, out=settings.output_dir,
    )
    if args.json:
        dump(links)
        return 0
    print(f"{len(links)} links")
    if links:
        rows = [(l["target_id"], l["target_snippet"], l["target_tier"], l["relationship_type"], l["direction"], f"{l['score']:.2f}", l["reason"])
                for l in links]
        print(table(["target", "text", "tier", "relationship", "dir", "score", "reason"], rows))
    return 0


def link(args: argparse.Namespace, settings) -> int:
    from crosstier.retrieval.errors import InvalidArgumentError
    from crosstier.retrieval.manual import add_relationship

    metadata = None
    if args.metadata is not None:
        try:
            metadata = json.loads(args.metadata)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"--metadata: not valid JSON: {exc.msg}") from None
    record = add_relationship(
        args.source_id, args.target_id, args.relationship_type, score=args.score, metadata=metadata,
        principal=args.principal, namespace=args.namespace, settings=settings, out=settings.output_dir,
    )
    if args.json:
        dump(record)
    else:
        print(f"added {record['source_id']} -{record['relationship_type']}-> {record['target_id']} (visible after the next `ctc run`)")
    return 0


def retrieve(args: argparse.Namespace, settings) -> int:
    from crosstier.retrieval.retrieve import retrieve_with_expansion

    result = retrieve_with_expansion(
        args.query, top_k=args.top_k, expand=args.expand, recency_weight=args.recency_weight, tiers=args.tiers,
        principal=args.principal, namespace=args.namespace, settings=settings, out=settings.output_dir,
    )
    if args.json:
        dump(result)
        return 0
    print(f"{len(result['primary'])} hits")
    for n, hit in enumerate(result["primary"], start=1):
        text = " ".join(hit["content"].split())
        print(f"{n}. {hit['id']} ({hit['tier']}, {hit['score']:.3f}) {text[:100]}{'…' if len(text) > 100 else ''}")
    print(f"\n{len(result['expanded'])} expanded")
    for e in result["expanded"]:
        print(f"   {e['from_id']} -> {e['target_id']} ({e['target_tier']}, {e['relationship_type']}, {e['score']:.2f}) {e['reason']}")
        if e.get("target_snippet"):
            print(f"      {e['target_snippet']}")
    return 0


def report_command(args: argparse.Namespace, settings) -> int:
    from crosstier.retrieval.workspace_report import report

    text = report(args.memory_id, principal=args.principal, namespace=args.namespace, max_depth=args.depth, settings=settings, out=settings.output_dir)
    if args.json:
        dump({"memory_id": args.memory_id, "markdown": text})
    else:
        print(text, end="")
    return 0


def sql_command(args: argparse.Namespace, settings) -> int:
    import duckdb

    from crosstier.retrieval.adhoc import run_sql

    try:
        columns, rows = run_sql(args.query, principal=args.principal, settings=settings, out=settings.output_dir)
    except duckdb.Error as exc:
        print(f"ctc sql: {exc}", file=sys.stderr)
        return 2
    fmt = "json" if args.json else args.format
    if fmt == "json":
        dump([dict(zip(columns, row)) for row in rows])
    elif fmt == "csv":
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        print(table(columns, rows))
        print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return 0


COMMANDS = {
    "correlations": correlations,
    "graph": graph,
    "discover": discover,
    "link": link,
    "retrieve": retrieve,
    "report": report_command,
    "sql": sql_command,
}

#!/usr/bin/env python3
"""(Re)write the bundled sample tier stores in data/sample/ from the hand-written content below.

Run from anywhere:  .venv/bin/python data/sample/build_sample.py

Deterministic: a fixed random seed (only for turn spacing), sorted output, gzip with mtime 0.
Stdlib only, except pyarrow for ops.parquet (it comes with the project's .venv).

What it writes (store name in correlator.toml / kind / path):
  workspace   markdown  workspace/ (memory/YYYY-MM-DD.md daily logs, MEMORY.md, skills/**/SKILL.md)
  episodes    jsonl     episodes.jsonl
  facts       jsonl     facts.jsonl.gz
  procedures  sqlite    procedures.sqlite (table memories)
  ops         parquet   ops.parquet (namespace "ops": the on-call agent)
  inbox       jsonl     inbox.jsonl (10 good records, 6 bad ones on purpose)
  EXPECTED.md           planted relationships and counts, ids resolved by this script
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import shutil
import sqlite3
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
RNG = random.Random(20261102)
UTC = timezone.utc
CET = timezone(timedelta(hours=1))  # Alice and most of the team are in Berlin

# Keys ("@name") label memories that EXPECTED.md and refs point at; the build resolves them
# to the real ids, so the table stays exact when content is edited.
KEYS: dict[str, str] = {}


def key_id(key: str) -> str:
    if key not in KEYS:
        raise KeyError(f"unknown key @{key}")
    return KEYS[key]


def resolve_refs(refs: list[str]) -> list[str]:
    return [key_id(r[1:]) if r.startswith("@") else r for r in refs]


# =====================================================================================
# 1. workspace (markdown): daily logs. Per day: sessions (time or None, heading, entries).
#    An entry is a bullet; "P:" makes it a paragraph; "@key " labels it; a leading
#    "HH:MM " stamps it. Long entries are wrapped onto indented continuation lines.
# =====================================================================================

DAILY: dict[str, list[tuple[str | None, str, list[str]]]] = {
    "2026-11-02": [
        ("09:10", "Sprint 46 kickoff", [
            "Sprint 46 started. Priya's goals: invoice PDF export for billing-api (due 2026-11-20), pgvector search for the docs portal, and halving Sentry noise.",
            "Alice owns billing-api this sprint; Maya pairs with her on the invoice rounding bug (#311). Jonas stays on web-dashboard, Tom on search-svc.",
            "09:40 Alice asked me to keep decisions in MEMORY.md instead of leaving them scattered across Slack threads.",
        ]),
        ("11:30", "PR #311 review", [
            "@wl-rounding Reviewed PR #311 (invoice rounding). `round(2.675, 2)` gives 2.67 because of float representation; suggested `Decimal.quantize(Decimal(\"0.01\"), ROUND_HALF_UP)`.",
            "Maya pointed out tax must be rounded per line, not per invoice. Oskar (finance) confirmed per-line rounding is what the accountants expect.",
            "12:05 Added `tests/billing/test_rounding.py::test_half_up_per_line` with the 2.675 case; pushed to Maya's branch.",
        ]),
        ("16:00", "Tooling notes", [
            "ruff 0.7.2 is pinned in billing-api's `pyproject.toml`, but formatting is still black 24.10. Maya wants `ruff format` later this month.",
            "P:Alice's laptop runs Python 3.12 from pyenv while billing-api CI still uses 3.11, so PEP 695 `type X = ...` aliases break CI even though they pass locally. Told her before she hit it.",
        ]),
    ],
    "2026-11-03": [
        ("09:05", "Account settings page", [
            "@wl-ts-ask Alice wants the account settings page written in TypeScript, not plain JS, and `strict: true` stays in `tsconfig.json`.",
            "Scaffolded `web-dashboard/src/pages/settings/AccountSettings.tsx`, a `useAccountSettings` hook and a zod schema for the form.",
            "10:20 Jonas asked for `react-hook-form` with `zodResolver` instead of my hand-rolled form state. Switched; 60 fewer lines.",
        ]),
        ("14:00", "Flaky vitest run", [
            "`AccountSettings.test.tsx` timed out twice on CI with an act(...) warning; passes locally. Suspect fake timers vs the 500 ms debounce in `useAutosave`.",
            "@wl-vitest-fix Wrapped the autosave assertions in `await vi.runAllTimersAsync()`; 30 CI reruns green.",
        ]),
        ("17:30", "End of day", [
            "@wl-maya-tabs Maya keeps her one-off Python scripts in `~/scratch/` indented with tabs and asked me not to reformat them when I edit them.",
            "P:Standup moves to 09:30 from Thursday on; Priya has a recurring customer call at 09:00.",
        ]),
    ],
    "2026-11-04": [
        ("10:00", "billing-api runtime", [
            "@wl-py311 Checked billing-api's `Dockerfile`: base image `python:3.11-slim`, gunicorn with 4 uvicorn workers, FastAPI 0.115.",
            "Sentry BILLING-2K1: `decimal.InvalidOperation` in `invoice_totals()` when a line has quantity 0 and a percentage discount. Fixed by skipping zero-quantity lines before the discount math.",
        ]),
        ("13:30", "Invoice PDF export", [
            "Priya's spec for PDF export: one page per invoice, company logo, line items, VAT summary; customers download it from web-dashboard.",
            "Compared weasyprint 62 and reportlab. weasyprint reuses our Jinja2 invoice templates; it needs pango in the image.",
            "15:10 Ravi: adding pango and cairo to the slim image costs about 45 MB; he is fine with it.",
        ]),
        (None, "Calendar", [
            "Alice is out Friday afternoon (2026-11-06) from 14:00.",
        ]),
    ],
    "2026-11-05": [
        ("09:30", "pgvector on staging", [
            "@wl-pgv-ext Enabled pgvector on `search_staging` (Postgres 16.4 on RDS): `CREATE EXTENSION vector;` installed pgvector 0.7.4.",
            "Added `embedding vector(384)` to `documents`; 384 dimensions matches all-MiniLM-L6-v2, which the indexer already uses.",
            "@wl-pgv-index 11:45 `CREATE INDEX CONCURRENTLY documents_embedding_hnsw ON documents USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);` took 6 min for 410k rows.",
        ]),
        ("14:00", "Recall check", [
            "HNSW vs exact search on 500 logged queries: recall@10 0.962 at `hnsw.ef_search = 40`, 0.991 at 100. p95 latency 9 ms vs 21 ms.",
            "Tom wants `ef_search = 100` for the docs portal; recall matters more to him than 12 ms.",
        ]),
        ("16:40", "Decision", [
            "P:@wl-pgv-decision Decided with Tom to keep embeddings in Postgres with pgvector rather than run a separate vector database: one system fewer to back up and patch, and 410k rows is small.",
        ]),
    ],
    "2026-11-06": [
        ("09:15", "search-svc staging deploy", [
            "@wl-deploy-staging Deployed search-svc 1.4.0 to staging with `./deploy.sh search-svc staging 1.4.0`; ArgoCD synced in 2m10s.",
            "09:40 Smoke test: `/search?q=refund+policy` returns the refunds doc first; with the old tsvector ranking it came third.",
        ]),
        ("11:00", "Release notes v2.8.0", [
            "Drafted v2.8.0 release notes: account settings page, rounding fix (#311), zero-quantity discount fix. Priya approved the wording.",
            "Jonas prefers release notes grouped by user-facing area (Billing, Dashboard, Search), not by repository.",
        ]),
        ("13:30", "Before Alice left", [
            "Alice asked me to remind her on Monday about the pgbouncer PR Ravi wants reviewed.",
        ]),
    ],
    "2026-11-07": [
        ("10:00", "Weekend housekeeping", [
            "Dependabot opened 7 PRs on web-dashboard, all dev dependencies (eslint, vitest, @types/node...). Grouped them into #476.",
            "P:Nothing else ran this weekend. The nightly billing pg_dump finished at 02:14 UTC as usual.",
        ]),
    ],
    "2026-11-09": [
        ("09:30", "pgbouncer review", [
            "@wl-pool-bump Ravi's PR #501 raises pgbouncer `default_pool_size` for billing-api from 20 to 60 in `deploy/billing-api/values-prod.yaml`. Alice approved after my reminder.",
            "Flagged that billing-prod has `max_connections = 100` shared with ledger-worker (30), payments-cron and Metabase. Ravi says peak load is far below the pool size.",
        ]),
        ("14:00", "Invoice PDF rendering", [
            "Added `billing/pdf/render.py`; the first invoice renders in 380 ms. Fonts fall back to DejaVu Sans, so Inter has to be installed in the image.",
            "16:10 Alice wants the invoice number in the file name: `invoice-INV-2026-00123.pdf`.",
        ]),
        ("17:45", "Team calendar", [
            "Maya is on vacation 2026-11-24 to 2026-11-28; rounding follow-ups need a handoff before then.",
        ]),
    ],
    "2026-11-10": [
        ("08:50", "Incident: billing latency", [
            "08:52 PagerDuty paged for billing-api: p99 latency 2.3 s against a 400 ms SLO. Postgres logs `FATAL: sorry, too many clients already`.",
            "@wl-latency-cause 09:05 The billing-api latency spike was caused by the pgbouncer pool_size bump from 20 to 60 (PR #501): billing-api took most of the 100 Postgres connections at the morning peak and ledger-worker could not connect.",
            "09:20 Ravi reverted `default_pool_size` to 30; p99 back to 210 ms at 09:31. 39 minutes end to end.",
        ]),
        ("13:00", "Postmortem", [
            "Postmortem draft at `docs/postmortems/2026-11-10-billing-latency.md`. Actions: a connection budget per service, and an alert at 80% of max_connections.",
            "Alice wants the connection budget table in the infra README with Ravi as owner.",
        ]),
        ("16:30", "TypeScript migration", [
            "Jonas asked whether to convert `legacy/charts.js` to TypeScript now. Alice: yes, but only when someone touches the file anyway.",
        ]),
    ],
    "2026-11-11": [
        ("10:00", "React 19 upgrade", [
            "@wl-react-merge Jonas merged PR #482: web-dashboard is on React 19 and Next.js 15. The Vercel preview looked fine.",
            "10:30 Gzipped bundle went from 412 kB to 398 kB after the upgrade.",
        ]),
        ("14:15", "Key rotation planning", [
            "Lena scheduled the quarterly API key rotation for Thursday 2026-11-13: Stripe restricted key, SendGrid API key and the webhook HMAC secret.",
            "P:Lena's rule: rotated keys go into Vault under `secret/billing/*` and nowhere else. No `.env` files in any repo, not even for local dev.",
        ]),
        ("17:00", "Python 3.12 for billing-api", [
            "Maya opened PR #509 moving billing-api to Python 3.12 (`python:3.12-slim`, CI matrix 3.12). Tests pass; waiting on Ravi for the image change.",
        ]),
    ],
    "2026-11-12": [
        ("09:00", "web-dashboard CI red", [
            "@wl-ci-break web-dashboard CI on `main` went red due to the React 19 upgrade in PR #482: `useFormState` moved out of `react-dom`, and `AccountSettings.tsx` still imports it.",
            "09:40 Replaced it with `useActionState` from `react`; CI green again. Asked Jonas to grep for other callers (found two in `src/pages/billing/`).",
        ]),
        ("11:00", "Migration 0042", [
            "@wl-dump Took `pg_dump -Fc -d billing -f /backups/billing-2026-11-12.dump` before migration 0042 (adds `invoices.pdf_url`): 1.8 GB in 7 minutes.",
            "11:26 `alembic upgrade head` applied 0042 on prod; the longest lock was 180 ms.",
        ]),
        ("15:30", "Python 3.12 rollout", [
            "@wl-py312 Ravi approved PR #509. billing-api now builds on `python:3.12-slim`; went to staging, then prod at 16:40 with `./deploy.sh billing-api prod 2.8.3`.",
        ]),
    ],
    "2026-11-13": [
        ("10:00", "Key rotation", [
            "@wl-stripe Rotated the Stripe restricted key: new key in the Stripe dashboard, written to Vault `secret/billing/stripe`, `kubectl rollout restart deploy/billing-api -n billing`, old key revoked after 30 minutes of clean logs.",
            "SendGrid key rotated the same way; notif-service picked it up through the Vault agent sidecar without a restart.",
            "11:40 The webhook HMAC secret needs an overlap window: webhook-relay accepts the old and new secret for 24 h. Lena agreed.",
        ]),
        ("15:00", "Review", [
            "Reviewed Tom's PR #514 (indexer batch size 64 -> 256). Asked for a memory profile first; the indexer pod limit is 1 GiB.",
        ]),
        ("17:30", "Friday wrap-up", [
            "P:Alice said the rotation went much smoother than last quarter because the steps were written down. She wants them kept as a skill in the workspace.",
        ]),
    ],
    "2026-11-16": [
        ("09:30", "ruff format rollout", [
            "Maya merged PR #520: billing-api switched from black to `ruff format` (ruff 0.8.0), 4-space indentation, line length 100.",
            "@wl-maya-spaces 10:15 Maya has dropped tabs: her `~/scratch/` scripts are now indented with spaces too, and she asked me to run `ruff format` over them.",
        ]),
        ("13:00", "Flaky ledger test", [
            "@wl-flaky `tests/ledger/test_reconcile.py::test_reconcile_month_end` fails about 1 run in 15 on CI; the fixture calls `datetime.now()` and breaks when a run crosses midnight UTC.",
            "14:20 Froze time with `time-machine` at 2026-11-30T23:59:00Z; 200 reruns green. PR #522.",
        ]),
        ("16:00", "Customer demo", [
            "Priya will demo invoice PDF export to Orion Logistics on 2026-11-20.",
        ]),
    ],
    "2026-11-17": [
        ("10:00", "Invoice PDF end to end", [
            "PDF export works end to end on staging: `GET /invoices/{id}/pdf` renders once and then streams from S3 (`acme-invoices/`).",
            "Inter is installed in the image now and renders match the Figma mock. Render p95 is 520 ms.",
        ]),
        ("14:30", "Docs portal search", [
            "Tom put the pgvector search behind the `search_v2` flag for 10% of docs portal users.",
            "P:First numbers from search_v2: click-through on the first result is 41%, up from 29% with tsvector ranking.",
        ]),
    ],
    "2026-11-18": [
        ("09:00", "Restore drill", [
            "@wl-restore Quarterly restore drill: `pg_restore -d billing_restore_test -j 4 /backups/billing-2026-11-17.dump` took 14 minutes; row counts match prod for invoices, payments and ledger_entries.",
            "The drill role lacked `CREATE` on schema `public` in the scratch database; granted it to that role only.",
        ]),
        ("13:00", "Alerting", [
            "Ravi added the alert `pg_stat_activity count / max_connections > 0.8` for billing-prod, an action item from the 2026-11-10 postmortem.",
        ]),
        ("16:00", "Review habits", [
            "Alice prefers small PRs (under roughly 400 changed lines) and asked me to split my PDF PR into render, storage and API parts.",
        ]),
    ],
    "2026-11-19": [
        ("09:30", "Release v2.9.0", [
            "Wrote v2.9.0 release notes: invoice PDF export, pgvector search (flagged), billing-api on Python 3.12, web-dashboard on React 19.",
            "@wl-deploy-prod 11:00 `./deploy.sh billing-api prod 2.9.0` with a 10% canary for 20 minutes; error rate 0.02%, promoted at 11:24.",
            "11:40 web-dashboard 2.9.0 is live on Vercel; Jonas checked the settings page in Safari.",
        ]),
        ("15:00", "Sentry", [
            "Sentry events are down 38% since the sprint started (target 50%). Most of what remains is `ClientDisconnect` on the PDF endpoint.",
        ]),
    ],
    "2026-11-20": [
        ("10:00", "Orion demo", [
            "Priya's demo to Orion Logistics went well; they asked for CSV export as well. Filed #531.",
        ]),
        ("14:00", "Retro", [
            "Retro: keep writing runbooks as skills; no dependency bumps merged on Fridays; every pool size change gets a connection budget review.",
            "P:Jonas pointed out the React 19 breakage would have been caught by running `next build` in the PR check, not only vitest. Added it to the workflow.",
        ]),
        ("17:00", "Terraform", [
            "Ravi upgraded Terraform from 1.8.5 to 1.9.8 in `infra/`; `terraform plan` showed no changes in any workspace.",
        ]),
    ],
    "2026-11-22": [
        (None, "Weekly summary", [
            "v2.9.0 shipped; the restore drill passed; one incident (billing latency, 39 min). Still open: CSV export #531, the Sentry target.",
            "Maya is out next week; Alice covers billing-api reviews.",
        ]),
    ],
}


# MEMORY.md: sections of facts; "<@wl-key" at the end of an item adds a Source: line
# pointing at that daily-log entry (line numbers computed while writing the logs).
MEMORY_MD: list[tuple[str, list[str]]] = [
    ("People", [
        "Alice Novak is the tech lead for billing and the person I work for. She reviews every billing-api PR.",
        "Maya Chen is a backend engineer on billing-api; she pairs with Alice on invoicing.",
        "Jonas Weber owns web-dashboard (Next.js, React, TypeScript) and the release notes.",
        "Ravi Patel runs infrastructure: EKS clusters, pgbouncer, Terraform, ArgoCD. Primary on-call for billing.",
        "Tom Okafor owns search-svc and the docs portal indexer.",
        "Priya Iyer is the product manager for billing and the dashboard; sprint goals are set on Mondays.",
        "Lena Fischer leads security and schedules the quarterly key rotation.",
        "Oskar Lind (finance) is the authority on how invoices must be rounded.",
    ]),
    ("Preferences", [
        "Alice wants new frontend code in TypeScript with `strict: true`. <@wl-ts-ask",
        "Maya indents her scratch Python scripts with tabs; leave them alone. <@wl-maya-tabs",
        "Maya switched to spaces everywhere after the ruff format rollout, scratch scripts included. <@wl-maya-spaces",
        "Jonas wants release notes grouped by user-facing area, not by repo.",
        "Alice prefers small PRs, under roughly 400 changed lines.",
        "Alice likes decisions written down in this file rather than left in Slack.",
        "Tom values recall over a few ms of latency for docs search.",
    ]),
    ("Services", [
        "billing-api: FastAPI 0.115 on gunicorn with 4 uvicorn workers, Postgres `billing` on billing-prod.",
        "billing-api ran on Python 3.11 (`python:3.11-slim`) until PR #509. <@wl-py311",
        "billing-api runs on Python 3.12 (`python:3.12-slim`) since 2026-11-12. <@wl-py312",
        "search-svc stores document embeddings in Postgres 16 with pgvector 0.7.4, `vector(384)`, HNSW index (m=16, ef_construction=64). <@wl-pgv-index",
        "web-dashboard runs React 19 and Next.js 15 since PR #482; use `useActionState` from `react`. <@wl-ci-break",
        "notif-service sends mail through SendGrid and reads secrets via the Vault agent sidecar.",
        "webhook-relay verifies webhook HMAC signatures and accepts two secrets during a rotation window.",
        "ledger-worker consumes payment events from SQS `payments-events` and writes `ledger_entries`.",
    ]),
    ("Decisions", [
        "Invoice tax is rounded per line with ROUND_HALF_UP on Decimal, never float `round()`. <@wl-rounding",
        "Embeddings stay in Postgres with pgvector; no separate vector database. <@wl-pgv-decision",
        "Invoice PDFs are rendered with weasyprint 62 from the Jinja2 templates; Inter font in the image.",
        "Every pgbouncer pool size change needs a connection budget review against max_connections = 100. <@wl-latency-cause",
        "No dependency bumps are merged on Fridays.",
        "Runbooks are written as skills in this workspace.",
        "The docs portal uses `hnsw.ef_search = 100`.",
        "Web-dashboard PR checks run `next build` as well as vitest.",
    ]),
    ("Operations", [
        "Deploys go through `./deploy.sh <service> <env> <version>`, which bumps the image tag in the gitops repo and waits for ArgoCD. <@wl-deploy-staging",
        "Prod deploys of billing-api use a 10% canary for 20 minutes before promotion. <@wl-deploy-prod",
        "Billing is dumped nightly at 02:00 UTC with pg_dump to `s3://acme-db-backups/billing/`, kept 14 days.",
        "A full billing restore with `pg_restore -j 4` takes about 14 minutes. <@wl-restore",
        "Secrets live in Vault under `secret/billing/*`; no `.env` files in repos.",
        "Postmortems go in `docs/postmortems/YYYY-MM-DD-slug.md`.",
        "Terraform is 1.9.8 in `infra/`, state in S3 with a DynamoDB lock table.",
        "The Stripe restricted key was last rotated on 2026-11-13. <@wl-stripe",
    ]),
    ("Testing", [
        "Debounced hooks in web-dashboard tests need `await vi.runAllTimersAsync()` under fake timers. <@wl-vitest-fix",
        "Tests that depend on the date must freeze time (`time-machine`), or they flake around midnight UTC. <@wl-flaky",
        "billing-api runs `mypy --strict` on `billing/` only; tests are not type-checked.",
    ]),
    ("Calendar", [
        "Standup is at 09:30 Berlin time.",
        "Maya is on vacation 2026-11-24 to 2026-11-28.",
        "P:The Orion Logistics demo of invoice PDF export happened on 2026-11-20; they now want CSV export (#531).",
    ]),
]

# Skills: (relative dir under skills/, name, description, body). One nested deeper on purpose.
SKILLS: list[tuple[str, str, str, str]] = [
    ("deploy-service", "deploy-service", "Deploy a service to staging or prod with deploy.sh and ArgoCD, canary for prod", """\
## Steps
1. Make sure the image for the version exists: `crane ls ghcr.io/acme/<service> | grep <version>`.
2. Staging first: `./deploy.sh <service> staging <version>`. It bumps the tag in `gitops/<service>/values-staging.yaml`, pushes, and waits for ArgoCD to report Healthy.
3. Smoke test the main endpoint (search-svc: `/search?q=refund+policy`; billing-api: `/healthz` and one invoice fetch).
4. Prod: `./deploy.sh <service> prod <version>`. billing-api goes out as a 10% canary for 20 minutes; watch the error rate in Grafana `billing-overview`.
5. Promote with `./deploy.sh --promote <service> prod` if the error rate stays under 0.1%, else `./deploy.sh --rollback <service> prod`.
6. Post the version and the ArgoCD sync time in #deploys.
"""),
    ("rotate-api-keys", "rotate-api-keys", "Quarterly rotation of the Stripe, SendGrid and webhook HMAC secrets through Vault", """\
## Steps
1. Create the new key at the provider (Stripe: restricted key with the same permissions; SendGrid: full-access key for mail send).
2. Write it to Vault: `vault kv put secret/billing/stripe api_key=...` (never to a `.env` file).
3. billing-api reads Stripe at start-up: `kubectl rollout restart deploy/billing-api -n billing`. notif-service picks SendGrid up from the Vault agent sidecar, no restart.
4. Webhook HMAC: add the new secret as `secondary` first; webhook-relay accepts both for 24 h; then swap and drop the old one.
5. Watch logs for 30 minutes (401s from Stripe or SendGrid), then revoke the old key at the provider.
6. Record the rotation date in MEMORY.md and tell Lena.
"""),
    ("db/pgvector-setup", "pgvector-setup", "Enable pgvector on a Postgres 16 database and build an HNSW index for search-svc", """\
## Steps
1. Check the server: Postgres 16 or newer, and `vector` in `pg_available_extensions` (RDS has it).
2. `CREATE EXTENSION IF NOT EXISTS vector;` then `SELECT extversion FROM pg_extension WHERE extname = 'vector';` (we run 0.7.4).
3. Add the column with the model's dimension: `ALTER TABLE documents ADD COLUMN embedding vector(384);` (all-MiniLM-L6-v2).
4. Backfill with the indexer (`search-indexer backfill --batch-size 256`).
5. Index without blocking writes: `CREATE INDEX CONCURRENTLY documents_embedding_hnsw ON documents USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);`
6. Measure recall@10 against exact search on logged queries; set `hnsw.ef_search` (docs portal: 100).
"""),
    ("backup-restore", "backup-restore", "Take a pg_dump of the billing database and restore it to check the backup", """\
## Backup
1. `pg_dump -Fc -d billing -f /backups/billing-$(date +%F).dump` (custom format, about 1.8 GB, 7 minutes).
2. `aws s3 cp /backups/billing-$(date +%F).dump s3://acme-db-backups/billing/`.
3. Always take one by hand before a migration, whatever the nightly job did.

## Restore drill (quarterly)
1. `createdb billing_restore_test` on the scratch instance.
2. `pg_restore -d billing_restore_test -j 4 /backups/billing-<date>.dump` (about 14 minutes).
3. Compare row counts of invoices, payments and ledger_entries with prod; drop the database afterwards.
"""),
    ("triage-flaky-test", "triage-flaky-test", "Find out why a test fails only sometimes on CI and fix the cause, not the symptom", """\
## Steps
1. Reproduce: rerun it 50-200 times (`pytest -x --count 200 path::test` or `vitest --repeat 50`).
2. Look for time: `datetime.now()`, timers, debounces, midnight UTC, month ends. Freeze time with `time-machine` (Python) or `vi.useFakeTimers()` + `vi.runAllTimersAsync()` (vitest).
3. Look for order: shared fixtures, leaked database rows, random seeds.
4. Fix the cause, rerun the same number of times, note the rerun count in the PR.
5. Never mark a test flaky without an issue and an owner.
"""),
    ("write-release-notes", "write-release-notes", "Write user-facing release notes for a web-dashboard and billing-api release", """\
## Steps
1. List merged PRs since the last tag: `gh pr list --state merged --search "merged:>=<last tag date>"`.
2. Group by user-facing area (Billing, Dashboard, Search), not by repo; Jonas insists.
3. One line per change in plain words; link the PR; mention flags (e.g. `search_v2` at 10%).
4. Runtime upgrades (Python, React) go in a short "Under the hood" section.
5. Send the draft to Priya for approval before tagging.
"""),
    ("incident-response", "incident-response", "First 30 minutes of a billing incident: page, stabilise, communicate, then write it up", """\
## Steps
1. Acknowledge the PagerDuty page; open #inc-<date>-<slug>.
2. Check Grafana `billing-overview` (p99, error rate, Postgres connections) and Sentry.
3. Look at what changed in the last 48 h: `git log` of the gitops repo, recent `./deploy.sh` runs, config PRs.
4. Prefer reverting the change over fixing forward.
5. Post updates every 15 minutes; write the postmortem in `docs/postmortems/` within two days.
"""),
    ("pgbouncer-pool-change", "pgbouncer-pool-change", "Review a pgbouncer pool size change against the Postgres connection budget", """\
## Steps
1. Read `max_connections` on the server (billing-prod: 100).
2. Sum the pools of every service on it: billing-api, ledger-worker, payments-cron, Metabase, plus 20 reserved for admin and migrations.
3. Reject the change if the sum exceeds max_connections; ask for a budget change in the infra README instead.
4. After the deploy, watch `pg_stat_activity` for an hour at peak.
"""),
    ("alembic-migration", "alembic-migration", "Ship a billing-api database migration with alembic safely", """\
## Steps
1. Take a pg_dump first (see backup-restore).
2. Check the migration for locks: no `ALTER TABLE ... SET NOT NULL` on big tables without a check constraint, indexes `CONCURRENTLY`.
3. Staging: `alembic upgrade head`, run the invoice suite.
4. Prod during low traffic: `alembic upgrade head`, watch for locks over 500 ms in `pg_locks`.
"""),
    ("typescript-page", "typescript-page", "Add a new web-dashboard page in TypeScript the way Alice and Jonas like it", """\
## Steps
1. `src/pages/<area>/<Name>.tsx`, TypeScript only; `strict: true` stays on.
2. Forms: react-hook-form + zod (`zodResolver`); server actions with `useActionState` from `react` (React 19).
3. Tests next to the page with vitest; fake timers for anything debounced.
4. Run `pnpm lint && pnpm test && pnpm next build` before opening the PR.
"""),
]


# =====================================================================================
# 2. episodes (jsonl): chat sessions. (start UTC "YYYY-MM-DD HH:MM", slug, channel, turns)
#    A turn is (speaker, text) or (speaker, text, opts); opts: key, readers, refs,
#    entities, reply (True: refs the previous turn, as the chat client records replies).
# =====================================================================================

A = "assistant"
CHATS: list[tuple[str, str, str, list[tuple]]] = [
    ("2026-11-02 09:20", "rounding-311", "slack", [
        ("alice", "Can you look at PR #311 before standup? Maya thinks the invoice totals are off by a cent."),
        (A, "Looked at it. invoice_totals() does round(2.675, 2), which gives 2.67 because 2.675 is stored as 2.67499999... in binary. Decimal with ROUND_HALF_UP fixes it."),
        ("alice", "per line or per invoice?"),
        (A, "Per line. Maya checked with Oskar in finance: the accountants expect each tax line rounded on its own, then summed.", {"key": "ep-round-per-line"}),
        ("alice", "ok. add a test so this never comes back"),
        (A, "Added test_half_up_per_line with the 2.675 case and pushed it to Maya's branch. CI is green."),
    ]),
    ("2026-11-02 14:40", "maya-scratch", "slack-dm", [
        ("maya", "quick one: when you edit anything in my ~/scratch folder, leave the tabs alone please", {"key": "ep-maya-tabs"}),
        (A, "Noted, I'll keep tab indentation in your scratch Python scripts and won't run a formatter on them.", {"reply": True}),
        ("maya", "thx. the real repos can be spaces, I don't care there"),
    ]),
    ("2026-11-03 08:05", "settings-page", "slack", [
        ("alice", "For the account settings page: TypeScript please, not plain JS. And strict: true stays in tsconfig, I don't want anyone loosening it to get a build through.", {"key": "ep-ts-ask"}),
        (A, "Understood. I'll scaffold AccountSettings.tsx with typed hooks and a zod schema for the form; tsconfig keeps strict: true.", {"reply": True}),
        ("alice", "Jonas will ask for react-hook-form"),
        (A, "Then I'll use react-hook-form with zodResolver from the start."),
        ("jonas", "+1 to that, and put the test next to the page"),
    ]),
    ("2026-11-03 13:10", "vitest-timeout", "slack", [
        ("jonas", "AccountSettings.test.tsx timed out on CI again. Second time today.", {"key": "ep-vitest-flake"}),
        (A, "It's the 500 ms debounce in useAutosave under vi.useFakeTimers(): the save promise never resolves because the timers aren't advanced. I'll await vi.runAllTimersAsync() before the assertions."),
        ("jonas", "did it help?"),
        (A, "30 reruns on CI, all green. Pushed as a fixup to your branch.", {"key": "ep-vitest-fixed"}),
    ]),
    ("2026-11-04 09:05", "billing-python", "slack", [
        ("alice", "What Python does billing-api actually run on right now?", {"key": "ep-py-ask"}),
        (A, "Python 3.11. The billing-api Dockerfile uses python:3.11-slim and the CI matrix only tests 3.11.", {"key": "ep-py311", "reply": True}),
        ("alice", "fine for now. Maya wants 3.12 at some point"),
        (A, "I'll note that the PEP 695 type aliases you used locally won't pass CI until then."),
    ]),
    ("2026-11-04 12:40", "pdf-spec", "slack", [
        ("priya", "Invoice PDF export: one page per invoice, logo, line items, VAT summary. I need it for the Orion Logistics demo on the 20th."),
        (A, "I'd render with weasyprint from our existing Jinja2 invoice templates. It needs pango in the billing-api image, roughly 45 MB more."),
        ("priya", "image size isn't my call, ask Ravi"),
        ("ravi", "45 MB is fine. put pango and cairo in the same apt layer please"),
        (A, "Will do, one RUN line with --no-install-recommends."),
    ]),
    ("2026-11-05 08:20", "pgvector-staging", "slack", [
        ("tom", "Can you set up pgvector on search_staging? It's Postgres 16.4 on RDS.", {"key": "ep-pgv-ask"}),
        (A, "Done: CREATE EXTENSION vector on search_staging installed pgvector 0.7.4 on Postgres 16.4.", {"key": "ep-pgv-ext", "reply": True}),
        ("tom", "dimension?"),
        (A, "vector(384) on documents.embedding, which is what all-MiniLM-L6-v2 outputs."),
        ("tom", "and the index"),
        (A, "HNSW with vector_cosine_ops, m = 16, ef_construction = 64, built CONCURRENTLY on documents.embedding. 6 minutes for 410k rows on search_staging.", {"key": "ep-pgv-index"}),
    ]),
    ("2026-11-05 13:05", "recall-check", "slack", [
        (A, "Recall@10 against exact search on 500 logged queries: 0.962 with hnsw.ef_search = 40 and 0.991 with 100. p95 is 9 ms vs 21 ms.", {"key": "ep-recall"}),
        ("tom", "go with 100. recall matters more than 12 ms on the docs portal"),
        (A, "Set hnsw.ef_search = 100 per query with SET LOCAL in search-svc's repository layer.", {"reply": True}),
        ("tom", "and let's not add a separate vector db. postgres is enough for 410k docs"),
    ]),
    ("2026-11-06 08:10", "search-staging-deploy", "cli", [
        ("alice", "ship search-svc 1.4.0 to staging"),
        (A, "./deploy.sh search-svc staging 1.4.0 finished; ArgoCD synced in 2m10s and the health checks are green.", {"key": "ep-deploy-staging"}),
        ("alice", "smoke test?"),
        (A, "/search?q=refund+policy now ranks the refunds doc first (third before)."),
    ]),
    ("2026-11-06 10:15", "release-notes-280", "slack", [
        ("jonas", "can you group the v2.8.0 notes by area (billing, dashboard) instead of by repo?"),
        (A, "Regrouped: Billing has the rounding fix (#311) and the zero-quantity discount fix, Dashboard has the account settings page."),
        ("priya", "wording looks good, ship it"),
    ]),
    ("2026-11-07 09:30", "personal-dentist", "slack-dm", [
        ("alice", "remind me: dentist on Tuesday the 10th at 17:30, Dr. Halvorsen at Praxis Mitte", {"readers": ["alice"], "key": "ep-dentist"}),
        (A, "Reminder set for Tuesday 16:45. I'll keep it out of team channels and calendars.", {"readers": ["alice"], "reply": True}),
    ]),
    ("2026-11-09 08:25", "pool-size-pr", "slack", [
        ("ravi", "PR #501 bumps pgbouncer default_pool_size for billing-api from 20 to 60 in values-prod.yaml, can someone approve", {"key": "ep-pool-bump"}),
        (A, "Heads-up before approving: billing-prod has max_connections = 100 and ledger-worker alone holds 30. A pool of 60 for billing-api leaves about 10 for payments-cron, Metabase and admin.", {"key": "ep-pool-warning"}),
        ("ravi", "real peak is way lower than the pool size, it's fine"),
        ("alice", "approved, but watch it tomorrow morning"),
    ]),
    ("2026-11-09 13:20", "pdf-fonts", "slack", [
        (A, "First invoice PDF rendered in 380 ms, but the fonts fell back to DejaVu Sans. We need Inter in the billing-api image."),
        ("alice", "also put the invoice number in the filename, e.g. invoice-INV-2026-00123.pdf"),
        (A, "Done, Content-Disposition uses invoice-<number>.pdf now."),
    ]),
    ("2026-11-10 07:55", "billing-incident", "slack", [
        ("alice", "billing is paging. p99 2.3s"),
        (A, "Postgres on billing-prod logs 'FATAL: sorry, too many clients already'; 97 of 100 connections are in use, 58 of them by billing-api through pgbouncer."),
        (A, "The billing-api latency spike was caused by PR #501: the pgbouncer default_pool_size bump from 20 to 60 for billing-api exhausted Postgres max_connections at the morning peak and starved ledger-worker as well.", {"key": "ep-latency", "refs": ["@ep-pool-bump"]}),
        ("ravi", "reverting to 30 now"),
        (A, "p99 is back to 210 ms at 09:31 Berlin time. Incident lasted 39 minutes. I'll start the postmortem doc."),
    ]),
    ("2026-11-10 15:10", "charts-ts", "slack", [
        ("jonas", "should I convert legacy/charts.js to TypeScript while I'm in there?"),
        ("alice", "yes, TypeScript for anything we touch. strict mode, no any escapes", {"key": "ep-ts-again"}),
        (A, "I can do the conversion; it's 340 lines, mostly d3 calls that already have types."),
    ]),
    ("2026-11-10 15:50", "personal-salary", "slack-dm", [
        ("alice", "keep this between us: I have the salary conversation with Marta on Thursday. I'm asking for 92k, floor is 88k.", {"readers": ["alice"], "key": "ep-salary"}),
        (A, "Noted privately. Want me to pull together your sprint outcomes since June as talking points?", {"readers": ["alice"]}),
        ("alice", "yes, the incident work and the rounding fix especially", {"readers": ["alice"]}),
    ]),
    ("2026-11-11 09:05", "react19-merge", "slack", [
        ("jonas", "merged #482: web-dashboard is on React 19 and Next.js 15 now", {"key": "ep-react-merge"}),
        (A, "Nice. The Vercel preview renders fine, and the gzipped bundle dropped from 412 kB to 398 kB."),
        ("jonas", "🎉 took three tries"),
    ]),
    ("2026-11-11 13:20", "rotation-plan", "slack", [
        ("lena", "quarterly key rotation is Thursday: Stripe restricted key, SendGrid, webhook HMAC. all of it through Vault"),
        (A, "I'll prepare the steps. For the HMAC secret webhook-relay needs to accept both secrets for a while, otherwise in-flight webhooks fail."),
        ("lena", "24h overlap is fine. and no .env files anywhere, I mean it"),
    ]),
    ("2026-11-11 16:05", "py312-pr", "github", [
        ("maya", "opened #509 to move billing-api to Python 3.12. CI matrix and Dockerfile both updated"),
        (A, "Reviewed: tests pass on 3.12, one DeprecationWarning from datetime.utcnow() in billing/export.py. Suggested datetime.now(UTC)."),
        ("maya", "fixed, needs Ravi for the base image"),
    ]),
    ("2026-11-12 08:02", "ci-red", "slack", [
        (A, "web-dashboard CI went red on main due to the React 19 upgrade in PR #482: react-dom renamed useFormState to useActionState, and AccountSettings.tsx still imports the old name.", {"key": "ep-ci-break", "refs": ["@ep-react-merge"]}),
        ("jonas", "ugh, my bad. fix?"),
        (A, "Switched AccountSettings.tsx to useActionState from react; CI is green. Two more callers in src/pages/billing/, fixing those too."),
        ("jonas", "thanks 🙏"),
    ]),
    ("2026-11-12 09:50", "migration-0042", "cli", [
        ("alice", "before you run migration 0042 on billing, take a pg_dump", {"key": "ep-dump-ask"}),
        (A, "pg_dump -Fc -d billing -f /backups/billing-2026-11-12.dump finished before migration 0042: 1.8 GB in 7 minutes, copied to s3://acme-db-backups/billing/.", {"key": "ep-dump-done", "reply": True}),
        ("alice", "go ahead with 0042"),
        (A, "alembic upgrade head applied 0042 (invoices.pdf_url) on prod at 11:26 Berlin; longest lock was 180 ms."),
    ]),
    ("2026-11-12 14:30", "py312-deploy", "cli", [
        ("ravi", "approved #509, base image is python:3.12-slim now"),
        (A, "./deploy.sh billing-api staging 2.8.3 is healthy; running the invoice suite against staging."),
        (A, "Suite passed. ./deploy.sh billing-api prod 2.8.3 went out at 16:40 Berlin: billing-api runs on Python 3.12 now.", {"key": "ep-py312"}),
    ]),
    ("2026-11-13 09:00", "key-rotation", "cli", [
        (A, "Created the new Stripe restricted key and wrote it to Vault secret/billing/stripe.", {"key": "ep-stripe-1"}),
        (A, "kubectl rollout restart deploy/billing-api -n billing done; 6/6 pods ready, Stripe calls returning 200 with the new key.", {"reply": True}),
        ("lena", "wait 30 min before revoking the old one"),
        (A, "30 minutes of clean logs; revoked the old Stripe key. SendGrid rotated the same way, notif-service picked it up via the Vault sidecar."),
        ("lena", "HMAC?"),
        (A, "New webhook HMAC secret is secondary in webhook-relay; I'll swap it to primary tomorrow morning."),
    ]),
    ("2026-11-13 14:10", "indexer-batch", "github", [
        ("tom", "PR #514 bumps the indexer batch size from 64 to 256, 3x faster backfill"),
        (A, "The indexer pod limit is 1 GiB; with 256 documents of up to 32 kB plus the MiniLM model I estimate ~900 MB peak. Can you attach a memory profile?"),
        ("tom", "peak 1.1 GiB. raising the limit to 1.5 GiB in the same PR"),
    ]),
    ("2026-11-14 10:30", "personal-physio", "slack-dm", [
        ("alice", "new physio schedule for my wrist: Wednesdays 08:00 until Christmas. don't put anything before 09:30 on Wednesdays", {"readers": ["alice"]}),
        (A, "Got it. I'll decline or move Wednesday meetings before 09:30 and not mention why.", {"readers": ["alice"]}),
    ]),
    ("2026-11-16 08:40", "ruff-format", "github", [
        ("maya", "#520 is in: billing-api uses ruff format now, no more black"),
        (A, "Pre-commit and CI both call ruff 0.8.0 for lint and format; line length 100, 4-space indentation."),
        ("maya", "also I gave up on tabs. you can reformat my ~/scratch scripts with ruff too, spaces everywhere", {"key": "ep-maya-spaces"}),
        (A, "Reformatted the 14 scripts in ~/scratch with ruff format; all spaces now.", {"reply": True}),
    ]),
    ("2026-11-16 12:10", "flaky-reconcile", "slack", [
        ("maya", "test_reconcile_month_end failed again on CI, third time this week", {"key": "ep-flaky"}),
        (A, "It calls datetime.now() in the fixture and the month-end bucket changes when a run crosses midnight UTC. Freezing time with time-machine at 2026-11-30T23:59:00Z.", {"reply": True}),
        (A, "200 reruns green with the frozen clock. PR #522.", {"key": "ep-flaky-fixed"}),
        ("maya", "approved"),
    ]),
    ("2026-11-17 09:15", "pdf-e2e", "slack", [
        ("priya", "can I try the PDF export on staging?"),
        (A, "Yes: open any invoice in web-dashboard staging and press 'Download PDF'. First render takes about half a second, then it streams from S3."),
        ("priya", "looks great. the logo is a bit blurry though"),
        (A, "Swapped the PNG logo for the SVG; weasyprint renders it sharp."),
    ]),
    ("2026-11-17 13:40", "search-v2-flag", "slack", [
        ("tom", "turned on search_v2 (pgvector) for 10% of docs portal users"),
        (A, "I'll watch the click-through in Metabase. Baseline with tsvector ranking is 29% on the first result."),
        ("tom", "after 4 hours: 41%"),
    ]),
    ("2026-11-18 08:00", "restore-drill", "cli", [
        ("ravi", "restore drill today, use last night's billing dump"),
        (A, "pg_restore -d billing_restore_test -j 4 /backups/billing-2026-11-17.dump finished in 14 minutes; row counts for invoices, payments and ledger_entries match prod.", {"key": "ep-restore"}),
        (A, "One snag: the drill role had no CREATE on schema public in the scratch database. Granted it to that role only."),
        ("ravi", "good, drop the db when you're done"),
    ]),
    ("2026-11-18 15:00", "split-pr", "github", [
        ("alice", "this PDF PR is 1,100 lines. split it please"),
        (A, "Split into three: render (#527), storage on S3 (#528) and the API endpoint (#529), each under 400 lines."),
    ]),
    ("2026-11-19 08:30", "release-290", "cli", [
        (A, "v2.9.0 release notes drafted: invoice PDF export, pgvector search behind search_v2, billing-api on Python 3.12, web-dashboard on React 19."),
        ("alice", "ship billing-api"),
        (A, "./deploy.sh billing-api prod 2.9.0 running as a 10% canary for 20 minutes.", {"key": "ep-deploy-prod"}),
        (A, "Canary error rate 0.02%, p99 190 ms. Promoted to 100% at 11:24 Berlin.", {"reply": True}),
        ("jonas", "web-dashboard 2.9.0 is live, checked settings in Safari"),
    ]),
    ("2026-11-20 09:10", "orion-demo", "slack", [
        ("priya", "Orion demo went really well. They want CSV export too"),
        (A, "Filed #531 for CSV export of invoices, linked to the PDF work."),
    ]),
    ("2026-11-20 13:00", "retro", "meeting", [
        ("priya", "retro: what went well?"),
        ("alice", "the key rotation. written steps made it boring, in a good way"),
        ("jonas", "what didn't: the React 19 break would have been caught if the PR check ran next build, not just vitest"),
        (A, "Added `pnpm next build` to the web-dashboard PR workflow."),
        ("ravi", "and no dependency merges on Fridays anymore"),
    ]),
    ("2026-11-02 15:30", "ruff-pin", "github", [
        ("maya", "can we bump ruff from 0.7.2 to 0.8.0 in billing-api? I want ruff format to replace black"),
        (A, "0.8.0 changes two default rules (E741 moved, new FURB lints). I'd do the bump and the black removal in one PR so the diff is reformatting only."),
        ("maya", "after the PDF work though, mid-month"),
    ]),
    ("2026-11-04 15:20", "sentry-2k1", "slack", [
        ("alice", "what's BILLING-2K1 in Sentry? it's 400 events since Friday"),
        (A, "decimal.InvalidOperation in invoice_totals() when a line has quantity 0 and a percentage discount: 0 * 15% goes through quantize on an invalid context. Zero-quantity lines can be skipped before the discount math."),
        ("alice", "do it, and add the case to the rounding tests"),
        (A, "PR #318: skips zero-quantity lines, plus test_zero_quantity_with_discount. Sentry issue resolved on deploy."),
    ]),
    ("2026-11-09 10:40", "standup-notes", "meeting", [
        ("priya", "PDF export still on track for the 20th?"),
        (A, "Rendering works; fonts and S3 caching left. I'd say yes, with the demo on staging."),
        ("tom", "pgvector search is ready for a flag rollout whenever Priya wants"),
        ("priya", "next week, after the release"),
    ]),
    ("2026-11-13 16:30", "friday-wrap", "slack-dm", [
        ("alice", "that rotation was the smoothest one yet"),
        (A, "Mostly because the steps were written down this time. I've kept them as the rotate-api-keys skill in the workspace."),
        ("alice", "good. do the same for the restore drill next week"),
    ]),
    ("2026-11-17 15:30", "csv-scope", "slack", [
        ("priya", "if Orion asks for CSV export on Friday, how big is it?"),
        (A, "Small: the PDF work already has the invoice query layer. A streaming CSV endpoint is about two days including tests."),
        ("priya", "ok, I won't promise a date in the demo"),
    ]),
    ("2026-11-18 12:30", "connections-alert", "slack", [
        ("ravi", "adding the 80% connections alert for billing-prod from the postmortem"),
        (A, "Threshold pg_stat_activity count / max_connections > 0.8 for 5 minutes, routed to PagerDuty billing-prod as a warning?"),
        ("ravi", "yes, warning only, page at 95%"),
    ]),
    ("2026-11-19 14:10", "sentry-noise", "slack", [
        ("alice", "where are we on the Sentry goal?"),
        (A, "Down 38% since the sprint started. Most of the rest is ClientDisconnect on GET /invoices/{id}/pdf when users close the tab mid-download."),
        ("alice", "filter those, they're not errors"),
        (A, "Added an inbound filter for ClientDisconnect on the PDF route; that should take us past 50% next week."),
    ]),
    ("2026-11-20 16:20", "terraform-bump", "github", [
        ("ravi", "Terraform 1.8.5 -> 1.9.8 in infra/, plan is clean in all four workspaces"),
        (A, "Checked the AWS provider constraint (~> 5.70) still resolves under 1.9.8; approved."),
        ("ravi", "merging Monday, not today"),
    ]),
    ("2026-11-21 11:00", "weekend-question", "slack-dm", [
        ("alice", "is the CSV export something you could draft over the weekend?"),
        (A, "Yes. I'll reuse the PDF query layer and stream rows with csv.writer, so memory stays flat for big customers."),
        ("alice", "draft PR only, I'll review Monday"),
    ]),
    ("2026-11-22 17:30", "week-review", "slack-dm", [
        ("alice", "what's left from sprint 46?"),
        (A, "CSV export (#531, draft open), Sentry noise at 38% down against a 50% target, and the connection budget table in the infra README."),
        ("alice", "and Maya's out next week, right?"),
        (A, "Yes, 24th to 28th. You're covering billing-api reviews."),
    ]),
]


# =====================================================================================
# 3. facts (jsonl.gz): semantic facts. (id, timestamp UTC, content, opts)
#    opts: refs (ids or @keys), readers, entities, confidence.
# =====================================================================================

FACTS: list[tuple[str, str, str, dict]] = [
    ("sem-alice-role", "2026-11-02 08:00", "Alice Novak is the tech lead for billing; the assistant works for her and she reviews every billing-api pull request.", {"entities": ["Alice Novak", "billing-api"]}),
    ("sem-maya-role", "2026-11-02 08:00", "Maya Chen is a backend engineer on billing-api and pairs with Alice on invoicing work.", {"entities": ["Maya Chen"]}),
    ("sem-jonas-role", "2026-11-02 08:00", "Jonas Weber owns web-dashboard (Next.js, React, TypeScript) and writes the release notes.", {"entities": ["Jonas Weber"]}),
    ("sem-ravi-role", "2026-11-02 08:00", "Ravi Patel runs infrastructure (EKS, pgbouncer, Terraform, ArgoCD) and is primary on-call for billing.", {"entities": ["Ravi Patel"]}),
    ("sem-tom-role", "2026-11-02 08:00", "Tom Okafor owns search-svc and the docs portal indexer.", {"entities": ["Tom Okafor"]}),
    ("sem-priya-role", "2026-11-02 08:00", "Priya Iyer is the product manager for billing and web-dashboard; she sets sprint goals on Mondays.", {"entities": ["Priya Iyer"]}),
    ("sem-lena-role", "2026-11-02 08:00", "Lena Fischer leads security and schedules the quarterly API key rotation.", {"entities": ["Lena Fischer"]}),
    ("sem-oskar-finance", "2026-11-02 12:00", "Oskar Lind in finance decides how invoice amounts must be rounded.", {"entities": ["Oskar Lind"]}),
    ("sem-rounding-rule", "2026-11-02 12:30", "Invoice tax lines are rounded one by one with Decimal and ROUND_HALF_UP; float round() is banned in billing-api because round(2.675, 2) gives 2.67.", {"refs": ["@ep-round-per-line"]}),
    ("sem-maya-tabs", "2026-11-02 16:00", "Maya prefers tabs for indentation in Python code, her scratch scripts included.", {"refs": ["@ep-maya-tabs"], "entities": ["Maya Chen", "tabs"]}),
    ("sem-alice-ts-pref", "2026-11-03 18:00", "Alice prefers TypeScript over plain JavaScript for new web-dashboard code and wants strict: true kept in tsconfig.", {"refs": ["@ep-ts-ask"], "entities": ["Alice Novak", "TypeScript"]}),
    ("sem-react-hook-form", "2026-11-03 18:05", "web-dashboard forms use react-hook-form with zodResolver; Jonas rejects hand-rolled form state.", {}),
    ("sem-vitest-timers", "2026-11-03 18:10", "In web-dashboard tests, debounced hooks under vi.useFakeTimers() need await vi.runAllTimersAsync() or the test times out on CI.", {"refs": ["@ep-vitest-fixed"]}),
    ("sem-standup", "2026-11-03 18:15", "Team standup is at 09:30 Berlin time since 2026-11-05 (it used to be 09:00).", {}),
    ("sem-billing-py311", "2026-11-04 10:00", "The billing API runs on Python 3.11: the billing-api Dockerfile uses python:3.11-slim and CI tests only 3.11.", {"refs": ["@ep-py311"], "entities": ["billing-api", "Python 3.11"]}),
    ("sem-alice-laptop", "2026-11-04 10:10", "Alice's laptop runs Python 3.12 from pyenv and Neovim with LazyVim.", {"entities": ["Alice Novak"]}),
    ("sem-billing-stack", "2026-11-04 10:20", "billing-api is FastAPI 0.115 served by gunicorn with 4 uvicorn workers; its database is billing on the billing-prod Postgres.", {}),
    ("sem-weasyprint", "2026-11-04 16:00", "Invoice PDFs are rendered by weasyprint 62 from the Jinja2 invoice templates; the billing-api image carries pango and cairo (about 45 MB).", {}),
    ("sem-pdf-spec", "2026-11-04 16:05", "The invoice PDF has one page per invoice with logo, line items and a VAT summary, downloadable from web-dashboard.", {}),
    ("sem-search-pgvector", "2026-11-05 17:00", "search-svc stores document embeddings in Postgres 16.4 with pgvector 0.7.4: documents.embedding is vector(384) with an HNSW index (vector_cosine_ops, m = 16, ef_construction = 64).", {"refs": ["@ep-pgv-ext", "@ep-pgv-index"], "entities": ["pgvector", "search-svc"]}),
    ("sem-ef-search", "2026-11-05 17:05", "The docs portal queries pgvector with hnsw.ef_search = 100 (recall@10 0.991, p95 21 ms).", {"refs": ["@ep-recall"]}),
    ("sem-no-vector-db", "2026-11-05 17:10", "Decision: no separate vector database; embeddings stay in Postgres with pgvector.", {}),
    ("sem-embedding-model", "2026-11-05 17:15", "The docs indexer embeds with all-MiniLM-L6-v2, 384 dimensions.", {}),
    ("sem-deploy-sh", "2026-11-06 12:00", "Deploys run ./deploy.sh <service> <env> <version>: it bumps the image tag in the gitops repo and waits for ArgoCD to report Healthy.", {"refs": ["@ep-deploy-staging"]}),
    ("sem-release-notes-style", "2026-11-06 12:05", "Jonas wants release notes grouped by user-facing area (Billing, Dashboard, Search) rather than by repository.", {}),
    ("sem-alice-dentist", "2026-11-07 10:00", "Alice has a dentist appointment with Dr. Halvorsen on 2026-11-10 at 17:30; remind her at 16:45, privately.", {"readers": ["alice"], "refs": ["@ep-dentist"]}),
    ("sem-pg-max-conn", "2026-11-09 10:00", "The billing-prod Postgres has max_connections = 100, shared by billing-api, ledger-worker, payments-cron and Metabase.", {"refs": ["@ep-pool-warning"]}),
    ("sem-inter-font", "2026-11-09 15:00", "The billing-api image needs the Inter font; without it weasyprint falls back to DejaVu Sans.", {}),
    ("sem-pdf-filename", "2026-11-09 15:05", "Invoice PDFs are named invoice-<invoice number>.pdf, e.g. invoice-INV-2026-00123.pdf.", {}),
    ("sem-maya-vacation", "2026-11-09 17:50", "Maya is on vacation from 2026-11-24 to 2026-11-28.", {"entities": ["Maya Chen"]}),
    ("sem-pool-budget", "2026-11-10 14:00", "Connection budget on billing-prod after the 2026-11-10 incident: billing-api 30, ledger-worker 30, payments-cron 10, Metabase 10, 20 reserved.", {"refs": ["@ep-latency"]}),
    ("sem-postmortems", "2026-11-10 14:05", "Postmortems live in docs/postmortems/YYYY-MM-DD-slug.md and are due within two days of an incident.", {}),
    ("sem-alice-salary", "2026-11-10 16:00", "Alice is negotiating her salary with Marta: asking 92k, floor 88k. Private to Alice.", {"readers": ["alice"], "refs": ["@ep-salary"]}),
    ("sem-ts-legacy", "2026-11-10 16:10", "legacy/charts.js gets converted to TypeScript only when someone touches it anyway.", {"refs": ["@ep-ts-again"]}),
    ("sem-react19", "2026-11-11 10:00", "web-dashboard runs React 19 and Next.js 15 since PR #482 (2026-11-11).", {"refs": ["@ep-react-merge"]}),
    ("sem-vault-rule", "2026-11-11 14:00", "Secrets go into Vault under secret/billing/* only; Lena forbids .env files in any repository.", {}),
    ("sem-hmac-overlap", "2026-11-11 14:05", "webhook-relay can accept a primary and a secondary HMAC secret, which allows a 24 h overlap during rotation.", {}),
    ("sem-use-action-state", "2026-11-12 10:00", "With React 19, use useActionState from react; useFormState from react-dom is gone.", {"refs": ["@ep-ci-break"]}),
    ("sem-migration-0042", "2026-11-12 12:00", "Migration 0042 added invoices.pdf_url to the billing database (applied 2026-11-12).", {}),
    ("sem-alembic", "2026-11-12 12:05", "billing-api schema changes are alembic migrations; a manual pg_dump is taken before each one reaches prod.", {"refs": ["@ep-dump-done"]}),
    ("sem-stripe-rotation", "2026-11-13 12:00", "The Stripe restricted key was rotated on 2026-11-13; the next rotation is due in February 2027.", {"refs": ["@ep-stripe-1"]}),
    ("sem-sendgrid", "2026-11-13 12:05", "notif-service sends email through SendGrid and reads its key from the Vault agent sidecar, so rotating it needs no restart.", {}),
    ("sem-indexer-limits", "2026-11-13 15:00", "The search indexer runs with batch size 256 and a 1.5 GiB memory limit since PR #514.", {}),
    ("sem-alice-wednesdays", "2026-11-14 11:00", "Alice has physiotherapy for her wrist on Wednesdays at 08:00 until Christmas; nothing before 09:30 on Wednesdays.", {"readers": ["alice"]}),
    ("sem-maya-spaces", "2026-11-16 10:30", "Maya no longer prefers tabs for indentation in Python code; she switched to spaces, her scratch scripts included.", {"refs": ["sem-maya-tabs", "@ep-maya-spaces"], "entities": ["Maya Chen", "tabs"]}),
    ("sem-ruff", "2026-11-16 10:35", "billing-api lints and formats with ruff 0.8.0 (line length 100) since PR #520; black is gone.", {}),
    ("sem-time-machine", "2026-11-16 15:00", "Date-dependent tests in billing-api freeze the clock with time-machine.", {"refs": ["@ep-flaky-fixed"]}),
    ("sem-orion", "2026-11-16 16:00", "Orion Logistics is the customer Priya demos invoice PDF export to.", {"entities": ["Orion Logistics"]}),
    ("sem-pdf-perf", "2026-11-17 11:00", "Invoice PDF render p95 is 520 ms; rendered files are cached in s3://acme-invoices/ and streamed afterwards.", {}),
    ("sem-search-v2", "2026-11-17 18:00", "pgvector search is behind the search_v2 flag at 10% of docs portal users; first-result click-through went from 29% to 41%.", {}),
    ("sem-restore-time", "2026-11-18 10:00", "Restoring the billing dump with pg_restore -j 4 takes about 14 minutes.", {"refs": ["@ep-restore"]}),
    ("sem-small-prs", "2026-11-18 16:00", "Alice prefers pull requests under about 400 changed lines and asks for big ones to be split.", {}),
    ("sem-canary", "2026-11-19 12:00", "billing-api prod deploys use a 10% canary for 20 minutes and are promoted below 0.1% errors.", {"refs": ["@ep-deploy-prod"]}),
    ("sem-sentry-progress", "2026-11-19 16:00", "Sprint 46 Sentry goal: halve events. At 38% by 2026-11-19; the rest is mostly ClientDisconnect on the PDF endpoint.", {}),
    ("sem-csv-export", "2026-11-20 11:00", "Orion Logistics asked for CSV export of invoices (#531) after the PDF demo.", {}),
    ("sem-no-friday-deps", "2026-11-20 15:00", "No dependency bumps are merged on Fridays (retro, 2026-11-20).", {}),
    ("sem-next-build-check", "2026-11-20 15:05", "The web-dashboard PR check runs pnpm next build in addition to vitest.", {}),
    ("sem-terraform", "2026-11-20 17:30", "infra/ uses Terraform 1.9.8 with state in S3 and a DynamoDB lock table.", {}),
    ("sem-pnpm", "2026-11-03 18:20", "web-dashboard uses pnpm 9; npm install would rewrite the lockfile.", {}),
    ("sem-k8s-prod", "2026-11-02 08:30", "Production runs on the EKS cluster prod-eu-1 (Kubernetes 1.30, eu-central-1) with namespaces billing, search and web.", {}),
    ("sem-grafana", "2026-11-02 08:35", "The main billing dashboard is Grafana billing-overview (p99, error rate, Postgres connections).", {}),
    ("sem-pagerduty", "2026-11-02 08:40", "PagerDuty service billing-prod escalates to Ravi, then to Alice after 15 minutes.", {}),
    ("sem-maya-review-style", "2026-11-05 12:00", "Maya wants review comments as GitHub suggested changes rather than prose.", {}),
    ("sem-jonas-safari", "2026-11-19 12:30", "Jonas always checks web-dashboard releases in Safari; about 30% of dashboard users are on macOS Safari.", {}),
    ("sem-alice-hours", "2026-11-02 09:00", "Alice works from Berlin and prefers no pings after 19:00 CET.", {"readers": ["alice", "assistant"]}),
    ("sem-team-lunch", "2026-11-05 12:30", "The team has lunch together on Thursdays at Mercado on Torstrasse.", {}),
]


# =====================================================================================
# 4. procedures (sqlite): mostly procedural, a few semantic. (id, tier, timestamp, content, opts)
# =====================================================================================

P, S = "procedural", "semantic"
PROCEDURES: list[tuple[str, str, str, str, dict]] = [
    ("proc-pgvector-setup", P, "2026-11-05 18:00",
     "Enable pgvector for search-svc: check Postgres >= 16; CREATE EXTENSION vector (pgvector 0.7.4); add documents.embedding vector(384) for all-MiniLM-L6-v2; build the HNSW index CONCURRENTLY with vector_cosine_ops, m = 16, ef_construction = 64; measure recall@10 and set hnsw.ef_search.",
     {"refs": ["@ep-pgv-ext"], "entities": ["pgvector", "search-svc", "Postgres 16"]}),
    ("proc-pg-dump-backup", P, "2026-11-12 13:00",
     "Back up the billing database before a migration: pg_dump -Fc -d billing -f /backups/billing-$(date +%F).dump, copy the dump to s3://acme-db-backups/billing/, check it with pg_restore --list, then run the migration.",
     {"refs": ["@ep-dump-done"], "entities": ["pg_dump", "billing"]}),
    ("proc-deploy-sh", P, "2026-11-06 12:30",
     "Deploy with deploy.sh: ./deploy.sh <service> staging <version>, wait for ArgoCD to sync and the health checks to pass, smoke test, then ./deploy.sh <service> prod <version>.",
     {"refs": ["@ep-deploy-staging"], "entities": ["deploy.sh", "ArgoCD"]}),
    ("proc-canary-promote", P, "2026-11-19 12:10",
     "Promote a billing-api canary: ./deploy.sh billing-api prod <version> starts it at 10%; after 20 minutes check error rate (< 0.1%) and p99 in Grafana billing-overview; ./deploy.sh --promote billing-api prod, or --rollback.", {}),
    ("proc-rotate-stripe", P, "2026-11-13 12:30",
     "Rotate the Stripe restricted key: create the new key with the same permissions, vault kv put secret/billing/stripe api_key=<new>, kubectl rollout restart deploy/billing-api -n billing, watch for Stripe 401s for 30 minutes, revoke the old key.",
     {"refs": ["@ep-stripe-1"]}),
    ("proc-rotate-sendgrid", P, "2026-11-13 12:35",
     "Rotate the SendGrid key: new key in SendGrid, vault kv put secret/billing/sendgrid, wait for the Vault agent sidecar in notif-service to re-render (no restart), send a test mail, revoke the old key.", {}),
    ("proc-hmac-overlap", P, "2026-11-13 12:40",
     "Rotate the webhook HMAC secret without dropping webhooks: set the new secret as secondary in webhook-relay, wait 24 h, promote it to primary, remove the old one.", {}),
    ("proc-restore-drill", P, "2026-11-18 10:30",
     "Quarterly restore drill: createdb billing_restore_test on the scratch instance, pg_restore -d billing_restore_test -j 4 /backups/billing-<date>.dump, compare row counts of invoices, payments, ledger_entries with prod, drop the database.",
     {"refs": ["@ep-restore"]}),
    ("proc-flaky-time", P, "2026-11-16 15:30",
     "Fix a date-dependent flaky test: find datetime.now() or date.today() in the test or fixture, freeze the clock with time-machine at an edge (month end, 23:59 UTC), rerun 200 times before merging.",
     {"refs": ["@ep-flaky"]}),
    ("proc-vitest-debounce", P, "2026-11-03 18:30",
     "Test a debounced React hook with vitest: vi.useFakeTimers(), trigger the change, await vi.runAllTimersAsync(), then assert; restore real timers in afterEach.",
     {"refs": ["@ep-vitest-flake"]}),
    ("proc-release-notes", P, "2026-11-06 12:40",
     "Release notes: list merged PRs since the last tag with gh pr list, group them by user-facing area, one plain line per change with the PR link, runtime upgrades under 'Under the hood', Priya approves before the tag.", {}),
    ("proc-pool-review", P, "2026-11-10 15:00",
     "Review a pgbouncer pool change: read max_connections on the server, add up every service's pool plus 20 reserved, refuse the change if it exceeds the limit, watch pg_stat_activity at the next peak.",
     {"refs": ["@ep-latency"]}),
    ("proc-incident-first-30", P, "2026-11-10 15:10",
     "First 30 minutes of an incident: acknowledge the page, open an incident channel, check Grafana and Sentry, list changes from the last 48 h (gitops log, deploy.sh runs, config PRs), revert before fixing forward, post updates every 15 minutes.", {}),
    ("proc-postmortem", P, "2026-11-10 15:20",
     "Write a postmortem in docs/postmortems/YYYY-MM-DD-slug.md: timeline in UTC, impact, root cause, what went well, action items with owners; share in #eng within two days.", {}),
    ("proc-alembic-migration", P, "2026-11-12 13:10",
     "Ship an alembic migration: take a pg_dump, check for long locks (no SET NOT NULL on big tables, indexes CONCURRENTLY), alembic upgrade head on staging, run the invoice suite, then prod at low traffic watching pg_locks.", {}),
    ("proc-python-upgrade", P, "2026-11-12 17:00",
     "Upgrade a service's Python: bump the base image (python:3.X-slim) and the CI matrix together, fix DeprecationWarnings (datetime.utcnow), deploy to staging, run the full suite, then prod with deploy.sh.", {}),
    ("proc-react-upgrade", P, "2026-11-12 11:00",
     "Upgrade React in web-dashboard: read the upgrade guide for renamed APIs (React 19: useFormState -> useActionState), grep for every caller, run pnpm next build and vitest locally, check Safari before merging.",
     {"refs": ["@ep-ci-break"]}),
    ("proc-ts-page", P, "2026-11-03 18:40",
     "New web-dashboard page: TypeScript with strict on, react-hook-form with zodResolver for forms, a vitest file next to the page, pnpm lint && pnpm test && pnpm next build before the PR.", {}),
    ("proc-ruff-scratch", P, "2026-11-16 11:00",
     "Reformat a folder of Python scripts with ruff: ruff format <dir> --line-length 100, then ruff check --fix; commit the formatting separately from any logic change.", {}),
    ("proc-dependabot-group", P, "2026-11-07 11:00",
     "Handle a batch of Dependabot PRs: group dev-dependency bumps into one PR, run the full CI, never merge on a Friday.", {}),
    ("proc-weasyprint-image", P, "2026-11-09 16:00",
     "Build the billing-api image for PDF rendering: apt-get install --no-install-recommends libpango-1.0-0 libpangoft2-1.0-0 fonts-inter in one RUN layer; check a render does not fall back to DejaVu Sans.", {}),
    ("proc-hnsw-tuning", P, "2026-11-05 18:10",
     "Tune an HNSW index: sample 500 logged queries, compute exact top-10 with a sequential scan, compare recall@10 for hnsw.ef_search 40/100/200, pick the smallest value meeting the recall target.",
     {"refs": ["@ep-recall"]}),
    ("proc-split-pr", P, "2026-11-18 16:00",
     "Split a large PR: cut along layers (rendering, storage, API), keep each under ~400 changed lines, stack them with base branches, link them in the descriptions.", {}),
    ("proc-sentry-triage", P, "2026-11-19 16:10",
     "Weekly Sentry triage: sort by event count, ignore ClientDisconnect only with a filter rule, open an issue for anything over 100 events/day, assign owners by service.", {}),
    ("proc-vault-add-secret", P, "2026-11-11 14:30",
     "Add a secret for a service: vault kv put secret/<team>/<name>, grant the service's Vault role read on that path, reference it from the Vault agent template; never commit it or put it in a .env file.", {}),
    ("proc-terraform-upgrade", P, "2026-11-20 17:40",
     "Upgrade Terraform: bump required_version and .terraform-version, terraform init -upgrade in each workspace, terraform plan must show no changes, then merge.", {}),
    ("proc-kubectl-debug", P, "2026-11-10 16:00",
     "Debug a failing pod: kubectl describe pod, kubectl logs --previous, kubectl get events -n <ns> --sort-by=.lastTimestamp, then kubectl debug -it <pod> --image=busybox if the image has no shell.", {}),
    ("proc-reindex-docs", P, "2026-11-13 15:30",
     "Reindex the docs portal: search-indexer backfill --batch-size 256 --since <date>, watch memory under the 1.5 GiB limit, REINDEX INDEX CONCURRENTLY documents_embedding_hnsw afterwards if more than 20% of rows changed.", {}),
    ("proc-pdf-font-check", P, "2026-11-17 11:30",
     "Check invoice PDF fonts: render a sample invoice, run pdffonts on the output, expect Inter embedded; fix the image if DejaVu Sans appears.", {}),
    ("proc-feature-flag-rollout", P, "2026-11-17 18:10",
     "Roll out behind a flag: start at 10%, compare the key metric (click-through for search_v2) against the baseline for a week, then 50%, then 100%, removing the flag in the following sprint.", {}),
    ("proc-breakglass-vault", P, "2026-11-13 16:00",
     "Break-glass Vault access: two of Ravi, Lena and Alice unseal with their key shares, generate a root token with vault operator generate-root, do the fix, revoke the token, write an incident note.",
     {"readers": ["ravi", "lena", "alice"]}),
    ("proc-onboard-argocd", P, "2026-11-06 13:00",
     "Onboard a service to ArgoCD: add gitops/<service>/ with values-staging.yaml and values-prod.yaml, create the Application in argocd/apps/, let deploy.sh manage the image tag.", {}),
    ("proc-sem-billing-py312", S, "2026-11-12 17:05",
     "The billing API runs on Python 3.12: the billing-api Dockerfile uses python:3.12-slim and CI tests only 3.12 (PR #509).",
     {"refs": ["sem-billing-py311", "@ep-py312"], "entities": ["billing-api", "Python 3.12"]}),
    ("proc-sem-deploy-flags", S, "2026-11-19 12:20",
     "deploy.sh takes --promote and --rollback for prod canaries; without flags it deploys the given version.", {}),
    ("proc-sem-argocd-apps", S, "2026-11-06 13:05",
     "ArgoCD Applications for all services live in the gitops repo under argocd/apps/; auto-sync is on for staging and off for prod.", {}),
    ("proc-sem-backup-schedule", S, "2026-11-07 10:30",
     "The nightly billing pg_dump runs at 02:00 UTC from the backup CronJob and keeps 14 days in s3://acme-db-backups/billing/.", {}),
]


# =====================================================================================
# 5. ops (parquet, namespace "ops"): the on-call agent. Sessions as in CHATS, plus facts
#    and runbooks. Several topics mirror the default namespace on purpose: links must not
#    cross namespaces, however similar the text.
# =====================================================================================

OB = "ops-bot"
OPS_CHATS: list[tuple[str, str, str, list[tuple]]] = [
    ("2026-11-03 02:10", "backup-job", "pagerduty", [
        ("pagerduty", "CronJob billing-backup in namespace billing finished with exit code 0 after 13m; dump size 1.79 GB."),
        (OB, "Nightly pg_dump of billing verified: pg_restore --list reads the dump, 312 TOC entries."),
    ]),
    ("2026-11-05 19:30", "search-disk", "grafana", [
        ("grafana", "Alert: search_staging RDS free storage below 20% (18.4 GB left)."),
        (OB, "Storage on search_staging dropped 22 GB today: the new pgvector HNSW index on documents.embedding plus WAL from the CONCURRENTLY build.", {"key": "ops-pgv-disk"}),
        ("ravi", "bump allocated storage to 200 GB, it's staging"),
        (OB, "Modified search_staging allocated storage 120 -> 200 GB, applied immediately; free storage back to 51%.", {"reply": True}),
    ]),
    ("2026-11-07 03:40", "node-pressure", "pagerduty", [
        ("pagerduty", "KubeNodeNotReady: ip-10-2-14-33 in prod-eu-1 NotReady for 5m."),
        (OB, "Node ip-10-2-14-33 had disk pressure from container logs; cordoned and drained it, the ASG replaced it in 4 minutes."),
        (OB, "No customer impact: billing-api pods rescheduled to other nodes, PodDisruptionBudget held 5/6."),
    ]),
    ("2026-11-09 07:15", "certmanager-orders", "grafana", [
        ("grafana", "Alert: cert-manager certificate request failures > 10/h for ClusterIssuer letsencrypt-prod."),
        (OB, "cert-manager keeps re-ordering the auth-gateway certificate: the DNS-01 solver lacks route53:ChangeResourceRecordSets after the IAM policy cleanup. Let's Encrypt now rate-limits letsencrypt-prod orders for auth.acme.io.", {"key": "ops-cert-orders"}),
        ("ravi", "I'll fix the IAM policy after standup"),
    ]),
    ("2026-11-10 06:50", "auth-tls", "pagerduty", [
        ("pagerduty", "Probe failed: https://auth.acme.io certificate expired."),
        (OB, "auth-gateway served an expired TLS certificate because the cert-manager renewal for auth.acme.io kept failing: the letsencrypt-prod rate limit on repeated DNS-01 orders blocked the new certificate.", {"key": "ops-cert-expired", "refs": ["@ops-cert-orders"]}),
        ("ravi", "IAM policy fixed, switching the issuer to letsencrypt-staging-free fallback? no, just wait for the limit window"),
        (OB, "Rate limit window ended 07:40 UTC; cert-manager issued the certificate, auth-gateway reloaded it. 52 minutes of TLS errors for API clients.", {"reply": True}),
    ]),
    ("2026-11-10 07:52", "billing-latency", "pagerduty", [
        ("pagerduty", "billing-api p99 latency 2.3 s > 400 ms SLO for 5m (PagerDuty service billing-prod)."),
        (OB, "billing-prod Postgres at 97/100 connections; 'too many clients already' in the logs. Recent change: pgbouncer default_pool_size 20 -> 60 for billing-api (PR #501).", {"key": "ops-latency", "refs": ["@ep-latency"]}),
        ("ravi", "reverting the pool to 30"),
        (OB, "p99 210 ms after the revert; resolved the PagerDuty incident at 08:31 UTC. Duration 39 min.", {"reply": True}),
    ]),
    ("2026-11-12 02:05", "backup-before-migration", "cron", [
        (OB, "Nightly pg_dump of billing finished at 02:12 UTC, 1.8 GB, uploaded to s3://acme-db-backups/billing/."),
        (OB, "Lifecycle rule removed dumps older than 14 days from s3://acme-db-backups/billing/ (2 objects)."),
    ]),
    ("2026-11-12 15:45", "billing-py312-deploy", "argocd", [
        ("argocd", "Application billing-api (prod) synced to image tag 2.8.3."),
        (OB, "billing-api 2.8.3 on prod runs Python 3.12 (python:3.12-slim); memory per pod dropped from 410 MB to 372 MB.", {"key": "ops-py312"}),
    ]),
    ("2026-11-13 09:05", "stripe-401-watch", "grafana", [
        (OB, "Watching Stripe responses during the key rotation: 0 HTTP 401 from api.stripe.com in 30 minutes after the billing-api restart."),
        ("lena", "ok, I revoked the old key"),
    ]),
    ("2026-11-14 22:30", "weekend-handoff", "slack", [
        ("ravi", "handing on-call to Lena for the weekend, I have a family thing", {"readers": ["ravi", "lena", "ops-bot"]}),
        (OB, "PagerDuty override set: Lena primary from Fri 23:00 to Mon 08:00 CET, Ravi secondary.", {"readers": ["ravi", "lena", "ops-bot"]}),
    ]),
    ("2026-11-15 04:20", "ledger-lag", "pagerduty", [
        ("pagerduty", "SQS payments-events ApproximateAgeOfOldestMessage > 600 s."),
        (OB, "ledger-worker was crash-looping: OOMKilled at 512 Mi while replaying a 40k-event batch after an upstream retry storm."),
        ("lena", "raise it to 1Gi for now"),
        (OB, "ledger-worker limit raised to 1 Gi; the backlog drained in 11 minutes, oldest message age back under 5 s."),
    ]),
    ("2026-11-16 10:00", "security-finding", "slack", [
        ("lena", "pentest found the Metabase instance reachable from the office VPN without SSO", {"readers": ["lena", "ops-bot"]}),
        (OB, "Restricted the Metabase security group to the SSO proxy; ticket SEC-118 tracks adding OIDC.", {"readers": ["lena", "ops-bot"]}),
    ]),
    ("2026-11-17 02:15", "backup-size", "cron", [
        (OB, "billing pg_dump grew to 1.9 GB (+6% in a week) after invoices.pdf_url was added; still within the 14-day S3 budget."),
    ]),
    ("2026-11-18 13:10", "connections-alert", "grafana", [
        ("ravi", "added the alert pg_stat_activity / max_connections > 0.8 on billing-prod"),
        (OB, "Test-fired the new billing-prod connections alert in Grafana; it routes to PagerDuty billing-prod with severity warning."),
    ]),
    ("2026-11-19 10:00", "canary-watch", "argocd", [
        ("argocd", "Rollout billing-api (prod) paused at 10% canary, image 2.9.0."),
        (OB, "Canary billing-api 2.9.0: error rate 0.02%, p99 190 ms for 20 minutes; promotion allowed.", {"key": "ops-canary"}),
        ("argocd", "Rollout billing-api (prod) promoted to 100%."),
    ]),
    ("2026-11-20 16:30", "terraform-plan", "ci", [
        ("ci", "terraform plan (infra/prod-eu-1) with Terraform 1.9.8: No changes."),
        (OB, "All four Terraform workspaces report no changes after the 1.8.5 -> 1.9.8 upgrade; unlocked the DynamoDB lock table entry left by the old CI job."),
    ]),
    ("2026-11-21 05:10", "search-latency", "grafana", [
        ("grafana", "search-svc p95 latency 180 ms > 100 ms."),
        (OB, "search-svc slow on prod: autovacuum on documents took an exclusive lock on the HNSW index pages during the weekly reindex; latency recovered at 05:31 UTC without action."),
    ]),
]

OPS_MEMORIES: list[tuple[str, str, str, str, dict]] = [
    ("ops-sem-billing-py312", S, "2026-11-12 16:00", "The billing API runs on Python 3.12: the billing-api Dockerfile uses python:3.12-slim and CI tests only 3.12 (PR #509).", {"refs": ["@ops-py312"]}),
    ("ops-sem-max-conn", S, "2026-11-10 09:00", "billing-prod Postgres allows max_connections = 100; billing-api, ledger-worker, payments-cron and Metabase share it.", {"refs": ["@ops-latency"]}),
    ("ops-sem-pool-budget", S, "2026-11-10 10:00", "Connection budget on billing-prod: billing-api 30, ledger-worker 30, payments-cron 10, Metabase 10, 20 reserved.", {}),
    ("ops-sem-backup-schedule", S, "2026-11-03 03:00", "The billing-backup CronJob runs pg_dump of billing at 02:00 UTC and keeps 14 days in s3://acme-db-backups/billing/.", {}),
    ("ops-sem-escalation", S, "2026-11-02 08:00", "PagerDuty service billing-prod: Ravi primary, Alice after 15 minutes; weekend overrides are set by hand.", {}),
    ("ops-sem-cluster", S, "2026-11-02 08:05", "prod-eu-1 is EKS 1.30 in eu-central-1 with managed node groups of m6i.xlarge.", {}),
    ("ops-sem-cert-issuer", S, "2026-11-10 09:30", "cert-manager uses ClusterIssuer letsencrypt-prod with the Route53 DNS-01 solver; the IAM role needs route53:ChangeResourceRecordSets.", {"refs": ["@ops-cert-expired"]}),
    ("ops-sem-search-storage", S, "2026-11-05 20:00", "search_staging RDS has 200 GB allocated since the pgvector HNSW index build.", {"refs": ["@ops-pgv-disk"]}),
    ("ops-sem-ledger-limits", S, "2026-11-15 05:00", "ledger-worker runs with a 1 Gi memory limit since the payments-events backlog on 2026-11-15.", {}),
    ("ops-sem-deploy-sh", S, "2026-11-06 09:00", "Deploys go through ./deploy.sh <service> <env> <version>; ArgoCD syncs the gitops repo.", {}),
    ("ops-sem-metabase", S, "2026-11-16 10:30", "Metabase is reachable only through the SSO proxy (SEC-118).", {"readers": ["lena", "ops-bot"]}),
    ("ops-sem-oncall-pay", S, "2026-11-14 23:00", "Weekend on-call is compensated at 1.5x; Ravi and Lena swap weekends by agreement.", {"readers": ["ravi", "lena", "alice", "ops-bot"]}),
    ("ops-sem-sqs", S, "2026-11-15 05:05", "The SQS queue payments-events alerts when the oldest message is older than 600 s.", {}),
    ("ops-sem-stripe-rotation", S, "2026-11-13 10:00", "The Stripe restricted key was rotated on 2026-11-13 with zero 401 responses.", {}),
    ("ops-proc-pg-dump", P, "2026-11-03 03:10", "Verify the nightly billing pg_dump: check the billing-backup CronJob exit code, pg_restore --list on the dump in s3://acme-db-backups/billing/, alert if it is more than 10% smaller than the previous night.", {}),
    ("ops-proc-pool-revert", P, "2026-11-10 10:10", "When billing-prod hits max_connections: find the service holding most connections in pg_stat_activity, revert its last pgbouncer pool change, restart pgbouncer pods one at a time.", {"refs": ["@ops-latency"]}),
    ("ops-proc-cert-renewal", P, "2026-11-10 10:20", "Fix a stuck cert-manager renewal: kubectl describe certificaterequest, check the DNS-01 solver IAM permissions, delete failed orders only after fixing the cause to avoid the Let's Encrypt rate limit.", {"refs": ["@ops-cert-orders"]}),
    ("ops-proc-node-drain", P, "2026-11-07 04:00", "Replace a NotReady node: kubectl cordon, kubectl drain --ignore-daemonsets --delete-emptydir-data, terminate the instance, let the ASG replace it, check PodDisruptionBudgets.", {}),
    ("ops-proc-rds-storage", P, "2026-11-05 20:10", "Grow RDS storage: aws rds modify-db-instance --allocated-storage <GB> --apply-immediately; storage can only grow, and the next change must wait 6 hours.", {}),
    ("ops-proc-canary", P, "2026-11-19 10:30", "Watch a canary: after ./deploy.sh puts billing-api at 10%, compare error rate and p99 with the stable pods for 20 minutes, promote below 0.1% errors or roll back.", {"refs": ["@ops-canary"]}),
    ("ops-proc-sqs-backlog", P, "2026-11-15 05:10", "Drain an SQS backlog: check the consumer for OOMKilled or crash loops, raise limits or replicas, watch ApproximateAgeOfOldestMessage until under 5 s.", {}),
    ("ops-proc-oncall-override", P, "2026-11-14 23:10", "Set an on-call override: PagerDuty > Schedules > billing-prod > Override, same hours in CET, post the swap in #oncall.", {}),
]

# =====================================================================================
# 6. inbox (jsonl): quick captures. 10 good records and 6 bad ones, one per reject rule.
# =====================================================================================

INBOX_GOOD: list[dict] = [
    {"id": "inbox-001", "tier": "episodic", "content": "Alice mentioned in passing that the Orion contract renewal is in January and the CSV export might decide it.", "timestamp": "2026-11-20T15:40:00+01:00", "session_id": "inbox-2026-11-20"},
    {"id": "inbox-002", "tier": "semantic", "content": "Priya's quarterly planning happens in the first week of December; roadmap input is due by 2026-12-01.", "timestamp": "2026-11-18T10:00:00Z"},
    {"id": "inbox-003", "tier": "procedural", "content": "To get a Metabase CSV of invoices by customer: Questions > Invoices by customer > Download > .csv; it caps at 1 million rows.", "timestamp": "2026-11-20T16:05:00Z"},
    {"id": "inbox-004", "tier": "episodic", "content": "Jonas said he will be late on Monday 2026-11-23; train strike in Leipzig.", "timestamp": "2026-11-21T18:12:00+01:00", "session_id": "inbox-2026-11-21"},
    {"id": "inbox-005", "tier": "semantic", "content": "The staging Stripe account uses test clocks for subscription renewals; never point staging at the live key.", "timestamp": "2026-11-13T13:00:00Z"},
    {"id": "inbox-006", "tier": "episodic", "content": "Alice asked me to book the retro room for Friday 14:00 and order pastries.", "timestamp": "2026-11-19T09:02:00+01:00", "session_id": "inbox-2026-11-19", "readers": ["alice", "priya"]},
    {"id": "inbox-007", "tier": "semantic", "content": "Maya reads reviews best in the morning; schedule PR review requests for her before 11:00.", "timestamp": "2026-11-12T08:00:00Z"},
    {"id": "inbox-008", "tier": "procedural", "content": "Regenerate the OpenAPI client for web-dashboard: pnpm openapi-ts --input https://billing-staging.acme.io/openapi.json --output src/api/billing.", "timestamp": "2026-11-17T12:00:00Z"},
    {"id": "inbox-009", "tier": "episodic", "content": "Tom shared a paper on Matryoshka embeddings; he wants to try 256-dimension vectors for search-svc next quarter.", "timestamp": "2026-11-21T10:30:00Z", "session_id": "inbox-2026-11-21"},
    {"id": "inbox-010", "tier": "semantic", "content": "The company holiday party is on 2026-12-11; no deploys that afternoon.", "timestamp": "2026-11-16T09:00:00Z"},
]

SKILL_TAGS = {
    "pgvector-setup": ["pgvector", "Postgres 16", "search-svc"],
    "backup-restore": ["pg_dump", "pg_restore", "billing"],
    "deploy-service": ["deploy.sh", "ArgoCD"],
    "rotate-api-keys": ["Vault", "Stripe", "SendGrid"],
}

# The bad inbox lines, one per rule, as raw bytes (inserted between the good ones).
INBOX_BAD: list[tuple[int, bytes, str]] = [
    (2, b'{"id": "inbox-011", "tier": "semantic", "timestamp": "2026-11-18T09:00:00Z", "session_id": "inbox-2026-11-18", "metadata": {"note": "captured from a voice memo, transcription failed"}}',
     "missing content"),
    (4, b'{"id": "inbox-012", "tier": "working", "content": "Scratchpad: compare weasyprint and wkhtmltopdf render times again next week.", "timestamp": "2026-11-10T11:00:00Z"}',
     "unknown tier 'working'"),
    (5, b'{"id": "inbox-013", "tier": "episodic", "content": "Ravi said the staging cluster upgrade is postponed.", "timestamp": "last Tuesday after lunch"}',
     "unparseable timestamp"),
    (7, b'{"id": "sem-team-lunch", "tier": "semantic", "content": "Team lunch moved to Wednesdays at Mercado.", "timestamp": "2026-11-19T12:00:00Z"}',
     "duplicate id: also in facts (facts.jsonl.gz); both copies are rejected"),
    (8, b'{"id": "inbox-015", "tier": "episodic", "content": "Lena pasted a log line from the old box: caf\xe9 cr\xe8me br\xfbl\xe9e order failed", "timestamp": "2026-11-16T14:00:00Z"}',
     "invalid UTF-8 (Latin-1 bytes pasted into the line)"),
    (10, b'["inbox-016", "semantic", "Jonas: remember to renew the Figma seat"]',
     "a JSON array, not an object"),
]


# =====================================================================================
# Build
# =====================================================================================


def iso(ts: datetime, local: bool = False) -> str:
    """ISO-8601 text: UTC with Z, or Berlin local time with +01:00."""
    if local:
        return ts.astimezone(CET).isoformat()
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


BULLET_RE = re.compile(r"^[-*+]\s+")
TIME_RE = re.compile(r"^(\d{2}):(\d{2})\s+")


def entry_parts(raw: str) -> tuple[bool, str | None, str]:
    """(is paragraph, key, text as written) of a daily-log or MEMORY.md item."""
    para = raw.startswith("P:")
    if para:
        raw = raw[2:]
    key = None
    if raw.startswith("@"):
        key, raw = raw[1:].split(" ", 1)
    return para, key, raw


def wrapped(text: str, para: bool) -> list[str]:
    """Lines of one entry: bullets wrap onto 2-space continuation lines, paragraphs flush."""
    if len(text) <= 110:
        return [text if para else f"- {text}"]
    for width in range(100, 70, -1):
        # A continuation line must not read as a heading or a new bullet (e.g. "#501 ...").
        lines = textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)
        if not any(BULLET_RE.match(line) or line.startswith("#") for line in lines[1:]):
            break
    else:
        raise ValueError(f"cannot wrap {text!r}")
    if para:
        return lines
    return [f"- {lines[0]}", *(f"  {line}" for line in lines[1:])]


def md_id(relpath: str, lines: list[str]) -> str:
    """The id the markdown adapter gives an entry (store 'workspace')."""
    first, *rest = lines
    text = "\n".join([BULLET_RE.sub("", first, count=1), *(l.strip() for l in rest)]).strip()
    text = TIME_RE.sub("", text, count=1).strip()
    return f"workspace:{relpath}#{hashlib.sha1(text.encode('utf-8')).hexdigest()[:10]}"


def write_daily_logs(root: Path) -> tuple[dict[str, tuple[str, int, int]], int]:
    """memory/YYYY-MM-DD.md files; returns key -> (relpath, first line, last line) and entry count."""
    where: dict[str, tuple[str, int, int]] = {}
    count = 0
    for day, sessions in DAILY.items():
        relpath = f"memory/{day}.md"
        out = [f"# {day}", ""]
        for hhmm, heading, entries in sessions:
            out += [f"## {hhmm} {heading}" if hhmm else f"## {heading}", ""]
            prev_para = False
            for raw in entries:
                para, key, text = entry_parts(raw)
                if (para or prev_para) and out[-1] != "":
                    out.append("")
                lines = wrapped(text, para)
                start = len(out) + 1
                out += lines
                count += 1
                if key:
                    where[key] = (relpath, start, start + len(lines) - 1)
                    KEYS[key] = md_id(relpath, lines)
                prev_para = para
            out.append("")
        (root / relpath).write_text("\n".join(out).rstrip("\n") + "\n", encoding="utf-8")
    return where, count


def write_memory_md(root: Path, where: dict[str, tuple[str, int, int]]) -> tuple[int, list[tuple[str, str]]]:
    """MEMORY.md; returns the fact count and (memory id, daily entry key) of every Source: line."""
    out = ["# MEMORY", "", "Long-term notes about Alice, the team and the systems I work on.", ""]
    sources: list[tuple[str, str]] = []
    count = 1  # the intro paragraph is a memory too
    for section, items in MEMORY_MD:
        out += [f"## {section}", ""]
        for raw in items:
            para, _, text = entry_parts(raw)
            text, _, src = text.partition(" <@")
            if para and out[-1] != "":
                out.append("")
            lines = wrapped(text, para)
            memory_id = md_id("MEMORY.md", lines)
            out += lines
            count += 1
            if src:
                relpath, a, b = where[src]
                out.append(f"  Source: {relpath}#L{a}" + (f"-L{b}" if b != a else ""))
                sources.append((memory_id, src))
            if para:
                out.append("")
        out.append("")
    (root / "MEMORY.md").write_text("\n".join(out).rstrip("\n") + "\n", encoding="utf-8")
    return count, sources


# What real OpenClaw workspaces hold besides plain daily logs (issue 16): a "Still open" list
# carried forward day after day, a counter that changes between heartbeats, dated boilerplate,
# headings with times and zones, a suffixed log, an undated notes file with scaffolding and
# labels under two headings, Chinese entries, skills named in logs, a dreaming block with
# evidence lines, and a promoted MEMORY.md entry with its promotion marker.
STILL_OPEN = [
    "Ask Lena whether the quarterly key rotation can move to the first week of December.",
    "PR #530 is closed, issue #531 stays open until the docs portal indexer stops flooding Sentry.",
]
SHAPES_APPENDED = {
    "2026-11-18": [
        "## Heartbeat (21:00 Europe/Berlin)", "",
        "- Sentry backlog holds 37 open issues for billing-api.",
        "- Nightly backup — 02:00 UTC (Wednesday, November 18) finished in 11 min.", "",
        "## Still open", "", *(f"- {item}" for item in STILL_OPEN), "",
    ],
    "2026-11-19": [
        "## Heartbeat (21:00 Europe/Berlin)", "",
        "- Sentry backlog holds 22 open issues for billing-api.",
        "- Nightly backup — 02:00 UTC (Thursday, November 19) finished in 11 min.", "",
        "## Still open", "", *(f"- {item}" for item in STILL_OPEN), "",
        "**Why it waits**:",
        "- Lena is out until Monday.", "",
    ],
    "2026-11-20": [
        "## Still open", "", *(f"- {item}" for item in STILL_OPEN), "",
        "## 今日更新 (18:30)", "",
        "- 给上海办公室的同事发了 v2.9.0 发布说明的中文摘要，按 write-release-notes 技能的格式。", "",
    ],
    "2026-11-22": [
        "## 今日更新 (10:05)", "",
        "- 上海办公室确认收到了 v2.9.0 发布说明的中文摘要。", "",
    ],
}
RETRO_LOG = [
    "# Sprint 46 retro", "",
    "_Notes from the retro call._", "",
    "## 15:00 CET Retro", "",
    "- What went well: the deploy-service skill made the billing-api 2.9.0 rollout uneventful.",
    "- Created skills/write-release-notes/SKILL.md from the v2.9.0 notes; Jonas reviews it.", "",
    "### 16:30 (America/New_York) Call with Tom", "",
    "- Tom wants the docs portal indexer to batch its Sentry events before issue #531 can close.", "",
]
PEOPLE_NOTES = [
    "# People notes", "",
    "*Kept by the assistant; facts live in MEMORY.md.*", "",
    "Last updated: 2026-11-22", "",
    "---", "",
    "## Alice", "",
    "- **Timezone**: Europe/Berlin",
    "- **Prefers**: small PRs under 400 lines", "",
    "## Tom", "",
    "- **Timezone**: America/New_York",
    "- **Prefers**: recall over latency for docs search", "",
]


def write_openclaw_shapes(root: Path, where: dict[str, tuple[str, int, int]]) -> tuple[dict[str, int], list[tuple[str, str, str, str]]]:
    """Append the OpenClaw shapes to the workspace; returns counts (episodic, semantic, rejects) and
    the links they must make (source id, target id, type, note)."""
    episodic = semantic = rejects = 0
    for day, lines in SHAPES_APPENDED.items():
        path = root / "memory" / f"{day}.md"
        path.write_text(path.read_text(encoding="utf-8") + "\n" + "\n".join(lines), encoding="utf-8")
        episodic += sum(1 for line in lines if line.startswith("- "))
    relpath, first, last = where["wl-deploy-prod"]
    dream = [
        "## Light Sleep", "",
        "<!-- openclaw:dreaming:light:start -->",
        "- Candidate: ./deploy.sh billing-api prod 2.9.0 with a 10% canary for 20 minutes",
        "  - confidence: 0.62",
        f"  - evidence: {relpath}:{first}-{last}",
        "  - recalls: 3",
        "  - status: staged",
        "- Candidate: Assistant: HEARTBEAT_OK",
        "  - confidence: 0.00",
        "  - evidence: memory/.dreams/session-corpus/2026-11-20.txt:12-12",
        "  - recalls: 0",
        "  - status: staged",
        "<!-- openclaw:dreaming:light:end -->", "",
    ]
    path = root / "memory" / "2026-11-20.md"
    path.write_text(path.read_text(encoding="utf-8") + "\n" + "\n".join(dream), encoding="utf-8")
    rejects += 1  # the candidate citing the session corpus, which is no entry of the store
    (root / "memory" / "2026-11-23-retro.md").write_text("\n".join(RETRO_LOG), encoding="utf-8")
    (root / "memory" / "people-notes.md").write_text("\n".join(PEOPLE_NOTES), encoding="utf-8")
    episodic += sum(1 for line in RETRO_LOG + PEOPLE_NOTES if line.startswith("- "))
    promoted = "billing-api 2.9.0 went to production behind a 10% canary for 20 minutes."
    memory_md = root / "MEMORY.md"
    memory_md.write_text(memory_md.read_text(encoding="utf-8") + "\n".join([
        "", "## Promoted From Short-Term Memory (2026-11-21)", "",
        f"<!-- openclaw-memory-promotion:memory:{relpath}:{first}:{last} -->",
        f"- {promoted} [score=0.812 recalls=3 avg=0.700 source={relpath}:{first}-{last}]", "",
    ]), encoding="utf-8")
    semantic += 1
    retro = "memory/2026-11-23-retro.md"
    zh = "memory/2026-11-20.md"
    links = [
        (md_id("MEMORY.md", [f"- {promoted}"]), key_id("wl-deploy-prod"), "derives_from",
         "Promoted MEMORY.md entry: its openclaw-memory-promotion marker and source= tag cite the 2026-11-19 prod deploy."),
        ("workspace:skill/deploy-service", md_id(retro, [RETRO_LOG[6]]), "generalizes",
         "A retro entry names the deploy-service skill (its folder name): an explicit reference."),
        ("workspace:skill/write-release-notes", md_id(retro, [RETRO_LOG[7]]), "generalizes",
         "A retro entry names skills/write-release-notes/SKILL.md (its path): an explicit reference."),
        ("workspace:skill/write-release-notes", md_id(zh, [SHAPES_APPENDED["2026-11-20"][-2]]), "generalizes",
         "A Chinese entry names the write-release-notes skill: an explicit reference."),
    ]
    return {"episodic": episodic, "semantic": semantic, "rejects": rejects}, links


def write_skills(root: Path) -> int:
    for rel, name, description, body in SKILLS:
        folder = root / "skills" / rel
        folder.mkdir(parents=True, exist_ok=True)
        head = ["---", f"name: {name}", f"description: {json.dumps(description)}"]
        if name in SKILL_TAGS:
            head.append("tags: [" + ", ".join(json.dumps(t) for t in SKILL_TAGS[name]) + "]")
        title = name.replace("-", " ").capitalize()
        text = "\n".join([*head, "---", "", f"# {title}", "", body.rstrip("\n"), ""])
        (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return len(SKILLS)


def chat_records(chats, prefix: str, session_prefix: str, namespace: str, local_every: int) -> list[dict]:
    """Episodic turns with ids <prefix>-YYYY-MM-DD-NNN, numbered per day in time order."""
    records: list[dict] = []
    per_day: dict[str, int] = {}
    for index, (start, slug, channel, turns) in enumerate(sorted(chats, key=lambda c: c[0])):
        ts = parse_utc(start) + timedelta(seconds=RNG.randint(0, 59))
        day = start[:10]
        local = local_every > 0 and index % local_every == 1
        previous = None
        for turn in turns:
            speaker, text, opts = (*turn, {}) if len(turn) == 2 else turn
            per_day[day] = per_day.get(day, 0) + 1
            memory_id = f"{prefix}-{day}-{per_day[day]:03d}"
            if opts.get("key"):
                KEYS[opts["key"]] = memory_id
            refs = resolve_refs(opts.get("refs", []))
            if opts.get("reply") and previous:
                refs.append(previous)
            record = {
                "id": memory_id,
                "tier": "episodic",
                "content": text,
                "timestamp": iso(ts, local),
                "session_id": f"{session_prefix}-{day}-{slug}",
                "namespace": namespace,
            }
            if opts.get("readers"):
                record["readers"] = opts["readers"]
            if opts.get("entities"):
                record["entities"] = opts["entities"]
            if refs:
                record["refs"] = refs
            role = "assistant" if speaker in (A, OB) else ("system" if speaker in ("pagerduty", "grafana", "argocd", "ci", "cron") else "user")
            record["metadata"] = {"speaker": speaker, "role": role, "channel": channel}
            records.append(record)
            previous = memory_id
            ts += timedelta(seconds=RNG.randint(35, 70) if role == "assistant" else RNG.randint(60, 420))
    return records


def simple_records(rows, namespace: str, default_tier: str | None = None) -> list[dict]:
    """Facts / procedures / ops memories from (id, [tier,] ts, content, opts) tuples."""
    out = []
    for row in rows:
        if default_tier:
            memory_id, ts, content, opts = row
            tier = default_tier
        else:
            memory_id, tier, ts, content, opts = row
        record = {"id": memory_id, "tier": tier, "content": content, "timestamp": iso(parse_utc(ts)), "namespace": namespace}
        if opts.get("readers"):
            record["readers"] = opts["readers"]
        if opts.get("entities"):
            record["entities"] = opts["entities"]
        refs = resolve_refs(opts.get("refs", []))
        if refs:
            record["refs"] = refs
        record["metadata"] = {"source": "consolidation" if refs else "assistant-note", "confidence": opts.get("confidence", 0.9 if refs else 0.8)}
        out.append(record)
    return out


def jsonl_bytes(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n" for r in records)


def write_sqlite(path: Path, records: list[dict]) -> None:
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE memories (id TEXT PRIMARY KEY, tier TEXT, content TEXT, timestamp TEXT, session_id TEXT,"
        " namespace TEXT, readers TEXT, entities TEXT, refs TEXT, metadata TEXT)"
    )
    for r in records:
        con.execute(
            "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                r["id"], r["tier"], r["content"], r["timestamp"], r.get("session_id"), r["namespace"],
                json.dumps(r["readers"]) if r.get("readers") else None,
                json.dumps(r.get("entities", [])),
                json.dumps(r.get("refs", [])),
                json.dumps(r["metadata"], sort_keys=True),
            ),
        )
    con.commit()
    con.execute("VACUUM")
    con.close()


def write_parquet(path: Path, records: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def ts(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)

    schema = pa.schema([
        ("id", pa.string()), ("tier", pa.string()), ("content", pa.string()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("session_id", pa.string()), ("namespace", pa.string()),
        ("readers", pa.list_(pa.string())), ("entities", pa.list_(pa.string())), ("refs", pa.list_(pa.string())),
        ("metadata", pa.string()),
    ])
    columns = {
        "id": [r["id"] for r in records],
        "tier": [r["tier"] for r in records],
        "content": [r["content"] for r in records],
        "timestamp": [ts(r["timestamp"]) for r in records],
        "session_id": [r.get("session_id") for r in records],
        "namespace": [r["namespace"] for r in records],
        "readers": [r.get("readers") for r in records],
        "entities": [r.get("entities", []) for r in records],
        "refs": [r.get("refs", []) for r in records],
        "metadata": [json.dumps(r["metadata"], sort_keys=True) for r in records],
    }
    pq.write_table(pa.table(columns, schema=schema), path, compression="snappy")


def write_inbox(path: Path) -> tuple[int, int]:
    good = [{**r, "namespace": "default"} for r in INBOX_GOOD]
    lines = [json.dumps(r, ensure_ascii=False).encode("utf-8") for r in good]
    for position, raw, _ in INBOX_BAD:
        lines.insert(position, raw)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return len(good), len(INBOX_BAD)


def table_row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    ws = HERE / "workspace"
    if ws.exists():
        shutil.rmtree(ws)
    (ws / "memory").mkdir(parents=True)
    where, n_daily = write_daily_logs(ws)
    n_memory_md, sources = write_memory_md(ws, where)
    n_skills = write_skills(ws)
    shapes, shape_links = write_openclaw_shapes(ws, where)

    episodes = chat_records(CHATS, "ep", "chat", "default", local_every=2)
    (HERE / "episodes.jsonl").write_bytes(jsonl_bytes(episodes))

    facts = simple_records(FACTS, "default", default_tier="semantic")
    with open(HERE / "facts.jsonl.gz", "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(jsonl_bytes(facts))

    procedures = simple_records(PROCEDURES, "default")
    write_sqlite(HERE / "procedures.sqlite", procedures)

    ops = chat_records(OPS_CHATS, "ops-ep", "oncall", "ops", local_every=0) + simple_records(OPS_MEMORIES, "ops")
    write_parquet(HERE / "ops.parquet", ops)

    n_inbox_good, n_inbox_bad = write_inbox(HERE / "inbox.jsonl")

    # ---- counts (what extract_all should report) ----
    all_ids = [r["id"] for r in episodes + facts + procedures + ops + INBOX_GOOD]
    assert len(all_ids) == len(set(all_ids)), "ids must be unique across the stores"
    read = {
        "workspace": n_daily + n_memory_md + n_skills + shapes["episodic"] + shapes["semantic"] + shapes["rejects"],
        "episodes": len(episodes),
        "facts": len(facts),
        "procedures": len(procedures),
        "ops": len(ops),
        "inbox": n_inbox_good + n_inbox_bad,
    }
    # The duplicate-id line in the inbox also takes down its twin in facts (both copies rejected).
    rejects = {"inbox": n_inbox_bad, "facts": 1, "workspace": shapes["rejects"]}
    tiers = {"episodic": n_daily + shapes["episodic"], "semantic": n_memory_md + shapes["semantic"], "procedural": n_skills}
    for r in episodes + facts + procedures + ops + INBOX_GOOD:
        if r["id"] != "sem-team-lunch":
            tiers[r["tier"]] += 1
    namespaces = {"default": sum(tiers.values()) - len(ops), "ops": len(ops)}
    with_readers = sum(1 for r in episodes + facts + procedures + ops + INBOX_GOOD if r.get("readers"))
    write_expected(read, rejects, tiers, namespaces, with_readers, sources, shape_links)
    print(f"records read {sum(read.values())} ({read}); rejects {sum(rejects.values())}; memories {sum(tiers.values())} {tiers}")


PLANTED = [
    # (source key or id, target key or id, type, note)
    ("sem-maya-spaces", "sem-maya-tabs", "contradicts",
     "Maya's indentation preference flips from tabs (2026-11-02) to spaces (2026-11-16, 'no longer prefers tabs'). The later fact refs the earlier one. Symmetric: stored once, either order."),
    ("proc-sem-billing-py312", "sem-billing-py311", "contradicts",
     "Same subject, conflicting version: 'The billing API runs on Python 3.11' (facts) vs '... runs on Python 3.12' (a semantic row in procedures.sqlite, refs the old fact). Symmetric: stored once, either order."),
    ("@ep-pool-bump", "@ep-latency", "causal",
     "Cause -> effect: Ravi's PR #501 bumps pgbouncer default_pool_size 20 -> 60 (2026-11-09); next morning 'The billing-api latency spike was caused by PR #501 ...' (refs the cause)."),
    ("@ep-react-merge", "@ep-ci-break", "causal",
     "Cause -> effect: Jonas merges #482 (React 19, Next.js 15); next day 'web-dashboard CI went red on main due to the React 19 upgrade in PR #482' (refs the cause)."),
    ("@ops-cert-orders", "@ops-cert-expired", "causal",
     "Namespace ops: cert-manager DNS-01 orders rate-limited by letsencrypt-prod -> 'auth-gateway served an expired TLS certificate because ...' (refs the cause)."),
    ("@ep-pgv-ask", "@ep-pgv-ext", "temporal_sequence",
     "Consecutive turns of session chat-2026-11-05-pgvector-staging: Tom asks for pgvector on search_staging, the assistant reports CREATE EXTENSION vector done (reply ref)."),
    ("@ep-dump-ask", "@ep-dump-done", "temporal_sequence",
     "Consecutive turns of session chat-2026-11-12-migration-0042: 'take a pg_dump before migration 0042' -> the pg_dump report (reply ref)."),
    ("sem-alice-ts-pref", "@ep-ts-ask", "derives_from",
     "The TypeScript preference fact (2026-11-03 18:00) was learned from Alice's request that morning; refs the episode."),
    ("sem-search-pgvector", "@ep-pgv-ext", "derives_from",
     "The search-svc pgvector fact (2026-11-05 17:00) was learned from the setup session; refs the CREATE EXTENSION turn."),
    ("sem-search-pgvector", "@ep-pgv-index", "derives_from",
     "Same fact, second source episode: the HNSW index turn (m = 16, ef_construction = 64)."),
    ("proc-pgvector-setup", "@ep-pgv-ext", "generalizes",
     "The pgvector setup procedure (sqlite) abstracts the 2026-11-05 setup episode: pgvector 0.7.4, vector(384), HNSW, search-svc; refs it."),
    ("proc-pg-dump-backup", "@ep-dump-done", "generalizes",
     "The pg_dump backup-before-migration procedure abstracts the 2026-11-12 pg_dump of billing before migration 0042; refs it."),
    ("proc-deploy-sh", "@ep-deploy-staging", "generalizes",
     "The deploy.sh procedure abstracts './deploy.sh search-svc staging 1.4.0'; refs it."),
]

MUST_NOT_LINK = [
    ("ops-sem-billing-py312", "proc-sem-billing-py312", "identical text in namespaces ops and default"),
    ("@ops-latency", "@ep-latency", "the ops episode refs the default-namespace episode explicitly: the ref must not cross namespaces"),
    ("ops-sem-pool-budget", "sem-pool-budget", "near-duplicate connection budget facts in two namespaces"),
    ("ops-proc-pg-dump", "proc-pg-dump-backup", "two pg_dump procedures in two namespaces"),
    ("ops-sem-deploy-sh", "sem-deploy-sh", "deploy.sh facts in two namespaces"),
]


def rid(ref: str) -> str:
    return key_id(ref[1:]) if ref.startswith("@") else ref


def write_expected(read, rejects, tiers, namespaces, with_readers, sources, shape_links) -> None:
    out = [
        "# Sample data: what is in it and what the pipeline should find",
        "",
        "Generated by `build_sample.py` (do not edit by hand: rerun the script). Ids in the tables",
        "are resolved by the script, so they are exact.",
        "",
        "## Planted relationships",
        "",
        "Each of these carries an explicit reference (`refs`), so it must be published whatever its",
        "score; the test is its type and direction. `contradicts` is symmetric: stored once, in a",
        "deterministic order of its two ends, so either order counts. The contradiction pairs also",
        "meet the classifier's bar without help (negation or a different version, shared subject",
        "terms, near-identical wording); the causal effects use the cues 'caused by' and 'due to'",
        "and avoid other cue words ('since', 'so') and negations that could mislead the rules.",
        "",
        table_row("source_id", "target_id", "relationship_type", "note"),
        table_row("---", "---", "---", "---"),
    ]
    out += [table_row(rid(s), rid(t), kind, note) for s, t, kind, note in PLANTED]
    out += [
        "",
        "### Markdown workspace: MEMORY.md facts with `Source:` lines",
        "",
        "Each `Source: memory/D.md#Lx-Ly` line makes the MEMORY.md fact reference the daily-log",
        "entry on those lines, so each pair below is an explicit link; a semantic fact pointing at the",
        "episode it came from is `derives_from` (semantic -> episodic).",
        "",
        table_row("source_id", "target_id", "relationship_type", "note"),
        table_row("---", "---", "---", "---"),
    ]
    out += [table_row(mid, key_id(src), "derives_from", f"MEMORY.md Source: line -> daily-log entry @{src}") for mid, src in sources]
    out += [
        "",
        "### Markdown workspace: what OpenClaw writes",
        "",
        "A promotion marker (`<!-- openclaw-memory-promotion:... -->`) and `source=`/`evidence:` lines",
        "make the MEMORY.md entry reference the daily-log entry they cite; naming a skill (its folder,",
        "its path, in any language) in a log is an explicit reference to it. The workspace also holds",
        "a \"Still open\" list carried forward over three days (each copy links to the next, reason",
        "\"Carried forward\"), a counter that changes between two heartbeats (a `temporal_sequence`",
        "saying what changed, never `contradicts`), dated nightly boilerplate, a suffixed log",
        "(`2026-11-23-retro.md`), an undated notes file with scaffolding, labels and two headings,",
        "heading times with zones, Chinese entries and a dreaming block (one candidate kept with the",
        "entry it cites, one citing the session corpus: a reject naming it).",
        "",
        table_row("source_id", "target_id", "relationship_type", "note"),
        table_row("---", "---", "---", "---"),
    ]
    out += [table_row(a, b, kind, note) for a, b, kind, note in shape_links]
    out += [
        "",
        "## Must not link (different namespaces)",
        "",
        "Links never cross namespaces, however similar the text or explicit the reference.",
        "",
        table_row("id_a", "id_b", "why"),
        table_row("---", "---", "---"),
    ]
    out += [table_row(rid(a), rid(b), why) for a, b, why in MUST_NOT_LINK]
    total_read = sum(read.values())
    total_rejects = sum(rejects.values())
    out += [
        "",
        "## Counts (extract)",
        "",
        table_row("store", "kind", "records read", "rejects"),
        table_row("---", "---", "---", "---"),
    ]
    kinds = {"workspace": "markdown", "episodes": "jsonl", "facts": "jsonl.gz", "procedures": "sqlite", "ops": "parquet", "inbox": "jsonl"}
    out += [table_row(name, kinds[name], str(n), str(rejects.get(name, 0))) for name, n in read.items()]
    out += [
        table_row("**total**", "", str(total_read), str(total_rejects)),
        "",
        f"Memories: {sum(tiers.values())} = {total_read} read - {total_rejects} rejects "
        f"(episodic {tiers['episodic']}, semantic {tiers['semantic']}, procedural {tiers['procedural']}; "
        f"namespace default {namespaces['default']}, ops {namespaces['ops']}). "
        f"{with_readers} memories carry `readers` limits.",
        "",
        "The workspace reads as one record per entry of a file under memory/, per MEMORY.md bullet or",
        "paragraph (the intro paragraph included), per SKILL.md, and per dreaming candidate that cites",
        "nothing in the store (a reject); scaffolding and labels are no records.",
        "",
        "## The six bad inbox lines",
        "",
        "`inbox.jsonl` holds 10 good records and 6 bad ones, one per rule. The duplicate id also",
        "rejects its twin in `facts` (every copy of a duplicate id is rejected, naming the others),",
        "hence 7 rejects in all.",
        "",
        table_row("line", "rule"),
        table_row("---", "---"),
    ]
    out += [table_row(str(position + 1), rule) for position, _, rule in INBOX_BAD]
    out += [
        "",
        "## At the default settings (calibrated scores, issue 12)",
        "",
        "With `MIN_CORRELATION_SCORE=0.6`, the seed's weights and the bundled calibration, at most 25% of",
        "the memories may be orphans (tests/link/test_links_sample.py). Measured with `ctc run` on",
        "2026-12-07 (a later stop): 12 orphans of 499 (2%; episodic 6, semantic 3, procedural 3), 1,625 links",
        "(temporal_sequence 431, references 391, derives_from 284, generalizes 278, supports 194, causal 44,",
        "contradicts 3) with fp32 embeddings (`EMBED_PRECISION=fp32`, what a CPU without bf16 runs); a CPU",
        "that multiplies bf16 in hardware embeds in bf16 (`EMBED_PRECISION=auto`), and a few links scored",
        "at the threshold fall on the other side there (1,623 links: references 389, temporal_sequence 430,",
        "derives_from 283, supports 196). Three terms are common in the `default` namespace (in at least 10%",
        "of its 433 memories: `billing-api`, `invoic`, `pr`) and weigh as common words in co_occurrence",
        "(docs/links.md, \"Terms common in a namespace\"): before that, 1,745 / 1,744 links and 13 orphans. The 3",
        "contradictions: the 2 planted above and the billing-api Python 3.11 episode against the 3.12",
        "fact. Missed: Maya's 'no longer prefers tabs' against the MEMORY.md line that she indents her",
        "scratch scripts with tabs (a real conflict) is a `references` link: a negation contradicts only",
        "a side that states every word of the denied phrase ('prefer tab'), the rule that keeps",
        "contradiction precision first. The two MEMORY.md lines on Python 3.12 now and 3.11 until the PR",
        "are a change of state (`Changed: billing-api Python 3.11 -> 3.12`), and the two lines that ban",
        "float `round()` in other words agree. Before the calibration, 292 of 478 memories were orphans.",
        "",
        "## What the sample is",
        "",
        "Three weeks (2026-11-02 .. 2026-11-22) of an AI coding/ops assistant working for Alice Novak,",
        "tech lead for billing, and her team (Maya, Jonas, Ravi, Tom, Priya, Lena): invoice rounding,",
        "a TypeScript settings page, pgvector search, a billing latency incident caused by a pgbouncer",
        "pool change, a React 19 upgrade that broke CI, Python 3.11 -> 3.12, key rotation, a restore",
        "drill and the v2.9.0 release. Namespace `ops` is the on-call agent's memory of the same weeks.",
        "A few memories are private (`readers`: Alice's dentist, physio and salary notes; an on-call",
        "swap; a security finding; the break-glass procedure).",
        "",
    ]
    (HERE / "EXPECTED.md").write_text("\n".join(out), encoding="utf-8")


if __name__ == "__main__":
    main()

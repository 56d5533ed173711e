"""The scale data set of `make bench`: a large organisation's two years, in PostgreSQL.

At BENCH_SCALE=1.0 (the default; 0.01 for a quick run, any positive number works) it holds
1,000 tenants, 10,000 users, their memberships and quotas, 1,000,000 GPU requests and
allocations over two years (with their notebooks, one for every twentieth allocation) and
1,000,000 audit events, and the statements of the closed months (one of them 100,000 lines
long). Tenants, users and requests scale together; the shape stays the same.

Written through the project's own services, because they are fast enough at this size and so
the rows are exactly what the portal writes:
- the GPU catalog (`catalog_presets_load`), the tenants (`tenant_create`), their quotas
  (`quota_set`, two GPU models each), the personas' accounts (`user_create`) and the personas'
  memberships (`membership_set`), and the one cluster the notebooks run in (`cluster_create`,
  disabled so that no provisioning run is queued).
Written with bulk inserts (PostgreSQL's COPY through psycopg's `cursor.copy`), because a
service call per row would take hours (each is a transaction with its own audit event):
- the 10,000 other users (no password: they sign in through SSO), their memberships, the
  1,000,000 requests, their notebooks and the 1,000,000 audit events. Their values follow what
  the services write (states, decision times, allocation times, GPU-eq of the offering).
Written in SQL from the requests (`INSERT … SELECT`, for the same reason): the closed months
  (every whole month before this one) with a final statement per tenant and a line per
  allocation that started in the month, priced at its model's rate; tenant 0's newest closed
  month has 100,000 more lines (the statement download the benchmark reads).
Written in SQL from the allocations (`INSERT … SELECT`), then rolled up through metering's own
`daily_rollup`: a year of hourly usage of a cluster of 10,000 GPUs as metering stores it (a
record per allocation and hour it held GPUs: some 8,000,000 at scale 1.0, about 1,100 GPU-eq
held on average, which is what a million requests over two years amount to; the GPUs present
each hour; each hour's window; the daily rollup).

Run as `DATABASE_URL=... BENCH_SCALE=0.01 python -m tests.bench.scale` against an empty,
migrated database; the benchmark does that once per scale and migration state, and keeps a
`pg_dump -Fc` of the result in var/bench/ to restore next time (tests/bench/bench_portal_reads.py).
"""

import hashlib
import os
import random
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Two years of history, ending when the data set is seeded (a cached data set ages: its
# pending requests stay pending, its active allocations stay active past their end).
SPAN = timedelta(days=730)
SEED = 19


@dataclass(frozen=True)
class Shape:
    """How many of each thing one scale holds."""

    scale: float
    tenants: int
    users: int
    requests: int
    audit_events: int
    big_statement_lines: int
    gpus: int

    @classmethod
    def at(cls, scale: float) -> "Shape":
        tenants = max(4, round(1000 * scale))
        return cls(
            scale=scale,
            tenants=tenants,
            users=max(10 * tenants, round(10_000 * scale)),
            requests=max(1000, round(1_000_000 * scale)),
            audit_events=max(1000, round(1_000_000 * scale)),
            big_statement_lines=max(1000, round(100_000 * scale)),
            gpus=max(100, round(10_000 * scale)),
        )


def bench_scale() -> float:
    raw = os.environ.get("BENCH_SCALE", "").strip() or "1.0"
    scale = float(raw)
    if not 0 < scale <= 10:
        raise ValueError(f"BENCH_SCALE must be more than 0 and at most 10, not {raw!r}")
    return scale


def data_set_key(scale: float) -> str:
    """What a cached data set depends on: the scale, the migrations, this module and the
    metering code whose daily rollup it writes with."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update((ROOT / "portal" / "metering" / "collection.py").read_bytes())
    for path in sorted(ROOT.glob("**/migrations/*.py")):
        if ".venv" in path.parts:
            continue
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return f"scale{scale:g}-{digest.hexdigest()[:12]}"


# Usernames of the personas the benchmark signs in as (and what each is).
ADMIN = "bench-admin"  # a global admin, through user_create
FINANCE = "bench-finance"  # finance, through user_create


def username(number: int) -> str:
    return f"u{number:05d}"


def lead_username() -> str:
    """The first user of tenant 0: a lead there, and (through membership_set) in tenant 1."""
    return username(0)


def developer_username(shape: Shape) -> str:
    """The third user of tenant 0: a developer there and nowhere else."""
    return username(2 * shape.tenants)


def tenant_slug(number: int) -> str:
    return f"team-{number:04d}"


REQUEST_COLUMNS = (
    "id", "tenant_id", "requester_id", "offering_id", "gpu_model_id", "count", "gpu_eq_num",
    "gpu_eq_den", "state", "purpose", "justification", "duration_hours", "starts_at", "ends_at",
    "decided_by_id", "decided_at", "decision_comment", "expiry_notice_sent_at", "created_at",
    "updated_at",
)  # fmt: skip
# Past requests end like this (cumulative weights): released, expired, rejected, cancelled, revoked.
PAST_STATES = ("released", "expired", "rejected", "cancelled", "revoked")
PAST_WEIGHTS = (60, 85, 93, 98, 100)
# The last two days' requests are still moving.
RECENT_STATES = ("pending", "active", "approved", "released")
RECENT_WEIGHTS = (20, 70, 75, 100)
AUDIT_ACTIONS = (
    ("gpu_request.submit", "gpurequest"), ("gpu_request.approve", "gpurequest"),
    ("gpu_request.release", "gpurequest"), ("gpu_request.expire", "gpurequest"),
    ("gpu_request.reject", "gpurequest"), ("notebook.launch", "notebook"),
    ("notebook.stop", "notebook"), ("notebook.delete", "notebook"),
    ("membership.add", "membership"), ("quota.set", "quota"), ("api_token.create", "apitoken"),
)  # fmt: skip


# The usage metering keeps: a year of hours before the data set was seeded.
USAGE_SPAN = timedelta(days=365)
# A record per allocation and hour it held GPUs in the span: the seconds of the hour it held
# them times its GPU-eq, in lowest terms.
USAGE_RECORDS = """
INSERT INTO metering_usagerecord (cluster_id, hour, tenant_id, namespace, user_id,
  workload_kind, workload, notebook_id, allocation_id, gpu_model_id, offering_id, reserved_num,
  reserved_den, requested_num, requested_den, used_gpu_hours, memory_gib_hours, cpu_core_hours,
  ram_gib_hours)
SELECT c.id, h.hour, r.tenant_id, c.namespace_prefix || t.slug,
  coalesce(n.owner_id, r.requester_id),
  CASE WHEN n.id IS NULL THEN 'allocation' ELSE 'notebook' END,
  coalesce(n.name, 'allocation-' || r.id), n.id, r.id, r.gpu_model_id, r.offering_id,
  q.num / gcd(q.num, q.den), q.den / gcd(q.num, q.den),
  CASE WHEN n.id IS NULL THEN 0 ELSE q.num / gcd(q.num, q.den) END,
  CASE WHEN n.id IS NULL THEN 1 ELSE q.den / gcd(q.num, q.den) END,
  round(q.num::numeric / q.den * (0.2 + (r.id + extract(hour FROM h.hour)::int) %% 7 * 0.1), 6),
  round(q.num::numeric / q.den * 24, 6),
  round(q.num::numeric / q.den * 8, 6),
  round(q.num::numeric / q.den * 32, 6)
FROM allocations_gpurequest r
JOIN tenants_tenant t ON t.id = r.tenant_id
JOIN cluster_cluster c ON c.id = %(cluster)s
LEFT JOIN workloads_notebook n ON n.allocation_id = r.id
CROSS JOIN LATERAL generate_series(
  date_trunc('hour', greatest(r.starts_at, %(since)s)),
  least(r.ends_at, %(until)s) - interval '1 microsecond', interval '1 hour') h(hour)
CROSS JOIN LATERAL (SELECT
  r.gpu_eq_num * floor(extract(epoch FROM
    least(r.ends_at, h.hour + interval '1 hour') - greatest(r.starts_at, h.hour)))::bigint AS num,
  r.gpu_eq_den * 3600 AS den) q
WHERE r.starts_at IS NOT NULL AND r.ends_at > %(since)s AND r.starts_at < %(until)s
  AND q.num > 0
ORDER BY h.hour
"""
# The GPUs present each hour, shared evenly among the catalog's models, named as the DCGM
# exporter names them.
USAGE_CAPACITY = """
INSERT INTO metering_usagecapacity
  (cluster_id, hour, gpu_model_id, model_name, gpu_hours_num, gpu_hours_den)
SELECT %(cluster)s, h.hour, m.id, replace(m.node_label_value, '-', ' '),
  %(gpus)s / m.models + CASE WHEN m.position <= %(gpus)s %% m.models THEN 1 ELSE 0 END, 1
FROM generate_series(%(since)s, %(until)s - interval '1 hour', interval '1 hour') h(hour)
CROSS JOIN (SELECT id, node_label_value, row_number() OVER (ORDER BY id) AS position,
  count(*) OVER () AS models FROM catalog_gpumodel) m
"""
USAGE_WINDOWS = """
INSERT INTO metering_usagewindow
  (cluster_id, start, state, attempts, error, queries, records, started_at, finished_at)
SELECT %(cluster)s, h.hour, 'done', 1, '', 12, coalesce(r.records, 0),
  h.hour + interval '1 hour 2 minutes', h.hour + interval '1 hour 3 minutes'
FROM generate_series(%(since)s, %(until)s - interval '1 hour', interval '1 hour') h(hour)
LEFT JOIN (SELECT hour, count(*) AS records FROM metering_usagerecord
  WHERE cluster_id = %(cluster)s GROUP BY hour) r ON r.hour = h.hour
"""


def _month_after(moment: datetime) -> datetime:
    """The first day of the month after `moment`'s."""
    return (moment.replace(day=1) + timedelta(days=32)).replace(day=1)


def _say(message: str) -> None:
    sys.stderr.write(f"    seed: {message}\n")
    sys.stderr.flush()


class Seeder:
    def __init__(self, shape: Shape, now: datetime) -> None:
        self.shape = shape
        self.now = now
        self.start = now - SPAN
        self.random = random.Random(SEED)

    # Through the services.

    def services(self) -> None:
        from portal.accounts.models import GlobalRole  # noqa: PLC0415
        from portal.accounts.services import user_create  # noqa: PLC0415
        from portal.catalog.models import GpuModel, NotebookImage, Offering  # noqa: PLC0415
        from portal.catalog.presets import catalog_presets_load  # noqa: PLC0415
        from portal.cluster.services.clusters import cluster_create  # noqa: PLC0415
        from tenants.services import quota_set, tenant_create  # noqa: PLC0415

        started = time.monotonic()
        catalog_presets_load(actor=None)
        self.admin = user_create(
            actor=None, username=ADMIN, email=f"{ADMIN}@example.org", global_role=GlobalRole.ADMIN
        )
        user_create(
            actor=None,
            username=FINANCE,
            email=f"{FINANCE}@example.org",
            global_role=GlobalRole.FINANCE,
        )
        models = list(GpuModel.objects.order_by("slug"))
        self.tenant_ids: list[int] = []
        self.tenant_models: list[list[Any]] = []
        for number in range(self.shape.tenants):
            tenant = tenant_create(
                actor=self.admin,
                slug=tenant_slug(number),
                name=f"Team {number:04d}",
                cost_centre=f"CC-{4000 + number % 500}",
            )
            chosen = [models[number % len(models)], models[(number + 2) % len(models)]]
            for gpu_model in chosen:
                quota_set(actor=self.admin, tenant=tenant, gpu_model=gpu_model, gpu_eq=16)
            self.tenant_ids.append(tenant.pk)
            self.tenant_models.append([gpu_model.pk for gpu_model in chosen])
        self.offerings: dict[int, list[tuple[int, int, int]]] = {}
        for offering in Offering.objects.filter(enabled=True):
            gpu_eq = offering.gpu_eq
            self.offerings.setdefault(offering.gpu_model_id, []).append(
                (offering.pk, gpu_eq.numerator, gpu_eq.denominator)
            )
        self.cluster = cluster_create(actor=self.admin, name="bench", enabled=False)
        self.image = NotebookImage.objects.filter(enabled=True).order_by("slug").first()
        _say(
            f"services: catalog, {self.shape.tenants} tenants and their quotas "
            f"in {time.monotonic() - started:.1f} s"
        )

    def personas(self) -> None:
        """The lead also leads tenant 1 (membership_set): a lead of two tenants."""
        from portal.accounts.models import MemberRole, User  # noqa: PLC0415
        from tenants.models import Tenant  # noqa: PLC0415
        from tenants.services import membership_set  # noqa: PLC0415

        lead = User.objects.get(username=lead_username())
        membership_set(
            actor=self.admin,
            tenant=Tenant.objects.get(pk=self.tenant_ids[1]),
            user=lead,
            role=MemberRole.LEAD,
        )

    # Bulk.

    def _copy(self, table: str, columns: tuple[str, ...], rows: Any) -> int:
        from django.db import connection  # noqa: PLC0415

        count = 0
        raw = connection.connection
        assert raw is not None
        with raw.cursor() as cursor:
            # The rows are consistent by construction: no foreign key check per row (a million
            # deferred checks at commit), for this transaction only.
            cursor.execute("SET LOCAL session_replication_role = replica")
            statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
            with cursor.copy(statement) as copy:
                for row in rows:
                    copy.write_row(row)
                    count += 1
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "  # noqa: S608
                f"(SELECT max(id) FROM {table}))"
            )
        return count

    def users(self) -> None:
        from django.contrib.auth.hashers import make_password  # noqa: PLC0415
        from django.db import connection  # noqa: PLC0415

        with connection.cursor() as cursor:
            cursor.execute("SELECT coalesce(max(id), 0) FROM accounts_user")
            first = cursor.fetchone()[0] + 1
        self.user_ids = [first + number for number in range(self.shape.users)]
        unusable = make_password(None)
        columns = (
            "id", "password", "is_superuser", "username", "first_name", "last_name", "email",
            "is_staff", "is_active", "date_joined", "global_role", "language", "time_zone",
        )  # fmt: skip

        def rows() -> Any:
            for number, pk in enumerate(self.user_ids):
                name = username(number)
                joined = self.start + timedelta(seconds=self.random.uniform(0, 86400 * 60))
                yield (
                    pk, unusable, False, name, f"User{number}", "Bench", f"{name}@example.org",
                    False, True, joined, "", "", "UTC",
                )  # fmt: skip

        self._copy("accounts_user", columns, rows())

    def memberships(self) -> None:
        tenants = self.shape.tenants
        self.user_tenants: list[list[int]] = []
        rows = []
        for number in range(self.shape.users):
            primary = number % tenants
            role = "lead" if number // tenants < 2 else "developer"
            mine = [primary]
            rows.append((self.tenant_ids[primary], self.user_ids[number], role))
            # A fifth of the developers work in a second tenant too.
            if role == "developer" and number % 5 == 0 and username(number) != self._developer:
                second = (number * 7 + 3) % tenants
                if second != primary:
                    mine.append(second)
                    rows.append((self.tenant_ids[second], self.user_ids[number], "developer"))
            self.user_tenants.append(mine)
        self._copy(
            "tenants_membership",
            ("tenant_id", "user_id", "role", "created_at"),
            ((tenant, user, role, self.start) for tenant, user, role in rows),
        )

    @property
    def _developer(self) -> str:
        return developer_username(self.shape)

    def _request_row(self, pk: int, at: datetime, state: str) -> tuple[Any, ...]:
        rnd = self.random
        number = rnd.randrange(self.shape.users)
        mine = self.user_tenants[number]
        tenant = mine[0] if len(mine) == 1 or rnd.random() < 0.85 else mine[1]
        gpu_model = self.tenant_models[tenant][rnd.randrange(2)]
        offering, unit_num, unit_den = rnd.choice(self.offerings[gpu_model])
        count = 1 if rnd.random() < 0.8 else 2
        duration = rnd.choice((2, 4, 8, 8, 8, 24, 72))
        purpose = "notebook" if pk % 20 == 0 else rnd.choice(("batch", "batch", "reservation"))
        gpu_eq = Fraction(unit_num * count, unit_den)
        lead = self.user_ids[tenant]  # user `tenant` is the first lead of tenant `tenant`
        decided_by, decided_at, starts_at, ends_at, comment = None, None, None, None, ""
        if state not in ("pending", "cancelled"):
            decided_at = at + timedelta(seconds=rnd.randrange(1, 1800))
            decided_by = lead if rnd.random() < 0.3 else None
            comment = "Within the tenant's policy." if decided_by is None else "ok"
        if state in ("released", "expired", "revoked", "active", "approved"):
            starts_at = decided_at
            assert starts_at is not None
            ends_at = starts_at + timedelta(hours=duration)
        if state == "rejected":
            comment = "Beyond the remaining quota."
        updated = ends_at or decided_at or at
        return (
            pk, self.tenant_ids[tenant], self.user_ids[number], offering, gpu_model, count,
            gpu_eq.numerator, gpu_eq.denominator, state, purpose, "", duration, starts_at,
            ends_at, decided_by, decided_at, comment, None, at, min(updated, self.now),
        )  # fmt: skip

    def requests(self) -> None:
        rnd = self.random
        total = self.shape.requests
        recent = self.now - timedelta(days=2)
        step = SPAN / total
        self.notebook_allocations: list[tuple[int, int, int, str, datetime]] = []

        def rows() -> Any:
            for index in range(total):
                pk = index + 1
                at = self.start + step * index + timedelta(seconds=rnd.uniform(0, 60))
                weights, states = (
                    (RECENT_WEIGHTS, RECENT_STATES) if at > recent else (PAST_WEIGHTS, PAST_STATES)
                )
                pick = rnd.randrange(100)
                state = next(s for s, w in zip(states, weights, strict=True) if pick < w)
                row = self._request_row(pk, at, state)
                if row[9] == "notebook" and state in ("released", "expired", "active"):
                    self.notebook_allocations.append((pk, row[1], row[2], state, at))
                yield row

        self._copy("allocations_gpurequest", REQUEST_COLUMNS, rows())

    def notebooks(self) -> None:
        image = self.image
        assert image is not None
        columns = (
            "tenant_id", "owner_id", "allocation_id", "cluster_id", "name", "image_id",
            "image_reference", "cpu_cores", "memory_gib", "workspace_gib", "desired", "state",
            "reason", "keep_workspace", "token", "url", "events", "running_since", "stopped_at",
            "created_at", "updated_at",
        )  # fmt: skip

        def rows() -> Any:
            for pk, tenant, owner, allocation_state, at in self.notebook_allocations:
                running = allocation_state == "active"
                state = "running" if running else "deleted"
                stopped = None if running else at + timedelta(hours=4)
                yield (
                    tenant, owner, pk, self.cluster.pk, f"nb-{pk}", image.pk, image.image,
                    "4.000", 16, 20, state, state, "", True, f"{pk:032x}", "", "[]", at,
                    stopped, at, at,
                )  # fmt: skip

        self._copy("workloads_notebook", columns, rows())

    def audit_events(self) -> None:
        rnd = self.random
        total = self.shape.audit_events
        step = SPAN / total
        columns = (
            "at", "actor_id", "actor_name", "action", "target_type", "target_id", "target_name",
            "tenant_id", "changes", "comment", "request_id", "source_ip", "user_agent",
        )  # fmt: skip

        def rows() -> Any:
            for index in range(total):
                number = rnd.randrange(self.shape.users)
                tenant = self.user_tenants[number][0]
                action, target_type = rnd.choice(AUDIT_ACTIONS)
                target = rnd.randrange(1, self.shape.requests)
                yield (
                    self.start + step * index, self.user_ids[number], username(number), action,
                    target_type, str(target), f"{target_type} {target}", self.tenant_ids[tenant],
                    '{"state": ["pending", "approved"]}', "", f"{index:032x}", "10.1.2.3",
                    "gpu-portal-cli/1.0",
                )  # fmt: skip

        self._copy("core_auditevent", columns, rows())

    def statements(self) -> None:
        """Every whole month before this one is closed: a final statement per tenant, a line
        per allocation that started in the month (its GPU-eq x its hours at its model's rate),
        and the newest closed month of tenant 0 with `big_statement_lines` more lines (the
        download the benchmark reads). Written in SQL from the requests just copied."""
        from django.db import connection  # noqa: PLC0415

        first = _month_after(self.start)
        this_month = self.now.date().replace(day=1)
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO billing_period (month, state, basis, closed_at, closed_by_id)"
                " SELECT m::date, 'closed', 'reserved', m + interval '1 month 2 days', %s"
                " FROM generate_series(%s::date, %s::date - interval '1 month', '1 month') m",
                [self.admin.pk, first, this_month],
            )
            cursor.execute(
                "INSERT INTO billing_statement"
                " (period_id, tenant_id, cost_centre, currency, basis, total, created_at)"
                " SELECT p.id, t.id, t.cost_centre, 'EUR', 'reserved', 0, p.closed_at"
                " FROM billing_period p CROSS JOIN tenants_tenant t"
            )
            # A model's rate: 1.50 EUR per GPU-eq-hour, 0.35 more for each model after it.
            lines = (
                "INSERT INTO billing_statementline (statement_id, position, gpu_model,"
                ' offering, "user", workload, quantity_num, quantity_den, unit, rate,'
                " currency, amount, used_gpu_hours)"
                " SELECT s.id, {position}, m.name, o.name, u.username, {workload},"
                " r.gpu_eq_num * r.duration_hours, r.gpu_eq_den, 'GPU-eq-hour', rates.rate,"
                " 'EUR', round(r.gpu_eq_num * r.duration_hours * rates.rate / r.gpu_eq_den, 2),"
                " round(r.gpu_eq_num * r.duration_hours * 0.6 / r.gpu_eq_den, 6)"
                " FROM allocations_gpurequest r"
                " JOIN billing_period p ON p.month = date_trunc('month', r.starts_at)::date"
                " JOIN billing_statement s ON s.period_id = p.id AND s.tenant_id = r.tenant_id"
                " JOIN catalog_gpumodel m ON m.id = r.gpu_model_id"
                " JOIN catalog_offering o ON o.id = r.offering_id"
                " JOIN accounts_user u ON u.id = r.requester_id"
                " JOIN (SELECT id, 1.5 + 0.35 * (row_number() OVER (ORDER BY slug) - 1) AS rate"
                "       FROM catalog_gpumodel) rates ON rates.id = r.gpu_model_id"
            )
            cursor.execute(
                lines.format(
                    position="row_number() OVER (PARTITION BY s.id ORDER BY r.id)",
                    workload="'request ' || r.id",
                )
                + " WHERE r.state IN ('released', 'expired', 'revoked')"
            )
            # Positions 1 to the statement's line count, as a close writes them.
            # The big one: the newest closed month of tenant 0, its allocations again and again,
            # numbered on from the lines it has (counted once: a count per inserted row is a
            # scan per row while the new lines have no statistics).
            cursor.execute(
                "SELECT count(*) FROM billing_statementline l"
                " JOIN billing_statement s ON s.id = l.statement_id"
                " JOIN billing_period p ON p.id = s.period_id"
                " WHERE s.tenant_id = %s AND p.month = %s::date - interval '1 month'",
                [self.tenant_ids[0], this_month],
            )
            (already,) = cursor.fetchone()
            big = lines.format(position=f"{int(already)} + n", workload="'job ' || n")
            big += (
                " CROSS JOIN generate_series(1, %s) n"
                " WHERE r.id = (SELECT min(id) FROM allocations_gpurequest"
                "   WHERE tenant_id = %s AND state = 'released'"
                "   AND starts_at >= %s::date - interval '1 month' AND starts_at < %s::date)"
            )
            cursor.execute(
                big, [self.shape.big_statement_lines, self.tenant_ids[0], this_month, this_month]
            )
            cursor.execute(
                "UPDATE billing_statement s SET total = l.total, line_count = l.lines"
                " FROM (SELECT statement_id, sum(amount) AS total, count(*) AS lines"
                "       FROM billing_statementline"
                "       GROUP BY statement_id) l WHERE l.statement_id = s.id"
            )

    def usage(self) -> None:
        """A year of hourly usage of the cluster's `gpus` GPUs, as metering stores it: a record
        per allocation and hour it held GPUs (its notebook's, with the notebook's owner, for
        those that have one; `allocation-<id>` otherwise), reserved to the second of the hour
        and in lowest terms as `Attribution.reserve` writes it, requested where a notebook
        asked, used at 20-80 %; the GPUs present each hour per model (`UsageCapacity`); each
        hour's window done; the daily rollup through metering's own `daily_rollup`."""
        from django.db import connection  # noqa: PLC0415

        from portal.metering.collection import daily_rollup  # noqa: PLC0415

        until = self.now.replace(minute=0, second=0, microsecond=0)
        since = until - USAGE_SPAN
        bounds: dict[str, Any] = {"since": since, "until": until, "cluster": self.cluster.pk}
        with connection.cursor() as cursor:
            # Consistent by construction, as the copies above: no deferred check of each
            # record's foreign keys at commit (minutes for millions of rows).
            cursor.execute("SET LOCAL session_replication_role = replica")
            cursor.execute(USAGE_RECORDS, bounds)
            # Statistics of the new rows first: without them each day's rollup below and the
            # windows' counts would be planned as scans of the whole table.
            cursor.execute("ANALYZE metering_usagerecord")
            cursor.execute(USAGE_CAPACITY, {**bounds, "gpus": self.shape.gpus})
            cursor.execute(USAGE_WINDOWS, bounds)
            cursor.execute(
                "INSERT INTO metering_meteringstate (cluster_id, begins_at, complete_until,"
                " last_error, last_run_at, demo, windows_done)"
                " VALUES (%(cluster)s, %(since)s, %(until)s, '', %(until)s, false,"
                " (SELECT COUNT(*) FROM metering_usagewindow WHERE cluster_id = %(cluster)s))",
                bounds,
            )
        day = since.date()
        while day < until.date() + timedelta(days=1):
            daily_rollup(self.cluster, day)
            day += timedelta(days=1)

    def run(self) -> None:
        from django.db import connection, transaction  # noqa: PLC0415

        with transaction.atomic():
            self.services()
        steps = (
            ("users (COPY)", self.users),
            ("memberships (COPY)", self.memberships),
            ("requests (COPY)", self.requests),
            ("notebooks (COPY)", self.notebooks),
            ("audit events (COPY)", self.audit_events),
            ("statements (INSERT … SELECT)", self.statements),
            ("a year of usage (INSERT … SELECT, daily_rollup)", self.usage),
        )
        for name, step in steps:
            started = time.monotonic()
            with transaction.atomic():
                step()
            _say(f"{name} in {time.monotonic() - started:.1f} s")
        with transaction.atomic():
            self.personas()
        started = time.monotonic()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        _say(f"VACUUM ANALYZE in {time.monotonic() - started:.1f} s")


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django  # noqa: PLC0415

    django.setup()
    shape = Shape.at(bench_scale())
    _say(
        f"{shape.tenants} tenants, {shape.users} users, {shape.requests} requests, "
        f"{shape.audit_events} audit events"
    )
    Seeder(shape, datetime.now(UTC)).run()


if __name__ == "__main__":
    main()

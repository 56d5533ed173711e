"""The portal's state never contradicts itself, whatever order services are called in.

A seeded random sequence of service calls (requests submitted, approved, rejected, cancelled,
released, extended, revoked and expired; quotas set, lowered and forced; quota requests;
tenants suspended, reactivated and archived; members added, changed and removed) with every
invariant checked after each step:

- per tenant and GPU model, what allocations hold is within the quota, unless an admin forced
  the quota below it; and then what is held never grows, nor does any allocation of the model
  get more time, until it fits again;
- a suspended or archived tenant has no allocation and no pending request;
- no allocation is of an offering that no GPU pool serves;
- every change of a request, quota, tenant or membership wrote its audit event.

Refusals (ApplicationError) are expected steps; any other exception fails the test. The seed
is fixed, so a failure replays exactly; the step count bounds the time.
"""

import random
from dataclasses import dataclass, field
from datetime import timedelta
from fractions import Fraction
from typing import Any

import pytest
from django.utils import timezone

from portal.accounts.models import GlobalRole, User
from portal.accounts.services import user_create
from portal.allocations import services as allocations
from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.catalog.models import GpuModel, GpuPool, Offering
from portal.catalog.presets import catalog_presets_load
from portal.catalog.services import gpu_pool_create
from portal.cluster.services import cluster_create
from portal.core.errors import ApplicationError
from portal.core.models import AuditEvent
from tenants import services as tenants
from tenants.models import MemberRole, Membership, Quota, Tenant, TenantState
from tenants.selectors import quota_lines_for

# Seeds whose sequences reach every rule (the closing asserts check that they do); about 15 s
# each on a busy two-core machine.
SEEDS = (1, 2)
STEPS = 150
# Offerings the sequence asks for: served by the cluster's pools (A100 whole and MIG, T4
# time-sliced) and not (A100 time-sliced, T4 whole).
OFFERINGS = (
    "a100-80gb-whole",
    "a100-80gb-mig-3g-40gb",
    "a100-80gb-mig-1g-10gb",
    "t4-time-slicing-1-4",
    "a100-80gb-time-slicing-1-4",
    "t4-whole",
)
POOLS = (("a100-whole", "a100-80gb-whole"), ("a100-mig", "a100-80gb-mig-3g-40gb"))
POOLS_T4 = (("t4-shared", "t4-time-slicing-1-4"),)


@dataclass
class World:
    """The people, tenants and offerings of the sequence, and what the checks remember."""

    rng: random.Random
    admin: User
    people: list[User]
    tenants: list[Tenant]
    offerings: list[Offering]
    models: list[GpuModel]
    served: set[tuple[int, int]]
    forced: dict[tuple[int, int], Fraction] = field(default_factory=dict)
    steps_over_quota: int = 0
    last_event: int = 0
    snapshot: dict[str, dict[Any, Any]] = field(default_factory=dict)


def _person(username: str, role: GlobalRole = GlobalRole.NONE) -> User:
    return user_create(
        actor=None,
        username=username,
        email=f"{username}@example.org",
        first_name=username,
        last_name="Tester",
        password="correct-horse-battery-staple",
        global_role=role,
    )


def _world(seed: int) -> World:
    catalog_presets_load(actor=None)
    admin = _person("admin", GlobalRole.ADMIN)
    offerings = [Offering.objects.select_related("gpu_model").get(slug=s) for s in OFFERINGS]
    by_slug = {offering.slug: offering for offering in offerings}
    cluster_create(actor=admin, name="lab")
    for name, slug in (*POOLS, *POOLS_T4):
        offering = by_slug[slug]
        gpu_pool_create(
            actor=admin,
            cluster="lab",
            name=name,
            gpu_model=offering.gpu_model,
            backend=offering.backend,
        )
    models = sorted({offering.gpu_model for offering in offerings}, key=lambda m: m.slug)
    people = [_person(f"person{n}") for n in range(5)]
    rng = random.Random(seed)
    team = []
    for slug in ("vision", "nlp", "speech"):
        tenant = tenants.tenant_create(
            actor=admin, slug=slug, name=slug, auto_approve_gpu_eq="2", auto_approve_hours=8
        )
        for model in models:
            tenants.quota_set(actor=admin, tenant=tenant, gpu_model=model, gpu_eq=4)
        for person in rng.sample(people, 3):
            role = rng.choice([MemberRole.DEVELOPER, MemberRole.LEAD])
            tenants.membership_set(actor=admin, tenant=tenant, user=person, role=role)
        team.append(tenant)
    served = set(GpuPool.objects.values_list("gpu_model_id", "backend_id"))
    world = World(rng, admin, people, team, offerings, models, served)
    world.snapshot = _snapshot()
    world.last_event = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    return world


# The operations. Each picks its objects with the world's random generator, from lists in a
# fixed order, and calls one service.


def _fresh(world: World, tenant: Tenant) -> Tenant:
    return Tenant.objects.get(pk=tenant.pk)


def _requests(state_in: tuple[str, ...]) -> list[GpuRequest]:
    return list(GpuRequest.objects.filter(state__in=state_in).select_related("tenant"))


def _member(world: World, tenant: Tenant) -> User:
    members = list(User.objects.filter(memberships__tenant=tenant).order_by("username")) or [
        world.admin
    ]
    return world.rng.choice(members)


def op_submit(world: World) -> None:
    tenant = _fresh(world, world.rng.choice(world.tenants))
    allocations.gpu_request_submit(
        actor=_member(world, tenant),
        tenant=tenant,
        offering=world.rng.choice(world.offerings),
        count=world.rng.randint(1, 3),
        duration_hours=world.rng.choice([1, 4, 8, 12]),
    )


def _decider(world: World, gpu_request: GpuRequest) -> User:
    return world.rng.choice([world.admin, _member(world, gpu_request.tenant)])


def op_decide(world: World) -> None:
    pending = _requests((RequestState.PENDING,))
    if pending:
        gpu_request = world.rng.choice(pending)
        verb = world.rng.choice(["approve", "approve", "reject", "cancel"])
        actor = gpu_request.requester if verb == "cancel" else _decider(world, gpu_request)
        allocations.gpu_request_transition(actor=actor, gpu_request=gpu_request, action=verb)


def op_end_or_extend(world: World) -> None:
    holding = _requests(HOLDING_STATES)
    if holding:
        gpu_request = world.rng.choice(holding)
        verb = world.rng.choice(["release", "extend", "extend", "revoke"])
        actor = world.admin if verb == "revoke" else gpu_request.requester
        allocations.gpu_request_transition(
            actor=actor,
            gpu_request=gpu_request,
            action=verb,
            hours=world.rng.randint(1, 4),
            comment="the invariant test",
        )


def op_expire(world: World) -> None:
    allocations.allocations_expire(now=timezone.now() + timedelta(hours=world.rng.randint(2, 9)))


def op_quota(world: World) -> None:
    # Mostly a quota something is held of, set around what is held: below it half the time.
    tenant = _fresh(world, world.rng.choice(world.tenants))
    model = world.rng.choice(world.models)
    holding = sorted(
        GpuRequest.objects.filter(state__in=HOLDING_STATES)
        .values_list("tenant_id", "gpu_model_id")
        .order_by()
        .distinct()
    )
    if holding and world.rng.random() < 0.7:
        tenant_id, model_id = world.rng.choice(holding)
        tenant = Tenant.objects.get(pk=tenant_id)
        model = GpuModel.objects.get(pk=model_id)
    held = quota_lines_held(tenant.pk, model.pk)
    amount = max(held + Fraction(world.rng.randint(-4, 2), 2), Fraction(0))
    force = world.rng.random() < 0.6
    tenants.quota_set(actor=world.admin, tenant=tenant, gpu_model=model, gpu_eq=amount, force=force)
    if force and amount < held:
        world.forced[tenant.pk, model.pk] = held


def op_quota_request(world: World) -> None:
    tenant = _fresh(world, world.rng.choice(world.tenants))
    lead = Membership.objects.filter(tenant=tenant, role=MemberRole.LEAD).first()
    if lead is None:
        return
    quota_request = tenants.quota_request_create(
        actor=lead.user,
        tenant=tenant,
        gpu_model=world.rng.choice(world.models),
        amount=world.rng.randint(1, 3),
        reason="more work",
    )
    decide = world.rng.choice([tenants.quota_request_approve, tenants.quota_request_reject])
    decide(actor=world.admin, quota_request=quota_request)


def op_tenant_state(world: World) -> None:
    tenant = _fresh(world, world.rng.choice(world.tenants))
    action = world.rng.choice(["suspend", "reactivate", "reactivate", "archive"])
    if action == "archive" and world.rng.random() < 0.7:
        action = "suspend"  # keep tenants alive for most of the sequence
    tenants.tenant_change_state(actor=world.admin, tenant=tenant, action=action)


def op_member(world: World) -> None:
    tenant = _fresh(world, world.rng.choice(world.tenants))
    person = world.rng.choice(world.people)
    if world.rng.random() < 0.3:
        tenants.membership_remove(actor=world.admin, tenant=tenant, username=person.username)
    else:
        role = world.rng.choice([MemberRole.DEVELOPER, MemberRole.LEAD])
        tenants.membership_set(actor=world.admin, tenant=tenant, user=person, role=role)


OPERATIONS = (
    (op_submit, 6),
    (op_decide, 3),
    (op_end_or_extend, 3),
    (op_expire, 1),
    (op_quota, 3),
    (op_quota_request, 1),
    (op_tenant_state, 1),
    (op_member, 1),
)


# The invariants.


def quota_lines_held(tenant_id: int, model_id: int) -> Fraction:
    lines = quota_lines_for([tenant_id])[tenant_id]
    return next((line.used for line in lines if line.gpu_model.pk == model_id), Fraction(0))


def _snapshot() -> dict[str, dict[Any, Any]]:
    return {
        "allocations.gpurequest": {
            pk: (state, ends_at)
            for pk, state, ends_at in GpuRequest.objects.values_list("pk", "state", "ends_at")
        },
        "tenants.quota": {
            pk: (num, den)
            for pk, num, den in Quota.objects.values_list("pk", "gpu_eq_num", "gpu_eq_den")
        },
        "tenants.tenant": dict(Tenant.objects.values_list("pk", "state")),
        "tenants.membership": dict(Membership.objects.values_list("pk", "role")),
    }


def check_invariants(world: World, step: str) -> None:
    # Over a forced quota nothing more is granted: no allocation of the model got more time.
    before_rows = world.snapshot["allocations.gpurequest"]
    over = set(world.forced)
    for pk, tenant_id, model_id, ends_at in GpuRequest.objects.filter(
        state__in=HOLDING_STATES
    ).values_list("pk", "tenant_id", "gpu_model_id", "ends_at"):
        earlier = before_rows.get(pk, (None, None))[1]
        if earlier is not None and ends_at > earlier:
            assert (tenant_id, model_id) not in over, f"{step}: {pk} extended over its quota"

    world.steps_over_quota += bool(over)
    ids = [tenant.pk for tenant in world.tenants]
    for tenant_id, lines in quota_lines_for(ids).items():
        for line in lines:
            key = (tenant_id, line.gpu_model.pk)
            if line.used <= line.quota:
                world.forced.pop(key, None)
                continue
            assert key in world.forced, f"{step}: {key} holds {line.used} > quota {line.quota}"
            assert line.used <= world.forced[key], f"{step}: {key} grew over a forced quota"
            world.forced[key] = line.used

    live = GpuRequest.objects.filter(state__in=(*HOLDING_STATES, RequestState.PENDING))
    stopped = live.exclude(tenant__state=TenantState.ACTIVE)
    assert not stopped.exists(), f"{step}: {list(stopped.values_list('pk', 'tenant__state'))}"

    for model_id, backend_id in live.filter(state__in=HOLDING_STATES).values_list(
        "offering__gpu_model_id", "offering__backend_id"
    ):
        assert (model_id, backend_id) in world.served, f"{step}: an unserved allocation"

    before, after = world.snapshot, _snapshot()
    events = AuditEvent.objects.filter(id__gt=world.last_event)
    audited = set(events.values_list("target_type", "target_id"))
    for kind, rows in after.items():
        changed = {pk for pk, value in rows.items() if before[kind].get(pk) != value}
        changed |= set(before[kind]) - set(rows)  # removed (memberships)
        missing = {pk for pk in changed if (kind, str(pk)) not in audited}
        assert not missing, f"{step}: {kind} {sorted(missing)} changed without an audit event"
    world.snapshot = after
    world.last_event = events.order_by("-id").values_list("id", flat=True).first() or (
        world.last_event
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_no_sequence_of_services_breaks_an_invariant(db, seed: int) -> None:
    world = _world(seed)
    check_invariants(world, "set-up")
    operations = [operation for operation, weight in OPERATIONS for _ in range(weight)]
    done: dict[str, int] = {}
    for number in range(STEPS):
        operation = world.rng.choice(operations)
        try:
            operation(world)
        except ApplicationError:
            outcome = "refused"
        else:
            outcome = "done"
        done[outcome] = done.get(outcome, 0) + 1
        check_invariants(world, f"seed {seed}, step {number} ({operation.__name__}, {outcome})")
    # The sequence did things and was refused things: it exercised both sides of the rules.
    assert done.get("done", 0) > STEPS // 3
    assert done.get("refused", 0) > 0
    revoked = GpuRequest.objects.filter(state=RequestState.REVOKED).count()
    assert revoked
    assert world.steps_over_quota  # forced quotas were lived with for a while

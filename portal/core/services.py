"""Writes that belong to no domain app: worker heartbeats, and the one way a service applies
a change of fields to a model and records it."""

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, models, transaction
from django.utils import timezone

from portal.core.audit import audit_record, changes_between, snapshot
from portal.core.errors import Conflict, ValidationFailed
from portal.core.models import WorkerHeartbeat
from portal.core.validators import model_problems

if TYPE_CHECKING:
    from portal.accounts.models import User
    from tenants.models import Tenant


def worker_heartbeat_record(*, worker: str) -> WorkerHeartbeat:
    """Record that `worker` ran its periodic heartbeat now. Idempotent per worker."""
    heartbeat, _ = WorkerHeartbeat.objects.update_or_create(
        worker=worker, defaults={"beat_at": timezone.now()}
    )
    return heartbeat


def _columns(instance: models.Model) -> dict[str, Any]:
    return {
        field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields
    }


def instance_update[M: models.Model](
    *,
    actor: "User | None",
    instance: M,
    changes: Mapping[str, Any],
    allowed: Iterable[str],
    action: str,
    tenant: "Tenant | None" = None,
    problems: Mapping[str, list[str]] | None = None,
    full_clean: Mapping[str, Any] | None = None,
    check: Callable[[M], None] | None = None,
) -> dict[str, list[Any]]:
    """Set `changes` (field -> value) on `instance`, validate it, save what changed and record
    the audit event `action` with each changed field's `[before, after]`; return those.

    Must run inside the service's transaction; the caller locks `instance` first if it may
    race. A field outside `allowed` is refused, naming it. Validation is the model's own
    (`full_clean` passes options to `Model.full_clean`) with `problems` the caller found
    parsing `changes`, all reported at once as ValidationFailed; then `check`, the rules
    across fields, which raises ValidationFailed itself. An unsaved `instance` is created,
    its before empty, and always recorded; an existing one is saved (only the columns that
    moved) and recorded only when something changed. A unique or constraint violation the
    validation let through raises Conflict.
    """
    unknown = set(changes) - set(allowed)
    if unknown:
        raise ValidationFailed(
            f"These fields cannot be changed: {', '.join(sorted(unknown))}.",
            fields={name: ["Cannot be changed."] for name in sorted(unknown)},
        )
    adding = instance._state.adding
    before = {} if adding else snapshot(instance, changes)
    columns = _columns(instance)
    for name, value in changes.items():
        setattr(instance, name, value)
    found = {name: list(messages) for name, messages in (problems or {}).items()}
    for name, messages in model_problems(instance, **(full_clean or {})).items():
        found.setdefault(name, []).extend(messages)
    if found:
        raise ValidationFailed.of(str(instance._meta.verbose_name), found)
    if check is not None:
        check(instance)
    changed = changes_between(before, snapshot(instance, changes), list(changes))
    if not adding and not changed:
        return changed
    try:
        with transaction.atomic():
            if adding:
                instance.save()
            else:
                moved = {
                    name for name, value in _columns(instance).items() if columns[name] != value
                }
                # Django sets an auto_now column only when it is among the fields saved.
                stamped = {
                    field.attname
                    for field in instance._meta.concrete_fields
                    if getattr(field, "auto_now", False)
                }
                instance.save(update_fields=sorted(moved | stamped))
    except IntegrityError:
        raise Conflict(
            f"A {instance._meta.verbose_name} with these names exists already."
        ) from None
    audit_record(actor=actor, action=action, target=instance, tenant=tenant, changes=changed)
    return changed

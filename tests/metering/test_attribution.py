"""Attribution rules that need no history: which model a shared resource name means."""

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from portal.catalog.models import GpuModel, Offering, SharingBackend
from portal.catalog.services import gpu_pool_create
from portal.cluster.services import cluster_create
from portal.metering.collection import hour_floor, window_collect
from portal.metering.models import MeteringState, UsageRecord
from portal.metering.sources import DeviceUse, PodRequest, PodRunning, WindowMetrics
from tenants.models import Tenant

START = hour_floor(datetime.now(UTC)) - timedelta(hours=2)


def slug(thing: Offering | GpuModel | None) -> str | None:
    return thing.slug if thing is not None else None


class OneJob:
    """A metrics source at the network edge: one kubectl job on one whole GPU for the hour."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        return WindowMetrics(
            requests=[PodRequest("t-vision", "train", "nvidia_com_gpu", Decimal(1))],
            running=[PodRunning("t-vision", "train", 3600)],
            devices=[
                DeviceUse(
                    namespace="t-vision", pod="train", node="n1", device="GPU-1",
                    model_name=self.model_name, mig_profile="",
                    busy_seconds=Decimal(1800), memory_mib_seconds=Decimal(0),
                )
            ],
        )  # fmt: skip


def test_a_whole_gpu_pod_takes_the_model_its_gpu_reports_when_models_share_the_name(
    tenant_a: Tenant, catalog: dict[str, Offering]
) -> None:
    whole = SharingBackend.objects.get(slug="whole")
    cluster = cluster_create(actor=None, name="mixed")
    for model in ("a100-80gb", "h100-80gb"):
        gpu_pool_create(
            actor=None, cluster="mixed", name=model, backend=whole,
            gpu_model=GpuModel.objects.get(slug=model),
        )  # fmt: skip

    window_collect(cluster, START, OneJob("NVIDIA H100 80GB HBM3"))
    window_collect(cluster, START + timedelta(hours=1), OneJob(""))

    [known] = UsageRecord.objects.filter(hour=START)
    assert slug(known.gpu_model) == "h100-80gb"
    assert slug(known.offering) == "h100-80gb-whole"
    assert (known.requested, known.used_gpu_hours) == (Fraction(1), Decimal("0.5"))
    # Without the exporter's word the model stays unknown, in one row, not guessed.
    [unknown] = UsageRecord.objects.filter(hour=START + timedelta(hours=1))
    assert unknown.gpu_model is None
    assert unknown.offering is None
    assert (unknown.requested, unknown.used_gpu_hours) == (Fraction(1), Decimal("0.5"))


def test_the_metering_begin_command_moves_the_beginning_and_refuses_bad_input(
    tenant_a: Tenant,
) -> None:
    cluster = cluster_create(actor=None, name="east")
    out = StringIO()

    call_command("metering_begin", "east", "2026-01-05", stdout=out)

    state = MeteringState.objects.get(cluster=cluster)
    assert state.begins_at == datetime(2026, 1, 5, tzinfo=UTC)
    assert state.complete_until is None
    assert "metered from 2026-01-05 00:00 UTC" in out.getvalue()
    for arguments, message in [
        (("west", "2026-01-05"), "No cluster is named 'west'"),
        (("east", "05/01/2026"), "is not a date"),
        (("east", "9999-01-01"), "cannot be in the future"),
    ]:
        with pytest.raises(CommandError, match=message):
            call_command("metering_begin", *arguments)

from decimal import Decimal

import pytest

from portal.metering.prometheus import PrometheusError, PrometheusGateway, prometheus_gateway
from tests.conftest import DcgmExporter, wait_until
from tests.harness.services import free_port


def test_gateway_reads_dcgm_utilisation_scraped_by_prometheus(dcgm_exporter: DcgmExporter) -> None:
    dcgm_exporter.set_gpu(
        pod="nb-gateway-1", namespace="t-vision", util_percent=73, fb_used_mib=20480
    )
    gateway = prometheus_gateway()

    samples = wait_until(
        lambda: gateway.query('DCGM_FI_DEV_GPU_UTIL{pod="nb-gateway-1"}'),
        timeout=30,
        what="Prometheus to scrape the exporter",
    )

    assert len(samples) == 1
    assert samples[0].value == Decimal(73)
    assert samples[0].labels["namespace"] == "t-vision"
    assert samples[0].labels["modelName"] == "NVIDIA A100-SXM4-80GB"
    memory = gateway.query('DCGM_FI_DEV_FB_USED{pod="nb-gateway-1"}')
    assert memory[0].value == Decimal(20480)


def test_gateway_reports_prometheus_refusing_a_query() -> None:
    with pytest.raises(PrometheusError, match="bad_data"):
        prometheus_gateway().query("sum(")


def test_gateway_reports_an_unreachable_prometheus() -> None:
    gateway = PrometheusGateway(base_url=f"http://127.0.0.1:{free_port()}", timeout_seconds=2)

    with pytest.raises(PrometheusError, match="unreachable"):
        gateway.query("up")

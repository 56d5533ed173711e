"""The gateway to Prometheus: the only module that speaks its HTTP API.

Values come back as Decimal, parsed from the strings Prometheus sends, so nothing downstream
ever holds a float.
"""

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NamedTuple

import requests
from django.conf import settings


class PrometheusError(Exception):
    """Prometheus could not be reached, or refused the query (with its own reason)."""


class Sample(NamedTuple):
    """One series' value at one instant (a tuple: a window's answers hold some 100,000)."""

    labels: dict[str, str]
    at: datetime
    value: Decimal


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    points: list[tuple[datetime, Decimal]]


def _point(raw: list[Any]) -> tuple[datetime, Decimal]:
    timestamp, value = raw
    return datetime.fromtimestamp(float(timestamp), tz=UTC), Decimal(value)


class PrometheusGateway:
    """Instant and range queries against one Prometheus server.

    Raises PrometheusError when the server is unreachable, answers an error status, or
    returns a result of another type than asked for. One gateway may be asked from several
    threads at once (collection sends a window's queries together): its session's connection
    pool is thread-safe, and nothing else in it changes after it is made.
    """

    def __init__(self, *, base_url: str, timeout_seconds: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self._session = requests.Session()

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        try:
            response = self._session.get(
                f"{self.base_url}{path}", params=params, timeout=self.timeout_seconds
            )
        except requests.RequestException as error:
            raise PrometheusError(
                f"Prometheus at {self.base_url} is unreachable: {error}"
            ) from error
        try:
            body: dict[str, Any] = response.json()
        except ValueError:
            raise PrometheusError(
                f"Prometheus answered HTTP {response.status_code} with a non-JSON body"
            ) from None
        if body.get("status") != "success":
            raise PrometheusError(
                f"Prometheus refused the query: {body.get('errorType')}: {body.get('error')}"
            )
        data: dict[str, Any] = body["data"]
        return data

    def query(self, promql: str, *, at: datetime | None = None) -> list[Sample]:
        """The instant vector `promql` evaluates to, at `at` (default: now)."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at.timestamp():.3f}"
        data = self._get("/api/v1/query", params)
        if data["resultType"] != "vector":
            raise PrometheusError(f"expected an instant vector, got a {data['resultType']}")
        # Every sample of an instant vector is at the one instant asked for: read it once.
        moments: dict[Any, datetime] = {}
        samples = []
        for item in data["result"]:
            timestamp, value = item["value"]
            when = moments.get(timestamp)
            if when is None:
                when = moments[timestamp] = datetime.fromtimestamp(float(timestamp), tz=UTC)
            samples.append(Sample(item["metric"], when, Decimal(value)))
        return samples

    def query_range(
        self, promql: str, *, start: datetime, end: datetime, step_seconds: int
    ) -> list[Series]:
        """The range vector of `promql` from `start` to `end`, one point per step."""
        data = self._get(
            "/api/v1/query_range",
            {
                "query": promql,
                "start": f"{start.timestamp():.3f}",
                "end": f"{end.timestamp():.3f}",
                "step": str(step_seconds),
            },
        )
        if data["resultType"] != "matrix":
            raise PrometheusError(f"expected a range vector, got a {data['resultType']}")
        return [
            Series(labels=item["metric"], points=[_point(raw) for raw in item["values"]])
            for item in data["result"]
        ]


def prometheus_gateway() -> PrometheusGateway:
    """The gateway for the configured PROMETHEUS_URL."""
    if not settings.PROMETHEUS_URL:
        raise PrometheusError("PROMETHEUS_URL is not set: metering is off")
    return PrometheusGateway(
        base_url=settings.PROMETHEUS_URL, timeout_seconds=settings.PROMETHEUS_TIMEOUT_SECONDS
    )

"""Values read once per read request (portal/core/per_request.py): once in a GET or HEAD, every
time in a POST and outside requests, again after `forget`; the catalog's version moves within
the request that changes it."""

from collections.abc import Callable

import pytest
from django.core.signals import request_finished, request_started

from portal.catalog import cache as catalog_cache
from portal.core.per_request import forget, once

# request_started and request_finished also close stale database connections (Django's).
pytestmark = pytest.mark.django_db


def _reader() -> tuple[list[int], Callable[[], int]]:
    reads: list[int] = []

    def read() -> int:
        reads.append(len(reads))
        return len(reads)

    return reads, read


def _request(method: str) -> None:
    request_started.send(sender=None, environ={"REQUEST_METHOD": method})


@pytest.fixture(autouse=True)
def _no_request_left_over():
    yield
    request_finished.send(sender=None)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_read_request_reads_a_value_once_until_forgotten(method) -> None:
    reads, read = _reader()
    _request(method)

    first, second = once("key", read), once("key", read)
    forget("key")
    third = once("key", read)

    assert (first, second, third) == (1, 1, 2)
    assert len(reads) == 2


def test_a_post_outside_requests_and_after_the_request_read_every_time() -> None:
    _reads, read = _reader()
    assert [once("key", read), once("key", read)] == [1, 2]  # outside any request
    _request("POST")
    assert [once("key", read), once("key", read)] == [3, 4]
    _request("GET")
    assert [once("key", read), once("key", read)] == [5, 5]
    request_finished.send(sender=None)
    assert once("key", read) == 6
    _request("GET")  # a new request reads anew
    assert once("key", read) == 7


def test_a_catalog_change_moves_the_version_within_the_request(redis_client) -> None:
    _request("GET")
    before = catalog_cache._version()
    assert catalog_cache._version() == before

    catalog_cache.catalog_changed()

    assert before is not None
    assert catalog_cache._version() != before

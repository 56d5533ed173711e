"""The `kube_api` fixture: a started Kubernetes API server emulator, stopped after the test."""

from collections.abc import Iterator

import pytest

from tests.kubeapi.server import KubeApiEmulator


@pytest.fixture
def kube_api() -> Iterator[KubeApiEmulator]:
    with KubeApiEmulator() as emulator:
        yield emulator
    # A request the emulator itself failed on (answered 500 InternalError) is a bug in the
    # emulator, not in the code under test: say so rather than let the test pass or fail on it.
    if emulator.server_errors:
        pytest.fail(
            "the Kubernetes API emulator failed internally:\n" + "\n".join(emulator.server_errors)
        )

"""Injectable faults: failed answers, slow answers and dropped connections.

Set them while the server runs (every method is thread-safe), e.g.:

    kube_api.faults.error_rate(0.3, statuses=(500, 503, 429), seed=1)
    kube_api.faults.fail_next(2, status=503, methods=WRITE_METHODS)
    kube_api.faults.slow(0.5, methods=("GET",))
    kube_api.faults.drop_next(1)
    kube_api.faults.writes_only()
    kube_api.faults.clear()

The server asks `decide()` once per request before touching its store, so a failed or
dropped request never changes state. A slow request is otherwise answered normally: like a
real server that is slow, it applies the change even when the client has given up waiting.
Rules are consulted in this order: `fail_next`, `drop_next`, `error_rate`, `drop_rate`; the
first that fires decides; `slow` adds its delay to whatever is answered.
"""

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass

WRITE_METHODS: frozenset[str] = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Decision:
    delay: float = 0.0
    drop: bool = False
    status: int | None = None
    retry_after: str = "1"

    @property
    def failed(self) -> bool:
        return self.drop or self.status is not None


def _methods(methods: Iterable[str] | None) -> frozenset[str] | None:
    return None if methods is None else frozenset(method.upper() for method in methods)


@dataclass
class _Rule:
    methods: frozenset[str] | None
    remaining: int | None = None  # for "next N" rules
    rate: float = 0.0  # for rate rules
    rng: random.Random | None = None
    statuses: tuple[int, ...] = ()
    retry_after: str = "1"
    seconds: float = 0.0

    def applies_to(self, method: str) -> bool:
        return self.methods is None or method in self.methods

    def fires(self, method: str) -> bool:
        """For rate rules: one draw per request the rule applies to."""
        return self.rng is not None and self.applies_to(method) and self.rng.random() < self.rate

    def choose_status(self) -> int:
        assert self.rng is not None
        return self.rng.choice(self.statuses)


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fail_next: list[_Rule] = []
        self._drop_next: list[_Rule] = []
        self._error_rate: _Rule | None = None
        self._drop_rate: _Rule | None = None
        self._slow: _Rule | None = None
        self._only: frozenset[str] | None = None

    def error_rate(
        self,
        rate: float,
        statuses: Iterable[int] = (500, 503, 429),
        *,
        seed: int | None = None,
        methods: Iterable[str] | None = None,
        retry_after: str = "1",
    ) -> None:
        """Answer a random share `rate` of requests with one of `statuses` (chosen at random).

        A seed makes the sequence of failures the same on every run. 429 answers carry
        `Retry-After: <retry_after>`.
        """
        if not 0 <= rate <= 1:
            raise ValueError("rate is a probability between 0 and 1")
        with self._lock:
            self._error_rate = _Rule(
                _methods(methods),
                rate=rate,
                rng=random.Random(seed),
                statuses=tuple(statuses),
                retry_after=retry_after,
            )

    def fail_next(
        self,
        count: int,
        status: int = 500,
        *,
        methods: Iterable[str] | None = None,
        retry_after: str = "1",
    ) -> None:
        """Answer the next `count` requests (of `methods`, when given) with `status`."""
        with self._lock:
            self._fail_next.append(
                _Rule(
                    _methods(methods), remaining=count, statuses=(status,), retry_after=retry_after
                )
            )

    def slow(self, seconds: float, *, methods: Iterable[str] | None = None) -> None:
        """Wait `seconds` before answering each request (of `methods`, when given)."""
        with self._lock:
            self._slow = _Rule(_methods(methods), seconds=seconds)

    def drop_rate(
        self, rate: float, *, seed: int | None = None, methods: Iterable[str] | None = None
    ) -> None:
        """Close the connection without answering for a random share `rate` of requests."""
        if not 0 <= rate <= 1:
            raise ValueError("rate is a probability between 0 and 1")
        with self._lock:
            self._drop_rate = _Rule(_methods(methods), rate=rate, rng=random.Random(seed))

    def drop_next(self, count: int, *, methods: Iterable[str] | None = None) -> None:
        """Close the connection without answering for the next `count` requests."""
        with self._lock:
            self._drop_next.append(_Rule(_methods(methods), remaining=count))

    def writes_only(self, enabled: bool = True) -> None:
        """Restrict every fault (set before or after) to POST, PUT, PATCH and DELETE."""
        with self._lock:
            self._only = WRITE_METHODS if enabled else None

    def clear(self) -> None:
        with self._lock:
            self._fail_next.clear()
            self._drop_next.clear()
            self._error_rate = self._drop_rate = self._slow = None
            self._only = None

    def decide(self, method: str) -> Decision:
        """What happens to this request; called once per request, before anything else."""
        method = method.upper()
        with self._lock:
            if self._only is not None and method not in self._only:
                return Decision()
            slow = self._slow
            delay = slow.seconds if slow and slow.applies_to(method) else 0.0
            for rule in self._fail_next:
                if rule.remaining and rule.applies_to(method):
                    rule.remaining -= 1
                    return Decision(delay, status=rule.statuses[0], retry_after=rule.retry_after)
            for rule in self._drop_next:
                if rule.remaining and rule.applies_to(method):
                    rule.remaining -= 1
                    return Decision(delay, drop=True)
            if (errors := self._error_rate) and errors.fires(method):
                status = errors.choose_status()
                return Decision(delay, status=status, retry_after=errors.retry_after)
            if (drops := self._drop_rate) and drops.fires(method):
                return Decision(delay, drop=True)
            return Decision(delay)

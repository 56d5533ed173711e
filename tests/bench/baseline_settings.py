"""The baselines' settings (tests/bench/baselines.py): the portal's settings, with no
middleware and the baselines' URLs. Only `make bench` serves these."""

from portal.settings import *  # noqa: F403

MIDDLEWARE = []
ROOT_URLCONF = "tests.bench.baselines"

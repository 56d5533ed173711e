"""gunicorn's configuration for `make demo`, also used by the tests that drive the demo's server.

One worker process with several threads: concurrent connections are served at once, while the
in-process task runner and the in-process scheduler exist exactly once. No reloader (restart
`make demo` after a code change, or add `--reload` on the command line while developing).
It listens on 127.0.0.1 at PORT (8000 unless set: `make demo PORT=8123`). Command-line options
override these, e.g. `--bind 127.0.0.1:8001`.
"""

import os
from typing import Any

_port = os.environ.get("PORT", "") or "8000"
if not _port.isdigit() or not 0 < int(_port) < 65536:
    raise SystemExit(f"PORT must be a TCP port number (1-65535), not {_port!r}")

wsgi_app = "portal.wsgi:application"
bind = [f"127.0.0.1:{int(_port)}"]
worker_class = "gthread"
workers = 1
threads = 8
reload = False
timeout = 60
graceful_timeout = 10
accesslog = "-"
# gunicorn 25+ opens a control socket at one fixed path per user; a demo needs none.
control_socket_disable = True

_scheduler: Any = None


def post_worker_init(worker: Any) -> None:
    """The worker has loaded Django: start the periodic tasks if PORTAL_IN_PROCESS_SCHEDULER."""
    global _scheduler  # noqa: PLW0603  (one scheduler per worker process, stopped on exit)
    from portal import celery_app  # noqa: PLC0415  (only once the worker has set Django up)
    from portal.core.scheduler import in_process_scheduler_start  # noqa: PLC0415

    _scheduler = in_process_scheduler_start(celery_app)


def worker_exit(server: Any, worker: Any) -> None:
    if _scheduler is not None:
        _scheduler.stop()

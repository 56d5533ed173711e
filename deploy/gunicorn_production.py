"""gunicorn's configuration for the web process in production (the image's default command).

Listens on all interfaces, port 8000 (inside a container or pod; put a proxy or an ingress in
front). Processes and threads come from the environment so one image fits every size:
GUNICORN_WORKERS (default 2) processes, each with GUNICORN_THREADS (default 4) threads, and
GUNICORN_TIMEOUT (default 60) seconds before a stuck request's worker is restarted. Periodic
tasks run in Celery beat, never in the web process (unlike `make demo`'s configuration in
deploy/demo/). Command-line options and GUNICORN_CMD_ARGS override these.
"""

import os


def _positive(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        # gunicorn reports this and stops: a wrong size should not start a default-sized server.
        raise ValueError(f"{name} must be a whole number of at least 1, not {raw!r}")
    return int(raw)


wsgi_app = "portal.wsgi:application"
bind = ["0.0.0.0:8000"]
worker_class = "gthread"
workers = _positive("GUNICORN_WORKERS", 2)
threads = _positive("GUNICORN_THREADS", 4)
timeout = _positive("GUNICORN_TIMEOUT", 60)
graceful_timeout = 30
keepalive = 5
# Restart workers now and then so a slow leak cannot grow without bound; jitter spreads them.
max_requests = 2000
max_requests_jitter = 200
# Heartbeat files on memory, not on the container's overlay file system.
worker_tmp_dir = "/dev/shm"  # noqa: S108  (gunicorn's own advice for containers)
accesslog = "-"
errorlog = "-"
# gunicorn 25+ opens a control socket at a fixed path in the user's home; the image's user has none.
control_socket_disable = True


# Garbage collection, tuned for request latency (measured with `make bench`: the slowest 1% of
# list calls were full collections over the ~200,000 objects a worker holds once loaded).
# Once a worker has loaded the portal, what it loaded is moved out of the collector's sight
# (gc.freeze: modules, settings, URL patterns, templates are never garbage), and the youngest
# generation is collected after 50,000 new objects rather than 700, so a list request of a
# few thousand objects rarely triggers a collection and a full one has little left to walk.
GC_THRESHOLD = (50_000, 20, 20)


def post_worker_init(worker: object) -> None:
    import gc  # noqa: PLC0415

    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)

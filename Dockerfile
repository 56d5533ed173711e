# syntax=docker/dockerfile:1
# The portal's one image: the web process (gunicorn, the default command), the Celery worker and
# Celery beat (deploy/README.md, "Container image and local stack").
#
# The portal runs from its source tree in /app (the package with its migrations and catalog
# presets, templates/ and static/ beside it, as in a checkout), with the runtime dependencies at
# the tested versions of constraints.txt in /opt/venv. The base is the official Python image,
# pinned by exact tag and by digest.

FROM python:3.13.16-slim-trixie@sha256:bf44cdfcb76cd3b41e879bc058fc37ec5872002ccfde7fcb765e218cde0cd79c AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# GNU gettext's msgfmt compiles the translation catalogs below. Debian's stable archive holds
# one version per release and the base is pinned by digest, so the package is not pinned again.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gettext \
 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml constraints.txt ./
# The project's runtime dependencies (not its dev extras), each at the version constraints.txt
# pins: the same versions `make test` runs.
RUN python -m venv /opt/venv \
 && python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir -r requirements.txt -c constraints.txt
# The translation catalogs: the .po files compiled to the .mo files Django reads (build output,
# not in the repository), checked for broken placeholders on the way.
COPY locale ./locale
RUN for po in locale/*/LC_MESSAGES/*.po; do \
      [ -e "$po" ] || continue; \
      msgfmt --check-format -o "${po%.po}.mo" "$po"; \
    done


FROM python:3.13.16-slim-trixie@sha256:bf44cdfcb76cd3b41e879bc058fc37ec5872002ccfde7fcb765e218cde0cd79c AS runtime

LABEL org.opencontainers.image.title="gpu-portal" \
      org.opencontainers.image.description="A multi-tenant self-service portal that shares an organisation's GPUs on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=portal.settings \
    STATIC_ROOT=/app/staticfiles

# A numeric, unprivileged user with no home and no shell (Kubernetes' runAsNonRoot checks the number).
RUN groupadd --system --gid 10001 portal \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin portal

COPY --from=builder /opt/venv /opt/venv

WORKDIR /app
COPY manage.py ./
COPY portal ./portal
COPY tenants ./tenants
COPY templates ./templates
COPY static ./static
COPY --from=builder /src/locale ./locale
COPY deploy/gunicorn_production.py ./deploy/gunicorn_production.py

# Static files are collected (and compressed for whitenoise) once, here, owned by root and
# read-only for the portal. The key only lets the settings load: nothing is signed at build time.
# var/ is the portal's only writable directory (the SQLite file when DATABASE_URL is unset).
RUN install -d -o 10001 -g 10001 /app/var \
 && SECRET_KEY=collectstatic-at-build-time-only python manage.py collectstatic --noinput \
 && python -m compileall -q portal tenants

USER 10001:10001
EXPOSE 8000

# The web process. The worker and beat run the same image with another command:
#   celery -A portal worker --loglevel INFO
#   celery -A portal beat --loglevel INFO --schedule /tmp/celerybeat-schedule
CMD ["gunicorn", "--config", "deploy/gunicorn_production.py"]

"""The portal's one settings module, configured from environment variables.

Every variable is listed, with its default, in the README's configuration table. Defaults are
the secure production ones, except the embedded ones that make `make demo` work with no
services: an SQLite file, tasks run in-process, and the cluster in dry-run.
"""

import re
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP  # type: ignore[import-untyped,unused-ignore]

from portal.core.env import Env

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = Env()

DEBUG = env.flag("DEBUG", default=False)
# `make demo`: plain HTTP on this machine with DEBUG off (a 404 is the portal's own page, not
# Django's list of every URL): a fixed secret key, cookies without Secure, static files found
# where they are, and the demo accounts on the sign-in page. Never for a portal others reach.
PORTAL_DEMO = env.flag("PORTAL_DEMO", default=False)

_DEBUG_SECRET_KEY = "insecure-debug-only-key-never-use-in-production"
SECRET_KEY = env.secret("SECRET_KEY", default=_DEBUG_SECRET_KEY if DEBUG or PORTAL_DEMO else None)
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is required when DEBUG is off: set SECRET_KEY or SECRET_KEY_FILE "
        "to a long random value (for example: python3 -c 'import secrets; "
        "print(secrets.token_urlsafe(50))')"
    )

ALLOWED_HOSTS = env.items("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.items("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_prometheus",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "axes",
    # The project's apps, lowest layer first (README, Architecture).
    "portal.core",
    "portal.accounts",
    "portal.catalog",
    "tenants",
    "portal.directory",
    "portal.allocations",
    "portal.cluster",
    "portal.workloads",
    "portal.metering",
    "portal.billing",
    "portal.demo",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "portal.core.middleware.RequestIdMiddleware",
    # Before anything reads a body (sessions, CSRF, DRF): an oversized API body is refused unread.
    "portal.core.middleware.ApiBodyLimitMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language of each request: the user's saved choice, else the browser's Accept-Language.
    "portal.core.middleware.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The signed-in user's saved language (over Accept-Language, on pages) and time zone.
    "portal.accounts.middleware.UserPreferencesMiddleware",
    # Django's, its storage made only for a request that adds or reads a message.
    "portal.core.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "portal.core.input_guard.InputGuardMiddleware",
    "portal.core.pages.ApplicationErrorMiddleware",
    # Turns a sign-in that django-axes refused into the sign-in page's lockout answer.
    "axes.middleware.AxesMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "start"
LOGOUT_REDIRECT_URL = "accounts:login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.template.context_processors.i18n",
                "django.template.context_processors.tz",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.core.context_processors.navigation",
            ],
        },
    },
]

# The common widgets written in Python, each as its template writes it (portal/core/forms.py).
FORM_RENDERER = "portal.core.forms.PageFormRenderer"

# Database: SQLite for the embedded demo, PostgreSQL in production and in the tests.
_database_url = env.secret("DATABASE_URL")
if not _database_url:
    VAR_DIR.mkdir(exist_ok=True)
    _database_url = f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"
try:
    DATABASES = {
        "default": dj_database_url.parse(
            _database_url,
            conn_max_age=env.integer("DATABASE_CONN_MAX_AGE", default=60),
            conn_health_checks=True,
        )
    }
except ValueError as error:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {error}") from None
DATABASES["default"]["ATOMIC_REQUESTS"] = False
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Concurrent writers queue instead of failing with "database is locked": a transaction
    # takes the write lock when it begins (a deferred one that reads, then writes, cannot wait
    # for it), waits up to the busy timeout for it, and WAL lets readers go on meanwhile.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        **DATABASES["default"].get("OPTIONS", {}),
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env.flag(
    "DATABASE_PREPARED_STATEMENTS", default=True
):
    # Values sent apart from the SQL (server-side binding), so that psycopg prepares a query
    # on its sixth run on a connection and PostgreSQL parses it once and, where its generic
    # plan costs no more than planning each call (its choice, after five calls), plans it
    # once: a list's queries took about as long to plan as to run. A pooler in front of
    # PostgreSQL must keep prepared statements (PgBouncer 1.21+: `max_prepared_statements`),
    # else turn this off.
    DATABASES["default"]["OPTIONS"] = {
        "server_side_binding": True,
        "prepare_threshold": 5,
        **DATABASES["default"].get("OPTIONS", {}),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Two roles on PostgreSQL (deploy/README.md, "Database roles"): `migrate` and `audit_archive` run
# with DATABASE_URL naming the owner of the tables; after each migration the runtime role named
# here, which the portal's processes connect as, is granted ordinary reads and writes, but on the
# audit trail only INSERT and SELECT (portal/core/database_roles.py). Unset: no grants are made.
PORTAL_DATABASE_RUNTIME_ROLE = env.text("PORTAL_DATABASE_RUNTIME_ROLE")

# Audit events are kept this long, then `manage.py audit_archive` moves them to a gzipped JSON
# lines file in PORTAL_AUDIT_ARCHIVE_DIR and deletes them (nothing else deletes them).
PORTAL_AUDIT_RETENTION_DAYS = env.integer("PORTAL_AUDIT_RETENTION_DAYS", default=400, minimum=1)
PORTAL_AUDIT_ARCHIVE_DIR = Path(
    env.text_or("PORTAL_AUDIT_ARCHIVE_DIR", str(VAR_DIR / "audit-archive"))
)

# Redis and Celery. Without a broker, tasks run in-process, at once, with the same code.
REDIS_URL = env.secret("REDIS_URL")
CELERY_BROKER_URL = env.secret("CELERY_BROKER_URL", default=REDIS_URL) or "memory://"
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL == "memory://"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# The cache holds the API's rate-limit counters: in Redis all web processes share them; without
# it (the demo) each process keeps its own in memory.
CACHES: dict[str, dict[str, Any]] = {
    "default": (
        {
            "BACKEND": "portal.core.cache.PortalRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "portal",
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    ),
    # HTML that a page would otherwise render again on every request, kept in each process
    # under a key holding all it depends on (templates' `{% cache ... using="fragments" %}`,
    # e.g. the header's navigation): nothing to invalidate, and at most MAX_ENTRIES kept.
    "fragments": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "fragments",
        "OPTIONS": {"MAX_ENTRIES": 1000},  # a header is some 3 kB: 3 MB at most
    },
}
# Without a broker there is no beat either: this runs the schedule below in a thread of the web
# process instead (`make demo` turns it on; portal/core/scheduler.py).
PORTAL_IN_PROCESS_SCHEDULER = env.flag("PORTAL_IN_PROCESS_SCHEDULER", default=False)
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "worker-heartbeat": {"task": "portal.core.tasks.worker_heartbeat", "schedule": 60.0},
    "expire-allocations": {
        "task": "portal.allocations.tasks.expire_allocations",
        "schedule": 60.0,
    },
    "notify-expiring-allocations": {
        "task": "portal.allocations.tasks.notify_expiring_allocations",
        "schedule": 300.0,
    },
}

# The clusters: dry-run renders and records what would be applied; kubernetes lets each
# cluster record's own mode decide. Calls time out, and transient failures are retried with
# exponential backoff from the given start (429 answers wait for their Retry-After).
PORTAL_CLUSTER_MODE = env.choice(
    "PORTAL_CLUSTER_MODE", choices=("dry-run", "kubernetes"), default="dry-run"
)
PORTAL_CLUSTER_TIMEOUT_SECONDS: float = env.integer(
    "PORTAL_CLUSTER_TIMEOUT_SECONDS", default=10, minimum=1
)
PORTAL_CLUSTER_RETRY_ATTEMPTS = env.integer("PORTAL_CLUSTER_RETRY_ATTEMPTS", default=5, minimum=1)
PORTAL_CLUSTER_RETRY_BACKOFF_SECONDS: float = (
    env.integer("PORTAL_CLUSTER_RETRY_BACKOFF_MS", default=500, minimum=0) / 1000
)
PORTAL_RECONCILE_SECONDS = env.integer("PORTAL_RECONCILE_SECONDS", default=600, minimum=10)
PORTAL_CAPACITY_SECONDS = env.integer("PORTAL_CAPACITY_SECONDS", default=120, minimum=10)
CELERY_BEAT_SCHEDULE |= {
    "reconcile-clusters": {
        "task": "portal.cluster.tasks.reconcile_clusters",
        "schedule": float(PORTAL_RECONCILE_SECONDS),
    },
    "collect-capacity": {
        "task": "portal.cluster.tasks.collect_capacity",
        "schedule": float(PORTAL_CAPACITY_SECONDS),
    },
    "resume-provisioning-runs": {
        "task": "portal.cluster.tasks.resume_provisioning_runs",
        "schedule": 60.0,
    },
}

# Notebooks: what one may ask for (each also capped by the tenant's quota), how often their
# pods are read, and when idle ones are stopped (the idle time itself is set per tenant).
PORTAL_NOTEBOOK_MAX_CPU = env.integer("PORTAL_NOTEBOOK_MAX_CPU", default=16, minimum=1)
PORTAL_NOTEBOOK_MAX_MEMORY_GIB = env.integer(
    "PORTAL_NOTEBOOK_MAX_MEMORY_GIB", default=128, minimum=1
)
PORTAL_NOTEBOOK_MAX_WORKSPACE_GIB = env.integer(
    "PORTAL_NOTEBOOK_MAX_WORKSPACE_GIB", default=500, minimum=1
)
PORTAL_NOTEBOOK_OBSERVE_SECONDS = env.integer(
    "PORTAL_NOTEBOOK_OBSERVE_SECONDS", default=30, minimum=5
)
PORTAL_CULL_SECONDS = env.integer("PORTAL_CULL_SECONDS", default=300, minimum=30)
PORTAL_CULL_GPU_UTIL_PERCENT = env.integer(
    "PORTAL_CULL_GPU_UTIL_PERCENT", default=5, minimum=0, maximum=100
)
PORTAL_CULL_NOTICE_MINUTES = env.integer("PORTAL_CULL_NOTICE_MINUTES", default=15, minimum=1)
PORTAL_CULL_SNOOZE_MINUTES = env.integer("PORTAL_CULL_SNOOZE_MINUTES", default=120, minimum=1)
CELERY_BEAT_SCHEDULE |= {
    "observe-notebooks": {
        "task": "portal.workloads.tasks.observe_notebooks",
        "schedule": float(PORTAL_NOTEBOOK_OBSERVE_SECONDS),
    },
    "cull-idle-notebooks": {
        "task": "portal.workloads.tasks.cull_idle_notebooks",
        "schedule": float(PORTAL_CULL_SECONDS),
    },
}

# Notifications: the portal's own address (for links in emails), and an optional webhook that
# receives every request event as signed JSON.
PORTAL_BASE_URL = env.text_or("PORTAL_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
PORTAL_WEBHOOK_URL = env.text("PORTAL_WEBHOOK_URL")
PORTAL_WEBHOOK_SECRET = env.secret("PORTAL_WEBHOOK_SECRET")
if PORTAL_WEBHOOK_URL and not PORTAL_WEBHOOK_SECRET:
    raise ImproperlyConfigured("PORTAL_WEBHOOK_SECRET is required when PORTAL_WEBHOOK_URL is set")
PORTAL_EXPIRY_NOTICE_MINUTES = env.integer("PORTAL_EXPIRY_NOTICE_MINUTES", default=60, minimum=1)

# Personal API tokens: the longest lifetime one may be given, in days.
PORTAL_API_TOKEN_MAX_DAYS = env.integer("PORTAL_API_TOKEN_MAX_DAYS", default=365, minimum=1)

# Prometheus, where usage and GPU utilisation are read from. Unset: metering is off.
PROMETHEUS_URL = env.text("PROMETHEUS_URL")
PROMETHEUS_TIMEOUT_SECONDS = env.integer("PROMETHEUS_TIMEOUT_SECONDS", default=10, minimum=1)
if PROMETHEUS_URL and not PROMETHEUS_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"PROMETHEUS_URL must be an http(s) URL, not {PROMETHEUS_URL!r}")

# Usage metering: hourly windows per cluster, read from each cluster's Prometheus (its own URL,
# else PROMETHEUS_URL). A window is collected once it ended PORTAL_METERING_DELAY_SECONDS ago;
# each run catches up at most PORTAL_METERING_CATCH_UP windows per cluster, oldest first.
# PORTAL_SYNTHETIC_METRICS (the demo) reads a built-in synthetic source instead of Prometheus.
PORTAL_METERING_SECONDS = env.integer("PORTAL_METERING_SECONDS", default=300, minimum=10)
PORTAL_METERING_DELAY_SECONDS = env.integer(
    "PORTAL_METERING_DELAY_SECONDS", default=120, minimum=0, maximum=3600
)
PORTAL_METERING_CATCH_UP = env.integer("PORTAL_METERING_CATCH_UP", default=48, minimum=1)
PORTAL_SYNTHETIC_METRICS = env.flag("PORTAL_SYNTHETIC_METRICS", default=False)

# Chargeback: what a statement charges for (reserved GPU-eq-hours by default; requested or used).
PORTAL_CHARGE_BASIS = env.text_or("PORTAL_CHARGE_BASIS", "reserved")
if PORTAL_CHARGE_BASIS not in ("reserved", "requested", "used"):
    raise ImproperlyConfigured(
        f"PORTAL_CHARGE_BASIS must be reserved, requested or used, not {PORTAL_CHARGE_BASIS!r}"
    )
# An extra line per GPU model on each statement: the cluster capacity nobody reserved (requested,
# used), shared out in proportion to each tenant's quantity (billing/unreserved.py).
PORTAL_CHARGE_UNRESERVED = env.flag("PORTAL_CHARGE_UNRESERVED", default=False)
CELERY_BEAT_SCHEDULE |= {
    "collect-usage": {
        "task": "portal.metering.tasks.collect_usage",
        "schedule": float(PORTAL_METERING_SECONDS),
    },
    # The open months' provisional totals, priced anew once new usage is in (billing).
    "price-open-months": {
        "task": "portal.billing.tasks.price_open_months",
        "schedule": float(PORTAL_METERING_SECONDS),
    },
}

# Budgets: how often each tenant's month is checked against its budget (80% and 100% notify
# the leads and finance once a month each).
PORTAL_BUDGET_CHECK_SECONDS = env.integer("PORTAL_BUDGET_CHECK_SECONDS", default=3600, minimum=60)
CELERY_BEAT_SCHEDULE |= {
    "check-budgets": {
        "task": "portal.billing.tasks.check_budgets",
        "schedule": float(PORTAL_BUDGET_CHECK_SECONDS),
    },
}

# Single sign-on (OpenID Connect; Keycloak is the reference provider). Unset: local accounts.
# The endpoints and signing keys come from the issuer's discovery document.
OIDC_ISSUER_URL = env.text_or("OIDC_ISSUER_URL", "").rstrip("/")
OIDC_CLIENT_ID = env.text_or("OIDC_CLIENT_ID", "")
OIDC_CLIENT_SECRET = env.secret("OIDC_CLIENT_SECRET")
SSO_ENABLED = bool(OIDC_ISSUER_URL)
if SSO_ENABLED and not OIDC_CLIENT_ID:
    raise ImproperlyConfigured("OIDC_CLIENT_ID is required when OIDC_ISSUER_URL is set")
if SSO_ENABLED and not OIDC_ISSUER_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"OIDC_ISSUER_URL must be an http(s) URL, not {OIDC_ISSUER_URL!r}")
OIDC_PROVIDER_NAME = env.text_or("OIDC_PROVIDER_NAME", "Keycloak")
OIDC_SCOPES = env.text_or("OIDC_SCOPES", "openid email profile")
OIDC_SIGNING_ALGORITHMS = env.items("OIDC_SIGNING_ALGORITHMS", default=["RS256"])
OIDC_TIMEOUT_SECONDS = env.integer("OIDC_TIMEOUT_SECONDS", default=10, minimum=1)
# Provider access tokens accepted on the API must name this audience and have been issued to
# one of these clients (`azp`): the portal's own and, e.g., a CI service account's.
OIDC_API_AUDIENCE = env.text_or("OIDC_API_AUDIENCE", OIDC_CLIENT_ID)
OIDC_API_CLIENTS = env.items("OIDC_API_CLIENTS", default=[OIDC_CLIENT_ID] if OIDC_CLIENT_ID else [])
# How claims map to the portal: the username, the groups that become memberships (the
# template's {tenant} is a tenant slug and {role} is `leads` or `developers`; RoleBindings
# name the same groups), and the client roles that become the global roles.
OIDC_USERNAME_CLAIM = env.text_or("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUPS_CLAIM = env.text_or("OIDC_GROUPS_CLAIM", "groups")
OIDC_ROLES_CLAIM = env.text_or("OIDC_ROLES_CLAIM", "resource_access.{client_id}.roles")
OIDC_ADMIN_ROLE = env.text_or("OIDC_ADMIN_ROLE", "admin")
OIDC_FINANCE_ROLE = env.text_or("OIDC_FINANCE_ROLE", "finance")
PORTAL_TENANT_GROUP = env.text_or("PORTAL_TENANT_GROUP", "/gpu-portal/tenants/{tenant}/{role}")
if "{tenant}" not in PORTAL_TENANT_GROUP or "{role}" not in PORTAL_TENANT_GROUP:
    raise ImproperlyConfigured("PORTAL_TENANT_GROUP must contain both {tenant} and {role}")
# Who decides memberships: the identity provider (applied at each sign-in) or the portal
# (its changes are sent to Keycloak when the sync below is on).
PORTAL_MEMBERSHIP_SOURCE = env.choice(
    "PORTAL_MEMBERSHIP_SOURCE", choices=("identity-provider", "portal"), default="identity-provider"
)
# With SSO on, only these local accounts may still sign in with a password (break-glass).
PORTAL_BREAK_GLASS_USERS = env.items("PORTAL_BREAK_GLASS_USERS", default=[])
AUTHENTICATION_BACKENDS = [
    # First: refuses every password check for an account or address that is locked out, before
    # the password is looked at. Only password sign-in calls authenticate(); the SSO callback
    # and the API's Bearer tokens do not, so the throttle never touches them.
    "axes.backends.AxesStandaloneBackend",
    "portal.accounts.backends.SsoBackend",
    "portal.accounts.backends.PasswordBackend",
]

# Password sign-in throttle (django-axes): after PORTAL_SIGN_IN_FAILURE_LIMIT wrong passwords for
# one username, or from one address, further attempts are refused (even with the right password)
# until PORTAL_SIGN_IN_LOCKOUT_MINUTES have passed since the last one. Attempts are counted in
# the database; each refusal is audited (portal/accounts/throttle.py). The client's address is
# REMOTE_ADDR, or, behind PORTAL_TRUSTED_PROXY_COUNT reverse proxies that each append to
# X-Forwarded-For, the address the outermost of them saw (set it, or everyone behind the
# ingress shares one address and one count).
PORTAL_SIGN_IN_FAILURE_LIMIT = env.integer("PORTAL_SIGN_IN_FAILURE_LIMIT", default=5, minimum=1)
PORTAL_SIGN_IN_LOCKOUT = env.minutes("PORTAL_SIGN_IN_LOCKOUT_MINUTES", default=15, minimum=1)
PORTAL_TRUSTED_PROXY_COUNT = env.integer("PORTAL_TRUSTED_PROXY_COUNT", default=0, maximum=10)
AXES_ENABLED = True
AXES_FAILURE_LIMIT = PORTAL_SIGN_IN_FAILURE_LIMIT
AXES_COOLOFF_TIME = PORTAL_SIGN_IN_LOCKOUT
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# A success must not wipe the count: it would also wipe the failures against other accounts
# from the same address, and a throttled guesser with an account of their own could reset it.
AXES_RESET_ON_SUCCESS = False
AXES_HANDLER = "portal.accounts.throttle.AuditedAxesHandler"
AXES_LOCKOUT_CALLABLE = "portal.accounts.views.sign_in_locked_out"
AXES_DISABLE_ACCESS_LOG = True  # successful sign-ins are not axes' business
AXES_ENABLE_ADMIN = False  # portal/accounts/admin.py shows the attempts, read-only
AXES_VERBOSE = False
AXES_CLIENT_IP_CALLABLE = "portal.core.http.client_address"

# Keycloak directory sync: a service account (client credentials) that creates each tenant's
# groups, sends the portal's membership changes, and reconciles periodically. The server and
# realm come from OIDC_ISSUER_URL (`<server>/realms/<realm>`). Unset: no sync.
KEYCLOAK_ADMIN_CLIENT_ID = env.text_or("KEYCLOAK_ADMIN_CLIENT_ID", "")
KEYCLOAK_ADMIN_CLIENT_SECRET = env.secret("KEYCLOAK_ADMIN_CLIENT_SECRET")
KEYCLOAK_SYNC = bool(KEYCLOAK_ADMIN_CLIENT_ID)
_keycloak_issuer = re.fullmatch(r"(?P<server>https?://.+)/realms/(?P<realm>[^/]+)", OIDC_ISSUER_URL)
KEYCLOAK_SERVER_URL = _keycloak_issuer["server"] if _keycloak_issuer else ""
KEYCLOAK_REALM = _keycloak_issuer["realm"] if _keycloak_issuer else ""
if KEYCLOAK_SYNC and not _keycloak_issuer:
    raise ImproperlyConfigured(
        "KEYCLOAK_ADMIN_CLIENT_ID needs OIDC_ISSUER_URL to be a Keycloak realm URL "
        "(https://keycloak.example.org/realms/<realm>)"
    )
if KEYCLOAK_SYNC and not PORTAL_TENANT_GROUP.startswith("/"):
    raise ImproperlyConfigured("With the Keycloak sync on, PORTAL_TENANT_GROUP must be a path")
KEYCLOAK_SYNC_SECONDS = env.integer("KEYCLOAK_SYNC_SECONDS", default=900, minimum=60)
CELERY_BEAT_SCHEDULE |= {
    "send-directory-changes": {
        "task": "portal.directory.tasks.send_directory_changes",
        "schedule": 60.0,
    },
    "reconcile-directory": {
        "task": "portal.directory.tasks.reconcile_directory",
        "schedule": float(KEYCLOAK_SYNC_SECONDS),
    },
}

# The portal's own metrics at /metrics: readable from these networks, or with this bearer token.
METRICS_ALLOWED_NETWORKS = env.networks(
    "METRICS_ALLOWED_NETWORKS", default=["127.0.0.0/8", "::1/128"]
)
METRICS_TOKEN = env.secret("METRICS_TOKEN")

# Security. Cookies are secure unless DEBUG or PORTAL_DEMO (plain HTTP on localhost); behind a
# TLS-terminating proxy set SECURE_PROXY_SSL_HEADER so Django knows the original request was HTTPS.
SESSION_COOKIE_SECURE = env.flag("SECURE_COOKIES", default=not (DEBUG or PORTAL_DEMO))
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = env.integer("SESSION_COOKIE_AGE", default=8 * 3600, minimum=60)
# Django's database sessions, read with SQL built once per process (portal/accounts/sessions.py).
SESSION_ENGINE = "portal.accounts.sessions"
SECURE_SSL_REDIRECT = env.flag("SECURE_SSL_REDIRECT", default=False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env.integer("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.flag("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.flag("SECURE_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env.flag("SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# The language cookie that `set_language` writes (for people not signed in; a signed-in
# person's choice is saved on their profile): as secure as the session cookie.
LANGUAGE_COOKIE_SECURE = SESSION_COOKIE_SECURE
LANGUAGE_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_SAMESITE = "Lax"
# One date, time and number format per language (portal/formats/<locale>/formats.py).
FORMAT_MODULE_PATH = ["portal.formats"]
# Times are stored in UTC and shown in each person's own zone (their profile; UTC by default).
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env.text_or("STATIC_ROOT", str(VAR_DIR / "static")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG or PORTAL_DEMO
            else "whitenoise.storage.CompressedStaticFilesStorage"
        )
    },
}
# WhiteNoise serves from STATIC_ROOT (filled by collectstatic) unless DEBUG; the demo has no
# collectstatic step, so it serves the files where the finders find them.
WHITENOISE_USE_FINDERS = DEBUG or PORTAL_DEMO

# API bodies: the largest accepted, and the deepest nesting of JSON arrays and objects. Both are
# checked before a body is parsed (portal/core/parsers.py); Django's own form limit follows.
PORTAL_API_MAX_BODY_BYTES = env.integer(
    "PORTAL_API_MAX_BODY_BYTES", default=1024 * 1024, minimum=1024
)
PORTAL_API_MAX_JSON_DEPTH = env.integer(
    "PORTAL_API_MAX_JSON_DEPTH", default=32, minimum=2, maximum=500
)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, PORTAL_API_MAX_BODY_BYTES)
# Long CSV downloads (the audit log, a statement's lines) are written by PostgreSQL itself
# (COPY … TO STDOUT) and streamed (portal/core/exports.py). Not an environment variable: the
# tests turn it off to run the same downloads through Python's csv writer, as on SQLite.
PORTAL_CSV_COPY = True
# The most audit events one CSV export writes; more is a 409 that asks to narrow the export by
# its filters.
PORTAL_AUDIT_EXPORT_LIMIT = env.integer(
    "PORTAL_AUDIT_EXPORT_LIMIT", default=2_000_000, minimum=1, maximum=100_000_000
)

# API rate limits, as requests per second, minute, hour or day: each personal token, each user
# (session and tokens together) and each address without credentials (portal/core/throttling.py).
_RATE = re.compile(r"[0-9]+/(s|sec|m|min|h|hour|d|day)")


def _api_rate(name: str, default: str) -> str:
    rate = env.text_or(name, default)
    if not _RATE.fullmatch(rate):
        raise ImproperlyConfigured(
            f"{name} must be a count per period such as 600/min (s, min, hour, day), not {rate!r}"
        )
    return rate


REST_FRAMEWORK = {
    # A Bearer token, when sent, decides alone (a bad one is 401 even beside a valid session).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.accounts.authentication.PortalBearerAuthentication",
        "portal.accounts.authentication.PortalSessionAuthentication",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "portal.core.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["portal.core.throttling.ApiRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "token": _api_rate("PORTAL_API_RATE_TOKEN", "300/min"),
        "user": _api_rate("PORTAL_API_RATE_USER", "600/min"),
        "anon": _api_rate("PORTAL_API_RATE_ANON", "60/min"),
    },
    # Anonymous callers are told apart by their address as sign-in throttling sees it: REMOTE_ADDR,
    # or behind PORTAL_TRUSTED_PROXY_COUNT proxies the X-Forwarded-For entry the outermost saw.
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "portal.core.pagination.PagePagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "portal.core.api.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # `?format=` is ours (API.md: `?format=csv` downloads), not DRF's renderer override.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU portal API",
    "DESCRIPTION": "Self-service GPU requests, notebooks, usage and chargeback.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": "/api/v1/",
    # Bodies get their own components (`...Request`, without read-only fields), so that what a
    # write takes is told apart from what it answers.
    "COMPONENT_SPLIT_REQUEST": True,
    # What the URL converters accept, so that the schema's path parameters say it too.
    "PATH_CONVERTER_OVERRIDES": {
        "int": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**63 - 1},
        "slug": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
        "str": {"type": "string", "pattern": "^[^/]+$"},
    },
    # Every operation's error answers, with the envelope's schema, added in one place.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.core.schema.document_errors",
    ],
    "ENUM_NAME_OVERRIDES": {
        "TenantStateEnum": "tenants.models.TenantState",
        "QuotaRequestStateEnum": "tenants.models.QuotaRequestState",
        "MemberRoleEnum": "tenants.models.MemberRole",
        "RequestStateEnum": "portal.allocations.models.RequestState",
        "RunStateEnum": "portal.cluster.models.RunState",
        "NotebookStateEnum": "portal.workloads.models.NotebookState",
        "NotebookDesiredEnum": "portal.workloads.models.Desired",
    },
}

_EMAIL_BACKEND = env.text_or("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
_SMTP_OPTIONS: dict[str, Any] = {
    "host": env.text_or("EMAIL_HOST", "localhost"),
    "port": env.integer("EMAIL_PORT", default=25, minimum=1),
    "username": env.text_or("EMAIL_HOST_USER", ""),
    "password": env.secret("EMAIL_HOST_PASSWORD") or "",
    "use_tls": env.flag("EMAIL_USE_TLS", default=False),
    "timeout": env.integer("EMAIL_TIMEOUT", default=10, minimum=1),
}
MAILERS = {
    "default": {
        "BACKEND": _EMAIL_BACKEND,
        "OPTIONS": _SMTP_OPTIONS if _EMAIL_BACKEND.endswith("smtp.EmailBackend") else {},
    }
}
DEFAULT_FROM_EMAIL = env.text_or("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")

LOG_LEVEL = env.choice("LOG_LEVEL", choices=("DEBUG", "INFO", "WARNING", "ERROR"), default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

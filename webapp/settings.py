"""Django settings. Everything comes from the environment through django-environ.

``DEBUG`` is off unless the environment turns it on (``make demo`` and the test suite do). With it
off, ``SECRET_KEY`` is required (with it on and no key, each process draws a random one) and the HTTPS
settings (redirect, HSTS, secure cookies) are on unless the environment turns each off; ``manage.py
check --deploy`` then reports no warnings. The production environment is documented in README.md
("Production") and in ``.env.example``. A password or key can come from a file instead (a Docker
secret): ``SECRET_KEY_FILE``, ``DATABASE_PASSWORD_FILE`` (the password of ``DATABASE_URL``),
``REDIS_PASSWORD_FILE`` (of ``REDIS_URL``).
"""

import ipaddress
import os
import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from sparkclient.contract.credentials import file_secret, url_with_password
from webapp.jobs.addresses import url_host_denial

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("SPARKSCALER_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)
(VAR_DIR / "staticfiles").mkdir(exist_ok=True)

env = environ.Env(
    DEBUG=(bool, False),
    ALLOWED_HOSTS=(list, ["127.0.0.1", "localhost", "testserver"]),
)


def _file_secret(variable: str) -> str:
    """The secret in the file the environment variable ``variable`` names (a Docker secret), ``""`` when
    it is unset; ImproperlyConfigured when the file cannot be read."""
    try:
        return file_secret(variable)
    except OSError as exc:
        raise ImproperlyConfigured(f"cannot read a secret: {exc.strerror}") from None


DEBUG = env("DEBUG")
# Read as is: django-environ takes a value starting with "$" for the name of another variable, and
# Django's get_random_secret_key() starts a key with "$" once in 50.
SECRET_KEY = os.environ.get("SECRET_KEY", "") or _file_secret("SECRET_KEY_FILE")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set and DEBUG is off: set SECRET_KEY (or SECRET_KEY_FILE, a file holding it) to a "
            "long random string (python -c 'from django.core.management.utils import get_random_secret_key as k; "
            "print(k())'), or set DEBUG=true for a development run")
    # A development run: a key of this process only, so nothing signed with it outlives the run.
    SECRET_KEY = secrets.token_urlsafe(50)
ALLOWED_HOSTS = env("ALLOWED_HOSTS")
# Behind a TLS-terminating proxy: CSRF_TRUSTED_ORIGINS=https://scaler.example.com, and
# SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,https when the proxy sets X-Forwarded-Proto.
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
_proxy_header = env.list("SECURE_PROXY_SSL_HEADER", default=[])
if _proxy_header:
    if len(_proxy_header) != 2:
        raise ImproperlyConfigured(f"SECURE_PROXY_SSL_HEADER must be 'HEADER,value' "
                                   f"(e.g. HTTP_X_FORWARDED_PROTO,https), not {','.join(_proxy_header)!r}")
    SECURE_PROXY_SSL_HEADER = tuple(_proxy_header)
# HTTPS only unless DEBUG is on: redirect to HTTPS, HSTS for a year (subdomains included, preload
# allowed), cookies sent over HTTPS only. A plain-HTTP setup with DEBUG off (a test bench) turns them
# off one by one: SECURE_SSL_REDIRECT=false SECURE_HSTS_SECONDS=0 SESSION_COOKIE_SECURE=false
# CSRF_COOKIE_SECURE=false (README "Production").
_HTTPS_ONLY = not DEBUG
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=_HTTPS_ONLY)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=365 * 24 * 3600 if _HTTPS_ONLY else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=_HTTPS_ONLY)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=_HTTPS_ONLY)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=_HTTPS_ONLY)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=_HTTPS_ONLY)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_filters",
    "drf_spectacular_sidecar",  # Swagger UI as static files (no CDN)
    "webapp.jobs",
    "webapp.proposals",
    "webapp.loop",
    "webapp.dashboard",
    "webapp.accounts",
    "webapp.inbox",
    "webapp.demo",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "webapp.api.schema.ApiNotFoundMiddleware",  # outside CommonMiddleware: its slash redirects stay
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "webapp.accounts.access.RoleRequiredMiddleware",
    "webapp.outage.RedisUnavailableMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last (django-axes): the lockout response
]

# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins for one username from one
# address, that pair is locked out for AXES_COOLOFF_TIME hours (429), even with the right password.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_TIME", default=0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True

# /metrics without a token: client addresses or networks allowed to scrape (e.g. 10.0.0.0/8).
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=[])
for _entry in METRICS_ALLOWED_IPS:
    try:
        ipaddress.ip_network(_entry, strict=False)
    except ValueError as _exc:
        raise ImproperlyConfigured(f"METRICS_ALLOWED_IPS: {_entry!r} is not an address or network "
                                   f"(e.g. 10.0.0.5 or 10.0.0.0/8): {_exc}") from None
# The demo generator's rate control (operators): the highest rate accepted, events/s.
DEMO_MAX_RATE = env.float("DEMO_MAX_RATE", default=20000.0)

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "webapp.proposals.permissions.workflow_context",
                "webapp.inbox.context.inbox_context",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if _database_password := _file_secret("DATABASE_PASSWORD_FILE"):  # compose: DATABASE_URL carries none
    DATABASES["default"]["PASSWORD"] = _database_password
if DATABASES["default"]["ENGINE"] in ("django.db.backends.postgresql", "django.db.backends.postgresql_psycopg2"):
    # Production: PostgreSQL through psycopg 3, persistent connections checked before reuse.
    DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, Celery worker, beat) share the demo database.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"})
    test_db = str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")
    DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_PATH", default=test_db)}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [{"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"}]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_TZ = True

STATIC_URL = "static/"
import plotly as _plotly  # noqa: E402 - its wheel ships plotly.min.js, served locally (no CDN)

STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", Path(_plotly.__file__).parent / "package_data")]
STATIC_ROOT = VAR_DIR / "staticfiles"
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:jobs"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["webapp.accounts.access.HasRole"],
    # numbers are numbers or null: a non-finite float is answered as null (webapp.api.renderers)
    "DEFAULT_RENDERER_CLASSES": [
        "webapp.api.renderers.FiniteJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "rest_framework.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "webapp.api.parsers.StrictMultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "webapp.api.pagination.StrictPageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "webapp.api.schema.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "sparkscaler API",
    "DESCRIPTION": "Jobs, vertices, metric snapshots, proposals (approve, reject, roll back), executions and "
                   "audit events. Authenticate with `Authorization: Token <key>` or a session.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # The enums' components (drf-spectacular's default hook), then the links between the operations.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "webapp.api.links.add_links"],
}

# compose: REDIS_URL carries no password, REDIS_PASSWORD_FILE names the file that holds it.
REDIS_URL = url_with_password(env("REDIS_URL", default="redis://127.0.0.1:6379/0"), _file_secret("REDIS_PASSWORD_FILE"))

# Autoscaler timing (seconds).
SCALER_COLLECT_INTERVAL_S = env.float("SCALER_COLLECT_INTERVAL_S", default=15.0)
SCALER_EXECUTION_TIMEOUT_S = env.float("SCALER_EXECUTION_TIMEOUT_S", default=240.0)
# FLIP-271 job.autoscaler.stabilization.interval: metrics right after a (re)start are not evaluated.
SCALER_STABILIZATION_S = env.float("SCALER_STABILIZATION_S", default=30.0)
# An attempt's lease = execution timeout + this margin; past it the reconcile beat takes over.
SCALER_EXECUTION_LEASE_MARGIN_S = env.float("SCALER_EXECUTION_LEASE_MARGIN_S", default=30.0)
SCALER_RECONCILE_INTERVAL_S = env.float("SCALER_RECONCILE_INTERVAL_S", default=15.0)
# Metric retention (webapp.loop.retention): raw snapshots are kept this long, then rolled up per minute;
# the roll-ups are kept SCALER_RETENTION_ROLLUP_S; the beat runs every SCALER_RETENTION_INTERVAL_S and
# handles SCALER_RETENTION_BATCH snapshots per transaction. Evaluations past the raw window go too, except
# each job's newest and those a proposal refers to. The audit trail is never pruned.
SCALER_RETENTION_RAW_S = env.float("SCALER_RETENTION_RAW_S", default=24 * 3600.0)
SCALER_RETENTION_ROLLUP_S = env.float("SCALER_RETENTION_ROLLUP_S", default=30 * 24 * 3600.0)
SCALER_RETENTION_INTERVAL_S = env.float("SCALER_RETENTION_INTERVAL_S", default=300.0)
SCALER_RETENTION_BATCH = env.int("SCALER_RETENTION_BATCH", default=5000)
if not 0 < SCALER_RETENTION_RAW_S <= SCALER_RETENTION_ROLLUP_S or SCALER_RETENTION_BATCH < 1:
    raise ImproperlyConfigured("Metric retention: need 0 < SCALER_RETENTION_RAW_S <= SCALER_RETENTION_ROLLUP_S "
                               "(seconds) and SCALER_RETENTION_BATCH >= 1")

# Notifications (webapp.inbox): deployment-wide defaults besides the targets edited in the admin; an
# identical notice is sent at most once per SCALER_NOTIFY_INTERVAL_S (Flink's
# job.autoscaler.scaling.event.interval, 30 min); a delivery times out after SCALER_NOTIFY_TIMEOUT_S and
# is retried with a back-off up to SCALER_NOTIFY_MAX_RETRIES times. SCALER_NOTIFY_BASE_URL (e.g.
# https://scaler.example.com) makes the links in the notices absolute.
SCALER_NOTIFY_WEBHOOK_URL = env.str("SCALER_NOTIFY_WEBHOOK_URL", default="")
SCALER_NOTIFY_EMAILS = env.list("SCALER_NOTIFY_EMAILS", default=[])
SCALER_NOTIFY_INTERVAL_S = env.float("SCALER_NOTIFY_INTERVAL_S", default=30 * 60.0)
SCALER_NOTIFY_TIMEOUT_S = env.float("SCALER_NOTIFY_TIMEOUT_S", default=5.0)
SCALER_NOTIFY_MAX_RETRIES = env.int("SCALER_NOTIFY_MAX_RETRIES", default=5)
SCALER_NOTIFY_BASE_URL = env.str("SCALER_NOTIFY_BASE_URL", default="")
if SCALER_NOTIFY_WEBHOOK_URL and not SCALER_NOTIFY_WEBHOOK_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("SCALER_NOTIFY_WEBHOOK_URL must be an http:// or https:// URL")
if _webhook_denial := url_host_denial(SCALER_NOTIFY_WEBHOOK_URL):
    raise ImproperlyConfigured(f"SCALER_NOTIFY_WEBHOOK_URL: {_webhook_denial.text('Give the endpoint')}")
# The notices' e-mail goes through Django's e-mail backend: EMAIL_URL (django-environ, e.g.
# smtp+tls://user:password@smtp.example.com:587) and the sender DEFAULT_FROM_EMAIL.
vars().update({k: v for k, v in env.email_url("EMAIL_URL", default="smtp://localhost:25").items() if v is not None})
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="sparkscaler@localhost")
# Cross-job throttles (webapp.loop.throttle): at most SCALER_CLUSTER_MAX_IN_FLIGHT executions in flight per
# Spark cluster (its master URL, or the host in local mode), and SCALER_CLUSTER_COOLDOWN_S seconds from the end
# of one execution on a cluster to the start of the next. Rollbacks are never held.
SCALER_CLUSTER_MAX_IN_FLIGHT = env.int("SCALER_CLUSTER_MAX_IN_FLIGHT", default=1)
SCALER_CLUSTER_COOLDOWN_S = env.float("SCALER_CLUSTER_COOLDOWN_S", default=30.0)
if SCALER_CLUSTER_MAX_IN_FLIGHT < 1 or not SCALER_CLUSTER_COOLDOWN_S >= 0:
    raise ImproperlyConfigured("Cluster throttles: need SCALER_CLUSTER_MAX_IN_FLIGHT >= 1 and "
                               "SCALER_CLUSTER_COOLDOWN_S >= 0 (seconds)")
# Bounded collection (webapp.loop.tasks.collect_job): Celery's soft and hard time limits of one collect and
# evaluate (enforced by the prefork pool; with the threads pool the collection stops itself at the soft limit:
# no Spark REST request starts past it), the per-job lock outlives the hard limit, and one collection makes at
# most SCALER_COLLECT_MAX_REQUESTS Spark REST requests (retries included).
SCALER_COLLECT_SOFT_TIME_LIMIT_S = env.float("SCALER_COLLECT_SOFT_TIME_LIMIT_S",
                                             default=3 * SCALER_COLLECT_INTERVAL_S)
SCALER_COLLECT_TIME_LIMIT_S = env.float("SCALER_COLLECT_TIME_LIMIT_S", default=4 * SCALER_COLLECT_INTERVAL_S)
SCALER_COLLECT_MAX_REQUESTS = env.int("SCALER_COLLECT_MAX_REQUESTS", default=60)
if not 0 < SCALER_COLLECT_SOFT_TIME_LIMIT_S < SCALER_COLLECT_TIME_LIMIT_S or SCALER_COLLECT_MAX_REQUESTS < 3:
    raise ImproperlyConfigured("Bounded collection: need 0 < SCALER_COLLECT_SOFT_TIME_LIMIT_S < "
                               "SCALER_COLLECT_TIME_LIMIT_S (seconds) and SCALER_COLLECT_MAX_REQUESTS >= 3")

CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default=REDIS_URL)
CELERY_TASK_ACKS_LATE = True
# Redis outages. kombu 5.7's Redis transport closes the consumer's channel twice when the
# connection drops: the first close (in Connection.collect) stops at the dead socket, the second one
# (in Connection.close) then restores the unacknowledged messages through a transport whose client
# was already detached, and the AttributeError ('NoneType' ... 'hostname') from its ack-emulation QoS
# ended the worker whenever a task was in flight. Without ack emulation kombu's plain QoS logs a
# failed restore instead of raising, and the worker reconnects. Unacknowledged messages are then
# not kept in Redis; the database is the record instead: the reconcile beat takes over executions
# whose lease expired and re-enqueues approved proposals that never started.
CELERY_BROKER_TRANSPORT_OPTIONS = {"ack_emulation": False}
CELERY_BROKER_CONNECTION_MAX_RETRIES = None  # keep reconnecting however long Redis is away
CELERY_BROKER_CONNECTION_TIMEOUT = 2.0  # seconds; a publish during an outage fails fast
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "collect-all-jobs": {"task": "webapp.loop.tasks.collect_all", "schedule": SCALER_COLLECT_INTERVAL_S},
    "reconcile-workflow": {"task": "webapp.loop.tasks.workflow_reconcile",
                           "schedule": SCALER_RECONCILE_INTERVAL_S},
    "prune-metrics": {"task": "webapp.loop.tasks.prune_metrics", "schedule": SCALER_RETENTION_INTERVAL_S},
    "notify-jobs-down": {"task": "webapp.inbox.tasks.jobs_down_notify", "schedule": SCALER_COLLECT_INTERVAL_S},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
}

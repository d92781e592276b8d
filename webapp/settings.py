"""Django settings. Everything comes from the environment through django-environ.

The defaults run the demo (SQLite under ``var/``, Redis on 127.0.0.1:6379); production sets
``DATABASE_URL``, ``REDIS_URL``, ``SECRET_KEY`` and ``DEBUG=false``.
"""

import os
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("SPARKSCALER_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)
(VAR_DIR / "staticfiles").mkdir(exist_ok=True)

env = environ.Env(
    DEBUG=(bool, True),
    ALLOWED_HOSTS=(list, ["127.0.0.1", "localhost", "testserver"]),
)

SECRET_KEY = env("SECRET_KEY", default="insecure-demo-key-set-SECRET_KEY-in-production")
DEBUG = env("DEBUG")
ALLOWED_HOSTS = env("ALLOWED_HOSTS")

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
    "drf_spectacular_sidecar",  # Swagger UI as static files (no CDN)
    "webapp.jobs",
    "webapp.proposals",
    "webapp.dashboard",
    "webapp.accounts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] in ("django.db.backends.postgresql", "django.db.backends.postgresql_psycopg2"):
    # Production: PostgreSQL through psycopg 3, persistent connections checked before reuse.
    DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, Celery worker, beat) share the demo database.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"})
    DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_PATH", default=str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3"))}

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
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
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
}

REDIS_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")

# Autoscaler timing (seconds).
SCALER_COLLECT_INTERVAL_S = env.float("SCALER_COLLECT_INTERVAL_S", default=15.0)
SCALER_EXECUTION_TIMEOUT_S = env.float("SCALER_EXECUTION_TIMEOUT_S", default=240.0)
# FLIP-271 job.autoscaler.stabilization.interval: metrics right after a (re)start are not evaluated.
SCALER_STABILIZATION_S = env.float("SCALER_STABILIZATION_S", default=30.0)
# An attempt's lease = execution timeout + this margin; past it the reconcile beat takes over.
SCALER_EXECUTION_LEASE_MARGIN_S = env.float("SCALER_EXECUTION_LEASE_MARGIN_S", default=30.0)
SCALER_RECONCILE_INTERVAL_S = env.float("SCALER_RECONCILE_INTERVAL_S", default=15.0)

CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default=REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "collect-all-jobs": {"task": "webapp.jobs.tasks.collect_all", "schedule": SCALER_COLLECT_INTERVAL_S},
    "reconcile-workflow": {"task": "webapp.proposals.tasks.workflow_reconcile",
                           "schedule": SCALER_RECONCILE_INTERVAL_S},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
}

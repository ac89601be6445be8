"""Settings for the streaming host.

Everything the host owns lives in the state directory (HOST_STATE_DIR). Every value has a
working default so a fresh clone runs with no configuration at all.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from common.env import env_bool, env_int, env_str
from common.ports import DEFAULT_BASE_PORT, PortMap
from common.statedir import DB_FILE, LOG_DIR, REDIS_SOCKET, ensure_state_dir
from hostconfig import startup as _startup
from supervisor import web_listener

BASE_DIR = Path(__file__).resolve().parent.parent
STATE_DIR = ensure_state_dir()

# ---------------------------------------------------------------------------------------------
# Host network identity
# The environment wins over host.conf (`port`, `bind_address`), which wins over the default;
# a bad file value stops the start naming the key (hostconfig/startup.py).
if os.environ.get("HOST_PORT", "").strip():
    HOST_PORT = env_int("HOST_PORT", DEFAULT_BASE_PORT)
else:
    HOST_PORT = _startup.from_file("port")
HOST_BIND = env_str("HOST_BIND", "") or _startup.from_file("bind_address") or "127.0.0.1"
PORTS = PortMap(HOST_PORT)
# `runhost --no-mgmt-token` sets this for its children: v1 then answers without auth.
HOST_NO_MGMT_TOKEN = env_bool("HOST_NO_MGMT_TOKEN", False)
# Seconds since the epoch when the supervisor started; health reports uptime from it.
HOST_STARTED_AT = float(env_str("HOST_STARTED_AT", "0") or 0)

# ---------------------------------------------------------------------------------------------
# Django core
# The secret only signs Django sessions and the console's CSRF cookie; it is kept in the state
# dir so sessions survive a restart.
_secret_file = STATE_DIR / "django-secret"
if not _secret_file.exists():
    from common.files import atomic_write

    atomic_write(_secret_file, secrets.token_hex(32))
SECRET_KEY = _secret_file.read_text().strip()
DEBUG = env_bool("HOST_DEBUG", False)
ALLOWED_HOSTS = ["*"]  # the host answers on whatever name the LAN knows it by

# No "daphne" app: it only swaps `runserver` for an ASGI one, and its import installs Twisted's
# reactor in every process (Celery workers, planes, manage.py) at a cost of a second or more of
# each one's start. The host serves through hostmgmt.daphne_main (see docs/architecture.md).
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "hostmgmt",
    "hooks",
    "library",
    "pairing",
    "streaming",
    "displays",
    "compat",
    "native",
    "plugins",
    "fleet",
]

MIDDLEWARE = [
    "hostmgmt.middleware.SecurityHeadersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "hostmgmt.middleware.OriginClassMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "hostmgmt.urls"
ASGI_APPLICATION = "hostmgmt.asgi.application"
WSGI_APPLICATION = None

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
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": STATE_DIR / DB_FILE,
        # Several processes (daphne, Celery workers) write: wait for the lock instead of failing,
        # take it up front, and let readers run beside the writer.
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
        # Keep each thread's connection: opening one (and its PRAGMAs) cost more than the
        # queries of a read route. SQLite has no server to drop an idle connection.
        "CONN_MAX_AGE": None,
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Checked where a person picks the admin password (/welcome, /api/password), not when tools
# or tests set one directly (access.credentials.check_password_rules).
AUTH_PASSWORD_VALIDATORS: list[dict] = [
    {
        "NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",
        "OPTIONS": {"user_attributes": ("username",)},
    },
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 8},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# One backend: the admin password, through the shared failed-login bucket (Django admin too).
AUTHENTICATION_BACKENDS = ["access.backends.ThrottledPasswordBackend"]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = STATE_DIR / "static-collected"

# The console is served over TLS only.
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Strict"
CSRF_COOKIE_SECURE = True
CSRF_COOKIE_SAMESITE = "Strict"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Request bodies above these are refused with 413 before they are read: 1 MiB everywhere (the
# admin API's documented limit), 4 MiB on the management API, whose documents (hooks.json)
# are validated by their routes so that an oversized one gets a 400 with field errors.
MAX_REQUEST_BODY = 1024 * 1024
MGMT_MAX_REQUEST_BODY = 4 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = MGMT_MAX_REQUEST_BODY

# ---------------------------------------------------------------------------------------------
# Redis and Celery. Without REDIS_URL the supervisor starts a private Redis on a unix socket.
REDIS_URL = env_str("REDIS_URL", "") or f"unix://{STATE_DIR / REDIS_SOCKET}"


def _celery_broker(url: str) -> str:
    if url.startswith("unix://"):
        return "redis+socket://" + url[len("unix://") :]
    return url


CELERY_BROKER_URL = _celery_broker(REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_CONCURRENCY = env_int("HOST_WORKER_CONCURRENCY", 4)

# Daphne processes serving the web port together (supervisor/web_listener.py): 1-4, default
# the number of cores (at most 4). 1 is one daphne binding the port itself.
WEB_PROCESSES = web_listener.processes_from(os.environ.get("HOST_WEB_PROCESSES", ""))

# ---------------------------------------------------------------------------------------------
# Django REST framework: both APIs set their own authentication on their base views.
REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "apikit.errors.exception_handler",
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "apikit.negotiation.JsonOnlyNegotiation",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# Plain Django views the schema generator never visits: route -> {method: operation factory}.
HOST_HAND_WRITTEN_ROUTES = {
    "/api/v1/events": {"get": "hooks.api.schema.events_operation"},
    "/api/v1/fleet/events": {"get": "fleet.schema.fleet_events_operation"},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Streaming host APIs",
    "DESCRIPTION": (
        "Management API under /api/v1 (bearer management token) and admin web API under /api "
        "(HTTP Basic admin credentials or scoped bearer tokens, CSRF for browser writes)."
    ),
    "VERSION": "0.23.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Plain Django views (the SSE stream) the generator cannot see: apikit/schema.py.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "apikit.schema.add_hand_written_routes",
        "apikit.schema.document_errors",
    ],
}

# ---------------------------------------------------------------------------------------------
# Logging: every process of the host appends to one file in the state dir and to stderr.
(STATE_DIR / LOG_DIR).mkdir(mode=0o700, exist_ok=True)
# host.conf's `log_path` moves the log (checked here: an unusable path stops the start naming
# the key); the console reads and the supervisor rotates whichever file this is.
LOG_FILE, LOG_PATH_CHOSEN = _startup.log_file(STATE_DIR / LOG_DIR / "host.log")
# HOST_LOG_LEVEL wins over host.conf's `min_log_level`; on the handlers too, so loggers with
# a level of their own (django.request) are held to it as well.
LOG_LEVEL = _startup.log_level(os.environ.get("HOST_LOG_LEVEL"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "line": {
            "()": "console.logfile.UtcFormatter",
            "format": "%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s",
        },
    },
    # Secrets are masked before any handler writes; the supervisor rotates the file and every
    # process reopens it on its next line (console/logfile.py).
    "filters": {"redact": {"()": "console.logfile.RedactingFilter"}},
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "formatter": "line",
            "filters": ["redact"],
            "level": LOG_LEVEL,
        },
        "file": {
            "class": "common.loghandler.DiskSafeFileHandler",
            "filename": str(LOG_FILE),
            "formatter": "line",
            "filters": ["redact"],
            "level": LOG_LEVEL,
        },
    },
    "root": {"handlers": ["stderr", "file"], "level": LOG_LEVEL},
    "loggers": {
        # Request lines can carry query strings; the host logs its own events instead.
        "django.request": {"level": "ERROR"},
        "daphne.access": {"level": "WARNING", "propagate": False},
    },
}

# ---------------------------------------------------------------------------------------------
# Updater: release manifests must be signed by this Ed25519 key (raw 32 bytes, base64).
# GAP: no release signing key exists yet; until one is pinned here every manifest is refused,
# nothing is fetched, and the update status (`refused`, `last_error`) and the console dashboard
# say so (console/updater.py NO_KEY_REASON; docs/console.md "Updater").
# HOST_UPDATE_PUBLIC_KEY overrides it for test rigs and private builds only.
# The manifest URL is the config schema key `update_manifest_url` (hostconfig/schema.py).
UPDATE_PUBLIC_KEY = env_str("HOST_UPDATE_PUBLIC_KEY", "")

# Fleet: how often this host asks each member for its state (docs/fleet.md); 0 turns it off.
# A member that fails is asked again after an exponential backoff capped at 5 minutes.
FLEET_REFRESH_S = env_int("HOST_FLEET_REFRESH_S", 10)

"""Django settings for a RaftConnect node.

Every operator setting comes from the environment (``RAFTCONNECT_*``), so one
node's configuration is one set of variables; ``runnode`` sets the per-node
ones (data dir, addresses) before Django starts. Fails fast
(``ImproperlyConfigured``) without a secret key unless the process is in
development mode (``RAFTCONNECT_DEVELOPMENT=1``, see ``DEVELOPMENT``). Each node keeps its Django
database (mirrored users, admin log) in SQLite under its data directory;
cluster metadata lives in Raft or the configured metadata store, never here.
"""
from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from webapp import environment
from webapp.connect import cors, response_headers
from webapp.logconfig import logging_config
from webapp.plugin.version import RAFTCONNECT_VERSION

# ``runnode`` and ``raftconnect node`` set RAFTCONNECT_DATA_DIR (default var/<node-id>); otherwise var/default, both
# relative to the working directory, never to where the package is installed (site-packages for a wheel)
DATA_DIR = Path(environment.data_dir()).resolve()

#: Development mode, explicit: ``RAFTCONNECT_DEVELOPMENT=1``. The Makefile exports it for its targets (demo,
#: test, bench, ...) and ``tests/settings.py`` sets it for any pytest run; a deployment never sets it.
DEVELOPMENT = os.environ.get("RAFTCONNECT_DEVELOPMENT", "") == "1"
_DEVELOPMENT_KEY = "raftconnect-insecure-development-key"

# Signs sessions, CSRF tokens and the credential cache (webapp.connect.api.authentication). Outside
# development a node refuses to start without one instead of signing with a key anyone can read here.
SECRET_KEY = os.environ.get("RAFTCONNECT_SECRET_KEY") or environment.cluster_secret() or ""
if not SECRET_KEY:
    if not DEVELOPMENT:
        raise ImproperlyConfigured(
            "RAFTCONNECT_SECRET_KEY is not set (nor RAFTCONNECT_CLUSTER_SECRET, used in its place): set it to a "
            "long random value, the same on every node, e.g. $(openssl rand -base64 32). For a development node "
            "on your own machine set RAFTCONNECT_DEVELOPMENT=1 instead (a fixed, insecure key).")
    SECRET_KEY = _DEVELOPMENT_KEY
DEBUG = os.environ.get("RAFTCONNECT_DEBUG", "") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("RAFTCONNECT_ALLOWED_HOSTS", "*").split(",") if h]
# The console's session writes are CSRF-checked against the Origin; behind a TLS-terminating proxy name its
# public origins here (e.g. https://connect.example.com).
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("RAFTCONNECT_CSRF_TRUSTED_ORIGINS", "").split(",") if o]
# Console and admin sessions are signed cookies, valid on every node that signs with the same key
# (webapp.connect.api.sessions); they cannot be revoked, hence an age shorter than Django's two weeks.
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
SESSION_COOKIE_AGE_ENV = "RAFTCONNECT_SESSION_COOKIE_AGE_S"
try:
    SESSION_COOKIE_AGE = int(os.environ.get(SESSION_COOKIE_AGE_ENV) or 12 * 3600)
    if SESSION_COOKIE_AGE <= 0:
        raise ValueError("must be positive")
except ValueError as _exc:
    raise ImproperlyConfigured(f"{SESSION_COOKIE_AGE_ENV}: a whole number of seconds above 0 is needed, "
                               f"got {os.environ.get(SESSION_COOKIE_AGE_ENV)!r} ({_exc})") from None
# Cross-origin access to the REST API for browser applications on other origins: Connect's
# access.control.allow.origin / .methods (webapp.connect.cors); none unless set.
try:
    _CORS = cors.cors_settings(os.environ.get(cors.ORIGINS_ENV), os.environ.get(cors.METHODS_ENV))
except ValueError as _exc:
    raise ImproperlyConfigured(f"{cors.ORIGINS_ENV} / {cors.METHODS_ENV}: {_exc}") from None
CORS_ALLOW_ALL_ORIGINS = _CORS["CORS_ALLOW_ALL_ORIGINS"]
CORS_ALLOWED_ORIGINS = _CORS["CORS_ALLOWED_ORIGINS"]
CORS_ALLOWED_ORIGIN_REGEXES = _CORS["CORS_ALLOWED_ORIGIN_REGEXES"]
CORS_ALLOW_METHODS = _CORS["CORS_ALLOW_METHODS"]
CORS_ALLOW_CREDENTIALS = _CORS["CORS_ALLOW_CREDENTIALS"]
CORS_URLS_REGEX = _CORS["CORS_URLS_REGEX"]
#: whether any origin may call the API cross-origin: only then does django-cors-headers' middleware run (it
#: adds ``Vary: Origin`` to every response it sees, which the REST fast path then adds too)
CORS_ENABLED = bool(CORS_ALLOW_ALL_ORIGINS or CORS_ALLOWED_ORIGINS or CORS_ALLOWED_ORIGIN_REGEXES)
# Headers added to every response: Connect's response.http.headers.config (webapp.connect.response_headers)
try:
    REST_RESPONSE_HEADER_RULES = response_headers.parse_rules(os.environ.get(response_headers.ENV))
except ValueError as _exc:
    raise ImproperlyConfigured(f"{response_headers.ENV}: {_exc}") from None

INSTALLED_APPS = [
    "webapp.admin_site.RaftConnectAdminConfig",  # django.contrib.admin with the metadata store page
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",  # API tokens (Authorization: Token/Bearer KEY)
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI / ReDoc files, served locally
    "corsheaders",  # cross-origin REST access (CORS_* above)
    "webapp.connect",
    "webapp.coordinator",
    "webapp.storage",
    "webapp.runtime",
    "webapp.console.apps.ConsoleConfig",  # the console's task history follows the node's lifecycle
]

MIDDLEWARE = [
    # first, so it runs last on the way out: frees each request's objects once its response is done
    "webapp.connect.api.release.ReleaseRequestMiddleware",
    # next, so that its headers go on every answer below, preflights and errors included (only with rules)
    *(["webapp.connect.response_headers.ResponseHeadersMiddleware"] if REST_RESPONSE_HEADER_RULES else []),
    "django.middleware.security.SecurityMiddleware",
    "webapp.console.middleware.ConsoleFilesMiddleware",  # /console/ (webapp/console/dist) and admin static files
    # before anything else that answers: preflights, CORS headers (only when some origin is allowed)
    *(["corsheaders.middleware.CorsMiddleware"] if CORS_ENABLED else []),
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "webapp.connect.api.sessions.ClusterAuthenticationMiddleware",  # Django's, sessions valid on every node
    "webapp.admin_site.LazyMessageMiddleware",  # Django's MessageMiddleware, storage made when used
]

ROOT_URLCONF = "webapp.urls"
APPEND_SLASH = False
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(DATA_DIR / "node.sqlite3"),
        "OPTIONS": {"timeout": 20},
        # Each REST thread keeps its connection: authentication reads the user's auth_user row on
        # every request, and opening and closing SQLite for it was 40% of a REST write's CPU on the
        # leader (py-spy, benchmarks/cluster, issue 16). Health-checked before reuse.
        "CONN_MAX_AGE": 600,
        "CONN_HEALTH_CHECKS": True,
    }
}

AUTH_PASSWORD_VALIDATORS: list[dict] = []
# users are replicated in Raft; each node mirrors them into auth_user (webapp/connect/api/accounts.py)
AUTHENTICATION_BACKENDS = ["webapp.connect.api.accounts.ReplicatedUserBackend"]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Request bodies larger than this are refused (413) before a view parses them.
# Kafka Connect's worker configs topic.tracking.enable / topic.tracking.allow.reset (KIP-558).
TOPIC_TRACKING_ENABLE = os.environ.get("RAFTCONNECT_TOPIC_TRACKING_ENABLE", "true").lower() == "true"
TOPIC_TRACKING_ALLOW_RESET = os.environ.get("RAFTCONNECT_TOPIC_TRACKING_ALLOW_RESET", "true").lower() == "true"

DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("RAFTCONNECT_MAX_BODY_BYTES", 1024 * 1024))

# Seconds a write forwarded to a leader that just died waits for the next leader (webapp.connect.api).
FORWARD_WAIT_S = environment.forward_wait_s()

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Basic first: DRF answers 401 with its WWW-Authenticate challenge.
        "webapp.connect.api.authentication.CachedBasicAuthentication",
        "webapp.connect.api.authentication.ReplicatedTokenAuthentication",
        "webapp.connect.api.authentication.BearerTokenAuthentication",
        "webapp.connect.api.forwarding.ForwardedUserAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # roles viewer/operator/admin, declared per path or view (webapp/connect/api/roles.py)
    "DEFAULT_PERMISSION_CLASSES": ["webapp.connect.api.roles.HasRole"],
    # DRF's JSONRenderer with orjson encoding the compact form (same JSON; see the module)
    "DEFAULT_RENDERER_CLASSES": ["webapp.connect.api.renderers.ConnectJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["webapp.connect.api.parsers.ConnectJSONParser"],
    "EXCEPTION_HANDLER": "webapp.connect.api.errors.connect_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# OpenAPI schema generated from the views (drf-spectacular), served at /raftconnect/v1/openapi.json.
SPECTACULAR_SETTINGS = {
    "TITLE": "RaftConnect REST API",
    "DESCRIPTION": "Kafka Connect's REST API plus RaftConnect's own /raftconnect/v1/ resources. "
                   "Errors are Kafka Connect's {\"error_code\", \"message\"} body.",
    "VERSION": RAFTCONNECT_VERSION,
    "SERVE_INCLUDE_SCHEMA": False,
    # the schema is public (it describes the API, holds no data): automation and the docs pages fetch it
    # without credentials; every operation in it still requires them
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # cluster-internal endpoints (HMAC-signed, for agents and nodes) are not part of the public API
    "PREPROCESSING_HOOKS": ["webapp.connect.api.schema.public_endpoints_only"],
    # bodies, error responses and auth schemes: webapp/connect/api/openapi.py
    "OAS_VERSION": "3.1.0",
    # one name per choice set used by several bodies (the generated clients' enum classes)
    "ENUM_NAME_OVERRIDES": {"ConnectStateEnum": "webapp.states.STATES",
                            "RaftRoleEnum": "webapp.connect.api.serializers.RAFT_ROLES",
                            "UserRoleEnum": "webapp.connect.api.roles.ROLES"},
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "webapp.connect.api.openapi.add_error_responses"],
    "AUTHENTICATION_WHITELIST": ["webapp.connect.api.authentication.CachedBasicAuthentication",
                                 "webapp.connect.api.authentication.ReplicatedTokenAuthentication",
                                 "webapp.connect.api.authentication.BearerTokenAuthentication",
                                 "rest_framework.authentication.SessionAuthentication"],
}

# plain text or JSON lines (RAFTCONNECT_LOG_FORMAT=json), credentials masked: webapp/logconfig.py
LOGGING = logging_config(os.environ.get("RAFTCONNECT_LOG_FORMAT", "plain"),
                         os.environ.get("RAFTCONNECT_LOG_LEVEL", "INFO"))

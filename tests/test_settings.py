"""webapp.settings: no secret key outside explicit development mode means no start; the session age."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"


def load_settings(script: str = SCRIPT, **variables: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTCONNECT_")}
    env.update(DJANGO_SETTINGS_MODULE="webapp.settings", **variables)
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


def test_no_secret_outside_development_fails_fast_naming_the_variables():
    out = load_settings()
    assert out.returncode != 0
    assert "ImproperlyConfigured" in out.stderr and "RAFTCONNECT_SECRET_KEY is not set" in out.stderr
    assert "RAFTCONNECT_DEVELOPMENT=1" in out.stderr


@pytest.mark.parametrize(("variables", "key"), [
    ({"RAFTCONNECT_SECRET_KEY": "k1", "RAFTCONNECT_CLUSTER_SECRET": "c1"}, "k1"),
    ({"RAFTCONNECT_CLUSTER_SECRET": "c1"}, "c1"),
    ({"RAFTCONNECT_DEVELOPMENT": "1"}, "raftconnect-insecure-development-key"),
    ({"RAFTCONNECT_DEVELOPMENT": "1", "RAFTCONNECT_SECRET_KEY": "k1"}, "k1"),
])
def test_the_key_in_use(variables, key):
    out = load_settings(**variables)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == key


def test_the_suite_itself_runs_in_development_mode():
    from django.conf import settings

    assert settings.DEVELOPMENT is True
    assert os.environ["DJANGO_SETTINGS_MODULE"] == "webapp.settings"  # what subprocess nodes load


AGE = "import django; django.setup(); from django.conf import settings; print(settings.SESSION_COOKIE_AGE)"


@pytest.mark.parametrize(("value", "age"), [(None, "43200"), ("3600", "3600")])
def test_the_session_age(value, age):
    out = load_settings(AGE, RAFTCONNECT_DEVELOPMENT="1",
                        **({"RAFTCONNECT_SESSION_COOKIE_AGE_S": value} if value else {}))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == age


@pytest.mark.parametrize("value", ["0", "-5", "12h", "1.5"])
def test_a_bad_session_age_fails_fast_naming_the_variable(value):
    out = load_settings(AGE, RAFTCONNECT_DEVELOPMENT="1", RAFTCONNECT_SESSION_COOKIE_AGE_S=value)
    assert out.returncode != 0
    assert "RAFTCONNECT_SESSION_COOKIE_AGE_S: a whole number of seconds above 0" in out.stderr and repr(value) in out.stderr

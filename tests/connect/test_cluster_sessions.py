"""Console sessions are signed cookies that name their user: valid on a node that numbers its user rows
differently, ended when the user goes, not readable without the cluster's key (webapp.connect.api.sessions)."""
from __future__ import annotations

from django.conf import settings
from django.contrib import auth
from django.contrib.sessions.backends.signed_cookies import SessionStore
from django.test import Client

from tests.connect.conftest import make_user
from tests.console.test_api import XHR, login
from webapp.connect.api.sessions import USER_NAME_KEY


def whoami(client: Client):
    resp = client.get("/raftconnect/v1/whoami", **XHR)
    return resp.json().get("username") if resp.status_code == 200 else resp.status_code


def cookie_from_another_node(user, row_id: int) -> str:
    """The session cookie another node would have set at ``user``'s login, where its row of ``user`` has
    the id ``row_id``: the same key signs it, the name and the password hash are the user's own."""
    s = SessionStore()
    s[auth.SESSION_KEY] = str(row_id)
    s[auth.BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
    s[auth.HASH_SESSION_KEY] = user.get_session_auth_hash()
    s[USER_NAME_KEY] = user.get_username()
    s.save()
    return s.session_key


def test_a_login_is_a_signed_cookie_that_names_its_user(db, node):
    make_user("op", "operator")
    client = Client(enforce_csrf_checks=True)
    assert login(client, "op", "pw").status_code == 200
    session = SessionStore(session_key=client.cookies[settings.SESSION_COOKIE_NAME].value)
    assert session[USER_NAME_KEY] == "op"  # no row anywhere: the cookie holds the session
    assert whoami(client) == "op"


def test_a_session_from_a_node_whose_row_ids_differ_is_the_same_user_here(db, node):
    op, vera = make_user("op", "operator"), make_user("vera", "viewer")
    client = Client()
    # there, op's row had the id vera's row has here: Django alone would read vera's row, find the hash
    # of another password and end the session
    client.cookies[settings.SESSION_COOKIE_NAME] = cookie_from_another_node(op, vera.pk)
    assert whoami(client) == "op"
    assert client.get("/connectors", **XHR).status_code == 200  # operator's rights, not vera's viewer ones
    # the rewritten cookie carries this node's id from now on
    assert SessionStore(session_key=client.cookies[settings.SESSION_COOKIE_NAME].value)[auth.SESSION_KEY] == str(op.pk)

    # one for an id this node never gave out: the user is found by name
    other = Client()
    other.cookies[settings.SESSION_COOKIE_NAME] = cookie_from_another_node(op, 4242)
    assert whoami(other) == "op"


def test_a_session_whose_user_this_node_never_saw_mirrors_the_replicated_user(db, node):
    from django.contrib.auth import get_user_model

    op = make_user("op", "operator")
    cookie = cookie_from_another_node(op, 7)
    get_user_model().objects.filter(username="op").delete()  # as on a node op never authenticated on
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = cookie
    assert whoami(client) == "op"
    assert get_user_model().objects.filter(username="op").exists()


def test_a_session_ends_when_its_user_is_deleted_or_the_password_changes(db, node):
    op, vera = make_user("op", "operator"), make_user("vera", "viewer")
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = cookie_from_another_node(op, op.pk)
    assert whoami(client) == "op"
    node.raft.commands.user_put(name="op", changes={"password": auth.hashers.make_password("new")}, create=False,
                                now=1.0)  # as another node would
    assert whoami(client) == 401

    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = cookie_from_another_node(vera, vera.pk)
    assert whoami(client) == "vera"
    node.raft.commands.user_delete(name="vera")
    assert whoami(client) == 401
    assert client.cookies[settings.SESSION_COOKIE_NAME].value == ""  # the answer deleted the cookie


def test_a_cookie_signed_with_another_key_or_edited_is_no_session(db, node, settings):
    op = make_user("op", "operator")
    good = cookie_from_another_node(op, op.pk)
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = good[:-1] + ("A" if good[-1] != "A" else "B")
    assert whoami(client) == 401
    settings.SECRET_KEY = "another cluster's key"
    client.cookies[settings.SESSION_COOKIE_NAME] = good
    assert whoami(client) == 401

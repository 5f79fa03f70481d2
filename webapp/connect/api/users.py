"""``/raftconnect/v1/users``: the cluster's replicated REST users, managed by admins (see :mod:`.accounts`).

* ``GET /raftconnect/v1/users`` — ``[{"name", "role", "active", "created", "updated", "tokens"}]``;
* ``POST /raftconnect/v1/users`` ``{"name", "password", "role", "active"?}`` — 201 with the user
  (the password is hashed by the node that proposes it; it is never stored or shown), 409 exists;
* ``GET /raftconnect/v1/users/{name}`` — one user, 404 unknown;
* ``PATCH /raftconnect/v1/users/{name}`` ``{"password"?, "role"?, "active"?}`` — 200 with the user;
* ``DELETE /raftconnect/v1/users/{name}`` — 204; its tokens go with it.

The last active admin can be neither demoted, deactivated nor deleted (409). Everything here
needs the admin role (``roles.POLICY``); writes go through the leader.
"""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.connect.herder import BadRequest

from . import accounts
from .roles import ROLES
from .views import ConnectAPIView

__all__ = ["UsersView", "UserView"]

_USER = inline_serializer("User", {
    "name": serializers.CharField(), "role": serializers.ChoiceField(choices=ROLES),
    "active": serializers.BooleanField(), "created": serializers.FloatField(help_text="unix seconds"),
    "updated": serializers.FloatField(help_text="unix seconds"),
    "tokens": serializers.IntegerField(help_text="how many tokens the user has")})
_NEW_USER = inline_serializer("NewUser", {
    "name": serializers.CharField(), "password": serializers.CharField(),
    "role": serializers.ChoiceField(choices=ROLES), "active": serializers.BooleanField(required=False)})
_USER_CHANGE = inline_serializer("UserChange", {
    "password": serializers.CharField(required=False), "role": serializers.ChoiceField(choices=ROLES, required=False),
    "active": serializers.BooleanField(required=False)})


def _body(request: Request, allowed: set[str], required: set[str], shape: str) -> dict:
    body = request.data
    if not isinstance(body, dict) or set(body) - allowed or required - set(body):
        raise BadRequest(f"Request body must be {shape}")
    return body


class UsersView(ConnectAPIView):
    """``GET``: every user; ``POST``: create one (201)."""

    @extend_schema(responses={200: serializers.ListSerializer(child=_USER)})
    def get(self, request: Request) -> Response:
        return Response(accounts.user_list())

    @extend_schema(request=_NEW_USER, responses={201: _USER})
    def post(self, request: Request) -> Response:
        body = _body(request, {"name", "password", "role", "active"}, {"name", "password", "role"},
                     '{"name", "password", "role", "active" (optional)}')
        if not isinstance(body["password"], str):
            raise BadRequest("password must be a non-empty string")
        user = accounts.user_create(name=body["name"], password=body["password"], role=body["role"],
                                    active=body.get("active", True))
        return Response(user, status=201)


class UserView(ConnectAPIView):
    """``GET`` / ``PATCH`` / ``DELETE`` one user."""

    @extend_schema(responses={200: _USER})
    def get(self, request: Request, name: str) -> Response:
        return Response(accounts.user_get(name))

    @extend_schema(request=_USER_CHANGE, responses={200: _USER})
    def patch(self, request: Request, name: str) -> Response:
        body = _body(request, {"password", "role", "active"}, set(), '{"password"?, "role"?, "active"?}')
        return Response(accounts.user_update(name=name, password=body.get("password"), role=body.get("role"),
                                             active=body.get("active")))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        accounts.user_delete(name=name)
        return Response(status=204)

"""``/raftconnect/v1/tokens``: the calling user's named API tokens, replicated (see :mod:`.accounts`).

``GET`` lists the caller's tokens (names, creation and expiry, never keys); ``POST``
``{"name", "expires_in_s"?}`` issues a new one and shows its key once (201), 409 when the
caller already has a token of that name (nothing is ever replaced);
``DELETE /raftconnect/v1/tokens/{name}`` revokes one on every node (204). Writes go
through the leader like every write (:class:`~.views.ConnectAPIView`). Any user with a
role may manage their own tokens (``roles.POLICY``). Error responses are added to the
schema by ``openapi.add_error_responses``.
"""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.connect.herder import BadRequest

from . import accounts
from .views import ConnectAPIView

__all__ = ["TokensView", "TokenView"]

_TOKEN_INFO = inline_serializer("TokenInfo", {
    "name": serializers.CharField(), "created": serializers.FloatField(help_text="unix seconds"),
    "expires": serializers.FloatField(allow_null=True, help_text="unix seconds; null: never"),
    "expired": serializers.BooleanField()})
_NEW_TOKEN = inline_serializer("NewToken", {
    "user": serializers.CharField(), "name": serializers.CharField(),
    "token": serializers.CharField(help_text="the key: shown only in this response"),
    "created": serializers.FloatField(), "expires": serializers.FloatField(allow_null=True)})
_NEW_TOKEN_REQUEST = inline_serializer("NewTokenRequest", {
    "name": serializers.CharField(), "expires_in_s": serializers.FloatField(required=False, allow_null=True)})


def _caller(request: Request) -> str:
    name = getattr(request.user, "username", None) or str(request.user)
    if not name:
        raise BadRequest("Tokens are issued to authenticated users")
    return name


class TokensView(ConnectAPIView):
    """``GET``: the caller's tokens ``[{"name", "created", "expires", "expired"}]``; ``POST``: a new token (201)."""

    @extend_schema(responses={200: serializers.ListSerializer(child=_TOKEN_INFO)})
    def get(self, request: Request) -> Response:
        return Response(accounts.token_list(_caller(request)))

    @extend_schema(request=_NEW_TOKEN_REQUEST, responses={201: _NEW_TOKEN})
    def post(self, request: Request) -> Response:
        body = request.data
        if not isinstance(body, dict) or set(body) - {"name", "expires_in_s"} or "name" not in body:
            raise BadRequest('Request body must be {"name": "<token name>", "expires_in_s": <seconds, optional>}')
        user = _caller(request)
        token = accounts.token_create(user=user, name=body["name"], expires_in_s=body.get("expires_in_s"))
        return Response({"user": user, **token}, status=201)


class TokenView(ConnectAPIView):
    """``DELETE /raftconnect/v1/tokens/{name}``: revoke the caller's token ``name`` everywhere (204; 404 unknown)."""

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        accounts.token_revoke(user=_caller(request), name=name)
        return Response(status=204)

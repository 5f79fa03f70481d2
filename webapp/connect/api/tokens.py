"""``/raftconnect/v1/tokens``: the calling user's API token (DRF ``authtoken``).

Tokens live in this node's SQLite like the users, so the request is served by
the node it reaches and never forwarded; use a token on the node that issued it.
``POST`` creates the token, or replaces it (the old key stops working at once);
``GET`` says whether one exists (never shows the key again); ``DELETE`` revokes it.
Any user with a role may manage their own token (``roles.POLICY``). Error
responses are added to the schema by ``openapi.add_error_responses``.
"""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .roles import HasRole

__all__ = ["TokensView"]

_TOKEN = inline_serializer("Token", {"user": serializers.CharField(), "token": serializers.CharField(),
                                     "created": serializers.DateTimeField()})


class TokensView(APIView):
    """The authenticated user's token: ``GET`` ``{"user", "exists"}``, ``POST`` 201 ``{"user", "token", "created"}``, ``DELETE`` 204."""

    permission_classes = [HasRole]

    def _user(self, request: Request):
        user = request.user
        if not getattr(user, "pk", None):
            from webapp.connect.herder import BadRequest

            raise BadRequest("Tokens are issued to users of this node; authenticate with a password here")
        return user

    @extend_schema(responses={200: inline_serializer("TokenState", {"user": serializers.CharField(),
                                                                    "exists": serializers.BooleanField()})})
    def get(self, request: Request) -> Response:
        user = self._user(request)
        return Response({"user": user.get_username(), "exists": Token.objects.filter(user=user).exists()})

    @extend_schema(request=None, responses={201: _TOKEN})
    def post(self, request: Request) -> Response:
        user = self._user(request)
        Token.objects.filter(user=user).delete()
        token = Token.objects.create(user=user)
        return Response({"user": user.get_username(), "token": token.key, "created": token.created}, status=201)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request) -> Response:
        Token.objects.filter(user=self._user(request)).delete()
        return Response(status=204)

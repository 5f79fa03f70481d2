"""Connect's ``ConnectorPluginsResource`` beyond the plain list: all plugin types, config definitions, validation.

``GET /connector-plugins/{plugin}/config`` and ``PUT /connector-plugins/{plugin}/config/validate``
(``GET /connector-plugins?connectorsOnly=`` is ``views.ConnectorPluginsView``). Thin over
:mod:`webapp.connect.plugins` and the Herder.
"""
from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from webapp.connect import plugins
from webapp.connect.herder import NotFoundError

from .views import ConnectAPIView, herder

__all__ = ["ConnectorPluginConfigView", "ConnectorPluginValidateView"]


class ConnectorPluginConfigView(ConnectAPIView):
    """``GET /connector-plugins/{plugin}/config``: the plugin's ConfigKeyInfo list (404 ``Unknown plugin``)."""

    def get(self, request: Request, plugin: str) -> Response:
        try:
            p = plugins.find(plugin)
        except plugins.UnknownPlugin as exc:
            raise NotFoundError(str(exc)) from exc
        return Response([plugins.config_key_info(k) for k in p.config_def.keys])


class ConnectorPluginValidateView(ConnectAPIView):
    """``PUT /connector-plugins/{plugin}/config/validate``: ConfigInfos of the config in the body (200, also
    when it has errors; 400 when its ``connector.class`` does not match ``plugin``)."""

    def put(self, request: Request, plugin: str) -> Response:
        return Response(herder().validate_plugin_config(plugin_name=plugin, config=request.data))

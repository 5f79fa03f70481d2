"""Connector plugins and the plugin API (see ``api``) and registry (see ``registry``)."""

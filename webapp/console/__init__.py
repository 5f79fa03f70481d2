"""The browser console's server side.

Owns what the console needs beyond Kafka Connect's REST API: serving its built
files at ``/console/`` (WhiteNoise, from ``webapp/console/dist``; see
:mod:`webapp.console.views`), session login and logout for the browser, the
current user's role (``GET /raftconnect/v1/whoami``) and per-task throughput
as the worker agents report it (:mod:`webapp.console.api`).

Every change the console makes goes through the public REST API; nothing here
writes cluster state.
"""

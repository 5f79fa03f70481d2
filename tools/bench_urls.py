"""URLconf of a benchmark node: the product's routes plus the baseline views of :mod:`tools.bench_views`.

Used only when ``tools.settings`` is loaded with ``RAFTCONNECT_BENCH_BASELINE=1`` (``benchmarks/rest/run.py``).
"""
from django.urls import path

from webapp.urls import handler404, handler500, urlpatterns as _product  # noqa: F401 - the error views stay

from . import bench_views

__all__ = ["urlpatterns"]

urlpatterns = [
    path("raftconnect/v1/bench/connectors-status", bench_views.connectors_status),
    path("raftconnect/v1/bench/status/<str:name>", bench_views.connector_status),
    *_product,
]

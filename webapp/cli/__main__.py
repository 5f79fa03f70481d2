"""``python -m webapp.cli``: the ``raftconnect`` console script without installing it."""
from webapp.cli.app import main

if __name__ == "__main__":
    main()

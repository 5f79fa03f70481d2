"""Models and migrations agree: a model change without its migration fails here, not on an operator's upgrade."""
from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits 1 when a migration is missing
        pytest.fail(f"models changed without a migration (exit {exc.code}):\n{out.getvalue()}")

"""Offsets remember the generation and commit number that wrote them, so a late copy of a commit
cannot move them back (``RelationalOffsets``); nullable, so existing rows need no value."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('storage', '0005_portable_text_on_postgresql'),
    ]

    operations = [
        migrations.AddField(
            model_name='offset',
            name='generation',
            field=models.BigIntegerField(null=True),
        ),
        migrations.AddField(
            model_name='offset',
            name='seq',
            field=models.BigIntegerField(null=True),
        ),
    ]

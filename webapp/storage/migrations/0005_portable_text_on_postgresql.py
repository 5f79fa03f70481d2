"""Configs, status traces and offsets may hold NUL on PostgreSQL too (escaped by the fields; no schema change)."""

import webapp.storage.models
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('storage', '0004_activetopic_bigautofield'),
    ]

    operations = [
        migrations.AlterField(
            model_name='connector',
            name='config',
            field=webapp.storage.models.PortableJSONField(default=dict),
        ),
        migrations.AlterField(
            model_name='connector',
            name='task_configs',
            field=webapp.storage.models.PortableJSONField(default=list),
        ),
        migrations.AlterField(
            model_name='offset',
            name='offset',
            field=webapp.storage.models.PortableJSONField(),
        ),
        migrations.AlterField(
            model_name='offset',
            name='partition',
            field=webapp.storage.models.PortableJSONField(),
        ),
        migrations.AlterField(
            model_name='status',
            name='trace',
            field=webapp.storage.models.PortableTextField(blank=True, null=True),
        ),
    ]

"""Active topics get the project-wide BigAutoField id (DEFAULT_AUTO_FIELD), as every other model has."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('storage', '0003_active_topic'),
    ]

    operations = [
        migrations.AlterField(
            model_name='activetopic',
            name='id',
            field=models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID'),
        ),
    ]

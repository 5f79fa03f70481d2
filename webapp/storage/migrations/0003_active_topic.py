"""Active topics of connectors (Connect's KIP-558 ``GET /connectors/{name}/topics``)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('storage', '0002_writer_lease'),
    ]

    operations = [
        migrations.CreateModel(
            name='ActiveTopic',
            fields=[
                ('id', models.AutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('connector', models.CharField(max_length=255)),
                ('topic', models.CharField(max_length=255)),
            ],
        ),
        migrations.AddConstraint(
            model_name='activetopic',
            constraint=models.UniqueConstraint(fields=('connector', 'topic'), name='storage_activetopic_unique'),
        ),
    ]

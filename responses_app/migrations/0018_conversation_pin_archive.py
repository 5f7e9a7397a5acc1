from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('responses_app', '0017_request_tool_text'),
    ]

    operations = [
        migrations.AddField(
            model_name='conversation',
            name='pinned_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='conversation',
            name='archived_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]

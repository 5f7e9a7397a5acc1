"""Provider fields (ids, names, codes) as text of any length; unique and looked-up ones by digest.
A count of takeovers, so a request whose runners keep crashing ends."""

import django.db.models.functions.text
import responses_app.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('responses_app', '0013_request_provider'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='mcpapproval',
            name='mcp_approval_once',
        ),
        migrations.RemoveConstraint(
            model_name='toolcall',
            name='toolcall_once_per_request',
        ),
        migrations.AddField(
            model_name='responserequest',
            name='takeovers',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='conversation',
            name='last_response_id',
            field=models.TextField(blank=True),
        ),
        migrations.AlterField(
            model_name='mcpapproval',
            name='approval_request_id',
            field=models.TextField(),
        ),
        migrations.AlterField(
            model_name='responserequest',
            name='error_code',
            field=models.TextField(blank=True),
        ),
        migrations.AlterField(
            model_name='responserequest',
            name='incomplete_reason',
            field=models.TextField(blank=True),
        ),
        migrations.AlterField(
            model_name='responserequest',
            name='response_id',
            field=models.TextField(blank=True),
        ),
        migrations.AlterField(
            model_name='safetyverdict',
            name='block_id',
            field=models.TextField(blank=True),
        ),
        migrations.AlterField(
            model_name='segment',
            name='response_id',
            field=models.TextField(blank=True),
        ),
        migrations.AlterField(
            model_name='toolcall',
            name='call_id',
            field=models.TextField(),
        ),
        migrations.AlterField(
            model_name='toolcall',
            name='name',
            field=models.TextField(),
        ),
        migrations.AddIndex(
            model_name='responserequest',
            index=responses_app.models.EqualityIndex(fields=['response_id'], name='request_response_id'),
        ),
        migrations.AddConstraint(
            model_name='mcpapproval',
            constraint=models.UniqueConstraint(models.F('request'), django.db.models.functions.text.MD5('approval_request_id'), name='mcp_approval_once'),
        ),
        migrations.AddConstraint(
            model_name='toolcall',
            constraint=models.UniqueConstraint(models.F('request'), django.db.models.functions.text.MD5('call_id'), name='toolcall_once_per_request'),
        ),
    ]

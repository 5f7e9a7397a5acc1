import django.db.models.deletion
from django.db import migrations, models


def chain_existing_turns(apps, schema_editor):
    """Every conversation so far was a line: each turn follows the one before it, and the newest
    is the branch shown."""
    Request = apps.get_model("responses_app", "ResponseRequest")
    Conversation = apps.get_model("responses_app", "Conversation")
    rows = (Request.objects.filter(conversation__isnull=False).order_by("conversation_id", "created", "pk")
            .values_list("pk", "conversation_id").iterator(chunk_size=2000))
    parents, leaves = [], {}
    previous = (None, None)
    for pk, conversation_id in rows:
        if conversation_id == previous[1]:
            parents.append(Request(pk=pk, parent_id=previous[0]))
        leaves[conversation_id] = pk
        previous = (pk, conversation_id)
        if len(parents) >= 1000:
            Request.objects.bulk_update(parents, ["parent"])
            parents = []
    Request.objects.bulk_update(parents, ["parent"])
    for conversation_id, leaf in leaves.items():
        Conversation.objects.filter(pk=conversation_id).update(leaf_id=leaf)


class Migration(migrations.Migration):

    dependencies = [
        ('responses_app', '0010_storage_linear'),
    ]

    operations = [
        migrations.AddField(
            model_name='conversation',
            name='leaf',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='responses_app.responserequest'),
        ),
        migrations.AddField(
            model_name='responserequest',
            name='parent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='children', to='responses_app.responserequest'),
        ),
        migrations.RunPython(chain_existing_turns, migrations.RunPython.noop),
    ]

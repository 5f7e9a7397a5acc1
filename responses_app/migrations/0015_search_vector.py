"""Each turn's search document, stored and GIN-indexed on PostgreSQL (search.py keeps it current):
a search reads the index instead of computing every turn's document per query. The existing turns'
documents are written here, with RELAY_SEARCH_CONFIG as it is now. The index is built after them
and without a pending list (fastupdate off): a document is written once per answer, and the
planner, which prices a pending list high, keeps choosing the index."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

import responses_app.models

INDEX = "search_document_vector"
# search.DOCUMENT as it is at this migration (a prompt's first 50,000 characters, an answer's 100,000)
DOCUMENT = (
    "setweight(to_tsvector(%(config)s::regconfig, left(coalesce(r.input #>> '{}', ''), 50000)), 'A')"
    " || setweight(to_tsvector(%(config)s::regconfig, left(r.final_text, 100000)), 'B')"
    " || CASE WHEN r.parent_id IS NULL THEN setweight(to_tsvector(%(config)s::regconfig, coalesce(("
    "SELECT c.title FROM \"responses_app_conversation\" c WHERE c.id = r.conversation_id), '')), 'A')"
    " ELSE ''::tsvector END")


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    from responses_app.conf import app_settings

    with schema_editor.connection.cursor() as cursor:
        cursor.execute("INSERT INTO responses_app_searchdocument (request_id, vector) "
                       f'SELECT r.id, {DOCUMENT} FROM "responses_app_responserequest" r',
                       {"config": app_settings.SEARCH_CONFIG})
        cursor.execute(f"CREATE INDEX {INDEX} ON responses_app_searchdocument USING gin (vector) "
                       "WITH (fastupdate = off)")


def backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):

    dependencies = [
        ('responses_app', '0014_provider_text_fields'),
    ]

    operations = [
        migrations.CreateModel(
            name='SearchDocument',
            fields=[
                ('request', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                                 related_name='search_document', serialize=False,
                                                 to='responses_app.responserequest')),
                ('vector', responses_app.models.SearchDocumentField()),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]

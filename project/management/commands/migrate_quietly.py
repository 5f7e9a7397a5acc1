"""`manage.py migrate_quietly`: `migrate` for `make run`, one line instead of one per migration.

The line says how many migrations were applied (and for which apps), or that there were none;
an error is migrate's own, on stderr, with its non-zero exit status.
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor


class Command(BaseCommand):
    help = "Apply the migrations, saying in one line what was done (errors still shown)."

    def handle(self, *args: Any, **options: Any) -> None:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        call_command("migrate", interactive=False, verbosity=0)
        if not plan:
            self.stdout.write("Database up to date: no migrations to apply.")
            return
        labels = sorted({migration.app_label for migration, _backwards in plan})
        self.stdout.write(f"Database migrated: {len(plan)} migration{'' if len(plan) == 1 else 's'} applied "
                          f"({', '.join(labels)}).")

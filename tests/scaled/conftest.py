"""A private scaled-out cluster for the destructive tests (bench/cluster.py): its own Redis and
PostgreSQL, so stopping them never touches the shared ones. One per module; each test starts
again whatever an earlier one killed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.cluster import Cluster, have_services
from tests.conftest import IN_CI


@pytest.fixture(scope="module")
def private_cluster() -> Iterator[Cluster]:
    missing = have_services()
    if missing:
        if IN_CI:
            pytest.fail(f"CI must be able to start private services: {missing}")
        pytest.skip(missing)
    cluster = Cluster(layout="scaled", web=2, workers=2).start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def cluster(private_cluster: Cluster) -> Iterator[Cluster]:
    private_cluster.ensure_running()
    yield private_cluster

"""relay/backoff.py: the wait between attempts to get a lost connection back."""

from __future__ import annotations

from responses_app.relay.backoff import DELAYS_S, Backoff


def test_the_delays_grow_to_their_cap_and_start_short_again_after_a_success() -> None:
    backoff = Backoff()
    assert [backoff.next_delay() for _ in range(7)] == [*DELAYS_S, DELAYS_S[-1], DELAYS_S[-1]]
    backoff.reset()
    assert backoff.next_delay() == DELAYS_S[0]

"""The relay: the async shell around the streaming core (runners, hub, worker consumer)."""

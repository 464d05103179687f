"""Job runner."""

"""Web dashboard."""

"""Helpers the tests share, imported as ``tests.support.<module>`` (no ``sys.path`` edits):

- ``polling``: ``wait_for``, the one bounded poll;
- ``pg_cluster``: a throwaway PostgreSQL cluster (also ``python -m tests.support.pg_cluster``);
- ``servers``: a real HTTP server for a WSGI app in a thread;
- ``chromium``: the system's headless Chromium through Playwright;
- ``web``, ``runner``, ``browser`` and ``browser_seed``: helpers of tests/web, tests/runner and
  tests/browser.
"""

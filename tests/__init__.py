"""The test suite. A package so that its helpers import as ``tests.support.<name>``."""

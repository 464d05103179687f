"""HTTP plumbing shared by every view: request parameters and bodies (``params``), the one
JSON error envelope (``errors``), the guards (``security``, ``login_limit``) and the app's
per-process state (``context``)."""

"""The demo's training script, shipped inside the package.

``tracker up --demo`` queues ``train_digits.py`` of this folder (a link to
``examples/train_digits.py`` in a source checkout, a copy in a wheel), so the demo works from
an installed wheel, which has no ``examples/`` folder. Nothing here is imported by
``import tracker``; the script is run, not imported.
"""

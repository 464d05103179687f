"""Native integrations with training frameworks (no MLflow needed).

* :mod:`tracker.integrations.lightning` -- ``TrackerLogger``, a Lightning ``Logger``.
* :mod:`tracker.integrations.transformers` -- ``TrackerCallback``, a Hugging Face
  ``TrainerCallback``.
* :mod:`tracker.integrations.common` -- what both share: the key mapping, the config
  conversion, checkpoint recording and the resume path.

Only these modules import Lightning, transformers or torch (an import contract checks it);
``import tracker`` imports none of them. Install with ``pip install tracker[integrations]``.
"""

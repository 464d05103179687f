"""The one exception hierarchy of the tracker.

Every error carries a stable ``code`` (used by the CLI's exit messages and the HTTP error
envelope) and a message that names the field, the problem and the rule.
"""

from __future__ import annotations


class TrackerError(Exception):
    """Base of every error the tracker raises on purpose."""

    code = "tracker_error"
    http_status = 500

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, object]:
        body: dict[str, object] = {"code": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body


class InvalidInput(TrackerError, ValueError):
    """A value given by the user breaks a documented rule."""

    code = "invalid_input"
    http_status = 400


class InvalidMetricKey(InvalidInput):
    code = "invalid_metric_key"


class InvalidMetricValue(InvalidInput):
    code = "invalid_metric_value"


class InvalidMetricType(TrackerError, TypeError):
    """A metric value of a type ``log()`` does not accept (a str, a bool, a 3-element tensor)."""

    code = "invalid_metric_type"
    http_status = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        TrackerError.__init__(self, message, field=field)


class TooLarge(InvalidInput):
    """An upload (an artifact's body) past the configured size limit; nothing was stored."""

    code = "too_large"
    http_status = 413


class NotFound(TrackerError, LookupError):
    code = "not_found"
    http_status = 404


class Conflict(TrackerError):
    """The request contradicts the stored state (e.g. finishing a run twice differently)."""

    code = "conflict"
    http_status = 409


class AttemptSuperseded(Conflict):
    """A job's process wrote into its run after another attempt took the job over (or the job
    ended): the store refuses it. The process should stop; nothing it sends is stored."""

    code = "attempt_superseded"


class ArtifactCorrupt(TrackerError):
    """An artifact's bytes, as read back, do not match its recorded size or sha256."""

    code = "artifact_corrupt"
    http_status = 500


class StoreUnavailable(TrackerError):
    """The database could not be reached; the client keeps points and retries."""

    code = "store_unavailable"
    http_status = 503


class FlushTimeout(TrackerError, TimeoutError):
    """``flush(timeout)`` returned before everything was stored while the store was up (the
    points are still being written); the message says how many and how fast."""

    code = "flush_timeout"


class SchemaError(TrackerError):
    """The database schema is missing, newer than this code, or a migration failed."""

    code = "schema_error"
    http_status = 500


class NoActiveRun(TrackerError, RuntimeError):
    code = "no_active_run"
    http_status = 400


class InheritedRunError(NoActiveRun):
    """A forked child process used the run of the process that forked it (see
    ``tracker.client.fork``): a child never logs into, flushes or finishes its parent's run."""

    code = "inherited_run"


class WriterError(TrackerError, RuntimeError):
    """The background writer failed; raised on the next log()/flush()/finish() of a strict
    run (``strict=True``, ``TRACKER_STRICT=1``) or of a job attempt that was superseded.
    Otherwise the failure is reported once on stderr and as a run event, and the run goes
    on (``tracker.client.failsafe``)."""

    code = "writer_error"


class CheckpointError(TrackerError):
    code = "checkpoint_error"


class NonFiniteLossError(TrackerError, FloatingPointError):
    """A loss-like metric stayed NaN/Inf while ``tracker.init(on_nonfinite="stop")`` asked
    to stop training at that point (a queued job then fails as ``nonfinite_loss``)."""

    code = "nonfinite_loss"


class UploadError(TrackerError, RuntimeError):
    """An artifact or media upload failed for good (not a passing outage: those are
    retried); raised by the next call on a strict run (``strict=True``,
    ``TRACKER_STRICT=1``), naming what was not stored and why. Otherwise it is reported once
    on stderr and as a run event, the files are kept in the spill file where they could be
    built, and the run goes on (``tracker.client.failsafe``)."""

    code = "upload_error"

"""How fast a dead run is noticed: the heartbeat and crash-detection defaults, in one place.

A training process's writer thread sends a heartbeat every ``HEARTBEAT_S`` seconds (a job's
worker also heartbeats the runs it holds, with every lease renewal). Every long-running
tracker process -- ``tracker worker``, ``tracker scheduler`` and the dashboard served by
``tracker ui`` -- sweeps every ``SWEEP_S`` seconds and marks a ``running`` run whose last
heartbeat is older than ``RUN_STALE_S`` as ``crashed``, its end time being that last
heartbeat. A run that a live job lease still holds is left to the lease reaper. So a
SIGKILLed training process is declared crashed at most ``RUN_STALE_S + SWEEP_S`` seconds
(``DETECTED_WITHIN_S``) after its last heartbeat.

The stale limit tolerates three missed heartbeats; keep ``heartbeat_interval`` (client)
well below ``--run-stale-seconds`` (server) when changing either.
"""

from __future__ import annotations

HEARTBEAT_S = 5.0
RUN_STALE_S = 20.0
SWEEP_S = 5.0
LIVE_DOCTOR_S = 5.0  # between the live doctor's passes over running runs (tracker ui)
SWEEPS_S = 2.0  # seconds between the sweep controller's passes (tracker ui, housekeeping)
SEAL_S = 10.0  # seconds between passes sealing ended runs' points (tracker ui)
DETECTED_WITHIN_S = RUN_STALE_S + SWEEP_S

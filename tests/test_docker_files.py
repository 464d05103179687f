"""Checks on docker/compose.yaml and docker/Dockerfile that hold without a Docker daemon.

The image installs its pins from constraints.txt (the repository's one place for them) and
the extras that the commands compose runs need (per ``tracker.cli.COMMANDS``).

Each rule is a function that returns a list of problems, so the same rule is run against
the real files (no problems expected) and against broken copies (a problem expected): a
rule that cannot fail would prove nothing.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tracker.cli import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = ROOT / "docker"
REQUIRED_SERVICES = ("postgres", "web", "worker")
BASE_IMAGE = "python:3.11-slim"
CONSTRAINTS = "constraints.txt"
TORCH_INSTALL = f"pip install -c {CONSTRAINTS} torch"
REQUIRED_TOKEN = re.compile(r"^\$\{TRACKER_TOKEN:\?[^}]+\}$")

Compose = dict[str, Any]


def load_compose(text: str) -> Compose:
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise ValueError("compose file is not a mapping")
    return doc


def service_env(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a dict, from either the mapping or the list form."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(key): "" if value is None else str(value) for key, value in env.items()}


def service_command(service: dict[str, Any]) -> str:
    command = service.get("command") or ""
    return " ".join(command) if isinstance(command, list) else " ".join(shlex.split(command))


def runs_tracker(service: dict[str, Any]) -> bool:
    return re.search(r"(^|\s)tracker\s", service_command(service)) is not None


def depends_condition(service: dict[str, Any], other: str) -> str | None:
    """The condition `service` waits for on `other`; None when it does not depend on it."""
    depends = service.get("depends_on") or {}
    if isinstance(depends, list):
        return "service_started" if other in depends else None
    if other not in depends:
        return None
    return (depends[other] or {}).get("condition", "service_started")


def check_services(doc: Compose) -> list[str]:
    services = doc.get("services") or {}
    return [f"service {name!r} is missing" for name in REQUIRED_SERVICES if name not in services]


def check_postgres(doc: Compose) -> list[str]:
    postgres = (doc.get("services") or {}).get("postgres") or {}
    problems = []
    if not str(postgres.get("image", "")).startswith("postgres:15"):
        problems.append("postgres service must use the postgres:15 image")
    test = (postgres.get("healthcheck") or {}).get("test") or []
    if "pg_isready" not in (" ".join(test) if isinstance(test, list) else str(test)):
        problems.append("postgres healthcheck must run pg_isready")
    named = set(doc.get("volumes") or {})
    mounts = [str(v).split(":", 1)[0] for v in postgres.get("volumes") or []]
    if not any(source in named for source in mounts):
        problems.append("postgres data must live on a named volume declared under volumes:")
    return problems


def check_web_waits_for_postgres(doc: Compose) -> list[str]:
    web = (doc.get("services") or {}).get("web") or {}
    condition = depends_condition(web, "postgres")
    if condition != "service_healthy":
        return [f"web must depend on postgres with condition service_healthy, not {condition}"]
    return []


def check_public_bind_needs_token(doc: Compose) -> list[str]:
    problems = []
    for name, service in (doc.get("services") or {}).items():
        if "0.0.0.0" not in service_command(service):
            continue
        token = service_env(service).get("TRACKER_TOKEN", "")
        if not REQUIRED_TOKEN.match(token):
            problems.append(
                f"{name} binds 0.0.0.0 but TRACKER_TOKEN is {token!r}, "
                "not a required ${TRACKER_TOKEN:?...} substitution"
            )
    web = (doc.get("services") or {}).get("web") or {}
    if "--host 0.0.0.0" not in service_command(web):
        problems.append("web must run the dashboard with --host 0.0.0.0 inside its container")
    return problems


def check_one_database(doc: Compose) -> list[str]:
    services = doc.get("services") or {}
    postgres_env = service_env(services.get("postgres") or {})
    user = postgres_env.get("POSTGRES_USER", "postgres")
    password = postgres_env.get("POSTGRES_PASSWORD", "")
    database = postgres_env.get("POSTGRES_DB", user)
    expected = f"postgresql+psycopg://{user}:{password}@postgres:5432/{database}"
    problems = []
    for name, service in services.items():
        if not runs_tracker(service):
            continue
        uri = service_env(service).get("TRACKER_URI")
        if uri != expected:
            problems.append(
                f"{name} has TRACKER_URI={uri!r}; every tracker service needs {expected!r}"
            )
    for name in ("web", "worker"):
        if name in services and not runs_tracker(services[name]):
            problems.append(f"{name} must run a tracker command")
    return problems


def check_migrations_first(doc: Compose) -> list[str]:
    """web and worker start only after `tracker db upgrade` has completed."""
    services = doc.get("services") or {}
    migrators = {
        name
        for name, service in services.items()
        if service_command(service) == "tracker db upgrade"
    }
    problems = []
    for name in ("web", "worker"):
        service = services.get(name) or {}
        if "tracker db upgrade &&" in service_command(service):
            continue
        if not any(
            depends_condition(service, m) == "service_completed_successfully" for m in migrators
        ):
            problems.append(f"{name} may start before `tracker db upgrade` has completed")
    return problems


def check_health_checks(doc: Compose) -> list[str]:
    """The dashboard answers its health endpoint; the worker proves a live heartbeat."""
    problems = []
    services = doc.get("services", {})
    web = " ".join(map(str, services.get("web", {}).get("healthcheck", {}).get("test", [])))
    if "/api/v1/health" not in web:
        problems.append("web has no health check on /api/v1/health")
    worker = " ".join(map(str, services.get("worker", {}).get("healthcheck", {}).get("test", [])))
    if "workers check" not in worker:
        problems.append("worker has no health check (`tracker workers check`)")
    return problems


def seconds(text: str) -> float:
    """A compose duration ('90s', '1m30s', '2m') in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", str(text))
    return sum(float(n) * units[u] for n, u in parts)


def check_worker_drains(doc: Compose) -> list[str]:
    """Compose must wait longer than the worker's drain, and the worker must get the GPUs."""
    worker = doc.get("services", {}).get("worker", {})
    command = service_command(worker)
    grace = re.search(r"--grace-seconds\s+(\d+)", command)
    drain = float(grace.group(1)) if grace else 10.0  # the worker's default
    problems = []
    if seconds(worker.get("stop_grace_period", "10s")) <= drain:
        problems.append(f"worker stop_grace_period must exceed its {drain:g} s drain")
    devices = (
        worker.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    )
    if not any("gpu" in d.get("capabilities", []) for d in devices):
        problems.append("worker reserves no GPU (deploy.resources.reservations.devices)")
    return problems


def check_files_have_a_home(doc: Compose) -> list[str]:
    """A PostgreSQL store keeps artifacts and code snapshots only under an artifact root:
    the dashboard, the worker and the dispatcher must name the same one, on a volume."""
    services = doc.get("services") or {}
    problems = []
    roots = set()
    for name in ("web", "worker", "dispatcher"):
        if name not in services:
            continue
        root = service_env(services[name]).get("TRACKER_ARTIFACT_ROOT")
        if not root:
            problems.append(f"{name} has no TRACKER_ARTIFACT_ROOT (uploads and snapshots fail)")
            continue
        roots.add(root)
        mounts = [
            str(v).split(":")[1] for v in services[name].get("volumes") or [] if ":" in str(v)
        ]
        if not any(root == m or root.startswith(m.rstrip("/") + "/") for m in mounts):
            problems.append(f"{name}'s artifact root {root} is on no volume")
    if len(roots) > 1:
        problems.append(f"the services name different artifact roots: {sorted(roots)}")
    return problems


def check_worker_runs_snapshots(doc: Compose) -> list[str]:
    """The worker runs the code jobs carry (a snapshot per attempt), not a copy of this
    repository baked or mounted into the container."""
    worker = (doc.get("services") or {}).get("worker") or {}
    problems = []
    if "--snapshot-dir" not in service_command(worker):
        problems.append("the worker does not name a --snapshot-dir on its data volume")
    for volume in worker.get("volumes") or []:
        if str(volume).startswith(".."):
            problems.append(f"the worker mounts the repository ({volume}): jobs carry their code")
    return problems


def check_postgres_on_loopback_only(doc: Compose) -> list[str]:
    ports = ((doc.get("services") or {}).get("postgres") or {}).get("ports") or []
    if not ports:
        return ["postgres is not published for `tracker db` commands on the host"]
    return [f"postgres published beyond loopback: {p}" for p in ports
            if not str(p).startswith("127.0.0.1:")]  # fmt: skip


def check_dispatcher_job_uri(doc: Compose) -> list[str]:
    """Slurm jobs run on other machines: their store address must be one they reach (never
    the compose network's ``postgres``), and their code on the shared directory."""
    dispatcher = (doc.get("services") or {}).get("dispatcher")
    if dispatcher is None:
        return []
    command = service_command(dispatcher)
    problems = []
    if "--job-uri" not in command:
        problems.append("the dispatcher gives jobs its own TRACKER_URI (postgres: unreachable)")
    if "--snapshot-dir ${TRACKER_SHARED_DIR}" not in command:
        problems.append("the dispatcher's --snapshot-dir is not on the shared directory")
    if "user" not in dispatcher:
        problems.append("the dispatcher's user (the jobs' user on the nodes) is not set")
    return problems


COMPOSE_RULES: list[Callable[[Compose], list[str]]] = [
    check_files_have_a_home,
    check_worker_runs_snapshots,
    check_postgres_on_loopback_only,
    check_dispatcher_job_uri,
    check_health_checks,
    check_worker_drains,
    check_services,
    check_postgres,
    check_web_waits_for_postgres,
    check_public_bind_needs_token,
    check_one_database,
    check_migrations_first,
]


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with comments dropped and continuations joined."""
    joined = re.sub(
        r"\\\n",
        " ",
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")),
    )
    pairs = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, args = line.strip().partition(" ")
            pairs.append((keyword.upper(), " ".join(args.split())))
    return pairs


def _project_installs(steps: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """(step index, arguments) of each RUN that pip-installs the project ('.[...]')."""
    return [
        (i, args)
        for i, (keyword, args) in enumerate(steps)
        if keyword == "RUN" and re.search(r"pip install\b.*\s'?\.(\[|\s|'|$)", args)
    ]


def check_dockerfile(text: str) -> list[str]:
    steps = dockerfile_instructions(text)
    problems = []
    froms = [args for keyword, args in steps if keyword == "FROM"]
    if not froms or froms[0].split()[0] != BASE_IMAGE:
        problems.append(f"the image must be built FROM {BASE_IMAGE}, not {froms[:1]}")
    runs = [(i, args) for i, (keyword, args) in enumerate(steps) if keyword == "RUN"]
    torch_at = [i for i, args in runs if re.search(rf"{re.escape(TORCH_INSTALL)}(\s|$)", args)]
    project_at = _project_installs(steps)
    copied_at = [
        i for i, (keyword, args) in enumerate(steps) if keyword == "COPY" and CONSTRAINTS in args
    ]
    if not torch_at:
        problems.append(f"no RUN {TORCH_INSTALL}")
    if not project_at:
        problems.append("no RUN pip install of the project ('.[...]')")
    if torch_at and project_at and min(torch_at) > min(i for i, _ in project_at):
        problems.append("torch must be installed before the project")
    for _, args in project_at:
        if f"-c {CONSTRAINTS}" not in args:
            problems.append(f"the project must be installed with -c {CONSTRAINTS}: {args}")
    if not copied_at or (torch_at and min(copied_at) > min(torch_at)):
        problems.append(f"{CONSTRAINTS} must be copied in before torch is installed")
    if any(re.search(r"\btorch\s*[=<>~!]=", args) for _, args in runs):
        problems.append(f"torch is pinned in {CONSTRAINTS}, not in the Dockerfile")
    users = [args for keyword, args in steps if keyword == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append("the image must switch to a non-root USER")
    if not any(keyword == "EXPOSE" and "5000" in args.split() for keyword, args in steps):
        problems.append("the image must EXPOSE 5000")
    return problems


def check_image_extras(dockerfile: str, doc: Compose) -> list[str]:
    """The image installs the extras of every tracker command compose runs, and postgres."""
    installed: set[str] = set()
    for _, args in _project_installs(dockerfile_instructions(dockerfile)):
        for extras in re.findall(r"\.\[([^\]]*)\]", args):
            installed |= {e.strip() for e in extras.split(",")}
    needed = {"postgres"}
    for service in (doc.get("services") or {}).values():
        words = service_command(service).split()
        if len(words) > 1 and words[0] == "tracker" and words[1] in COMMANDS:
            needed |= set(COMMANDS[words[1]][1])
    missing = sorted(needed - installed)
    return [f"the image must install the extras {missing}"] if missing else []


def check_constraints_pin_torch(text: str) -> list[str]:
    pins = re.findall(r"^torch==\S+", text, re.M)
    return [] if len(pins) == 1 else [f"{CONSTRAINTS} must pin torch exactly once: {pins}"]


@pytest.fixture(scope="module")
def compose() -> Compose:
    return load_compose((DOCKER_DIR / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return (DOCKER_DIR / "Dockerfile").read_text()


@pytest.mark.parametrize("rule", COMPOSE_RULES, ids=lambda rule: rule.__name__)
def test_compose_file_follows_rule(compose: Compose, rule: Callable[[Compose], list[str]]):
    assert rule(compose) == []


def test_dockerfile_follows_rules(dockerfile: str):
    assert check_dockerfile(dockerfile) == []


def test_image_installs_the_extras_compose_needs(dockerfile: str, compose: Compose):
    assert check_image_extras(dockerfile, compose) == []
    assert check_image_extras(dockerfile.replace("server,", ""), compose) != []
    assert check_image_extras(dockerfile.replace("runner,", ""), compose) != []


def test_constraints_pin_torch():
    assert check_constraints_pin_torch((ROOT / CONSTRAINTS).read_text()) == []
    assert check_constraints_pin_torch("numpy==2.0\n") != []


def test_env_example_holds_no_token():
    env = dict(
        line.split("=", 1)
        for line in (DOCKER_DIR / ".env.example").read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    assert "TRACKER_TOKEN" in env
    assert env["TRACKER_TOKEN"].strip() == "", "the example must not ship a usable token"


def _drop_token(doc: Compose) -> None:
    del doc["services"]["web"]["environment"]["TRACKER_TOKEN"]


def _default_token(doc: Compose) -> None:
    doc["services"]["web"]["environment"]["TRACKER_TOKEN"] = "${TRACKER_TOKEN:-changeme}"


def _web_starts_with_postgres(doc: Compose) -> None:
    doc["services"]["web"]["depends_on"]["postgres"]["condition"] = "service_started"


def _worker_other_database(doc: Compose) -> None:
    doc["services"]["worker"]["environment"]["TRACKER_URI"] = "sqlite:///tracker.db"


def _no_worker(doc: Compose) -> None:
    del doc["services"]["worker"]


def _no_healthcheck(doc: Compose) -> None:
    del doc["services"]["postgres"]["healthcheck"]


def _no_migration_wait(doc: Compose) -> None:
    doc["services"]["worker"]["depends_on"] = {"postgres": {"condition": "service_healthy"}}


def _no_web_healthcheck(doc: Compose) -> None:
    del doc["services"]["web"]["healthcheck"]


def _no_worker_healthcheck(doc: Compose) -> None:
    del doc["services"]["worker"]["healthcheck"]


def _short_stop_grace(doc: Compose) -> None:
    doc["services"]["worker"]["stop_grace_period"] = "30s"  # less than --grace-seconds 60


def _no_gpu(doc: Compose) -> None:
    del doc["services"]["worker"]["deploy"]


def _no_artifact_root(doc: Compose) -> None:
    del doc["services"]["worker"]["environment"]["TRACKER_ARTIFACT_ROOT"]


def _artifact_root_off_volume(doc: Compose) -> None:
    doc["services"]["web"]["environment"]["TRACKER_ARTIFACT_ROOT"] = "/tmp/artifacts"


def _worker_mounts_the_repository(doc: Compose) -> None:
    doc["services"]["worker"]["volumes"].append("..:/project:ro")


def _worker_without_snapshot_dir(doc: Compose) -> None:
    doc["services"]["worker"]["command"] = ["tracker", "worker", "--grace-seconds", "60"]


def _postgres_published_everywhere(doc: Compose) -> None:
    doc["services"]["postgres"]["ports"] = ["5432:5432"]


def _dispatcher_without_job_uri(doc: Compose) -> None:
    command = doc["services"]["dispatcher"]["command"]
    doc["services"]["dispatcher"]["command"] = command[: command.index("--job-uri")]


@pytest.mark.parametrize(
    "breakage",
    [
        _drop_token,
        _default_token,
        _web_starts_with_postgres,
        _worker_other_database,
        _no_worker,
        _no_healthcheck,
        _no_migration_wait,
        _no_web_healthcheck,
        _no_worker_healthcheck,
        _short_stop_grace,
        _no_gpu,
        _no_artifact_root,
        _artifact_root_off_volume,
        _worker_mounts_the_repository,
        _worker_without_snapshot_dir,
        _postgres_published_everywhere,
        _dispatcher_without_job_uri,
    ],
    ids=lambda f: f.__name__.lstrip("_"),
)
def test_compose_rules_catch_breakage(compose: Compose, breakage: Callable[[Compose], None]):
    broken = copy.deepcopy(compose)
    breakage(broken)
    assert [p for rule in COMPOSE_RULES for p in rule(broken)] != []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (f"FROM {BASE_IMAGE}", "FROM python:3.12"),
        (f"RUN {TORCH_INSTALL}", "RUN pip install torch==2.13.0"),
        (f"RUN {TORCH_INSTALL}", f"RUN {TORCH_INSTALL}==2.13.0"),
        (f"pip install -c {CONSTRAINTS} '.[", "pip install '.["),
        (f"COPY {CONSTRAINTS} ./\n", ""),
        ("USER tracker", "USER root"),
        ("EXPOSE 5000", "EXPOSE 8000"),
    ],
)
def test_dockerfile_rules_catch_breakage(dockerfile: str, old: str, new: str):
    assert old in dockerfile
    assert check_dockerfile(dockerfile.replace(old, new)) != []


def test_dockerfile_rule_catches_torch_after_project(dockerfile: str):
    torch_line = f"RUN {TORCH_INSTALL}\n"
    moved = dockerfile.replace(torch_line, "") + torch_line
    assert "must be installed before the project" in " ".join(check_dockerfile(moved))


def test_the_cpu_override_drops_the_gpu_reservation_only() -> None:
    """compose.cpu.yaml resets the worker's device reservation (compose's !reset tag) and
    tells the worker to use no GPU; nothing else."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!reset", lambda loader, node: "RESET")
    doc = yaml.load((DOCKER_DIR / "compose.cpu.yaml").read_text(), Loader=Loader)
    assert list(doc["services"]) == ["worker"]
    worker = doc["services"]["worker"]
    assert worker["deploy"] == "RESET"
    assert "--gpus none" in service_command(worker)


def test_the_worker_health_check_command_exists() -> None:
    from click.testing import CliRunner

    from tracker.cli import main

    done = CliRunner().invoke(main, ["workers", "check", "--help"])
    assert done.exit_code == 0 and "--max-age" in done.output

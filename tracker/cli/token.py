"""``tracker token create|ls|revoke``: the dashboard's access tokens, kept in the store.

A token is printed once, when it is created; the store keeps only its sha256. Scopes:
``log`` for training hosts (create runs, log metrics and checkpoints, read everything),
``admin`` for people who launch, cancel, schedule and delete. Whoever runs these commands
has store access, which is already more than any token gives.
"""

from __future__ import annotations

import click

from tracker.cli.common import echo_json, fmt_time, json_option, open_store, print_table, uri_option
from tracker.cli.suggest import SuggestingGroup


@click.group(cls=SuggestingGroup)
def token() -> None:
    """Access tokens for the dashboard and its API (scopes: log, admin)."""


@token.command("create")
@click.option("--scope", type=click.Choice(["log", "admin"]), required=True,
              help="log: create runs, log, read (training hosts); "
              "admin: also launch, cancel, schedule, delete.")  # fmt: skip
@click.option("--name", default=None, help="A label to recognise the token by (default token-ID).")
@uri_option
@json_option
def token_create(scope: str, name: str | None, uri: str | None, as_json: bool) -> None:
    """Create a token and print it (the only time it is shown)."""
    from tracker.store.tokens import create_token

    info, secret = create_token(open_store(uri, create=True), scope, name)
    if as_json:
        echo_json({"id": info.id, "name": info.name, "scope": info.scope, "token": secret})
        return
    click.echo(f"token {info.id} ({info.name}, scope {info.scope}); it is shown only now:",
               err=True)  # fmt: skip
    click.echo(secret)


@token.command("ls")
@click.option("--all", "include_revoked", is_flag=True, help="Include revoked tokens.")
@uri_option
@json_option
def token_ls(include_revoked: bool, uri: str | None, as_json: bool) -> None:
    """List tokens (never the tokens themselves): id, name, scope, created, last used."""
    from tracker.store.tokens import list_tokens

    found = list_tokens(open_store(uri), include_revoked=include_revoked)
    if as_json:
        echo_json(found)
        return
    rows = [
        (t.id, t.name, t.scope, fmt_time(t.created_at), fmt_time(t.last_used_at),
         fmt_time(t.revoked_at))
        for t in found
    ]  # fmt: skip
    print_table(["ID", "NAME", "SCOPE", "CREATED", "LAST USED", "REVOKED"], rows)


@token.command("revoke")
@click.argument("token_ids", type=int, nargs=-1, required=True)
@uri_option
def token_revoke(token_ids: tuple[int, ...], uri: str | None) -> None:
    """Revoke tokens by ID: they stop working at once, and so do their sign-in sessions."""
    from tracker.store.tokens import revoke_token

    store = open_store(uri)
    for token_id in token_ids:
        info = revoke_token(store, token_id)
        click.echo(f"token {info.id} ({info.name}) revoked")

"""A SelfOps apply racing an owner's ``PUT /workspace/files`` of the same file: the
apply compares the file with what its preview saw and writes under the lock the PUT
takes, so no acknowledged write is lost.

Lost, precisely: a PUT answered 2xx whose content was then replaced by an apply that was
previewed against the content before that PUT. Both answered 2xx and the file ending
with the apply's content is exactly that (had the apply written first, the PUT's
content would be last; had the PUT written first, the apply must have seen it differ
and refused with 409 ``mutation_apply_conflict``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.gateway.conftest import SidecarFactory
from tests.selfops.test_mutations import APPLY, PREVIEW
from tests.sim.anthropic_sim import AnthropicSim
from tests.workspace.test_files import raw

ROUNDS = 120


async def test_an_apply_never_overwrites_an_acknowledged_workspace_write(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)  # the workspace is the folder of config.toml
    target = tmp_path / "prompts" / "race.md"
    target.parent.mkdir()
    target.write_text("start\n")
    lost: list[int] = []
    outcomes: dict[tuple[int, int], int] = {}

    for i in range(ROUNDS):
        applied = f"applied {i}\n"
        owners = f"owner's write {i}\n"
        op = {"kind": "replace", "path": "prompts/race.md", "value": applied}
        body = {"target": "workspace_file", "operations": [op]}
        status, p, _ = await sc.call("POST", PREVIEW, body)
        assert status == 200, p
        confirm = {
            "mutation_id": p["mutation_id"],
            "confirm_hash": p["confirm_hash"],
            "allow_sensitive": False,
        }

        async def apply(confirm: dict[str, object] = confirm) -> tuple[int, bytes]:
            data = json.dumps(confirm).encode()
            return await raw(sc, "POST", APPLY, data, **{"Content-Type": "application/json"})

        put = raw(sc, "PUT", "/workspace/files/prompts/race.md", data=owners.encode())
        if i % 2:  # which request is sent first alternates
            (put_status, _), (apply_status, answer) = await asyncio.gather(put, apply())
        else:
            (apply_status, answer), (put_status, _) = await asyncio.gather(apply(), put)
        assert put_status == 200
        assert apply_status in (200, 409), answer
        if apply_status == 409:
            assert json.loads(answer)["error"]["code"] == "mutation_apply_conflict"
        outcomes[(put_status, apply_status)] = outcomes.get((put_status, apply_status), 0) + 1
        final = target.read_text()
        assert final in (applied, owners)
        if apply_status == 200 and final == applied:
            lost.append(i)

    assert lost == [], f"{len(lost)} of {ROUNDS} acknowledged writes lost; {outcomes}"

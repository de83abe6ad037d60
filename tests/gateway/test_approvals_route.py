"""``GET /agent/approvals``: the permission decisions read back from the real database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kernel.store.approvals import ApprovalRecord
from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim

AT = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)


def record(n: int, delegation: str, decision: str = "allow", by: str = "owner") -> ApprovalRecord:
    return ApprovalRecord(
        delegation_id=delegation,
        tool="Bash",
        input=f'{{"command": "make {n}"}}',
        decision=decision,
        decided_by=by,
        asked_at=AT + timedelta(seconds=n),
        answered_at=AT + timedelta(seconds=n + 1),
        conversation="telegram:1",
        session_id=4,
        cli="claude_code",
    )


async def test_decisions_newest_first_by_delegation_with_the_key(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    records = sc.kernel.approvals.records
    await records.record(record(1, "d-1"))
    await records.record(record(2, "d-2", "deny", "timeout"))
    await records.record(record(3, "d-1", "deny", "owner"))
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with sc.http.get(f"{sc.url}/agent/approvals", headers=headers) as response:
        assert response.status == 200
        items = (await response.json())["items"]
    assert [i["input"] for i in items] == [
        '{"command": "make 3"}',
        '{"command": "make 2"}',
        '{"command": "make 1"}',
    ]
    assert items[1]["decided_by"] == "timeout" and items[1]["decision"] == "deny"
    assert items[0]["asked_at"].startswith("2026-11-26T10:00:03")
    url = f"{sc.url}/agent/approvals?delegation_id=d-1&limit=1"
    async with sc.http.get(url, headers=headers) as response:
        [only] = (await response.json())["items"]
    assert (only["delegation_id"], only["decision"]) == ("d-1", "deny")
    async with sc.http.get(f"{sc.url}/agent/approvals?limit=0", headers=headers) as response:
        assert response.status == 400
        assert "limit" in (await response.json())["error"]["message"]
    async with sc.http.get(f"{sc.url}/agent/approvals") as response:
        assert response.status == 401

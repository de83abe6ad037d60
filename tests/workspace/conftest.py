"""The live sidecar, shared from tests/gateway."""

import pytest

from kernel.workspace import dirs, paths
from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared

# Races that swap a folder in a tight loop: only the descriptor walk closes them fully.
_STORMS = {
    "test_a_link_swapped_in_while_requests_run_is_never_followed",
    "test_writes_and_deletes_racing_in_threads_give_only_workspace_errors",
}


@pytest.fixture(autouse=True, params=["fd", "path"])
def dirs_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every workspace test runs with both ways of walking a path: descriptors (POSIX)
    and checked full paths (what Windows gets), so the Windows walk is tested here."""
    if request.param == "path":
        if request.function.__name__ in _STORMS:
            pytest.skip(
                "the path walk keeps a microsecond window between its check and a path's "
                "use (kernel/workspace/dirs.py); these storms swap folders in a tight loop"
            )
        monkeypatch.setattr(paths, "choose_dirs", dirs.PathDirs)
    return str(request.param)

"""Processes of the tests' pools, read from Linux ``/proc``."""

from pathlib import Path


def children_of(pid: int) -> list[int]:
    """The processes that ``pid`` started and that are still there (none once ``pid`` has gone)."""
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except FileNotFoundError:
        return []
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"

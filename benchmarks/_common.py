"""What every benchmark records beside its figures: the machine it ran on, and quantiles.

Imported by the ``benchmarks/*/run.py`` scripts (each puts the repository root on
``sys.path``); not part of the product.
"""
from __future__ import annotations

import os
import platform
import subprocess

__all__ = ["cpu_ticks", "machine", "quantile", "record", "short_commit"]


def machine() -> str:
    """``"<CPU model>, <n> cores, <GiB> GiB, <OS> <kernel>, Python <version>"`` of this machine (from /proc)."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def short_commit(repo: str | os.PathLike, default: str = "?") -> str:
    """The short hash of ``repo``'s ``HEAD`` (a checkout's directory), or ``default`` when git cannot tell."""
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or default


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of ``values`` (0 < q <= 1); raises ValueError when empty."""
    if not values:
        raise ValueError("no values")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * len(s) + 0.5)) - 1))]


def record(script: str, text: str, *, keep: bool = True, results: str = "RESULTS.md") -> None:
    """Print a benchmark's ``text`` and, with ``keep`` (its ``--no-record`` not given), append it
    to the ``results`` file beside ``script`` (the benchmark's ``__file__``)."""
    print(text)
    if keep:
        with open(os.path.join(os.path.dirname(os.path.abspath(script)), results), "a") as fh:
            fh.write(text)


def thread_stats(pid: int | str) -> dict[str, tuple[str, int, int]]:
    """Per thread of process ``pid``: ``{tid: (name, user + system CPU in clock ticks, context switches)}``.

    From ``/proc/<pid>/task/<tid>/stat`` and ``status`` (voluntary plus involuntary switches); a thread that
    ends while it is read is left out. The name is the kernel's (``comm``): Python threads show the
    interpreter's name unless they set their own, Rust threads (granian's) their runtime's. Errors:
    ``OSError`` when the process is gone."""
    out: dict[str, tuple[str, int, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                stat = fh.read()
            with open(f"/proc/{pid}/task/{tid}/status") as fh:
                switches = sum(int(line.split(":")[1]) for line in fh
                               if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")))
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        out[tid] = (stat[stat.index("(") + 1:stat.rindex(")")], int(fields[11]) + int(fields[12]), switches)
    return out


def cpu_ticks(pid: int | str) -> tuple[int, int, int, int]:
    """``(user, system, reaped children's user, reaped children's system)`` CPU time of process ``pid``
    in clock ticks (``/proc/<pid>/stat``; ``os.sysconf("SC_CLK_TCK")`` per second). Errors: ``OSError``
    when the process is gone."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()  # after the command name, which may hold spaces
    return int(fields[11]), int(fields[12]), int(fields[13]), int(fields[14])

"""Run untrusted generated code against tests in a separate, limited process.

Layers, strongest available first (the modes in force are listed in :attr:`TestRun.isolation`):

* ``netns``: a fresh network namespace (no interfaces but a down loopback), via ``unshare(2)``
  directly (root with CAP_SYS_ADMIN) or inside a new user namespace (unprivileged users, capless
  containers); ``netns`` is missing when the OS refuses both.
* ``uid``: as root, the child drops to ``nobody`` so the process-count limit binds and other
  users' files (the parent's ``/proc/<pid>/environ`` included) are unreadable -- only where
  ``nobody`` can run the interpreter (not when Python lives under a private ``/root``).
* ``rlimits``: CPU time, address space, process count, open files, file size, no core dumps.
* ``audit``: a ``sys.addaudithook`` hook in the child refusing sockets, new processes, ctypes,
  writes outside the temporary working directory and other processes' ``/proc`` entries. This is
  the weakest layer (it binds Python code, not native code), the only one everywhere.

Always: a fresh temporary working directory, an environment of ``PATH``/``LANG`` only,
``python -I -B`` (no user site, no ``PYTHON*`` variables), its own session, killed with its
whole process group at the wall-clock deadline.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

_HARNESS = Path(__file__).with_name("_sandbox_harness.py")
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_NOBODY = 65534
_probe: tuple[str, ...] | None = None


@dataclass
class TestRun:
    """The outcome of :func:`run_tests`.

    ``outcomes[i]`` is ``"passed"``, ``"failed"`` (assertion), ``"error"`` (another exception),
    ``"timeout"`` (running when the deadline hit) or ``"not_run"``. ``error`` names why the
    program as a whole failed (syntax error, import, memory, killed), ``None`` if it loaded.
    """

    passed: int
    total: int
    outcomes: list[str]
    error: str | None = None
    timed_out: bool = False
    isolation: tuple[str, ...] = ()
    wall_s: float = 0.0
    details: list[str | None] = field(default_factory=list)

    @property
    def fraction(self) -> float:
        """Passed tests over all tests (0.0 when there are none)."""
        return self.passed / self.total if self.total else 0.0


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _unshare_net() -> bool:
    """In the forked child: a new network namespace (directly as root, else in a user namespace)."""
    libc = _libc()
    if libc.unshare(_CLONE_NEWNET) == 0:
        return True
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:  # unprivileged, or root without CAP_SYS_ADMIN
        try:  # map ourselves so files keep their owner; failure leaves us 'nobody' in the ns
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        except OSError:
            pass
        return True
    return False


def _nobody_can_run() -> bool:
    """In a throwaway child, as root: whether ``nobody`` could start the interpreter and the harness."""
    if os.geteuid() != 0:
        return False
    try:
        os.setgroups([])
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)
    except OSError:
        return False
    stdlib = os.path.dirname(os.__file__)
    return (os.access(sys.executable, os.X_OK) and os.access(_HARNESS, os.R_OK)
            and os.access(stdlib, os.R_OK | os.X_OK))


def _isolation_modes() -> tuple[str, ...]:
    """Which layers this machine grants, probed once in a throwaway child."""
    global _probe
    if _probe is None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                os.write(w, b"1" if _unshare_net() else b"0")
                os.write(w, b"1" if _nobody_can_run() else b"0")
            finally:
                os._exit(0)
        os.close(w)
        got = os.read(r, 2)
        os.close(r)
        os.waitpid(pid, 0)
        modes = ["netns"] if got[:1] == b"1" else []
        if got[1:2] == b"1":
            modes.append("uid")
        _probe = tuple(modes + ["rlimits", "audit"])
    return _probe


def _limits(timeout_s: float, memory_mb: int, max_procs: int, workdir: str, modes: tuple[str, ...]):
    import resource

    cpu = max(1, int(timeout_s + 1))

    def setup() -> None:  # runs in the child between fork and exec
        if "netns" in modes:
            _unshare_net()
        if "uid" in modes:
            os.chown(workdir, _NOBODY, _NOBODY)
            os.setgroups([])
            os.setgid(_NOBODY)
            os.setuid(_NOBODY)
        for res, val in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, memory_mb << 20),
                         (resource.RLIMIT_NPROC, max_procs), (resource.RLIMIT_NOFILE, 64),
                         (resource.RLIMIT_FSIZE, 16 << 20), (resource.RLIMIT_CORE, 0)):
            try:
                resource.setrlimit(res, (val, val))
            except (ValueError, OSError):
                pass

    return setup


def run_tests(code: str, tests: Sequence[str], *, timeout_s: float = 5.0, memory_mb: int = 512,
              max_procs: int = 16) -> TestRun:
    """Run ``code`` then each test snippet (e.g. ``"assert f(1) == 2"``) in a sandboxed process.

    ``timeout_s`` bounds the whole run (wall clock; CPU time is limited to about the same);
    ``memory_mb`` the address space. Never raises for anything the code does.
    """
    if timeout_s <= 0 or memory_mb <= 0:
        raise ValueError(f"timeout_s and memory_mb must be positive (got {timeout_s}, {memory_mb})")
    tests = [str(t) for t in tests]
    modes = _isolation_modes()
    nonce = secrets.token_hex(16)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gw-sandbox-") as workdir:
        os.chmod(workdir, 0o700)
        r, w = os.pipe()
        job = json.dumps({"nonce": nonce, "code": str(code), "tests": tests, "workdir": workdir, "fd": w})
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir}
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", str(_HARNESS)], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=workdir, env=env,
                pass_fds=(w,), preexec_fn=_limits(timeout_s, memory_mb, max_procs, workdir, modes),
                start_new_session=True, close_fds=True)
        finally:
            os.close(w)
        lines, stderr, timed_out = _communicate(proc, r, job, t0 + timeout_s)
    return _collect(lines, nonce, len(tests), stderr, timed_out, proc.returncode, modes,
                    time.monotonic() - t0)


def _communicate(proc: subprocess.Popen, r: int, job: str, deadline: float):
    import selectors

    try:
        proc.stdin.write(job.encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    buf, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    open_fds, timed_out = 2, False
    try:
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(min(left, 0.5)):
                chunk = os.read(key.fd if key.fd == r else proc.stderr.fileno(), 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_fds -= 1
                elif key.fd == r:
                    buf += chunk[: (1 << 20) - len(buf)]
                else:
                    err += chunk[: 4096 - len(err)]
    finally:
        sel.close()
        os.close(r)
        _kill_group(proc)
    return buf.decode("utf-8", "replace").splitlines(), err.decode("utf-8", "replace"), timed_out


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stderr.close()


def _collect(lines, nonce, n, stderr, timed_out, rc, modes, wall) -> TestRun:
    outcomes: list[str] = ["not_run"] * n
    details: list[str | None] = [None] * n
    loaded, error = None, None
    for line in lines:
        tag, _, body = line.partition("\t")
        if tag != nonce:
            continue
        try:
            rec = json.loads(body)
        except ValueError:
            continue
        if rec.get("kind") == "program":
            loaded = bool(rec.get("ok"))
            if not loaded:
                error = rec.get("error")
        elif rec.get("kind") == "test" and isinstance(rec.get("index"), int) and 0 <= rec["index"] < n:
            outcomes[rec["index"]] = rec["outcome"]
            details[rec["index"]] = rec.get("error")
    if timed_out or (rc is not None and rc < 0):
        pending = outcomes.index("not_run") if "not_run" in outcomes else None
        if timed_out:
            if pending is not None and loaded:
                outcomes[pending] = "timeout"
            error = error or ("timed out" if loaded else "timed out while loading the program")
        elif rc == -signal.SIGXCPU or rc == -signal.SIGKILL:
            if pending is not None and loaded:
                outcomes[pending] = "timeout"
            error = error or f"killed by signal {-rc} (CPU time limit)"
            timed_out = True
        else:
            error = error or f"killed by signal {-rc}"
    elif loaded is None:
        last = stderr.strip().splitlines()[-1:] or [f"exit status {rc}"]
        error = f"the program did not start: {last[0][:300]}"
    return TestRun(passed=outcomes.count("passed"), total=n, outcomes=outcomes, error=error,
                   timed_out=timed_out, isolation=modes, wall_s=wall, details=details)

"""The program that runs inside the sandbox process (never imported by the engine).

Reads ``{"nonce", "code", "tests", "workdir", "fd"}`` as JSON on stdin, installs an audit hook that
refuses the escapes the OS limits may not cover (writes outside the working directory, /proc of
other processes, sockets, new processes, ctypes), executes ``code``, then each test in turn,
writing one ``nonce<TAB>json`` line per outcome to the result pipe (descriptor ``fd``) as it finishes,
so a test that hangs leaves the earlier outcomes behind.
"""

import json
import os
import sys


def _main() -> None:
    job = json.loads(sys.stdin.read())
    nonce, code, tests, workdir = job["nonce"], job["code"], job["tests"], os.path.realpath(job["workdir"])
    out = os.fdopen(job["fd"], "w", buffering=1)
    write = out.write

    def report(**kw) -> None:
        write(nonce + "\t" + json.dumps(kw) + "\n")
        out.flush()

    def inside(path) -> bool:
        try:
            p = os.path.realpath(os.fsdecode(path) if not isinstance(path, int) else "")
        except (TypeError, ValueError):
            return False
        return p == workdir or p.startswith(workdir + os.sep)

    blocked_events = {
        "socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo",
        "os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
        "os.kill", "os.killpg", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "os.putenv", "os.chdir",
    }
    write_events = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link",
                    "os.chmod", "os.chown", "os.truncate", "os.utime", "shutil.rmtree"}

    def hook(event: str, args) -> None:
        if event in blocked_events:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and args and str(args[0]).split(".")[0] in ("ctypes", "_ctypes"):
            raise PermissionError("sandbox: importing ctypes is not allowed")
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if isinstance(path, int):
                return
            p = os.fsdecode(path) if path is not None else ""
            if p.startswith("/proc") and not (p.startswith("/proc/self") or p.startswith("/proc/thread-self")):
                raise PermissionError(f"sandbox: reading {p} is not allowed")
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
            if writing and not inside(p):
                raise PermissionError(f"sandbox: writing {p} outside the working directory is not allowed")
        elif event in write_events and args and not inside(args[0]):
            raise PermissionError(f"sandbox: {event} outside the working directory is not allowed")

    del job
    sys.stdin.close()
    sys.addaudithook(hook)
    namespace = {"__name__": "__sandbox__"}
    try:
        exec(compile(code, "solution.py", "exec"), namespace)
    except BaseException as e:  # noqa: BLE001 - the program's own failure is the result
        report(kind="program", ok=False, error=f"{type(e).__name__}: {e}"[:500])
        return
    report(kind="program", ok=True)
    for i, test in enumerate(tests):
        try:
            exec(compile(test, f"test_{i}", "exec"), dict(namespace))
            report(kind="test", index=i, outcome="passed")
        except AssertionError as e:
            report(kind="test", index=i, outcome="failed", error=f"AssertionError: {e}"[:300])
        except BaseException as e:  # noqa: BLE001
            report(kind="test", index=i, outcome="error", error=f"{type(e).__name__}: {e}"[:300])


if __name__ == "__main__":
    _main()

#!/usr/bin/env bash
# vt chat in a pseudo-terminal (python's pty module), as a user types to it:
# the "> " prompt, answers streamed; the KV cache is kept across turns (-v: each
# turn reports the tokens it prefilled and kept): the second turn keeps the
# whole first prompt and prefills only the rest, and after /clear the same first
# message keeps all but its last token and gets the same answer; Ctrl-C at the
# prompt drops the line and does not end the program; /exit ends it with 0.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh" # models, vt; missing, require_file
model="$models/stories260K.gguf"
require_file "$model"
"$vt" chat --help >/dev/null 2>&1 || missing "$vt was built without the server libraries (no vt chat)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/t.jinja" <<'T'
{%- for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}assistant:
T
VT="$vt" MODEL="$model" TMPL="$tmp/t.jinja" python3 - <<'PY'
import os, pty, re, select, sys, time

passed = failed = 0
def check(cond, what):
    global passed, failed
    if cond: passed += 1
    else:
        failed += 1
        print("FAIL", what)

argv = [os.environ["VT"], "chat", "-m", os.environ["MODEL"], "--chat-template-file", os.environ["TMPL"],
        "--temp", "0", "-n", "8", "-v", "-sys", "Tell stories."]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
buf = b""
def until(pattern, silence=120.0):
    """Read until the output since the last call matches; returns that output.
    Only a hang fails here: vt chat silent for `silence` seconds (no deadline on
    the whole wait, which a busy machine could miss)."""
    global buf
    while True:
        m = re.search(pattern, buf, re.S)
        if m:
            out, buf = buf[:m.end()], buf[m.end():]
            return out.decode("utf-8", "replace")
        r, _, _ = select.select([fd], [], [], silence)
        if not r:
            raise TimeoutError(f"vt chat silent for {silence} s waiting for {pattern!r}; got {buf[-400:]!r}")
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            raise EOFError(f"vt chat ended; got {buf[-400:]!r}")
        buf += data.replace(b"\r\n", b"\n")

def turn(line):
    os.write(fd, line.encode() + b"\r")
    out = until(rb"\n> ")
    m = re.search(r"prefilled (\d+) tokens, (\d+) kept in the cache\n(.*)\n> $", out, re.S)
    check(m is not None, f"turn {line!r}: {out!r}")
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else (0, 0, "")

try:
    until(rb"> ")
    p1, k1, a1 = turn("Once upon a time")
    check(k1 == 0 and p1 > 5, f"turn 1: prefilled {p1}, kept {k1}")
    check(len(a1) > 0, "turn 1: an answer")
    p2, k2, a2 = turn("The cat sat on the mat")
    check(k2 >= p1 and 0 < p2 < p1 + 8 + 20, f"turn 2: prefilled {p2}, kept {k2} (turn 1 prefilled {p1})")
    os.write(fd, b"/clear\r")
    until(rb"> ")
    p3, k3, a3 = turn("Once upon a time")
    check(p3 == 1 and k3 == p1 - 1, f"after /clear: prefilled {p3}, kept {k3} (turn 1: {p1})")
    check(a3 == a1, f"after /clear: {a3!r} vs {a1!r}")
    os.write(fd, b"half a line")
    time.sleep(0.2)
    os.write(fd, b"\x03")  # Ctrl-C at the prompt: the line is dropped, the program stays
    until(rb"> ")
    os.write(fd, b"/clear\r")
    until(rb"> ")
    p4, k4, a4 = turn("Once upon a time")
    check(a4 == a1 and p4 == 1, f"after Ctrl-C: {a4!r}, prefilled {p4}")
    os.write(fd, b"/exit\r")
    _, status = os.waitpid(pid, 0)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"exit status {status}")
except (TimeoutError, EOFError) as e:
    check(False, str(e))
    try: os.kill(pid, 9)
    except OSError: pass
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY

"""harness.py — what the CLI tests share: check() with a running count, run() a `tinylm`
command, and main() (--tinylm PATH --work DIR, a fresh work folder, the summary line)."""
import argparse
import os
import shutil
import stat
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STORIES = os.path.join(ROOT, "data", "stories260K.bin")  # llama2.c stories260K and its tokenizer
TOK512 = os.path.join(ROOT, "data", "tok512.bin")
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))  # tinylm_ref, the PyTorch reference

counts = {"passed": 0, "failed": 0}


def check(ok, what, detail=""):
    counts["passed" if ok else "failed"] += 1
    print("%-78s %s%s" % (what, "ok" if ok else "FAIL", ("  " + str(detail)[-600:]) if (detail and not ok) else ""))
    return ok


def run(tinylm, *args, stdin=None):
    p = subprocess.run([tinylm, *args], input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def run_bounded(tinylm, args, timeout):
    """(exit code, stdout, stderr) of a command that must not block (on a FIFO, say): rc None
    when it ran past timeout seconds"""
    try:
        p = subprocess.run([tinylm, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", "(timed out after %d s: blocked on a FIFO?)" % timeout
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def snapshot(top, with_bytes=False):
    """what a command must not change: every entry under top (lstat: links are not followed),
    with_bytes: also the inode, device number, a link's target and a small file's bytes"""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            s = os.lstat(p)
            if not with_bytes:
                out[p] = (s.st_mode, s.st_size, s.st_mtime_ns)
                continue
            extra = os.readlink(p) if stat.S_ISLNK(s.st_mode) else None
            if stat.S_ISREG(s.st_mode) and s.st_size <= 1 << 20:
                with open(p, "rb") as f:
                    extra = f.read()
            out[p] = (s.st_mode, s.st_size, s.st_mtime_ns, s.st_ino, s.st_rdev, extra)
    return out


def main(tests):
    """Runs each test(tinylm, work) in a fresh --work folder; the exit code (1 on any failure)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    tinylm, work = os.path.abspath(a.tinylm), os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    for test in tests:
        test(tinylm, work)
    print("%d passed, %d failed" % (counts["passed"], counts["failed"]))
    return 1 if counts["failed"] else 0

#!/usr/bin/python3
"""test_info_system.py — the units `tinylm info --system` reports against what Linux says the CPU
has (/proc/cpuinfo's flags: amx_tile, amx_bf16, amx_int8, avx512_bf16, avx512_vnni), on whatever
machine runs it:
  - "AMX: tile bf16 int8 (...)" names exactly the amx_* flags the kernel lists, "AMX: absent" when
    it lists none; "AVX512-BF16 present|absent", "AVX512-VNNI present|absent" likewise;
  - the tile data permission: granted only where amx_tile is listed; on a Linux 5.16 or later that
    lists amx_tile (it then has the arch_prctl permission request) it must be granted, and where it
    is not the line says why ("unusable: ...");
  - TLM_ISA=avx2 changes the kernels, not what the hardware has: the same units, said unused.
Skipped (77) where there is no /proc/cpuinfo flags line (not Linux, not x86).

    test_info_system.py --tinylm PATH --work DIR"""
import os
import platform
import re
import subprocess
import sys

from harness import check, main

UNITS = ("tile", "bf16", "int8")


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def system_info(T, env=None):
    p = subprocess.run([T, "info", "--system"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                       env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def units_line(out):
    """(AMX units named, parenthesis or '', {'AVX512-BF16': 'present'|'absent', ...}, whole line)"""
    line = next((l for l in out.splitlines() if l.startswith("AMX:")), None)
    if line is None:
        return None
    amx = line[len("AMX:"):].split(";")[0]
    paren = amx[amx.index("("):] if "(" in amx else ""
    names = amx.split("(")[0].split()
    rest = dict(re.findall(r"(AVX512-BF16|AVX512-VNNI) (present|absent)", line))
    return names, paren, rest, line


def kernel_at_least(major, minor):
    m = re.match(r"(\d+)\.(\d+)", platform.release())
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (major, minor)


def test_units(T, work):
    flags = cpu_flags()
    rc, out, err = system_info(T)
    check(rc == 0, "info --system exits 0", err)
    got = units_line(out)
    if not check(got is not None, "info --system prints an 'AMX:' line", out):
        return
    names, paren, rest, line = got
    print("  " + line)
    have = {u: "amx_" + u in flags for u in UNITS}
    if not any(have.values()):
        check(names == ["absent"], "no amx_* flag in /proc/cpuinfo: 'AMX: absent'", line)
    else:
        check(names == [u for u in UNITS if have[u]],
              "AMX units = the amx_* flags of /proc/cpuinfo (%s)" % " ".join("amx_" + u for u in UNITS if have[u]), line)
    check(rest.get("AVX512-BF16") == ("present" if "avx512_bf16" in flags else "absent"),
          "AVX512-BF16 %s as /proc/cpuinfo says" % ("present" if "avx512_bf16" in flags else "absent"), line)
    check(rest.get("AVX512-VNNI") == ("present" if "avx512_vnni" in flags else "absent"),
          "AVX512-VNNI %s as /proc/cpuinfo says" % ("present" if "avx512_vnni" in flags else "absent"), line)
    permitted = "tile data permitted by the kernel" in paren
    if not have["tile"]:
        check(paren == "", "no amx_tile: no permission claimed and nothing to explain", line)
    elif kernel_at_least(5, 16):
        check(permitted, "amx_tile on Linux %s (>= 5.16): the tile data permission granted" % platform.release(), line)
    else:
        check(permitted or "unusable:" in paren, "amx_tile on Linux %s: granted, or says why not" % platform.release(),
              line)
    check("measured FMA peak:" in out, "the measurements still follow", out[-300:])
    # the bf16 peak: measured where a bf16 product path exists (AMX-BF16 with the permission, or
    # AVX512-BF16; oneDNN needs AVX-512 for either), else the line saying --precision bf16 is fp32
    import re
    bf = re.search(r"measured bf16 matmul 1024x1024x1024 \((AMX-BF16|AVX512-BF16), f32 sums\): (\d+) GFLOP/s", out)
    expect_path = "avx512f" in flags and ("avx512_bf16" in flags or ("amx_bf16" in flags and permitted))
    if expect_path:
        check(bf is not None and int(bf.group(2)) > 0, "a bf16 path: its measured matmul peak printed", out[-400:])
        if bf and "amx_bf16" in flags and permitted:
            check(bf.group(1) == "AMX-BF16", "amx_bf16 permitted: the bf16 products run on AMX", bf.group(0))
    else:
        check("bf16 products: none" in out, "no bf16 path: info says --precision bf16 computes in fp32", out[-400:])

    env = dict(os.environ, TLM_ISA="avx2")
    rc2, out2, err2 = system_info(T, env)
    got2 = units_line(out2)
    check(rc2 == 0 and got2 is not None and got2[:3] == got[:3],
          "TLM_ISA=avx2: the same units reported (the hardware's, not the cap's)", got2[3] if got2 else out2)
    if got2 and (permitted or "present" in rest.values()):
        check("unused: TLM_ISA caps the kernels" in got2[3], "TLM_ISA=avx2: the units said unused", got2[3])
    check("capped by TLM_ISA" in out2, "TLM_ISA=avx2: the kernels line says capped", out2[:300])
    check("bf16 products: none" in out2, "TLM_ISA=avx2: no bf16 products", out2[-400:])


if __name__ == "__main__":
    if cpu_flags() is None:
        print("no flags line in /proc/cpuinfo: nothing to compare with (skipped)")
        sys.exit(77)
    sys.exit(main([test_units]))

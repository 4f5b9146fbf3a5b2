"""`stackctl abi` against `auditwheel show` on one large wheel, and what listing it remotely costs; or, with
`--stack`, on a real stack from the public index.

    python benchmarks/abi.py [--lib-mb 100] [--data-mb 100] [--repeat 3] [--padding code|random]
    python benchmarks/abi.py --stack benchmarks/stacks/torch-2.11-cuda13.toml --data /work/abi-data

`--stack PROFILE --data DIR` (DIR outside any repository: 2.7 GB of wheels for the torch stack):
resolves the profile into DIR (the index of pip's configuration), fetches its wheels into DIR/wheels
(sha256-checked; what is there already is kept), then in the same run:

1. the bytes of the ELF regions `abi` needs: per library, the compressed bytes up to the end of the last of
   its dynamic section, .dynstr and version tables (found by pyelftools in the whole file, inflated by
   zlib), plus each wheel's central directory; against the bytes a cold `stackctl abi PROFILE` fetched
   (fresh cache: range requests to the index) and the wheels' size;
2. wall time of the cold run and of a warm one (same cache: the ELF facts kept per sha256), and the
   bytes the warm one read;
3. `stackctl abi TORCH_WHEEL` against `auditwheel show TORCH_WHEEL` on the local file, best of --repeat.

Builds, with gcc, a wheel of several hundred MB: four shared libraries each carrying LIB_MB of padding
(two in .rodata, which sits before the dynamic section, two in .data, which sits after it). The padding
is machine code taken from the system's libraries, so it compresses like a library; `--padding random`
uses random bytes instead. Also an extension module linked against all four through RUNPATH `$ORIGIN/lib`, and a DATA_MB
data member. Then, in the same run:

1. wall time of `stackctl abi WHEEL` and of `auditwheel show WHEEL` (best of --repeat each, run as the
   commands a user types), and their ratio;
2. bytes fetched over the loopback index (HTTP range requests) to list the wheel's libraries, as
   `stackctl abi PROFILE` does for a wheel that provides libraries, and to read every library's
   dynamic section, against the wheel's size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.index_server import IndexServer  # noqa: E402
from tests.support.wheels import build_wheel  # noqa: E402

TAG = "cp310-cp310-linux_x86_64"
SYSTEM_ALLOW = ["libc.so.6", "libm.so.6", "libgcc_s.so.1", "libstdc++.so.6"]


def sh(*cmd: str, cwd: Path | None = None) -> None:
    subprocess.run(cmd, check=True, cwd=cwd, capture_output=True)


def machine_code(n: int) -> bytes:
    """n bytes of real machine code and tables, taken from the system's own shared libraries.

    Padding a library with it makes the wheel compress (and inflate) the way a real library does;
    random padding would be stored, not compressed, and cost almost nothing to unpack.
    """
    out = bytearray()
    files = sorted(p for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib") for p in Path(d).glob("*.so*")
                   if p.is_file() and not p.is_symlink())
    while len(out) < n:
        for p in files:
            out += p.read_bytes()
            if len(out) >= n:
                break
    return bytes(out[:n])


def build_libraries(work: Path, lib_mb: int, padding: str) -> dict[str, bytes]:
    """member path -> bytes of four padded libraries and an extension module that needs them."""
    members: dict[str, bytes] = {}
    code = machine_code(4 * lib_mb << 20) if padding == "code" else b""
    for i in range(4):
        blob = work / f"blob{i}.bin"
        size = lib_mb << 20
        blob.write_bytes(code[i * size:(i + 1) * size] if padding == "code" else os.urandom(size))
        sh("ld", "-r", "-b", "binary", "-o", f"blob{i}.o", blob.name, cwd=work)
        if i % 2 == 0:
            # Read-only data lands before .dynamic: the reader must inflate through it.
            sh("objcopy", "--rename-section", ".data=.rodata,alloc,load,readonly,data,contents",
               f"blob{i}.o", cwd=work)
        lang, src = ("g++", f"pad{i}.cpp") if i == 0 else ("gcc", f"pad{i}.c")
        body = ('#include <string>\nextern "C" int pad0(const char *s) { return std::string(s).size(); }\n'
                if i == 0 else f"int pad{i}(const char *s) {{ return s[0] + {i}; }}\n")
        (work / src).write_text(body)
        sh(lang, "-shared", "-fPIC", "-O1", f"-Wl,-soname,libpad{i}.so", "-o", f"libpad{i}.so", src,
           f"blob{i}.o", cwd=work)
        members[f"bigstack/lib/libpad{i}.so"] = (work / f"libpad{i}.so").read_bytes()
    (work / "ext.c").write_text("extern int pad0(const char*), pad1(const char*), pad2(const char*), "
                                "pad3(const char*);\nint ext(void) { return pad0(\"a\") + pad1(\"b\") + "
                                "pad2(\"c\") + pad3(\"d\"); }\n")
    sh("gcc", "-shared", "-fPIC", "-o", "ext.so", "ext.c", "-L.", "-Wl,--no-as-needed", "-lpad0", "-lpad1",
       "-lpad2", "-lpad3", "-Wl,-rpath,$ORIGIN/lib", "-Wl,--enable-new-dtags", cwd=work)
    members["bigstack/_ext.cpython-310-x86_64-linux-gnu.so"] = (work / "ext.so").read_bytes()
    return members


def best(cmd: list[str], repeat: int) -> tuple[float, int]:
    times = []
    code = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        code = proc.returncode
        if code not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed ({code}): {proc.stderr.strip()[-400:]}")
    return min(times), code


def remote_costs(wheel: Path) -> tuple[int, int, int, int, int]:
    from stackctl.index.client import IndexClient
    from stackctl.index.config import endpoint_of
    from stackctl.index.remote import RemoteFile
    from stackctl.wheels.archive import WheelReader
    from stackctl.wheels.scan import scan_wheel

    with IndexServer() as server:
        server.add(wheel)
        url = f"{server.base}files/{wheel.name}"
        listing = RemoteFile(IndexClient(), endpoint_of(url), url)
        with WheelReader(listing, label=wheel.name) as r:
            libs = scan_wheel(r, read_elves=False).elves
        full = RemoteFile(IndexClient(), endpoint_of(url), url)
        with WheelReader(full, label=wheel.name) as r:
            scan_wheel(r)
        return len(libs), listing.fetched, listing.requests, full.fetched, full.requests


def needed_regions(wheel: Path) -> tuple[int, int]:
    """(bytes of the ELF regions `abi` needs, libraries) of one wheel: each library's compressed bytes up to the
    end of its dynamic section, .dynstr and version tables, and the central directory at the file's end."""
    import io
    import struct
    import zipfile
    import zlib

    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    total, libs = min(64 << 10, wheel.stat().st_size), 0
    with zipfile.ZipFile(wheel) as zf, open(wheel, "rb") as fh:
        for info in zf.infolist():
            base = info.filename.rsplit("/", 1)[-1]
            if not (base.endswith(".so") or ".so." in base):
                continue
            data = zf.read(info)
            if data[:4] != b"\x7fELF":
                continue
            try:
                elf = ELFFile(io.BytesIO(data))
                far = elf.header["e_phoff"] + elf.header["e_phnum"] * elf.header["e_phentsize"]
                for seg in elf.iter_segments():
                    if seg["p_type"] == "PT_DYNAMIC":
                        far = max(far, seg["p_offset"] + seg["p_filesz"])
                for sec in elf.iter_sections():
                    if sec.name in (".dynstr", ".gnu.version_r", ".gnu.version_d"):
                        far = max(far, sec["sh_offset"] + sec["sh_size"])
            except ELFError:
                continue
            libs += 1
            fh.seek(info.header_offset)
            head = struct.unpack("<4s5H3L2H", fh.read(30))
            fh.seek(info.header_offset + 30 + head[9] + head[10])
            if info.compress_type == zipfile.ZIP_STORED:
                total += far
                continue
            z, out, used = zlib.decompressobj(-15), 0, 0
            while out < far:  # compressed bytes consumed until the output reaches `far`, to 4 KiB
                chunk = fh.read(4096)
                if not chunk:
                    break
                out += len(z.decompress(chunk))
                used += len(chunk) - len(z.unconsumed_tail)
            total += used
    return total, libs


def stack_benchmark(profile: Path, data: Path, repeat: int) -> None:
    import json

    data.mkdir(parents=True, exist_ok=True)
    lock, wheels = data / f"{profile.stem}.lock", data / "wheels"
    stackctl = [sys.executable, "-m", "stackctl"]
    sh(*stackctl, "resolve", str(profile), "--lock", str(lock))
    target = json.loads(subprocess.run([*stackctl, "resolve", str(profile), "--lock", str(lock), "--json"],
                                       check=True, capture_output=True, text=True).stdout)["files"][0]["target"]
    sh(*stackctl, "fetch", str(profile), "--lock", str(lock), "--target", target, "--dest", str(wheels))
    files = sorted(wheels.glob("*.whl"))
    size = sum(f.stat().st_size for f in files)
    need = libs = 0
    for f in files:
        n, k = needed_regions(f)
        need, libs = need + n, libs + k
    print(f"stack: {profile.name}, {len(files)} wheels, {size / 2**20:.0f} MiB, {libs} libraries; the ELF regions "
          f"abi needs: {need / 2**20:.0f} MiB ({100 * need / size:.1f}% of the wheels)")

    def run_abi(cache: Path, lock: Path = lock, extra: tuple[str, ...] = ()) -> tuple[float, dict[str, object]]:
        env = {**os.environ, "STACKCTL_CACHE_DIR": str(cache / "http")}
        t0 = time.perf_counter()
        proc = subprocess.run([*stackctl, "abi", str(profile), "--lock", str(lock), "--json", "--no-record",
                               *extra], capture_output=True, text=True, env=env)
        took = time.perf_counter() - t0
        if proc.returncode not in (0, 1):
            raise SystemExit(f"stackctl abi failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
        out: dict[str, object] = json.loads(proc.stdout)
        return took, out

    with tempfile.TemporaryDirectory(prefix="stackctl-bench-abi-cache-") as tmp:
        cold, doc = run_abi(Path(tmp))
        warm, again = run_abi(Path(tmp))
    sources: list[dict[str, int | None]] = doc["sources"]  # type: ignore[assignment]
    fetched = sum(s["fetched"] or 0 for s in sources)
    requests = sum(s["requests"] or 0 for s in sources)
    checked = sum(1 for s in sources if s["verified"] == "sha256")
    warm_bytes = sum(s["fetched"] or 0 for s in again["sources"])  # type: ignore[attr-defined]
    report = doc["reports"][0]  # type: ignore[index]
    print(f"cold abi: {cold:.1f} s, fetched {fetched / 2**20:.0f} MiB in {requests} requests = "
          f"{fetched / need:.3f}x the ELF regions (target <= 1.1x), {fetched / size:.3f}x the wheels "
          f"(target <= 1.05x); {checked} of {len(sources)} wheels hash-checked; passed: {report['ok']} "
          f"({report['checked_files']} files, {len(report['resolutions'])} needed entries)")
    print(f"warm abi: {warm:.2f} s, fetched {warm_bytes} bytes (target <= 2 s, 0 bytes)")
    # The same cold run against a loopback mirror of the same files: stackctl's own cost, without the link.
    from dataclasses import replace

    from stackctl.resolve.lock import read_lock, write_lock

    with IndexServer() as server, tempfile.TemporaryDirectory(prefix="stackctl-bench-abi-cache-") as tmp:
        by_name = {f.name: f for f in files}
        for f in files:
            server.add(f)
        locked = read_lock(lock)
        mirrored = Path(tmp) / lock.name
        write_lock(mirrored, replace(locked, pins=tuple(
            replace(p, files=tuple(replace(f, url=f"{server.base}files/{f.filename}") for f in p.files
                                   if f.filename in by_name)) for p in locked.pins), closure=tuple(
            replace(c, file=replace(c.file, url=f"{server.base}files/{c.file.filename}")) if c.file else c
            for c in locked.closure)))
        loop, ldoc = run_abi(Path(tmp), mirrored, ("--index", f"public={server.url}"))
    lfetched = sum(s["fetched"] or 0 for s in ldoc["sources"])  # type: ignore[attr-defined]
    print(f"cold abi on a loopback mirror of the same wheels: {loop:.1f} s, fetched {lfetched / 2**20:.0f} MiB = "
          f"{lfetched / need:.3f}x the ELF regions (the index's link: {fetched / cold / 2**20:.0f} MiB/s in the "
          "public run)")
    torch = next(f for f in files if f.name.startswith("torch-"))
    auditwheel = shutil.which("auditwheel") or str(Path(sys.executable).with_name("auditwheel"))
    ours, _ = best([*stackctl, "abi", str(torch), "--json", "--provider", "nvidia"], repeat)
    theirs, _ = best([auditwheel, "show", str(torch)], repeat)
    print(f"{torch.name}: stackctl abi {ours:.2f} s, auditwheel show {theirs:.2f} s = {theirs / ours:.1f}x faster "
          "(target >= 5x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib-mb", type=int, default=100, help="MB of padding inside each of 4 libraries")
    ap.add_argument("--data-mb", type=int, default=100, help="MB of the data member")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--padding", choices=("code", "random"), default="code",
                    help="what fills the libraries: real machine code (compresses like a library) or random bytes")
    ap.add_argument("--keep", type=Path, help="leave the wheel in this directory")
    ap.add_argument("--stack", type=Path, help="a profile of a real stack: measure abi on its lock's wheels")
    ap.add_argument("--data", type=Path, help="with --stack: where its lock and wheels go (outside the repository)")
    args = ap.parse_args()
    if args.stack is not None:
        if args.data is None:
            raise SystemExit("--stack needs --data DIR")
        stack_benchmark(args.stack, args.data, args.repeat)
        return

    auditwheel = shutil.which("auditwheel") or str(Path(sys.executable).with_name("auditwheel"))
    if not Path(auditwheel).exists():
        raise SystemExit("auditwheel is not installed: pip install auditwheel")
    with tempfile.TemporaryDirectory(prefix="stackctl-bench-abi-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        members = build_libraries(work, args.lib_mb, args.padding)
        members["bigstack/__init__.py"] = b"from bigstack._ext import *\n"
        members["bigstack/data/weights.bin"] = os.urandom(args.data_mb << 20)
        wheel = build_wheel(args.keep or work / "dist", "bigstack", "1.0", tag=TAG, files=members)
        # The same extension module alone in a 2 KB wheel: what each tool costs before it reads anything.
        tiny = build_wheel(work / "tiny", "bigstack", "1.0", tag=TAG, files={
            k: v for k, v in members.items() if k.endswith((".py", "-linux-gnu.so"))})
        del members
        size = wheel.stat().st_size
        print(f"wheel: {wheel.name}, {size / 2**20:.0f} MiB, 5 ELF members, {args.padding} padding (built in "
              f"{time.perf_counter() - t0:.0f} s)")

        stackctl = [sys.executable, "-m", "stackctl", "abi", str(wheel), "--json",
                    *(x for a in SYSTEM_ALLOW for x in ("--allow", a))]
        ours, code = best(stackctl, args.repeat)
        if code != 0:
            raise SystemExit("stackctl abi did not pass on the benchmark wheel")
        theirs, _ = best([auditwheel, "show", str(wheel)], args.repeat)
        print(f"stackctl abi     {ours:7.2f} s")
        print(f"auditwheel show  {theirs:7.2f} s")
        print(f"ratio            {theirs / ours:7.1f}x faster (target >= 2x)")
        floor, _ = best([*stackctl[:4], str(tiny), *stackctl[5:]], args.repeat)
        their_floor, _ = best([auditwheel, "show", str(tiny)], args.repeat)
        print(f"on a {tiny.stat().st_size / 1024:.0f} KiB wheel of the extension module alone (start-up cost): "
              f"stackctl abi {floor:.2f} s, auditwheel show {their_floor:.2f} s")
        print(f"wheel work beyond that: stackctl abi {ours - floor:.2f} s, auditwheel show "
              f"{theirs - their_floor:.2f} s = {(theirs - their_floor) / max(ours - floor, 1e-3):.1f}x")

        n, list_bytes, list_reqs, full_bytes, full_reqs = remote_costs(wheel)
        print(f"remote listing of {n} libraries: {list_bytes / 1024:.0f} KiB in {list_reqs} requests = "
              f"{100 * list_bytes / size:.3f}% of the wheel (target < 1%)")
        print(f"remote read of every library's dynamic section: {full_bytes / 2**20:.1f} MiB in {full_reqs} "
              f"requests = {100 * full_bytes / size:.1f}% of the wheel")


if __name__ == "__main__":
    main()

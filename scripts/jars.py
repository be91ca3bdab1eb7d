"""Fetch the pinned JVM artifacts of scripts/jars.lock from Maven Central into jars/<group>/.

Each group is fetched by Maven (``dependency:copy-dependencies`` on a small generated pom, so an
artifact's runtime dependencies come with it where the lock file says so) into a staging folder that
replaces jars/<group>/ only once complete. A group whose folder was filled from the same lock lines is
skipped, so running it again costs nothing. The lock file's lines are the only place versions live.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "scripts" / "jars.lock"
MARKER = ".jars.lock"  # the group's lock lines, written last: present only after a complete fetch


@dataclass(frozen=True)
class Pin:
    group: str
    coordinate: str  # groupId:artifactId:version
    with_deps: bool
    spark: str
    note: str
    line: str

    def dependency_xml(self) -> str:
        group_id, artifact_id, version = self.coordinate.split(":")
        exclusions = (
            ""
            if self.with_deps
            else (
                "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
            )
        )
        return (
            f"<dependency><groupId>{escape(group_id)}</groupId><artifactId>{escape(artifact_id)}"
            f"</artifactId><version>{escape(version)}</version>{exclusions}</dependency>"
        )


def read_lock(path: Path = LOCK) -> list[Pin]:
    pins = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        is_pyspark = fields[1].startswith("pyspark==") if len(fields) > 1 else False
        if (
            len(fields) not in (4, 5)
            or (fields[1].count(":") != 2 and not is_pyspark)
            or fields[2] not in ("-", "runtime")
        ):
            raise SystemExit(f"{path}: malformed line: {raw!r}")
        note = fields[4] if len(fields) == 5 else ""
        pins.append(Pin(fields[0], fields[1], fields[2] == "runtime", fields[3], note, line))
    return pins


def _pom(pins: list[Pin]) -> str:
    deps = "".join(pin.dependency_xml() for pin in pins)
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>arctic-sql</groupId><artifactId>jars</artifactId><version>0</version>"
        "<packaging>pom</packaging>"
        f"<dependencies>{deps}</dependencies></project>"
    )


def make_venv(pin: Pin, dest: Path) -> str:
    """A virtual environment at dest with the pinned pyspark, for a peer built for another Spark minor."""
    marker = dest / MARKER
    if marker.is_file() and marker.read_text() == pin.line + "\n":
        return "present"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(dest)], check=True)
    subprocess.run([str(dest / "bin" / "python"), "-m", "pip", "install", "-q", pin.coordinate], check=True)
    marker.write_text(pin.line + "\n")
    return f"{pin.coordinate} installed in {time.monotonic() - started:.0f} s"


def fetch_group(group: str, pins: list[Pin], jars_root: Path) -> str:
    """Fill jars_root/<group>/ with the group's jars; returns what was done, for the log line."""
    if pins[0].coordinate.startswith("pyspark=="):
        return make_venv(pins[0], ROOT / f".{group}")
    dest = jars_root / group
    lines = "".join(pin.line + "\n" for pin in pins)
    marker = dest / MARKER
    if marker.is_file() and marker.read_text() == lines:
        return "present"
    jars_root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f".{group}-", dir=jars_root) as tmp:
        staging = Path(tmp) / group
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_pom(pins))
        cmd = [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            unserved = [pin.coordinate for pin in pins if pin.note == "unserved"]
            why = f" ({', '.join(unserved)} was not served by Maven Central when pinned)" if unserved else ""
            errors = [ln for ln in done.stdout.splitlines() if ln.startswith("[ERROR]")][:1]
            raise SystemExit(
                f"jars.sh: could not fetch group {group!r}{why}: "
                f"{errors[0] if errors else done.stderr.strip()[-300:]}"
            )
        (staging / MARKER).write_text(lines)
        if dest.exists():
            shutil.rmtree(dest)
        staging.rename(dest)
    size = sum(f.stat().st_size for f in dest.glob("*.jar"))
    return f"fetched {len(list(dest.glob('*.jar')))} jars, {size / 1e6:.0f} MB in {time.monotonic() - started:.0f} s"


def main(argv: list[str]) -> int:
    pins = read_lock()
    groups = list(dict.fromkeys(pin.group for pin in pins))
    if not argv:
        print("usage: bash scripts/jars.sh GROUP... | all")
        for group in groups:
            members = [pin for pin in pins if pin.group == group]
            print(
                f"  {group:8} "
                + ", ".join(f"{p.coordinate}{' (unserved)' if p.note else ''}" for p in members)
            )
        return 0
    if argv == ["all"]:
        argv = [g for g in groups if not any(p.note == "unserved" for p in pins if p.group == g)]
    unknown = [g for g in argv if g not in groups]
    if unknown:
        raise SystemExit(f"jars.sh: unknown group(s) {', '.join(unknown)}; groups: {', '.join(groups)}")
    if shutil.which("mvn") is None:
        raise SystemExit("jars.sh needs Maven ('mvn') on PATH, e.g. 'apt-get install maven'")
    jars_root = ROOT / "jars"
    for group in argv:
        print(f"{group}: {fetch_group(group, [p for p in pins if p.group == group], jars_root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The Java side of a local Spark cluster: Spark and Beam's Spark job server, fetched by Maven.

`job_server/pom.xml` (committed beside this module) lists Beam's published Spark 3 runner
(`beam-runners-spark-3`, which holds `SparkJobServerDriver`) and Spark's own modules; Maven's
`dependency:build-classpath` resolves them (downloading into `~/.m2` only what is not there yet)
and `~/.cache/asynctrain/spark-<pom digest>/jars` gets a link to each resolved jar (no second
copy of ~260 MB). That folder, with a `RELEASE` file beside it, is a Spark home as far as Spark's
launcher is concerned: the standalone Workers
build their executors' classpath from `SPARK_HOME/jars/*` (Spark's `findJarsDir`), so every JVM of
the cluster runs the same jars. Spark from Maven, rather than the 300 MB `pyspark` distribution,
reuses `~/.m2` and brings only the modules a Beam batch job needs.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import pathlib
import shutil
import subprocess
import time
import xml.etree.ElementTree as ElementTree

POM = pathlib.Path(__file__).resolve().parent / 'job_server' / 'pom.xml'
CACHE_ROOT = pathlib.Path.home() / '.cache' / 'asynctrain'
_POM_NS = {'m': 'http://maven.apache.org/POM/4.0.0'}


@dataclasses.dataclass(frozen=True)
class SparkHome:
    """A resolved Spark home.

    Attributes:
      path: the folder to use as SPARK_HOME (holds `RELEASE` and `jars/`).
      spark_version: Spark's version, from the pom's `spark.version` property.
      beam_version: the Beam Java (job server) version, from the pom's `beam.version`.
    """

    path: pathlib.Path
    spark_version: str
    beam_version: str

    @property
    def jars(self) -> pathlib.Path:
        return self.path / 'jars'

    @property
    def classpath(self) -> str:
        """A JVM `-cp` value naming every jar (the JVM expands the trailing `*`)."""
        return str(self.jars / '*')

    @property
    def runner_jar(self) -> pathlib.Path:
        """Beam's Spark runner jar (what a Beam job stages to its executors)."""
        return self.jars / f'beam-runners-spark-3-{self.beam_version}.jar'


def pom_versions(pom: pathlib.Path = POM) -> tuple[str, str]:
    """(Spark version, Beam version) from the pom's properties."""
    properties = ElementTree.parse(pom).getroot().find('m:properties', _POM_NS)
    if properties is None:
        raise ValueError(f'{pom}: no <properties> with spark.version and beam.version')
    versions = []
    for key in ('spark.version', 'beam.version'):
        element = properties.find(f'm:{key}', _POM_NS)
        if element is None or not (element.text or '').strip():
            raise ValueError(f'{pom}: <properties> has no <{key}>')
        versions.append(element.text.strip())
    return versions[0], versions[1]


def _digest(pom: pathlib.Path) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()[:12]


def spark_home(pom: pathlib.Path = POM, cache_root: pathlib.Path = CACHE_ROOT) -> SparkHome:
    """The Spark home for `pom`, resolving it with Maven on first use (cached by the pom's digest).

    Concurrent callers (pytest-xdist workers) wait on a file lock; only one runs Maven. Prints one
    line per fetched piece, so that a CI log shows what was downloaded and how long it took.
    """
    spark_version, beam_version = pom_versions(pom)
    home = cache_root / f'spark-{_digest(pom)}'
    resolved = SparkHome(home, spark_version, beam_version)
    if _complete(home):
        return resolved
    if shutil.which('mvn') is None or shutil.which('java') is None:
        raise RuntimeError(
            'A local Spark cluster needs `mvn` and `java` (OpenJDK 17) on PATH to fetch and run '
            f"Spark {spark_version} and Beam {beam_version}'s Spark job server; found "
            f'mvn={shutil.which("mvn")}, java={shutil.which("java")}'
        )
    cache_root.mkdir(parents=True, exist_ok=True)
    with open(cache_root / f'spark-{_digest(pom)}.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(home):
            return resolved
        shutil.rmtree(home, ignore_errors=True)  # Its links point into a cleaned ~/.m2.
        staging = home.with_name(home.name + '.partial')
        shutil.rmtree(staging, ignore_errors=True)
        (staging / 'jars').mkdir(parents=True)
        print(
            f'spark jars: resolving Beam {beam_version} Spark runner + Spark {spark_version} '
            f'with Maven ({pom}) into {home}/jars',
            flush=True,
        )
        start = time.monotonic()
        classpath_file = staging / 'classpath.txt'
        command = [
            'mvn', '-q', '-B', '-f', str(pom), 'dependency:build-classpath',
            f'-Dmdep.outputFile={classpath_file}', '-DincludeScope=runtime',
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f'{" ".join(command)} failed (exit {result.returncode}):\n'
                f'{result.stdout[-4000:]}{result.stderr[-4000:]}'
            )
        jars = [pathlib.Path(entry) for entry in classpath_file.read_text().strip().split(':')]
        for jar in jars:
            (staging / 'jars' / jar.name).symlink_to(jar)
        size_mb = sum(jar.stat().st_size for jar in jars) / (1 << 20)
        print(
            f'spark jars: {len(jars)} jars, {size_mb:.0f} MiB, in {time.monotonic() - start:.1f} s',
            flush=True,
        )
        (staging / 'RELEASE').write_text(
            f'Spark {spark_version} (jars resolved by Maven from {pom.name}), '
            f'Beam {beam_version} Spark job server\n'
        )
        staging.rename(home)
    return resolved


def _complete(home: pathlib.Path) -> bool:
    """Whether `home` was fully resolved and every jar it links to is still in `~/.m2`."""
    return (home / 'RELEASE').is_file() and all(jar.exists() for jar in (home / 'jars').iterdir())

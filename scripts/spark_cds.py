"""A class-data-sharing archive of the classes a Spark driver loads, for the test suite's JVMs.

The suite starts about sixty Spark drivers (its two sessions, and the CLI, Thrift, notebook and crash
drivers its tests launch), each of which loads some ten thousand classes from Spark's jars before it
plans its first query. Java 17 can map those classes from an archive instead of parsing and
verifying them again (AppCDS): a driver here started in about two thirds of the time and ran its
first statements about a fifth faster with it. The archive is made once per virtual environment by
a short arctic workload run with ``-XX:ArchiveClassesAtExit``, and is kept in the environment
(``.venv/spark-cds-<key>.jsa``), its name keyed by the Java runtime and pyspark's jars, so a new
Java or pyspark makes a new one.

    python scripts/spark_cds.py      # makes the archive when missing; prints the JVM options

A JVM given an archive that does not match its class path (a driver with other jars first on it, a
standalone master) ignores it and runs as without; the options silence the JVM's note about that,
which would otherwise go to standard output. Users' Spark is untouched: only scripts/test.sh uses it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

# Logging of the cds tags off: a mismatched archive is a note on standard output otherwise.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

WORKLOAD = """
import os, sys, tempfile
import arctic_sql
from arctic_sql.spark import local_session

work = tempfile.mkdtemp(prefix="spark-cds-")
spark = local_session(work, {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"})
s = arctic_sql.connect(warehouse=os.path.join(work, "wh"), spark=spark)
s.sql("CREATE DATABASE db")
s.sql("CREATE TABLE db.t (k BIGINT, v STRING, n INT, PRIMARY KEY (k, n)) PARTITIONED BY (n)")
s.sql("INSERT INTO db.t VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 2)")
spark.range(100).selectExpr("id AS k", "CAST(id AS STRING) AS v", "CAST(id % 3 AS INT) AS n") \\
    .write.format("arctic").mode("append").save("db.t")
s.sql("MERGE INTO db.t t USING (SELECT 2 AS k, 'z' AS v, 1 AS n) s ON t.k = s.k AND t.n = s.n "
      "WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *")
s.sql("SELECT n, count(*) FROM db.t GROUP BY n ORDER BY n").collect()
s.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
s.sql("SELECT * FROM db.t WHERE k = 1").collect()
spark.read.format("arctic").load("db.t").join(spark.range(5).withColumnRenamed("id", "k"), "k").collect()
spark.stop()
"""


def archive_path(venv: Path) -> Path:
    """The archive for this Java runtime and this environment's pyspark jars."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True).stderr
    jars = sorted(os.listdir(Path(pyspark.__file__).parent / "jars"))
    key = hashlib.sha256("\n".join([java, sys.prefix, *jars]).encode()).hexdigest()[:16]
    return venv / f"spark-cds-{key}.jsa"


def ensure(venv: Path) -> Path | None:
    """The archive, made now when missing; None when it could not be made (the suite runs without)."""
    path = archive_path(venv)
    if path.exists():
        return path
    for old in venv.glob("spark-cds-*.jsa*"):  # another Java or pyspark's, or a dead run's: unused
        old.unlink()
    partial = path.with_name(path.name + ".partial")
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{opts} -XX:ArchiveClassesAtExit={partial} {QUIET}"}
    done = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True)
    if done.returncode != 0 or not partial.exists():
        print(
            f"no Spark class archive (the suite runs without): {done.stderr.strip()[-300:]}", file=sys.stderr
        )
        return None
    os.replace(partial, path)  # whole or not at all: a JVM never maps a half-written archive
    return path


def main() -> None:
    path = ensure(Path(sys.prefix))
    print(f"-XX:SharedArchiveFile={path} {QUIET}" if path is not None else "")


if __name__ == "__main__":
    main()

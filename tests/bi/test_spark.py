#!/usr/bin/env python3
"""Apache Spark's JDBC source, unmodified, over pg_dp as a DP-only analyst.

Spark reads a query by first probing its schema (`SELECT * FROM (<query>) SPARK_GEN_SUBQ_0 WHERE 1=0`),
then selecting its columns from the same wrapper, with filters it pushes down added outside. The probe
must be free and give the column types; the read is paid once; a second read, and a filtered count, are
the same release (the release cache is keyed on the DP level, not the statement around it).

Run by scripts/test.sh with the BI tools' virtual environment:
    $VENV/bin/python tests/bi/test_spark.py --host /tmp --port 25433
Prints one line per check and "spark: N passed, M failed".
"""
import argparse
import os
import sys

from pyspark.sql import SparkSession

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run_checks  # noqa: E402
from database import Database  # noqa: E402

ARGS = None
DB = "pg_dp_spark"
ANALYST = "spark_analyst"
EPS = 1000
QUERY = f"SELECT diagnosis, dp_count(id, {EPS}) AS visits, dp_avg(cost, 0, 500, {EPS}) AS mean_cost FROM visits GROUP BY diagnosis"
STATE = {}


def setup():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    STATE["db"] = Database(ARGS.host, ARGS.port, DB, ANALYST)
    STATE["db"].create(budget_delta=0)
    spark = (SparkSession.builder.master("local[1]").appName("pg_dp")
             .config("spark.jars", ARGS.jdbc_jar).config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    STATE["spark"] = spark


def sql(query, args=None):
    return STATE["db"].sql(query, args)


def spent():
    return STATE["db"].spent()


def reader():
    return (STATE["spark"].read.format("jdbc")
            .option("url", f"jdbc:postgresql://127.0.0.1:{ARGS.port}/{DB}")
            .option("driver", "org.postgresql.Driver")
            .option("user", ANALYST).option("query", QUERY))


def check_1_the_schema_probe_is_free_and_typed():
    before = spent()
    df = reader().load()
    STATE["df"] = df
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {"diagnosis": "string", "visits": "bigint", "mean_cost": "double"}, types
    assert spent() == before, "Spark's schema probe was charged"


def check_2_a_read_is_paid_once_and_exact_at_a_large_epsilon():
    before = spent()
    rows = {r["diagnosis"]: (r["visits"], r["mean_cost"]) for r in STATE["df"].collect()}
    assert spent() - before == 2 * EPS, (spent(), before)
    truth = {d: (n, m) for d, n, m in sql("SELECT diagnosis, count(*), avg(cost) FROM visits GROUP BY 1")}
    assert set(rows) == set(truth), rows
    for d, (n, m) in truth.items():
        assert abs(rows[d][0] - n) <= 0.5 and abs(rows[d][1] - m) <= 1, (d, rows[d], n, m)
    STATE["rows"] = rows


def check_3_another_read_and_a_pushed_down_filter_are_the_same_release():
    before = spent()
    again = {r["diagnosis"]: (r["visits"], r["mean_cost"]) for r in reader().load().collect()}
    assert again == STATE["rows"] and spent() == before, "a second read was charged"
    df = reader().load()
    n = df.filter(df.visits > 0).filter(df.diagnosis != "flu").count()
    assert n == 3 and spent() == before, (n, spent(), before)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ap.add_argument("--jdbc-jar", default="/usr/share/java/postgresql.jar")
    ARGS = ap.parse_args()
    setup()
    try:
        run_checks(globals(), "spark")
    finally:
        STATE["spark"].stop()


if __name__ == "__main__":
    main()

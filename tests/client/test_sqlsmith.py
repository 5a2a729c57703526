#!/usr/bin/env python3
"""sqlsmith, run as a DP-only role: a second, independent generator of attacks on pg_dp's grammar.

test_totality.py builds its queries from the grammar's own constructs; sqlsmith (the Debian package,
1.4) knows nothing of pg_dp and writes random SQL from the catalog: joins, subqueries, every function
and operator PostgreSQL has, window functions, MERGE, CTEs, TABLESAMPLE. It runs as `smith`, a role
with a privacy budget and no SELECT grant on the protected tables, in a fresh database of small tables
of many types with NULLs, NaN, ±Infinity and type extremes. Three runs, with a fixed seed:

  tables   --exclude-catalog: the protected tables, a public table and pg_dp's own views
  views    the same, plus views that the analyst may read: DP levels written by the DBA (anything
           sqlsmith writes around them post-processes released values, and must forfeit nothing)
           and plain views over one protected table (row sources of a DP level)
  catalog  the catalogs too: the statistics pg_dp hides from untrusted roles

sqlsmith rarely writes a DP aggregate by itself (only in `(select agg(col) from t)` and as a window
function), so a mutation step then rewrites the SELECT statements it dumped (--dump-all-queries) that
read a protected table into DP queries, and runs them as smith too, counted apart:
  - over the statement's own FROM and WHERE: `SELECT dp_count(*) FROM <from> WHERE <where>`, a
    select-list item as the aggregated value, as a GROUP BY key or in dp_sum, the WHERE as a FILTER,
    and the whole statement (without LIMIT) as a row source;
  - over one protected table of its FROM, with the WHERE's operands and the select-list items that
    refer to that table alone: pg_dp refuses most of sqlsmith's FROM clauses (LATERAL, subqueries,
    TABLESAMPLE, joins of protected tables) before it looks at an expression, and this puts sqlsmith's
    expressions in WHERE, FILTER, GROUP BY keys, aggregated values (dp_count, dp_sum, dp_avg,
    dp_median), row sources and next to a many-to-one join with the public table.

The test fails if the server crashed (server.log, and a fresh connection), if an error was raised
inside an admitted DP level (pg_dp's fail-closed WARNING "an error inside an admitted DP level", a
ledger receipt with mechanism 'forfeit'), if sqlsmith did not run or ran fewer statements than asked,
if too few statements reached pg_dp's grammar (refused with SQLSTATE 42501 naming pg_dp or a DP
aggregate, or admitted: a receipt in dp.ledger), or if a mutated statement ran without a receipt.
Errors raised before a statement runs (a parse error, a refusal) are what we expect.

What it takes to run sqlsmith as a DP-only role (in the fixture, nothing in pg_dp):
  - sqlsmith lists tables from information_schema.tables, which shows only the tables a role holds
    some privilege on: without any grant, the protected tables are invisible to it. The fixture
    grants REFERENCES on them (harmless: smith owns no table a foreign key could start from), which
    makes them visible without SELECT. Its other catalog queries (pg_type, pg_attribute and
    pg_class by oid and relname, pg_constraint, pg_operator, pg_proc) read nothing pg_dp hides.
  - it picks functions from pg_proc whatever their privileges: the test functions of a build with
    pgrx's pg_test feature (schema "tests", no USAGE for smith) would end a third of its statements
    with "permission denied for schema tests"; this database goes without them.
  - it reports errors only in aggregate: the SQLSTATE of each one is read from the server log, where
    the fixture has smith's errors logged with log_error_verbosity = verbose (and without their
    statements, log_min_error_statement = panic, to keep the log small). sqlsmith runs one statement
    at a time and prints one character per statement (--verbose), so the n-th failed statement is the
    n-th error in the log: that gives the statement of an unexpected error.
  - it sets statement_timeout = 1s and client_min_messages = error in its sessions, so the
    fail-closed WARNING reaches only the server log.

Run by hand (or by scripts/test.sh), as root or a user with sudo, against a server with pg_dp
preloaded whose data directory holds server.log:
    /usr/bin/python3 tests/client/test_sqlsmith.py --host /tmp --port 25433 --datadir DIR \
        [--seed N] [--queries N] [--mutations N]
sqlsmith is installed (apt-get install sqlsmith) if missing. About a minute with the defaults on two
cores. Prints the counts of each run, one line per check and "sqlsmith: N passed, M failed"; exits
non-zero on any failure.
"""
import argparse
import collections
import functools
import os
import random
import re
import shutil
import subprocess
import tempfile
import time

import psycopg

from harness import run_checks

ARGS = None
DB = "pg_dp_sqlsmith"
ROLE = "smith"
PROTECTED = ("people", "measures", "visits")
FAIL_WARNING = "pg_dp: an error inside an admitted DP level"
CRASH_MARKERS = ("terminated by signal", "was terminated by exception", "terminated by unrecognized",
                 "all server processes terminated; reinitializing", "database system was interrupted",
                 "PANIC:  ")
REPORT_MAX = 10


def connect(user="postgres", dbname=DB, autocommit=True):
    return psycopg.connect(host=ARGS.host, port=ARGS.port, dbname=dbname, user=user, autocommit=autocommit,
                           connect_timeout=10)


# ----- sqlsmith itself ------------------------------------------------------------------------------

def as_root(cmd):
    return cmd if os.geteuid() == 0 else ["sudo", "-n"] + cmd


def ensure_sqlsmith():
    """The path of sqlsmith, installing the Debian package on a fresh machine."""
    path = shutil.which("sqlsmith")
    if path:
        return path
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = as_root(["apt-get", "install", "-y", "-qq", "sqlsmith"])
    r = subprocess.run(install, env=env, capture_output=True, text=True)
    if r.returncode != 0:  # stale package lists on a fresh machine
        subprocess.run(as_root(["apt-get", "update", "-qq"]), env=env, capture_output=True, text=True)
        r = subprocess.run(install, env=env, capture_output=True, text=True)
    path = shutil.which("sqlsmith")
    if not path:
        raise AssertionError(f"sqlsmith is not installed and `{' '.join(install)}` failed: "
                             f"{(r.stderr or r.stdout).strip()[-500:]}")
    return path


# ----- the fixture ----------------------------------------------------------------------------------

PEOPLE_EXTREMES = """
 (100, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL),
 (101, 1, 32767, 2147483647, 9223372036854775807, 'Infinity', 'Infinity', 'Infinity', '', '', '', '', true,
  'infinity', 'infinity', 'infinity', '178956970 years 7 months 2147483647 days 2562047788:00:54.775807',
  'ffffffff-ffff-ffff-ffff-ffffffffffff', '{{1,2},{3,4}}', '[1e1000, -1e-1000]', 'x'),
 (102, 2, -32768, -2147483648, -9223372036854775808, '-Infinity', '-Infinity', '-Infinity', repeat('x', 5000), 'ß',
  'ǅ', repeat('é', 5000), false, '-infinity', '-infinity', '-infinity',
  '-178956970 years -8 months -2147483648 days -2562047788:00:54.775807', '00000000-0000-0000-0000-000000000000', '{}',
  'null', ''),
 (103, 3, 0, 0, 0, 'NaN', 'NaN', 'NaN', 'a%b_c\\', 'İ', 'x', 'ı', NULL, '4714-11-24 BC', '4714-11-24 00:00 BC',
  '4714-11-24 00:00+00 BC', '0', NULL, '[0:2]={7,8,9}', '{"a": [1, {"b": null}]}', 'abcde'),
 (104, 4, 1, 1, 1, 1.4e-45, 5e-324, 1e-1000, 'z', 'Z', 'Z', 'Z', true, '5874897-12-31', '294276-12-31 23:59:59.999999',
  '294276-12-31 23:59:59.999999+00', '1 microsecond', NULL, '{{{1}}}', '"s"', NULL),
 (105, 99, 7, 7, 7, '3.4028235e38', '1.7976931348623157e308', 1e130, E'\\t\\n', ' ', ' ', E'\\u00a0', false,
  '2000-02-29', '2000-02-29 12:00', '2000-02-29 12:00+00', '-1 day', NULL, '{NULL,NULL}', '1e-1000', ' '),
 (106, 5, -1, -1, -1, '-0', '-0', '-0', '%', '_', '\\', '\\', true, '1999-12-31', '1999-12-31 23:59:59',
  '1999-12-31 23:59:59+14', '-178956970 years', '12345678-1234-1234-1234-123456789abc', '[-5:-3]={1,NULL,3}',
  '{"k": "v"}', '%')
"""

FIXTURE = [
    "CREATE TABLE regions (id int PRIMARY KEY, name text COLLATE \"POSIX\" UNIQUE, climate text, pop int8)",
    "INSERT INTO regions SELECT g, 'r' || g, (ARRAY['cold', 'warm', 'hot'])[1 + g % 3], g * 1000 "
    "FROM generate_series(0, 9) g",
    # people: one column of (almost) every type an analyst can reach, ordinary rows and extreme ones
    """CREATE TABLE people (
         id int PRIMARY KEY, region_id int, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, num numeric,
         tc text COLLATE "C", tp text COLLATE "POSIX", vc varchar(10), td text, b bool, d date, ts timestamp,
         tz timestamptz, iv interval, u uuid, ia int[], j jsonb, bp char(5))""",
    """INSERT INTO people SELECT g, g % 10, g::int2, g * 1000, g * 100000000000::int8, g / 3.0, g * 1.5, g * 1.25,
         'name' || g, 'Name' || g, 'v' || g, 'n' || g, g % 2 = 0, date '2020-01-01' + g,
         timestamp '2020-01-01' + g * interval '1 hour', timestamptz '2020-01-01 00:00+00' + g * interval '1 day',
         g * interval '1 hour', md5(g::text)::uuid, ARRAY[g, g + 1], jsonb_build_object('g', g), 'c' || (g % 10)
       FROM generate_series(1, 40) g""",
    "INSERT INTO people VALUES " + PEOPLE_EXTREMES,
    # measures: numbers to aggregate, a key to join on
    "CREATE TABLE measures (id int PRIMARY KEY, region_id int, x float8, y numeric, n int, flag bool, "
    "label text COLLATE \"C\", at timestamptz)",
    "INSERT INTO measures SELECT g, g % 12, CASE WHEN g % 17 = 0 THEN 'NaN' ELSE g * 0.5 END, g * 3, g % 7, "
    "g % 3 = 0, 'm' || (g % 5), timestamptz '2021-06-01 00:00+00' + g * interval '7 hours' "
    "FROM generate_series(1, 60) g",
    "INSERT INTO measures VALUES (1000, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
    "(1001, 0, '-Infinity', 'NaN', -2147483648, true, '', '-infinity'), "
    "(1002, 11, 'Infinity', 'Infinity', 2147483647, false, repeat('m', 3000), 'infinity')",
    # visits: many rows per patient (a privacy unit)
    "CREATE TABLE visits (id int PRIMARY KEY, patient_id int, region_id int, cost float8, day date, "
    "note text, tags text[])",
    "INSERT INTO visits SELECT g, g % 15, g % 10, g * 10.0, date '2021-01-01' + g % 30, 'n' || (g % 4), "
    "ARRAY['t' || (g % 3)] FROM generate_series(1, 80) g",
    "INSERT INTO visits VALUES (1000, NULL, NULL, 'NaN', 'infinity', NULL, NULL), "
    "(1001, 3, 3, 'Infinity', '-infinity', '', '{{a,b},{c,d}}'), (1002, 4, 99, '-1e308', '-infinity', 'x', '{}')",
    "SELECT dp.protect_table('people')",
    "SELECT dp.protect_table('measures')",
    "SELECT dp.protect_table('visits', privacy_unit => 'patient_id')",
    # declared bounds, so that a one-argument dp_sum(col) of sqlsmith's can be admitted, and domains
    "SELECT dp.set_bounds('people', 'i2', -100, 100)",
    "SELECT dp.set_bounds('people', 'i4', 0, 100000)",
    "SELECT dp.set_bounds('people', 'i8', 0, 1000000000000)",
    "SELECT dp.set_bounds('people', 'f8', -1000, 1000)",
    "SELECT dp.set_bounds('people', 'num', 0, 100)",
    "SELECT dp.set_bounds('measures', 'x', 0, 100)",
    "SELECT dp.set_bounds('measures', 'y', 0, 1000)",
    "SELECT dp.set_bounds('measures', 'n', 0, 10)",
    "SELECT dp.set_bounds('visits', 'cost', 0, 1000)",
    "SELECT dp.set_domain('people', 'region_id', ARRAY[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])",
    "SELECT dp.set_domain('people', 'b', ARRAY[true, false])",
    "SELECT dp.set_domain('visits', 'region_id', 'regions', 'id')",
    # views the analyst may read in the "views" run: DP levels written by the DBA, and row sources
    "CREATE SCHEMA dpviews",
    f"GRANT USAGE ON SCHEMA dpviews TO {ROLE}",
    "CREATE VIEW dpviews.visits_by_region AS SELECT region_id, dp_count(id, 0.01) AS n, "
    "dp_avg(cost, 0, 1000, 0.01) AS avg_cost FROM visits GROUP BY region_id",
    "CREATE VIEW dpviews.people_by_climate AS SELECT r.climate, dp_count(p.id, 0.01) AS n, "
    "dp_sum(p.f8, -1000, 1000, 0.01) AS sum_f8 FROM people p JOIN regions r ON r.id = p.region_id GROUP BY r.climate",
    "CREATE VIEW dpviews.people_by_flag AS SELECT b, dp_count(*) AS n, dp_avg(i4, 0, 100000, 0.01) AS avg_i4, "
    "dp_median(f8, -1000, 1000, 0.01) AS med_f8 FROM people GROUP BY b",
    "CREATE VIEW dpviews.measures_total AS SELECT dp_count(x, 0.01) AS n, dp_sum(y, 0, 1000, 0.01) AS sum_y, "
    "dp_variance(x, 0, 100, 0.01) AS var_x, dp_percentile(x, 0.9, 0, 100, 0.01) AS p90 FROM measures "
    "WHERE flag IS NOT TRUE",
    "CREATE VIEW dpviews.measures_by_label AS SELECT label, dp_count(*) AS n FROM measures GROUP BY label",
    "CREATE VIEW dpviews.people_rows AS SELECT id, region_id, i2, i4, f8, num, tc, tp, b, d, tz FROM people "
    "WHERE id <> 100",
    "CREATE VIEW dpviews.visit_rows AS SELECT patient_id, region_id, cost, day FROM visits WHERE cost >= 0",
]

# A build with pgrx's test functions (cargo pgrx install with the pg_test feature) installs some 200
# functions in a schema "tests" the analyst has no USAGE on; sqlsmith picks functions from pg_proc
# without looking at privileges, and a third of its statements would stop at "permission denied for
# schema tests". They are not part of a release build: this database goes without them.
DROP_TEST_FUNCTIONS = """
DO $$
DECLARE
    f regprocedure;
BEGIN
    IF to_regnamespace('tests') IS NULL THEN
        RETURN;
    END IF;
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = 'tests'::regnamespace LOOP
        IF EXISTS (SELECT FROM pg_depend WHERE classid = 'pg_proc'::regclass AND objid = f AND deptype = 'e') THEN
            EXECUTE format('ALTER EXTENSION pg_dp DROP FUNCTION %s', f);
        END IF;
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$"""

VIEWS = ["visits_by_region", "people_by_climate", "people_by_flag", "measures_total", "measures_by_label",
         "people_rows", "visit_rows"]


def setup():
    with connect(dbname="postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        try:
            c.execute(f"DROP ROLE IF EXISTS {ROLE}")
        except psycopg.Error:
            pass  # it still owns something in another database: keep it
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
            c.execute(f"CREATE ROLE {ROLE} LOGIN")
        c.execute(f"ALTER ROLE {ROLE} NOSUPERUSER LOGIN")
        c.execute(f"ALTER ROLE {ROLE} SET statement_timeout = '2s'")
        # the SQLSTATE of each of its errors in the server log, without the statement
        c.execute(f"ALTER ROLE {ROLE} SET log_error_verbosity = 'verbose'")
        c.execute(f"ALTER ROLE {ROLE} SET log_min_error_statement = 'panic'")
        c.execute(f"CREATE DATABASE {DB}")
        # every execution runs its levels and writes its receipts: no release cache
        c.execute(f"ALTER DATABASE {DB} SET dp.release_cache = off")
    with connect() as c:
        c.execute("CREATE EXTENSION pg_dp")
        c.execute(DROP_TEST_FUNCTIONS)
        for sql in FIXTURE:
            c.execute(sql)
        c.execute(f"GRANT SELECT ON regions TO {ROLE}")
        # visible to sqlsmith (information_schema.tables) without SELECT
        c.execute(f"GRANT REFERENCES ON {', '.join(PROTECTED)} TO {ROLE}")
        # a budget no run exhausts (a grant adds at most 1e6; delta stays below 1)
        c.execute("SELECT dp.grant_budget(%s, 1000000, 0.9)", (ROLE,))
        for _ in range(2):
            c.execute("SELECT dp.grant_budget(%s, 1000000)", (ROLE,))
        c.execute("ANALYZE")


def regrant():
    """More budget for smith, after what it spent (or forfeited)."""
    with connect() as c:
        c.execute("SELECT dp.grant_budget(%s, 1000000)", (ROLE,))


def ledger_mark():
    with connect() as c:
        return c.execute("SELECT coalesce(max(id), 0) FROM dp.ledger").fetchone()[0]


def ledger_since(mark):
    """smith's receipts after mark: (receipts, executions with a receipt, forfeits)."""
    with connect() as c:
        receipts, executions = c.execute(
            "SELECT count(*), count(DISTINCT coalesce(execution_id, id::text)) FROM dp.ledger "
            "WHERE id > %s AND role = %s::regrole AND mechanism <> 'forfeit'", (mark, ROLE)).fetchone()
        forfeits = c.execute(
            "SELECT id, role_name, details->'forfeit'->>'sqlstate', query_text FROM dp.ledger "
            "WHERE id > %s AND mechanism = 'forfeit' ORDER BY id", (mark,)).fetchall()
    return receipts, executions, forfeits


# ----- the server log -------------------------------------------------------------------------------

def log_path():
    return os.path.join(ARGS.datadir, "server.log")


def log_offset():
    try:
        return os.path.getsize(log_path())
    except OSError:
        return 0


ENTRY = re.compile(r"^(?P<prefix>.*?)\b(?P<level>ERROR|WARNING|FATAL|PANIC|LOG|DETAIL|HINT|STATEMENT|LOCATION|"
                   r"CONTEXT|QUERY|NOTICE|INFO|DEBUG\d?):  (?:(?P<code>[0-9A-Z]{5}): )?(?P<text>.*)$")


def log_entries(start):
    """The server log from offset start, as (level, sqlstate, text, [(level, text) of the lines that follow])."""
    try:
        with open(log_path(), "rb") as f:
            f.seek(start)
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        raise AssertionError(f"cannot read the server log {log_path()}: {e}")
    entries = []
    for line in data.split("\n"):
        m = ENTRY.match(line) if not line.startswith("\t") else None
        if m is None:
            if entries:  # a continuation line of a multi-line message, or of its detail
                last = entries[-1]
                if last[3]:
                    last[3][-1] = (last[3][-1][0], last[3][-1][1] + "\n" + line)
                else:
                    last[2] += "\n" + line
            continue
        level, code, text = m.group("level"), m.group("code"), m.group("text")
        if level in ("DETAIL", "HINT", "STATEMENT", "LOCATION", "CONTEXT", "QUERY") and entries:
            entries[-1][3].append((level, text))
        else:
            entries.append([level, code, text, []])
    return entries


def crashes_in(entries):
    out = []
    for level, _, text, more in entries:
        if any(mark in f"{level}:  {text}" for mark in CRASH_MARKERS):
            detail = " ".join(t for lv, t in more if lv == "DETAIL")
            out.append(one_line(f"{level}: {text} {detail}", 1200))
    return out


def fail_warnings_in(entries):
    out = []
    for level, code, text, more in entries:
        if FAIL_WARNING in text:
            detail = " ".join(t for lv, t in more if lv == "DETAIL")
            at = detail.find("statement: ")  # the WARNING's DETAIL ends with the statement
            out.append(f"{level}: {text}\n    {one_line(detail[at:] if at >= 0 else detail, 1200)}")
    return out


# ----- classification of errors ---------------------------------------------------------------------

def category(code, msg):
    """What an error says about pg_dp: 'refused' by its grammar, 'statistics' it hides, 'pg_dp' (another
    error of pg_dp's: a parameter, the budget, a window function), or 'other' (PostgreSQL's own)."""
    msg = msg or ""
    if "this database holds tables protected by pg_dp" in msg:
        return "statistics"
    ours = re.search(r"\bpg_dp\b|\bdp[._]\w+", msg)  # names pg_dp, a DP aggregate or a function of pg_dp's
    if code == "42501" and ours:
        return "refused"
    if code == "57014":
        return "timeout"
    if ours:
        return "pg_dp"
    return "other"


def normalize(msg):
    msg = re.sub(r"\"[^\"]*\"", '"…"', msg or "")
    return re.sub(r"\d+(\.\d+)?", "N", msg)[:110]


class Tally:
    """Counts of one phase's statements by outcome."""

    def __init__(self, label):
        self.label = label
        self.statements = 0
        self.errors = collections.Counter()        # category -> count
        self.classes = collections.Counter()       # SQLSTATE class of the 'other' errors
        self.messages = collections.Counter()      # (category, normalized message)
        self.receipts = self.admitted = 0
        self.forfeits = []
        self.warnings = []
        self.crashes = []
        self.elapsed = 0.0
        self.notes = []
        self.unexpected = []  # (SQLSTATE, message, statement) of pg_dp's other errors and internal errors

    def error(self, code, msg, sql=None):
        cat = category(code, msg)
        if (cat == "pg_dp" or (code or "").startswith("XX")) and len(self.unexpected) < REPORT_MAX:
            self.unexpected.append((code, msg, sql))
        self.errors[cat] += 1
        if cat == "other":
            self.classes[(code or "?????")[:2]] += 1
        self.messages[(cat, code or "?????", normalize(msg))] += 1

    @property
    def error_count(self):
        return sum(self.errors.values())

    def summary(self):
        e = self.errors
        classes = " ".join(f"{k}xxx:{v}" for k, v in sorted(self.classes.items(), key=lambda kv: -kv[1]))
        return (f"sqlsmith: {self.label}: {self.statements} statements in {self.elapsed:.1f}s: "
                f"{self.statements - self.error_count} ran; {e['refused'] + self.admitted} reached pg_dp's grammar: "
                f"{e['refused']} refused, "
                f"{self.admitted} admitted and charged ({self.receipts} receipts), "
                f"{e['statistics']} refused a statistic pg_dp hides; {e['pg_dp']} other pg_dp errors, "
                f"{e['timeout']} timeouts, {e['other']} other errors ({classes or 'none'}), "
                f"{len(self.forfeits)} forfeits ({len(self.warnings)} fail-closed WARNINGs), "
                f"{len(self.crashes)} crashes")


# ----- the sqlsmith runs ----------------------------------------------------------------------------

def split_statements(text):
    return [s.strip() for s in re.split(r";\n", text) if s.strip()]


def sqlsmith_report(stderr):
    """sqlsmith's own count of its statements and errors, from its last --verbose report."""
    queries = errors = None
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("queries: "):
            queries = int(line.split()[1])
            errors = 0
            for more in lines[i + 1:]:
                m = re.match(r"^(\d+)\t", more)
                if m:
                    errors += int(m.group(1))
                elif more.startswith("error rate"):
                    break
    # one character per statement, in order: . ran, e error, S syntax error, t timeout, C lost connection
    progress = "".join(line for line in lines if re.fullmatch(r"[.etSC]+", line))
    return queries, errors, progress


def run_sqlsmith(label, seed, count, exclude_catalog, workdir):
    t = Tally(label)
    sqlsmith = ensure_sqlsmith()
    target = f"host={ARGS.host} port={ARGS.port} dbname={DB} user={ROLE}"
    cmd = [sqlsmith, f"--target={target}", f"--seed={seed}", f"--max-queries={count}", "--verbose",
           "--dump-all-queries"] + (["--exclude-catalog"] if exclude_catalog else [])
    out_path = os.path.join(workdir, f"{label}.sql")
    err_path = os.path.join(workdir, f"{label}.err")
    mark, offset, t0 = ledger_mark(), log_offset(), time.time()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            rc = p.wait(timeout=max(120, count * 0.05))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = "killed after a timeout"
    t.elapsed = time.time() - t0
    with open(out_path, errors="replace") as f:
        t.dump = split_statements(f.read())
    with open(err_path, errors="replace") as f:
        stderr = f.read()
    queries, sqlsmith_errors, progress = sqlsmith_report(stderr)
    t.statements = queries or 0
    t.rc, t.stderr_tail = rc, stderr.strip()[-1500:]
    entries = log_entries(offset)
    errors = [(code, text) for level, code, text, _ in entries if level == "ERROR" and code]  # smith's
    # sqlsmith runs one statement at a time: its n-th failed statement is the n-th error in the log
    failed = [i for i, ch in enumerate(progress) if ch in "etS"]
    mapped = len(failed) == len(errors) and len(progress) == len(t.dump) and "C" not in progress
    for k, (code, text) in enumerate(errors):
        t.error(code, text, t.dump[failed[k]] if mapped else None)
    if not mapped:
        t.notes.append(f"the server log's {len(errors)} errors could not be matched to sqlsmith's {len(failed)} "
                       f"failed statements (of {len(progress)})")
    broken = progress.count("C")
    t.crashes = crashes_in(entries)
    t.warnings = fail_warnings_in(entries)
    t.receipts, t.admitted, t.forfeits = ledger_since(mark)
    if sqlsmith_errors is not None and sqlsmith_errors != t.error_count:
        t.notes.append(f"sqlsmith counted {sqlsmith_errors} errors, the server log {t.error_count}")
    if broken:
        t.notes.append(f"sqlsmith lost its connection {broken} times")
    t.expected = count
    report(t)
    return t


def report(t):
    print(t.summary())
    for n in t.notes:
        print(f"sqlsmith: {t.label}: {n}")
    for code, msg, sql in t.unexpected:
        print(f"sqlsmith: {t.label}: note: {code} {msg}" + (f"\n    statement: {one_line(sql)}" if sql else ""))


def one_line(sql, n=600):
    sql = re.sub(r"\s+", " ", sql or "").strip()
    return sql if len(sql) <= n else sql[:n] + " …"


# ----- the mutation step ----------------------------------------------------------------------------

CLAUSE = re.compile(r"(select|from|where|group\s+by|having|window|order\s+by|limit|offset|fetch|"
                    r"for\s+(?:update|share|no\s+key\s+update|key\s+share)|union|intersect|except)\b", re.I)


def clauses(sql, keywords=CLAUSE):
    """The top-level clauses of a statement (outside parentheses and quotes): [(keyword, start, end)]."""
    out, depth, i, n = [], 0, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:
                        j += 2
                        continue
                    break
                j += 1
            i = j + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] in "_.")):
            m = keywords.match(sql, i)
            if m:
                out.append((re.sub(r"\s+", " ", m.group(1).lower()), i, m.end()))
                i = m.end()
                continue
        i += 1
    return out


def split_top(s, sep=","):
    parts, depth, start, i, n = [], 0, 0, 0, len(s)
    while i < n:
        ch = s[i]
        if ch in "'\"":
            j = s.find(ch, i + 1)
            i = n if j < 0 else j + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_select(sql):
    """A SELECT statement of sqlsmith's as {'items', 'from', 'where', 'body'}, or None."""
    cs = clauses(sql)
    if not cs or cs[0][0] != "select" or cs[0][1] != 0:
        return None
    names = [c[0] for c in cs]
    if names.count("select") != 1 or names.count("from") != 1 or set(names) & {"union", "intersect", "except"}:
        return None
    part = {}
    for k, (name, _, end) in enumerate(cs):
        stop = cs[k + 1][1] if k + 1 < len(cs) else len(sql)
        part[name] = sql[end:stop].strip()
    items = part["select"]
    items = re.sub(r"^(distinct|all)\b", "", items.strip(), flags=re.I).strip()
    items = [re.sub(r"\s+as\s+\w+$", "", it, flags=re.I).strip() for it in split_top(items)]
    # the statement without LIMIT, OFFSET and FOR UPDATE: a row source
    ends = [start for name, start, _ in cs if name in ("limit", "offset", "fetch") or name.startswith("for ")]
    body = sql[:min(ends)] if ends else sql
    return {"items": items, "from": part["from"], "where": part.get("where"), "body": body.strip()}


NUMERIC = {21: "int2", 23: "int4", 20: "int8", 700: "float4", 701: "float8", 1700: "numeric"}


def item_types(c, sql):
    """The type OIDs of a statement's result columns, from PostgreSQL's description of it (as postgres:
    the statement is only parsed and analysed, never planned nor run)."""
    pg = c.pgconn
    try:
        r = pg.prepare(b"", sql.encode())
        if r.status != psycopg.pq.ExecStatus.COMMAND_OK:
            return None
        d = pg.describe_prepared(b"")
    except (psycopg.Error, MemoryError):  # libpq returns no result on a lost connection
        return None
    if d.status != psycopg.pq.ExecStatus.COMMAND_OK:
        return None
    return [d.ftype(i) for i in range(d.nfields)]


ALIAS = re.compile(r"\b([a-z]+_\d+)\.")
BASE = re.compile(r"\bpublic\.(" + "|".join(PROTECTED) + r")\s+as\s+([a-z]+_\d+)")
TABLESAMPLE = re.compile(r"\s+tablesample\s+\w+\s*\([^()]*\)(\s+repeatable\s*\([^()]*\))?", re.I)


BOOL_OP = re.compile(r"(and|or|between)\b", re.I)


def depths(s):
    d, out = 0, []
    for ch in s:
        d += (ch == "(") - (ch == ")")
        out.append(d)
    return out


def unwrap(c):
    """c without the parentheses around the whole of it."""
    c = c.strip()
    while c.startswith("(") and c.endswith(")") and min(depths(c[1:-1]) or [0]) >= 0:
        c = c[1:-1].strip()
    return c


def operands(cond):
    """The operands of a condition's top-level ANDs and ORs, and theirs, recursively."""
    cond = unwrap(cond)
    cuts, between = [], False
    for kw, a, b in clauses(cond, BOOL_OP):
        if kw == "between":
            between = True
        elif kw == "and" and between:
            between = False  # x BETWEEN y AND z
        else:
            cuts.append((a, b))
    if not cuts:
        return [cond] if cond else []
    out, start = [], 0
    for a, b in cuts:
        out += operands(cond[start:a])
        start = b
    return out + operands(cond[start:])


def local(expr, alias):
    """Whether expr refers to no other alias than alias (its subqueries' own aliases count as others)."""
    return set(ALIAS.findall(expr)) <= {alias}


def conditions(where, alias, rng):
    """The WHERE, or some of its top-level AND/OR operands, that refer to alias alone."""
    if where is None:
        return None
    if local(where, alias):
        return where
    ok = [p for p in operands(where) if local(p, alias)]
    if not ok:
        return None
    rng.shuffle(ok)
    glue = rng.choice([" and ", " or "])
    return glue.join(f"({p})" for p in ok[:3])


def mutations(stmts, rng, limit, su):
    """DP queries built from sqlsmith's SELECT statements that read a protected table: over the statement's
    own FROM and WHERE, and over one protected table of its FROM with the conditions and select-list items
    that refer to that table alone (its expressions then reach the grammar without the joins, LATERAL
    items and subqueries around them, which pg_dp refuses first). TABLESAMPLE is dropped from some."""
    prot = re.compile(r"\b(public\.)?(" + "|".join(PROTECTED) + r")\b")
    out = []
    stmts = list(stmts)
    rng.shuffle(stmts)
    for sql in stmts:
        if len(out) >= limit:
            break
        if not prot.search(sql):
            continue
        q = parse_select(sql)
        if q is None:
            continue
        types = item_types(su, sql) or []
        typed = list(zip(q["items"], types + [None] * (len(q["items"]) - len(types))))
        frm = q["from"] if rng.random() < 0.5 else TABLESAMPLE.sub("", q["from"])
        where = f"\nwhere {q['where']}" if q["where"] else ""
        # over the statement's own FROM and WHERE
        out.append(("count(*)", f"select dp_count(*)\nfrom {frm}{where}"))
        kinds = ["value", "group by", "row source"] + (["filter"] if q["where"] else [])
        nums = [it for it, t in typed if t in NUMERIC]
        kinds += ["sum"] if nums else []
        kind = rng.choice(kinds)
        item = rng.choice(q["items"]) if q["items"] else "1"
        if kind == "value":
            out.append((kind, f"select dp_count({item})\nfrom {frm}{where}"))
        elif kind == "group by":
            out.append((kind, f"select {item}, dp_count(*)\nfrom {frm}{where}\ngroup by 1"))
        elif kind == "filter":
            out.append((kind, f"select dp_count(*) filter (where {q['where']})\nfrom {frm}"))
        elif kind == "row source":
            out.append((kind, f"select dp_count(*) from (\n{q['body']}) as dp_s"))
        else:
            out.append((kind, f"select dp_sum({rng.choice(nums)}, -100, 100)\nfrom {frm}{where}"))
        # over one protected table of the FROM
        bases = BASE.findall(q["from"])
        if not bases:
            continue
        table, alias = rng.choice(bases)
        src = f"public.{table} as {alias}"
        cond = conditions(q["where"], alias, rng)
        w = f"\nwhere {cond}" if cond else ""
        mine = [(it, t) for it, t in typed if local(it, alias)]
        items = [it for it, _ in mine] or ["1"]
        nums = [it for it, t in mine if t in NUMERIC]
        kinds = ["1 table: count(*)", "1 table: value", "1 table: group by", "1 table: row source"]
        kinds += ["1 table: filter"] if cond else []
        kinds += ["1 table: sum", "1 table: avg", "1 table: median"] if nums else []
        kinds += ["1 table: join"]
        for kind in rng.sample(kinds, min(3, len(kinds))):
            item = rng.choice(items)
            if kind == "1 table: count(*)":
                m = f"select dp_count(*)\nfrom {src}{w}"
            elif kind == "1 table: value":
                m = f"select dp_count({item})\nfrom {src}{w}"
            elif kind == "1 table: group by":
                m = f"select {item}, dp_count(*)\nfrom {src}{w}\ngroup by 1"
            elif kind == "1 table: row source":
                m = f"select dp_count(*) from (\nselect {', '.join(items)}\nfrom {src}{w}) as dp_s"
            elif kind == "1 table: filter":
                m = f"select dp_count(*) filter (where {cond})\nfrom {src}"
            elif kind == "1 table: join":  # many-to-one with the public table, grouped by its column
                m = (f"select dp_r.climate, dp_count(*), dp_count({item})\nfrom {src} join public.regions as dp_r "
                     f"on dp_r.id = {alias}.region_id{w}\ngroup by dp_r.climate")
            elif kind == "1 table: median":
                m = f"select dp_median({rng.choice(nums)}, -100, 100, 0.1)\nfrom {src}{w}"
            elif kind == "1 table: sum":
                m = f"select dp_sum({rng.choice(nums)}, -100, 100)\nfrom {src}{w}"
            else:
                m = f"select dp_avg({rng.choice(nums)}, 0, 1000, 0.1)\nfrom {src}{w}"
            out.append((kind, m))
    seen, unique = set(), []
    for kind, m in out:
        if m not in seen:
            seen.add(m)
            unique.append((kind, m))
    return unique[:limit]


class Analyst:
    """smith's connection for the mutated statements; reconnects after a lost connection."""

    def __init__(self):
        self.conn = None
        self.notices = []

    def open(self, wait=60):
        deadline = time.time() + wait
        while True:
            try:
                self.conn = connect(ROLE)
                break
            except psycopg.OperationalError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        self.conn.add_notice_handler(lambda d: self.notices.append(
            (d.severity, d.message_primary or "", d.message_detail or "")))

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def run(self, sql):
        """('ok', None, None) or ('error' | 'crash', SQLSTATE, message)."""
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.open()
        try:
            cur = self.conn.execute(sql)
            if cur.description is not None:
                try:
                    cur.fetchall()
                except (NotImplementedError, psycopg.DataError):
                    pass  # the server answered; psycopg cannot load a value (a date past year 9999, say)
            return ("ok", None, None)
        except psycopg.Error as e:
            if self.conn.broken or self.conn.closed or isinstance(e, (psycopg.errors.AdminShutdown,
                                                                      psycopg.errors.CrashShutdown)):
                self.close()
                return ("crash", e.sqlstate, str(e).strip())
            return ("error", e.sqlstate, e.diag.message_primary or str(e))


def run_mutations(label, stmts, limit):
    t = Tally(label)
    rng = random.Random(ARGS.seed)
    with connect() as su:
        # most of sqlsmith's statements do not even parse: keep them out of the server log
        su.execute("SET log_min_messages = fatal")
        su.execute("SET log_min_error_statement = panic")
        muts = mutations(stmts, rng, limit, su)
    t.kinds = collections.Counter(k for k, _ in muts)
    t.admitted_by_kind = collections.Counter()
    t.failures = []
    mark, offset, t0 = ledger_mark(), log_offset(), time.time()
    a = Analyst()
    try:
        for kind, sql in muts:
            a.notices = []
            out = a.run(sql)
            if out[0] == "error" and out[1] == "53000":  # the budget ran out (a forfeit?): a new period
                regrant()
                a.notices = []
                out = a.run(sql)
            t.statements += 1
            if out[0] == "ok":
                t.admitted_by_kind[kind] += 1
            else:
                t.error(out[1], out[2], sql)
            warned = [n for n in a.notices if FAIL_WARNING in n[1]]
            if warned or out[0] == "crash":
                t.failures.append((sql, out, warned))
                if out[0] == "crash":
                    t.crashes.append(f"{one_line(out[2])} (after: {one_line(sql)})")
    finally:
        a.close()
    t.elapsed = time.time() - t0
    entries = log_entries(offset)
    t.crashes += crashes_in(entries)
    t.warnings = fail_warnings_in(entries)
    t.receipts, t.admitted, t.forfeits = ledger_since(mark)
    t.expected = len(muts)
    report(t)
    print(f"sqlsmith: {label}: by kind (admitted/run): " +
          ", ".join(f"{k} {t.admitted_by_kind[k]}/{n}" for k, n in t.kinds.most_common()))
    return t


# ----- the campaign ---------------------------------------------------------------------------------

class Campaign:
    def __init__(self):
        self.phases, self.error, self.elapsed = [], None, 0.0
        self.log_start = log_offset()


def grant_views(grant):
    views = ", ".join("dpviews." + v for v in VIEWS)
    with connect() as c:
        c.execute(f"GRANT SELECT ON {views} TO {ROLE}" if grant else f"REVOKE SELECT ON {views} FROM {ROLE}")


@functools.lru_cache(maxsize=None)
def campaign():
    """Runs everything once; the checks read its results."""
    r = Campaign()
    n = ARGS.queries
    t0 = time.time()
    try:
        with tempfile.TemporaryDirectory(prefix="pg_dp_sqlsmith.") as work:
            ensure_sqlsmith()
            tables = run_sqlsmith("tables", ARGS.seed, n, True, work)
            r.phases.append(tables)
            regrant()  # a forfeit (reported by check_4) leaves nothing for the next runs
            grant_views(True)
            try:
                views = run_sqlsmith("views", ARGS.seed + 1, max(n // 2, 1), True, work)
            finally:
                grant_views(False)
            r.phases.append(views)
            regrant()
            r.phases.append(run_sqlsmith("catalog", ARGS.seed + 2, max(n // 5, 1), False, work))
            regrant()
            r.phases.append(run_mutations("mutated", tables.dump + views.dump, ARGS.mutations))
    except Exception as e:  # noqa: BLE001 (reported by the checks)
        r.error = e
        print(f"sqlsmith: the campaign stopped: {type(e).__name__}: {e}")
    r.elapsed = time.time() - t0
    sm = [p for p in r.phases if p.label != "mutated"]
    if sm:
        total = Tally("all sqlsmith runs")
        msgs = collections.Counter()
        for p in sm:
            total.statements += p.statements
            total.errors.update(p.errors)
            total.classes.update(p.classes)
            total.admitted += p.admitted
            total.receipts += p.receipts
            total.forfeits += p.forfeits
            total.warnings += p.warnings
            total.crashes += p.crashes
            total.elapsed += p.elapsed
            msgs.update(p.messages)
        print(total.summary())
        print("sqlsmith: the most frequent errors of the sqlsmith runs:")
        for (cat, code, msg), k in msgs.most_common(8):
            print(f"  {k:6} {cat:10} {code} {msg}")
    print(f"sqlsmith: seed {ARGS.seed}, {n} statements asked of sqlsmith's main run, {r.elapsed:.1f}s in all")
    return r


def phases():
    r = campaign()
    if r.error is not None:
        raise AssertionError(f"the campaign stopped: {type(r.error).__name__}: {r.error}") from r.error
    return {p.label: p for p in r.phases}


# ----- the checks -----------------------------------------------------------------------------------

MIN_STATEMENTS = 1000


def check_1_sqlsmith_ran_every_statement_it_was_asked_for():
    ps = phases()
    for p in ps.values():
        if p.label == "mutated":
            continue
        assert p.rc == 0, f"{p.label}: sqlsmith exited with {p.rc}:\n{p.stderr_tail}"
        assert p.statements == p.expected, \
            f"{p.label}: sqlsmith ran {p.statements} statements of {p.expected}:\n{p.stderr_tail}"
        assert len(p.dump) == p.expected, f"{p.label}: sqlsmith dumped {len(p.dump)} statements of {p.expected}"
        # the server log has its errors: else the counts below would mean nothing
        assert p.error_count > 0, f"{p.label}: none of sqlsmith's errors is in the server log"
    total = sum(p.statements for p in ps.values() if p.label != "mutated")
    assert total >= min(MIN_STATEMENTS, ARGS.queries), f"sqlsmith ran {total} statements in all"


def check_2_the_statements_reached_pg_dps_grammar():
    ps = phases()
    tables, views, m = ps["tables"], ps["views"], ps["mutated"]
    # the protected tables are in sqlsmith's schema: it reads them, and pg_dp refuses
    assert tables.errors["refused"] >= max(1, tables.statements // 100), tables.summary()
    # around the DBA's DP views, some of its statements are admitted and charged
    if views.statements >= 1000:
        assert views.admitted >= 1, views.summary()
    # the mutated statements: many refused, many admitted, and each admitted one has its receipts
    assert m.statements >= min(ARGS.mutations, 100), m.summary()
    assert m.errors["refused"] >= max(1, m.statements // 20), m.summary()
    assert m.admitted >= max(1, m.statements // 50), m.summary()
    # and every one that ran was charged (a statement with a DP aggregate releases nothing unpaid)
    ran = sum(m.admitted_by_kind.values())
    assert ran <= m.admitted, f"{ran} mutated statements ran, {m.admitted} executions wrote receipts"


def check_3_the_server_did_not_crash():
    r = campaign()
    crashes = crashes_in(log_entries(r.log_start))
    crashes += [f"{p.label}: {c}" for p in r.phases for c in p.crashes if "after:" in c]
    assert not crashes, "the server crashed:\n" + "\n".join(crashes[:REPORT_MAX])
    with connect(ROLE) as c:
        assert c.execute("SELECT 1").fetchone()[0] == 1


def check_4_no_error_inside_an_admitted_level():
    r = campaign()
    lines = fail_warnings_in(log_entries(r.log_start))
    with connect() as c:
        forfeits = c.execute("SELECT id, role_name, details->'forfeit'->>'sqlstate', query_text FROM dp.ledger "
                             "WHERE mechanism = 'forfeit' ORDER BY id").fetchall()
    for fid, role, code, text in forfeits:
        lines.append(f"forfeit receipt {fid} (role {role}, SQLSTATE {code}), statement:\n    {one_line(text, 4000)}")
    for p in r.phases:
        for sql, out, warned in getattr(p, "failures", []):
            if warned:
                lines.append(f"{p.label}: {out[1]} {out[2]}, statement:\n    {one_line(sql, 4000)}")
    assert not lines, ("errors inside admitted DP levels (pg_dp's fail-closed rule):\n" +
                       "\n".join(lines[:3 * REPORT_MAX]))


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ap.add_argument("--datadir", required=True, help="the cluster's data directory, which holds server.log")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--queries", type=int, default=10000, help="statements of sqlsmith's main run (the views "
                    "run gets half as many, the catalog run a fifth)")
    ap.add_argument("--mutations", type=int, default=15000, help="at most this many mutated statements")
    ARGS = ap.parse_args()
    setup()
    run_checks(globals(), "sqlsmith")


if __name__ == "__main__":
    main()

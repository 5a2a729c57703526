#!/usr/bin/env python3
"""The grammar's totality claim, tried with every value of every type: nothing the DP query grammar
admits below a DP aggregate (WHERE, JOIN ON, FILTER, GROUP BY keys, HAVING conditions without an
aggregate, the aggregated values, the select lists and ORDER BY of row sources in FROM) may raise an
error at run time for any stored value. An error that depends on the data answers a question about
one person for almost no ε: `CASE WHEN <fact about one person> THEN ARRAY[t.a, ARRAY[1, 2]] END`
raises "multidimensional arrays must have array expressions with matching dimensions" only if the
fact is true.

A seeded generator writes typed expressions over the grammar's own constructs (and over constructs it
refuses: casts that can fail, date and interval arithmetic, functions, COLLATE; and arithmetic on
numbers, which it makes total), nested a few levels, and places them
everywhere the grammar allows, sometimes behind `CASE WHEN t.id = 1000001 THEN … END`, where 1000001
is the id of one adversarial row. Queries read the protected table directly or through row sources
(nested up to two deep), joined or not to a public table with text columns of other collations (pub,
the DBA's, or mine, the analyst's own copy), over t (one row per person) or tu (the same rows with a
privacy unit), under session settings the analyst chooses (TimeZone, DateStyle, IntervalStyle,
extra_float_digits). A few hand-written probes (PROBES), one per hole found so far, run first.

Each query is previewed (dp.preview: the grammar's verdict, without running it) and run by a DP-only
role against two protected tables that differ by that one row: a.t, which holds ordinary and extreme
rows, and one of b.t, c.t, … = a.t plus one adversarial row (NULL everywhere, NaN and infinities, the
largest and smallest values, long strings, arrays of 6 dimensions, …); query i uses pair i mod K. The
query text is the same, only search_path differs (schema names of one letter: pg_dp's receipts name
the table, and a charge request has a size limit). A query fails the test if it was admitted and
raised an error on either table, if the two runs differ in error versus success or in their error,
if a run logged pg_dp's fail-closed warning "an error inside an admitted DP level", or if the server
crashed. An admitted query that raises the same error on an empty table too (a constant expression
that fails while planning, such as `7::int2 / 0::int2`) depends on its text alone: it is counted, not
failed.

Run by hand against a server with pg_dp preloaded (3000 queries take about 10 s on 2 cores):
    /usr/bin/python3 tests/client/test_totality.py --host /tmp --port 25433 [--seed N] [--queries N]
        [--jobs N] [--huge]
Prints the counts, the coverage of the admitted queries (node kind × type), one line per check and
"totality: N passed, M failed"; exits non-zero on any failure. PG_DP_CHECKS=word runs only some checks
(the queries run once, for the first check that needs them).
"""
import argparse
import collections
import functools
import queue
import random
import re
import threading
import time

import psycopg

from harness import run_checks

ARGS = None
DB = "pg_dp_totality"
ANALYST = "dp_t_analyst"
SECRET = 1000001
EPS = "0.001"
FAIL_WARNING = "pg_dp: an error inside an admitted DP level"
REPORT_MAX = 20

# ----- the fixture ----------------------------------------------------------------------------------

# name, SQL type, the generator's type, collation label (text types)
COLUMNS = [
    ("id", "int PRIMARY KEY", "int4", None),
    ("k", "int", "int4", None),
    ("i2", "int2", "int2", None),
    ("i4", "int4", "int4", None),
    ("i8", "int8", "int8", None),
    ("f4", "float4", "float4", None),
    ("f8", "float8", "float8", None),
    ("num", "numeric", "numeric", None),
    ("tc", 'text COLLATE "C"', "text", "C"),
    ("tp", 'text COLLATE "POSIX"', "text", "POSIX"),
    ("ti", 'text COLLATE "und-x-icu"', "text", "und-icu"),
    ("tn", "text COLLATE public.nd", "text", "nd"),
    ("td", "text", "text", "default"),
    ("vc", "varchar(10)", "varchar", "default"),
    ("bp", "char(5)", "bpchar", "default"),
    ("b", "bool", "bool", None),
    ("d", "date", "date", None),
    ("ts", "timestamp", "timestamp", None),
    ("tz", "timestamptz", "timestamptz", None),
    ("iv", "interval", "interval", None),
    ("tm", "time", "time", None),
    ("u", "uuid", "uuid", None),
    ("en", "public.mood", "mood", None),
    ("di", "public.posint", "posint", None),
    ("dt", "public.shorttext", "shorttext", "default"),
    ("nm", "name", "name", "C"),
    ("bc", 'char(5) COLLATE "C"', "bpchar", "C"),
    ("vp", 'varchar(10) COLLATE "POSIX"', "varchar", "POSIX"),
    ("dpx", "public.ptext", "ptext", "POSIX"),
    ("ia", "int[]", "int4[]", None),
    ("ta", "text[]", "text[]", "default"),
    ("tac", 'text[] COLLATE "C"', "text[]", "C"),
    ("tap", 'text[] COLLATE "POSIX"', "text[]", "POSIX"),
    ("j", "jsonb", "jsonb", None),
]
COLNAMES = [c[0] for c in COLUMNS]

# the public tables: pub (the DBA's, read-only to the analyst) and mine (the analyst's own copy), with
# text columns of other collations than t's and keys to join on
PUB_COLUMNS = [
    ("id", "int PRIMARY KEY", "int4", None),
    ("name", 'text COLLATE "POSIX" UNIQUE', "text", "POSIX"),
    ("pe", 'text COLLATE "en-x-icu"', "text", "en-icu"),
    ("ptr", 'text COLLATE "tr-x-icu"', "text", "tr-icu"),
    ("pu", 'text COLLATE "ucs_basic"', "text", "ucs_basic"),
    ("pn", "int", "int4", None),
    ("pf", "float8", "float8", None),
    ("pd", "date", "date", None),
    ("pts", "timestamp", "timestamp", None),
    ("ptz", "timestamptz", "timestamptz", None),
    ("pb", "bool", "bool", None),
    ("pbp", 'char(5) COLLATE "en-x-icu"', "bpchar", "en-icu"),
    ("pnm", "name", "name", "C"),
    ("pta", 'text[] COLLATE "tr-x-icu"', "text[]", "tr-icu"),
]
PUB_ROWS = [
    "(0, 'name0', 'İstanbul', 'ıIiİ', 'x', 0, 'NaN', 'infinity', '-infinity', 'infinity', true, 'İ', 'name0', "
    "'{İ,ı}')",
    "(1, 'name1', 'ß', 'İ', '', 1, 1.5, '2020-01-02', '2020-01-02 03:04', '2020-01-02 03:04+00', false, 'b1', 'nm1', "
    "'{a1,NULL}')",
    "(2, 'name2', '', 'i', 'name2', -2147483648, '-Infinity', '5874897-12-31', '294276-12-31 23:59:59.999999', "
    "'294276-12-31 23:59:59.999999+00', NULL, '', '', '{}')",
    "(3, 'name3', NULL, NULL, NULL, NULL, NULL, '4714-11-24 BC', '4714-11-24 00:00 BC', '4714-11-24 00:00+00 BC', true, "
    "NULL, NULL, NULL)",
    "(4, 'NAME4', 'a%b_c\\', 'ǅ', 'x', 2147483647, 5e-324, '2000-02-29', '2000-02-29 12:00', '2000-02-29 12:00+00', false, "
    "'ß', 'NAME4', '{{x,y},{z,w}}')",
]

LONG = 100_000


def ordinary(g):
    """The SQL values of the ordinary row g (g an SQL expression)."""
    return {
        "id": f"{g}", "k": f"({g}) % 5", "i2": f"({g})::int2", "i4": f"({g}) * 1000", "i8": f"({g}) * 100000000000::int8",
        "f4": f"({g}) / 3.0", "f8": f"({g}) * 1.5", "num": f"({g}) * 1.25", "tc": f"'name' || ({g})",
        "tp": f"'Name' || ({g})", "ti": f"'näme' || ({g})", "tn": f"'NAME' || ({g})", "td": f"'n' || ({g})",
        "vc": f"'v' || ({g})", "bp": f"'c' || (({g}) % 10)", "b": f"({g}) % 2 = 0",
        "d": f"date '2020-01-01' + ({g})", "ts": f"timestamp '2020-01-01' + ({g}) * interval '1 hour'",
        "tz": f"timestamptz '2020-01-01 00:00+00' + ({g}) * interval '1 day'", "iv": f"({g}) * interval '1 hour'",
        "tm": f"time '00:00' + ({g}) * interval '1 minute'", "u": f"md5(({g})::text)::uuid",
        "en": f"(ARRAY['sad', 'ok', 'happy'])[1 + ({g}) % 3]::mood", "di": f"{g}", "dt": f"'d' || ({g})",
        "nm": f"'nm' || ({g})", "bc": f"'b' || (({g}) % 10)", "vp": f"'vp' || ({g})", "dpx": f"'x' || ({g})",
        "ia": f"ARRAY[{g}, ({g}) + 1]", "ta": f"ARRAY['a' || ({g}), NULL]", "tac": f"ARRAY['c' || ({g})]",
        "tap": f"ARRAY['p' || ({g}), 'P']", "j": f"jsonb_build_object('g', {g})",
    }


NAN = {"f4": "'NaN'", "f8": "'NaN'", "num": "'NaN'", "d": "'infinity'", "ts": "'infinity'", "tz": "'infinity'",
       "j": "'[1e1000, -1e-1000]'"}
INF = {"i2": "32767", "i4": "2147483647", "i8": "9223372036854775807", "f4": "'Infinity'", "f8": "'Infinity'",
       "num": "'Infinity'", "d": "'infinity'", "ts": "'infinity'", "tz": "'infinity'", "tm": "'24:00'",
       "u": "'ffffffff-ffff-ffff-ffff-ffffffffffff'", "di": "2147483647", "en": "'happy'"}
NEG_INF = {"i2": "-32768", "i4": "-2147483648", "i8": "-9223372036854775808", "f4": "'-Infinity'", "f8": "'-Infinity'",
           "num": "'-Infinity'", "d": "'-infinity'", "ts": "'-infinity'", "tz": "'-infinity'", "tm": "'00:00'",
           "u": "'00000000-0000-0000-0000-000000000000'", "di": "1", "en": "'sad'", "k": "-2147483648"}
INTERVAL_MAX = "'178956970 years 7 months 2147483647 days 2562047788:00:54.775807'"
INTERVAL_MIN = "'-178956970 years -8 months -2147483648 days -2562047788:00:54.775807'"
MAX = dict(INF, f4="'3.4028235e38'", f8="'1.7976931348623157e308'", num="repeat('9', 131072)::numeric",
           d="'5874897-12-31'", ts="'294276-12-31 23:59:59.999999'", tz="'294276-12-31 23:59:59.999999+00'",
           iv=INTERVAL_MAX, k="2147483647")
MIN = dict(NEG_INF, f4="'-3.4028235e38'", f8="'-1.7976931348623157e308'", num="('-' || repeat('9', 131072))::numeric",
           d="'4714-11-24 BC'", ts="'4714-11-24 00:00 BC'", tz="'4714-11-24 00:00+00 BC'", iv=INTERVAL_MIN)
TINY = {"f4": "'1e-45'", "f8": "'5e-324'", "num": "'1e-16383'", "i2": "1", "i4": "-1", "i8": "1",
        "iv": "'1 microsecond'", "tm": "'00:00:00.000001'"}
ZERO = {"i2": "0", "i4": "0", "i8": "0", "f4": "'-0'", "f8": "'-0'", "num": "0", "k": "0", "iv": "'0'",
        "tc": "''", "tp": "''", "ti": "''", "tn": "''", "td": "''", "vc": "''", "bp": "''", "dt": "''",
        "nm": "''", "bc": "''", "vp": "''", "dpx": "''", "ia": "'{}'", "ta": "'{}'", "tac": "'{}'", "tap": "'{}'",
        "j": "'{}'", "b": "false"}


def long_strings(n):
    return {"tc": f"repeat('x', {n})", "tp": f"repeat('X', {n})", "ti": f"repeat('ß', {n})", "tn": f"repeat('İ', {n})",
            "td": f"repeat('%', {n})", "dt": f"repeat('d', {n})", "vc": "repeat('v', 10)", "bp": "'bbbbb'",
            "ta": f"ARRAY[repeat('y', {n}), '']", "j": f"to_jsonb(repeat('j', {n}))", "nm": f"repeat('n', {n})",
            "bc": "'ccccc'", "vp": "repeat('w', 10)", "dpx": f"repeat('z', {n})", "tac": f"ARRAY[repeat('c', {n})]",
            "tap": f"ARRAY[repeat('p', {n}), repeat('P', {n})]",
            "ia": "(SELECT array_agg(g) FROM generate_series(1, 10000) g)"}


SPECIAL = {"tc": r"'a%b_c\'", "tp": "'ǅǆǄ'", "ti": "'İıiI' || chr(1114111) || chr(57344)", "tn": "'straße'",
           "td": r"'\\%_' || chr(1114111) || chr(917631) || '😀'", "dt": "'é'",
           "vc": r"'%\_'", "bp": "'İ'", "ta": r"ARRAY['\', NULL, '']", "j": "'\"\\u00e9\"'",
           "u": "'00000000-0000-0000-0000-000000000001'", "nm": "'İ'", "bc": "'ß'", "vp": "'ǅ'", "dpx": r"'\'",
           "tac": "ARRAY['İ', 'ı']", "tap": "ARRAY['ß', 'SS']"}
ARRAYS2 = {"ia": "'{{1,2},{3,4}}'", "ta": "'{{a,b},{c,d}}'", "tac": "'{{a},{b}}'"}
ARRAYS3 = {"ia": "'{{{1,2},{3,4}},{{5,6},{7,8}}}'", "ta": "'{{{a}},{{b}}}'", "tap": "'{{{a,b}}}'"}
ARRAYS_LB = {"ia": "'[-5:-3]={1,NULL,3}'", "ta": "'[2:3]={NULL,NULL}'", "tac": "'[0:0]={x}'"}
ARRAYS6 = {"ia": "'{{{{{{1,2}}}}}}'", "ta": "'{{{{{{a}}}}}}'", "tac": "'{{{{{{a}}}}}}'", "tap": "'{{{{{{b}}}}}}'"}

# the extreme rows of a.t (ids 101…), on top of ordinary values
A_EXTREMES = [None, NAN, INF, NEG_INF, MAX, MIN, TINY, ZERO, long_strings(LONG), SPECIAL, ARRAYS2, ARRAYS3,
              ARRAYS_LB]
# the adversarial rows: b.t, c.t, … = a.t + one of these, with id 1000001, over the ordinary values of row g:
# the same privacy unit (t.u) as a.t's extreme row of the same kind, so that a unit holds two
# extreme rows
ADVERSARIAL = [
    ("nulls", None, 7),
    ("nan_inf", dict(INF, **NAN), 8),
    ("max", MAX, 11),
    ("min", MIN, 12),
    ("long", long_strings(10 * LONG), 15),
    ("arrays6", dict(ARRAYS6, ta="'{{{{a}}}}'"), 18),
    ("special", dict(SPECIAL, **TINY), 16),
    ("empty", ZERO, 14),
    ("ordinary", {}, 20),
]
# --huge: a string of 300 MB (about 1 s to write, and to read in each query that reads it): ILIKE under a
# collation of libc other than C lowercases it through a buffer of 4 bytes per character, past the
# 1 GB that one allocation may take
HUGE = ("huge", {"td": "repeat('x', 300000000)"}, 20)
K = len(ADVERSARIAL)


EMPTY = "z"  # the schema of an empty copy of t


def pair_schema(k):
    """The schema of the table of pair k (1…K): b, c, …"""
    return chr(ord("a") + k)


def row_sql(table, rid, override, g):
    """INSERT of one row: the ordinary row g with `override`'s values (None: NULL everywhere)."""
    if override is None:
        return f"INSERT INTO {table} (id) VALUES ({rid})"
    vals = ordinary(g)
    vals.update(override)
    vals["id"] = str(rid)
    return f"INSERT INTO {table} ({', '.join(COLNAMES)}) VALUES ({', '.join(vals[c] for c in COLNAMES)})"


def connect(user="postgres", dbname=DB, options=None):
    return psycopg.connect(host=ARGS.host, port=ARGS.port, dbname=dbname, user=user, autocommit=True,
                           options=options)


def setup():
    with connect(dbname="postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
        c.execute(f"DROP ROLE IF EXISTS {ANALYST}")
        c.execute(f"CREATE ROLE {ANALYST} LOGIN")
        c.execute(f"ALTER DATABASE {DB} SET dp.release_cache = off")
    with connect() as c:
        c.execute("CREATE EXTENSION pg_dp")
        c.execute("CREATE COLLATION public.nd (provider = icu, locale = 'und-u-ks-level2', deterministic = false)")
        c.execute("CREATE TYPE public.mood AS ENUM ('sad', 'ok', 'happy')")
        c.execute("CREATE DOMAIN public.posint AS int CHECK (VALUE > 0)")
        c.execute("CREATE DOMAIN public.shorttext AS text CHECK (length(VALUE) <= 2000000)")
        c.execute('CREATE DOMAIN public.ptext AS text COLLATE "POSIX"')
        schemas = ["a", EMPTY] + [pair_schema(k) for k in range(1, K + 1)]
        for s in schemas:
            c.execute(f"CREATE SCHEMA {s}")
            c.execute(f"GRANT USAGE ON SCHEMA {s} TO {ANALYST}")
        c.execute(f"CREATE TABLE a.t ({', '.join(n + ' ' + t for n, t, _, _ in COLUMNS)})")
        c.execute(f"INSERT INTO a.t ({', '.join(COLNAMES)}) SELECT {', '.join(ordinary('g').values())} "
                  "FROM generate_series(1, 30) g")
        for i, extreme in enumerate(A_EXTREMES):
            c.execute(row_sql("a.t", 101 + i, extreme, 7 + i))
        c.execute(f"CREATE TABLE {EMPTY}.t (LIKE a.t INCLUDING ALL)")
        for k, (_, row, g) in enumerate(ADVERSARIAL, 1):
            c.execute(f"CREATE TABLE {pair_schema(k)}.t (LIKE a.t INCLUDING ALL)")
            c.execute(f"INSERT INTO {pair_schema(k)}.t SELECT * FROM a.t")
            # k = 1: the adversarial row joins a row of the public table
            c.execute(row_sql(f"{pair_schema(k)}.t", SECRET, None if row is None else dict(row, k="1"), g))
        for s in schemas:
            # tu: the same rows, protected with a privacy unit (u; NULL in the row of NULLs)
            c.execute(f"CREATE TABLE {s}.tu (LIKE {s}.t INCLUDING ALL)")
            c.execute(f"INSERT INTO {s}.tu SELECT * FROM {s}.t")
            for tbl in ("t", "tu"):
                c.execute(f"ANALYZE {s}.{tbl}")
                if tbl == "t":
                    c.execute(f"SELECT dp.protect_table('{s}.t')")
                else:
                    c.execute(f"SELECT dp.protect_table('{s}.tu', 'u')")
                for col, (lo, hi) in DECLARED_BOUNDS.items():
                    c.execute(f"SELECT dp.set_bounds('{s}.{tbl}', '{col}', {lo}, {hi})")
                for col, vals in DECLARED_DOMAINS.items():
                    c.execute(f"SELECT dp.set_domain('{s}.{tbl}', '{col}', {vals})")
        # a public table the analyst reads (and cannot write), with other collations than t's
        c.execute(f"CREATE TABLE public.pub ({', '.join(n + ' ' + t for n, t, _, _ in PUB_COLUMNS)})")
        c.execute(f"INSERT INTO public.pub VALUES {', '.join(PUB_ROWS)}")
        c.execute(f"GRANT SELECT ON public.pub TO {ANALYST}")
        # the analyst's own schema, for its own copy of it
        c.execute(f"CREATE SCHEMA an AUTHORIZATION {ANALYST}")
        for _ in range(3):
            c.execute(f"SELECT dp.grant_budget('{ANALYST}', 1e6, 0.1)")
    with connect(ANALYST) as c:
        c.execute(f"CREATE TABLE an.mine ({', '.join(n + ' ' + t for n, t, _, _ in PUB_COLUMNS)})")
        c.execute(f"INSERT INTO an.mine VALUES {', '.join(PUB_ROWS)}")
        # a DP-only role: no SELECT on the protected tables
        assert not c.execute("SELECT has_table_privilege('a.t', 'SELECT')").fetchone()[0]


# ----- the generator --------------------------------------------------------------------------------

NUMERIC = ["int2", "int4", "int8", "float4", "float8", "numeric"]
INTS = ["int2", "int4", "int8"]
TEXTISH = ["text", "varchar", "bpchar", "shorttext", "name", "ptext"]
DATETIME = ["date", "timestamp", "timestamptz"]
ALL_TYPES = NUMERIC + TEXTISH + ["bool"] + DATETIME + ["interval", "time", "uuid", "mood", "posint", "int4[]",
                                                         "text[]", "jsonb"]
# comparison families: the first ones are the grammar's comparable types, the last ones are not
FAMILIES = [
    (NUMERIC + ["posint"], 6), (TEXTISH, 6), (DATETIME, 4), (["interval"], 1), (["time"], 1), (["uuid"], 1),
    (["bool"], 1), (["mood"], 0.5), (["int4[]"], 0.4), (["text[]"], 0.3), (["jsonb"], 0.4),
]
SQLTYPE = {"int4[]": "int[]", "text[]": "text[]", "posint": "posint", "shorttext": "shorttext", "mood": "mood",
           "ptext": "ptext"}
ELEMENT = {"int4[]": "int4", "text[]": "text"}

LIT = {
    "int2": ["0::int2", "1::int2", "'-1'::int2", "32767::int2", "'-32768'::int2", "7::int2", "NULL::int2"],
    "int4": ["0", "1", "-1", "42", "2147483647", "'-2147483648'::int4", "NULL::int4"],
    "int8": ["0::int8", "9223372036854775807", "'-9223372036854775808'::int8", "3000000000", "NULL::int8"],
    "float4": ["'NaN'::float4", "'Infinity'::float4", "'-Infinity'::float4", "'3.4028235e38'::float4",
               "'1e-45'::float4", "1.5::float4", "'-0'::float4", "NULL::float4"],
    "float8": ["'NaN'::float8", "'Infinity'::float8", "'-Infinity'::float8", "'1.7976931348623157e308'::float8",
               "'5e-324'::float8", "2.5::float8", "'-0'::float8", "NULL::float8"],
    "numeric": ["'NaN'::numeric", "'Infinity'::numeric", "'-Infinity'::numeric", "1.5", "0.0", "1e100",
                "123456789012345678901234567890.123", "'1e-1000'::numeric", "NULL::numeric"],
    "text": ["'abc'", "''", "'name1'", "'ß'", "'İ'", r"'%_\'", "'x'", "NULL::text", "'NAME4'"],
    "varchar": ["'abc'::varchar", "'v1'::varchar", "''::varchar"],
    "bpchar": ["'c1'::char(5)", "' '::char(1)", "'İ'::char(2)"],
    "shorttext": ["'d1'", "''"],
    "name": ["'nm1'::name", "'İ'::name", "''::name"],
    "ptext": ["'x1'", "'ß'", "'x'::ptext"],
    "bool": ["true", "false", "NULL::bool"],
    "date": ["'2020-01-05'::date", "'infinity'::date", "'-infinity'::date", "'5874897-12-31'::date",
             "'4714-11-24 BC'::date", "NULL::date"],
    "timestamp": ["'2020-01-01 05:00'::timestamp", "'infinity'::timestamp", "'-infinity'::timestamp",
                  "'294276-12-31 23:59:59.999999'::timestamp", "'4714-11-24 00:00 BC'::timestamp"],
    "timestamptz": ["'2020-01-01 05:00+00'::timestamptz", "'infinity'::timestamptz", "'-infinity'::timestamptz",
                    "'294276-12-31 23:59:59.999999+00'::timestamptz", "'4714-11-24 00:00+00 BC'::timestamptz"],
    "interval": ["'1 day'::interval", f"{INTERVAL_MAX}::interval", f"{INTERVAL_MIN}::interval", "'0'::interval"],
    "time": ["'00:00'::time", "'24:00'::time", "'12:34:56.789'::time"],
    "uuid": ["'00000000-0000-0000-0000-000000000000'::uuid", "'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid"],
    "mood": ["'sad'::mood", "'happy'::mood"],
    "posint": ["5", "1", "5::posint"],
    "int4[]": ["ARRAY[1, 2]", "'{}'::int[]", "'{{1,2},{3,4}}'::int[]", "'[0:1]={1,2}'::int[]", "'{{{1}}}'::int[]",
               "NULL::int[]"],
    "text[]": ["ARRAY['a', 'b']", "'{}'::text[]", "'{{a,b},{c,d}}'::text[]", "'{NULL}'::text[]"],
    "jsonb": ["'{\"a\": 1}'::jsonb", "'null'::jsonb", "'[]'::jsonb"],
}
LIKE_PATTERNS = ["'a%'", "'%'", "''", r"'%\%%'", r"'\_x%'", "'_'", "'%ß%'", "'%İ%'", "'%i%'", "'%x%x%x%'",
                 "'name1_'", "'%_%_%_%'", "'N%'", "'%ss%'", r"'\\%'", "'ǅ%'"]
# a trailing escape (an error whatever the data) and ESCAPE clauses (not a literal pattern)
BAD_LIKE_PATTERNS = [r"'a\'", "'%' ESCAPE ''", "'a#%%' ESCAPE '#'", r"'%\\\'"]
DIVISORS = ["2", "3", "7", "10", "1000", "1", "-2", "-7", "32767", "2147483647", "-2147483648"]
BAD_DIVISORS = ["0", "-1"]
COLLATIONS = ['"C"', '"POSIX"', '"und-x-icu"', "nd", '"default"', '"en-x-icu"', '"tr-x-icu"', '"ucs_basic"']
CMP = ["=", "<>", "<", "<=", ">", ">="]

# casts that cannot fail (the grammar's TOTAL_CASTS and the casts to text), by target
TOTAL_CAST_FROM = {
    "int4": ["int2", "bool", "posint"], "int8": ["int2", "int4"], "numeric": ["int2", "int4", "int8", "float4", "float8"],
    "float8": ["int2", "int4", "int8", "float4"], "float4": ["int2", "int4", "int8"], "bool": ["int4"],
    "text": NUMERIC + ["bpchar", "varchar", "name", "bool", "date", "timestamp", "timestamptz", "interval", "time",
                       "uuid"],
    "varchar": ["int4", "date", "text"],
}
# casts that can fail for some value, or go through a type the grammar does not know
PARTIAL_CAST_FROM = {
    "int2": ["int4", "int8", "float8", "numeric", "text"], "int4": ["int8", "float4", "float8", "numeric", "text"],
    "int8": ["float8", "numeric", "text"], "float4": ["float8", "numeric", "text"], "float8": ["numeric", "text"],
    "numeric": ["text"], "date": ["timestamp", "timestamptz", "text"], "timestamp": ["date", "timestamptz", "text"],
    "timestamptz": ["date", "timestamp", "text"], "interval": ["text", "time"], "time": ["timestamp", "interval"],
    "uuid": ["text"], "mood": ["text"], "posint": ["int4", "int8"], "shorttext": ["text"], "name": ["text"],
    "ptext": ["text"], "text": ["mood", "int4[]", "jsonb", "text[]"],
    "int4[]": ["text[]", "text"], "text[]": ["int4[]", "text"], "jsonb": ["text"], "bool": ["text"],
    "varchar": ["text"], "bpchar": ["text"],
}


class Ex:
    """A generated expression: its SQL and its type."""
    __slots__ = ("sql", "typ")

    def __init__(self, sql, typ):
        self.sql, self.typ = sql, typ


class Col:
    """A column the generator may read: its reference, type, collation; pub: of the public table;
    origin: t, pub, or out (an expression a row source computed)."""
    __slots__ = ("ref", "typ", "coll", "pub", "origin")

    def __init__(self, ref, typ, coll, pub=False, origin=None):
        self.ref, self.typ, self.coll, self.pub = ref, typ, coll, pub
        self.origin = origin or ("pub" if pub else "t")


def label(typ, coll=None):
    return f"{typ}/{coll}" if coll else typ


class Gen:
    def __init__(self, rng, env, idref, strict, secret_rate):
        self.r = rng
        self.env = env
        self.idref = idref  # the id column the secret condition reads (None: no secret here)
        self.strict = strict  # mostly the grammar's constructs
        self.secret_rate = secret_rate
        self.feats = set()
        self.collation = rng.choice(["C", "POSIX", "und-icu", "nd", "default"])

    def pick(self, weighted):
        items = [(o, w) for o, w in weighted if w > 0]
        total = sum(w for _, w in items)
        x = self.r.random() * total
        for o, w in items:
            x -= w
            if x <= 0:
                return o
        return items[-1][0]

    def feat(self, kind, typ):
        self.feats.add((kind, typ))

    def cols(self, typ):
        out = [c for c in self.env if c.typ == typ]
        if typ == "int4":
            out += [c for c in self.env if c.typ == "posint"]
        if typ == "text":
            out += [c for c in self.env if c.typ in ("varchar", "bpchar", "shorttext", "name", "ptext")]
        return out

    # -- values --------------------------------------------------------------------------------

    def value(self, typ, depth):
        if self.idref and depth > 0 and self.r.random() < self.secret_rate:
            inner = self.value(typ, depth - 1)
            self.feat("secret", inner.typ)
            return Ex(f"CASE WHEN {self.secret()} THEN {inner.sql} END", inner.typ)
        cols = self.cols(typ)
        wild = 0.2 if self.strict else 1.0
        opts = [("col", 6 if cols else 0), ("lit", 2)]
        if depth > 0:
            comparable = typ not in ("mood", "int4[]", "text[]", "jsonb")
            opts += [("case", 2), ("simplecase", 1), ("coalesce", 2), ("nullif", 1 if comparable else 0.2),
                     ("greatest", 1 if comparable else 0.2), ("least", 1 if comparable else 0.2),
                     ("cast", 2 if typ in TOTAL_CAST_FROM else 1.5 * wild), ("partial_cast", 1.5 * wild)]
            if typ in INTS:
                opts += [("div", 2), ("mod", 2)]
            if typ in NUMERIC + DATETIME + ["interval"]:
                opts += [("arith", 2 if typ in NUMERIC else 1.5 * wild)]
            if typ in ELEMENT:
                opts += [("array", 1.5 if self.strict else 3), ("nested_array", 1 if self.strict else 3)]
            if typ in TEXTISH:
                opts += [("collate", 1.5 * wild)]
            if typ in FUNCS:
                opts += [("func", 1.5 * wild)]
            if typ == "bool":
                opts += [("pred", 5)]
        kind = self.pick(opts)
        return getattr(self, "v_" + kind)(typ, depth)

    def secret(self):
        return self.r.choice([f"{self.idref} = {SECRET}", f"{self.idref} > 1000000", f"{self.idref} IN ({SECRET})",
                              f"{self.idref} BETWEEN {SECRET} AND {SECRET}"])

    def v_col(self, typ, depth):
        cols = self.cols(typ)
        if self.strict and typ in TEXTISH and self.r.random() < 0.85:
            # most text values of a strict query in one collation (or the default one, which yields to
            # any other): queries that compare across collations are refused
            cols = [c for c in cols if c.coll in (self.collation, "default", None)] or cols
        c = self.r.choice(cols)
        self.feat({"t": "col", "pub": "pubcol", "out": "outcol"}[c.origin], label(c.typ, c.coll))
        return Ex(c.ref, c.typ)

    def v_lit(self, typ, depth):
        self.feat("lit", typ)
        lits = LIT[typ]
        if self.strict and typ in ("posint", "ptext"):
            lits = lits[:-1]  # a domain cast is refused even of a literal
        return Ex(self.r.choice(lits), typ)

    def v_case(self, typ, depth):
        p = self.pred(depth - 1)
        a, b = self.value(typ, depth - 1), self.value(typ, depth - 1)
        self.feat("case", typ)
        if self.r.random() < 0.2:
            return Ex(f"CASE WHEN {p} THEN {a.sql} END", typ)
        return Ex(f"CASE WHEN {p} THEN {a.sql} ELSE {b.sql} END", typ)

    def v_simplecase(self, typ, depth):
        fam = self.family()
        s1, s2 = self.value(self.r.choice(fam), depth - 1), self.value(self.r.choice(fam), depth - 1)
        a, b = self.value(typ, depth - 1), self.value(typ, depth - 1)
        self.feat("simplecase", s1.typ)
        return Ex(f"CASE {s1.sql} WHEN {s2.sql} THEN {a.sql} ELSE {b.sql} END", typ)

    def v_coalesce(self, typ, depth):
        args = [self.value(typ, depth - 1) for _ in range(self.r.randint(2, 3))]
        self.feat("coalesce", typ)
        return Ex(f"COALESCE({', '.join(a.sql for a in args)})", typ)

    def v_nullif(self, typ, depth):
        a, b = self.value(typ, depth - 1), self.value(typ, depth - 1)
        self.feat("nullif", typ)
        return Ex(f"NULLIF({a.sql}, {b.sql})", typ)

    def v_greatest(self, typ, depth, fn="GREATEST"):
        args = [self.value(typ, depth - 1) for _ in range(self.r.randint(2, 3))]
        self.feat(fn.lower(), typ)
        return Ex(f"{fn}({', '.join(a.sql for a in args)})", typ)

    def v_least(self, typ, depth):
        return self.v_greatest(typ, depth, "LEAST")

    def v_cast(self, typ, depth):
        sources = TOTAL_CAST_FROM.get(typ) or PARTIAL_CAST_FROM.get(typ, [typ])
        src = self.r.choice(sources)
        a = self.value(src, depth - 1)
        self.feat("cast", f"{src}->{typ}")
        return Ex(f"({a.sql})::{SQLTYPE.get(typ, typ)}", typ)

    def v_partial_cast(self, typ, depth):
        src = self.r.choice(PARTIAL_CAST_FROM.get(typ, ["text"]))
        a = self.value(src, depth - 1)
        self.feat("partial_cast", f"{src}->{typ}")
        return Ex(f"CAST({a.sql} AS {SQLTYPE.get(typ, typ)})", typ)

    def divisor(self, typ):
        bad = self.r.random() < (0.05 if self.strict else 0.25)
        k = self.r.choice(BAD_DIVISORS if bad else DIVISORS)
        if typ == "int2":
            return f"({k})::int2" if k.startswith("-") else f"{k}::int2"
        if typ == "int8" and self.r.random() < 0.5:
            return f"{k}::int8" if not k.startswith("-") else f"({k})::int8"
        return k

    def v_div(self, typ, depth, op="/"):
        a = self.value(typ, depth - 1)
        k = self.divisor(typ)
        self.feat("div" if op == "/" else "mod", typ)
        return Ex(f"({a.sql} {op} {k})", typ)

    def v_mod(self, typ, depth):
        return self.v_div(typ, depth, "%")

    def v_arith(self, typ, depth):
        if typ in NUMERIC:
            # every operator, on any two values: below a DP aggregate pg_dp makes them total
            # (saturating integers, IEEE floats, ±Infinity numerics, NULL for a division by 0)
            a, b = self.value(typ, depth - 1), self.value(typ, depth - 1)
            if self.r.random() < 0.1:
                self.feat("negate", typ)
                return Ex(f"(- {a.sql})", typ)
            op = self.r.choice(["+", "-", "*", "/"] + (["%"] if typ in INTS or typ == "numeric" else []))
            self.feat("arith", typ)
            return Ex(f"({a.sql} {op} {b.sql})", typ)
        if typ == "interval":
            a, b = self.value("interval", depth - 1), self.value("interval", depth - 1)
            self.feat("arith", typ)
            return Ex(f"({a.sql} {self.r.choice(['+', '-'])} {b.sql})", typ)
        if typ == "date":
            a, b = self.value("date", depth - 1), self.value("int4", depth - 1)
            self.feat("arith", typ)
            return Ex(f"({a.sql} + {b.sql})", typ)
        a, b = self.value(typ, depth - 1), self.value("interval", depth - 1)
        self.feat("arith", typ)
        return Ex(f"({a.sql} {self.r.choice(['+', '-'])} {b.sql})", typ)

    def v_array(self, typ, depth):
        el = ELEMENT[typ]
        args = [self.value(el, depth - 1) for _ in range(self.r.randint(1, 3))]
        self.feat("array", typ)
        return Ex(f"ARRAY[{', '.join(a.sql for a in args)}]", typ)

    def v_nested_array(self, typ, depth):
        """ARRAY[<array>, <array>, …]: a multidimensional array from array values (columns of 1 to 6
        dimensions, ARRAY[...] of any length, nested again)."""
        n = self.r.randint(1, 3)
        args = []
        for _ in range(n):
            if depth > 1 and self.r.random() < 0.4:
                args.append(self.v_nested_array(typ, depth - 1))
            else:
                args.append(self.value(typ, depth - 1))
        self.feat("nested_array", typ)
        return Ex(f"ARRAY[{', '.join(a.sql for a in args)}]", typ)

    def v_collate(self, typ, depth):
        a = self.value(typ, depth - 1)
        c = self.r.choice(COLLATIONS)
        self.feat("collate", f"{typ}/{c.strip(chr(34))}")
        return Ex(f"({a.sql} COLLATE {c})", typ)

    def v_func(self, typ, depth):
        fmt, args = self.r.choice(FUNCS[typ])
        vals = [self.value(t, depth - 1).sql for t in args]
        self.feat("func", (fmt.split("(")[0].strip() or fmt.strip("(){} ")) + ":" + typ)
        return Ex(fmt.format(*vals), typ)

    def v_pred(self, typ, depth):
        return Ex(f"({self.pred(depth)})", "bool")

    def family(self):
        """The types of one comparison; strict queries compare the grammar's comparable types more often."""
        if self.strict:
            return self.pick([(f, w if i < 7 else w / 3) for i, (f, w) in enumerate(FAMILIES)])
        return self.pick(FAMILIES)

    # -- predicates ----------------------------------------------------------------------------

    def pred(self, depth):
        if self.idref and depth > 0 and self.r.random() < self.secret_rate:
            p = self.pred(depth - 1)
            self.feat("secret", "bool")
            return f"CASE WHEN {self.secret()} THEN {p} ELSE true END"
        opts = [("cmp", 6), ("in", 2), ("any", 2), ("between", 2), ("isnull", 2), ("distinct", 2), ("like", 2),
                ("ilike", 2), ("boolcol", 1.5), ("regex", 0.15 if self.strict else 1.5)]
        if depth > 0:
            opts += [("and", 3), ("or", 2), ("not", 1), ("istrue", 1)]
        return getattr(self, "p_" + self.pick(opts))(depth)

    def operands(self, depth, n=2):
        fam = self.family()
        first = self.r.choice(fam)
        # the same type most of the time, another type of the family (date against timestamptz, text
        # under one collation against text under another) otherwise
        types = [first] + [first if self.r.random() < 0.55 else self.r.choice(fam) for _ in range(n - 1)]
        return [self.value(t, depth) for t in types]

    def p_cmp(self, depth):
        a, b = self.operands(depth)
        self.feat("cmp", a.typ if a.typ == b.typ else f"{a.typ}~{b.typ}")
        return f"{a.sql} {self.r.choice(CMP)} {b.sql}"

    def p_in(self, depth):
        vals = self.operands(depth, self.r.randint(2, 4))
        self.feat("in", vals[0].typ)
        neg = "NOT " if self.r.random() < 0.3 else ""
        return f"{vals[0].sql} {neg}IN ({', '.join(v.sql for v in vals[1:])})"

    def p_any(self, depth):
        el = self.r.choice(["int4", "text", "int4", "text"] + ["int8", "numeric", "date", "timestamptz", "float8"])
        a = self.value(el, depth)
        q = self.r.choice(["ANY", "ANY", "ALL", "SOME"])
        op = self.r.choice(CMP)
        if el in ("int4", "text") and self.r.random() < 0.6:
            arr = self.value(el + "[]" if el == "text" else "int4[]", depth)
            self.feat("any", f"{el}[]")
        else:
            elems = [self.value(el, max(depth - 1, 0)) for _ in range(self.r.randint(1, 3))]
            arr = Ex(f"ARRAY[{', '.join(e.sql for e in elems)}]", el + "[]")
            self.feat("any", el)
        return f"{a.sql} {op} {q} ({arr.sql})"

    def p_between(self, depth):
        a, lo, hi = self.operands(depth, 3)
        self.feat("between", a.typ)
        kw = self.r.choice(["BETWEEN", "NOT BETWEEN", "BETWEEN SYMMETRIC"])
        return f"{a.sql} {kw} {lo.sql} AND {hi.sql}"

    def p_isnull(self, depth):
        a = self.value(self.r.choice(ALL_TYPES), depth)
        self.feat("isnull", a.typ)
        return f"{a.sql} IS {self.r.choice(['', 'NOT '])}NULL"

    def p_distinct(self, depth):
        a, b = self.operands(depth)
        self.feat("distinct", a.typ if a.typ == b.typ else f"{a.typ}~{b.typ}")
        return f"{a.sql} IS {self.r.choice(['', 'NOT '])}DISTINCT FROM {b.sql}"

    def p_istrue(self, depth):
        p = self.pred(depth - 1)
        self.feat("istrue", "bool")
        return f"({p}) IS {self.r.choice(['', 'NOT '])}{self.r.choice(['TRUE', 'FALSE', 'UNKNOWN'])}"

    def p_like(self, depth, op="LIKE"):
        a = self.value(self.r.choice(TEXTISH + ["text", "text"]), depth)
        self.feat(op.lower(), a.typ)
        neg = "NOT " if self.r.random() < 0.25 else ""
        bad = self.r.random() < (0.08 if self.strict else 0.3)
        return f"{a.sql} {neg}{op} {self.r.choice(BAD_LIKE_PATTERNS if bad else LIKE_PATTERNS)}"

    def p_ilike(self, depth):
        return self.p_like(depth, "ILIKE")

    def p_regex(self, depth):
        a = self.value("text", depth)
        self.feat("regex", "text")
        return self.r.choice([f"{a.sql} ~ 'a(b|c)*'", f"{a.sql} SIMILAR TO '%(x|y)%'", f"{a.sql} ~* '^n'"])

    def p_boolcol(self, depth):
        a = self.value("bool", 0)
        self.feat("boolcol", "bool")
        return a.sql

    def p_and(self, depth, op="AND"):
        a, b = self.pred(depth - 1), self.pred(depth - 1)
        self.feat(op.lower(), "bool")
        return f"({a} {op} {b})"

    def p_or(self, depth):
        return self.p_and(depth, "OR")

    def p_not(self, depth):
        self.feat("not", "bool")
        return f"NOT ({self.pred(depth - 1)})"


# functions (refused below a DP aggregate unless their arguments are constants): (format, argument types)
FUNCS = {
    "text": [("lower({})", ["text"]), ("upper({})", ["text"]), ("to_char({}, 'YYYY-MM-DD')", ["timestamp"]),
             ("to_char({}, '9999')", ["numeric"]), ("({} || {})", ["text", "text"]), ("substr({}, 2, 3)", ["text"])],
    "int4": [("length({})", ["text"]), ("abs({})", ["int4"]), ("array_length({}, 1)", ["int4[]"])],
    "int8": [("abs({})", ["int8"])],
    "numeric": [("extract(year from {})", ["date"]), ("extract(epoch from {})", ["timestamptz"]),
                ("round({}, 2)", ["numeric"]), ("abs({})", ["numeric"])],
    "float8": [("abs({})", ["float8"]), ("sqrt({})", ["float8"]), ("ln({})", ["float8"])],
    "timestamp": [("date_trunc('day', {})", ["timestamp"]), ("date_trunc('year', {})", ["timestamp"])],
    "timestamptz": [("date_trunc('month', {})", ["timestamptz"])],
    "interval": [("age({}, {})", ["timestamp", "timestamp"]), ("justify_interval({})", ["interval"])],
    "bool": [("isfinite({})", ["date"]), ("starts_with({}, 'n')", ["text"])],
    "int4[]": [("array_append({}, {})", ["int4[]", "int4"]), ("array_cat({}, {})", ["int4[]", "int4[]"])],
    "text[]": [("string_to_array({}, ',')", ["text"])],
    "jsonb": [("to_jsonb(({})::text)", ["text"])],
}


# ----- queries --------------------------------------------------------------------------------------

def t_env(alias="t"):
    return [Col(f"{alias}.{n}", typ, coll) for n, _, typ, coll in COLUMNS]


def pub_env(alias="p"):
    return [Col(f"{alias}.{n}", typ, coll, pub=True) for n, _, typ, coll in PUB_COLUMNS]


FLOAT8_ONLY = ("dp_median", "dp_percentile")
AGG_TYPES = {
    "dp_sum": ["int2", "int4", "int8", "float4", "float8", "numeric", "posint"],
    "dp_avg": NUMERIC + ["posint"],
    "dp_variance": NUMERIC,
    "dp_stddev": NUMERIC,
    "dp_median": NUMERIC,
    "dp_percentile": NUMERIC,
}
# declared bounds (dp.set_bounds): dp_sum(t.i4) and dp_sum(t.i4, ε) use them
DECLARED_BOUNDS = {"i2": (-100, 100), "i4": (0, 100000), "i8": (0, 10 ** 12), "f8": (-1e6, 1e6), "num": (0, 1000)}
# declared domains (dp.set_domain): GROUP BY t.k shows every value of the list, and no other
DECLARED_DOMAINS = {"k": "ARRAY[0, 1, 2, 3, 4]", "tc": "ARRAY['name1', 'name2', '']",
                    "d": "ARRAY['2020-01-02', 'infinity']::date[]", "b": "ARRAY[true, false]",
                    "f4": "ARRAY['NaN', '1.5', 'Infinity']::float4[]", "ti": "ARRAY['näme1', 'NÄME1']"}
# session settings the analyst chooses: they change casts to text and comparisons across time types
SETTINGS = {
    "TimeZone": ["UTC", "Pacific/Kiritimati", "America/Los_Angeles", "Etc/GMT+12", "Asia/Kathmandu"],
    "DateStyle": ["ISO, MDY", "SQL, DMY", "Postgres, MDY", "German"],
    "IntervalStyle": ["postgres", "iso_8601", "sql_standard", "postgres_verbose"],
    "extra_float_digits": ["1", "-15", "3"],
}


EXTREME_BOUNDS = {"int2": "'-32768'::int2, 32767::int2", "int4": "'-2147483648'::int4, 2147483647",
                  "posint": "'-2147483648'::int4, 2147483647",
                  "int8": "'-9223372036854775808'::int8, 9223372036854775807",
                  "numeric": "'-1e30'::numeric, 1e30", "float8": "'-1e30'::float8, '1e30'::float8"}


def bounds(func, typ, rng):
    if rng.random() < 0.2:
        # the widest bounds (pg_dp takes none wider than 1e30): a sum of clamped values can overflow
        if func == "dp_sum" and typ in EXTREME_BOUNDS:
            return EXTREME_BOUNDS[typ]
        if typ == "numeric" and func in ("dp_sum", "dp_avg", "dp_variance", "dp_stddev"):
            return EXTREME_BOUNDS["numeric"]
        return EXTREME_BOUNDS["float8"]
    if func == "dp_sum" and typ in ("int2", "int8"):
        return f"'-1000'::{typ}, '1000'::{typ}"
    if func == "dp_sum" and typ in ("int4", "posint"):
        return "-1000, 1000"
    if typ == "numeric" and func in ("dp_sum", "dp_avg", "dp_variance", "dp_stddev"):
        return "'-1000'::numeric, '1000'::numeric"
    return "'-1000'::float8, '1000'::float8"


class Query:
    __slots__ = ("i", "sql", "feats", "pair", "settings", "probe")

    def __init__(self, i, sql, feats, pair, settings=None, probe=None):
        self.i, self.sql, self.feats, self.pair = i, sql, feats, pair
        self.settings, self.probe = settings or {}, probe


# Hand-written queries run before the generated ones: one per kind of hole found so far (name, the
# adversarial row it needs, query). Most reach the partial expression only through that row.
# Not here: ORDER BY, in a row source, of a value whose collations conflict. Its error comes from
# setting up the sort, on an empty table too: it depends on the query, not on the data.
PROBES = [
    ("conflicting collations in a comparison", "ordinary",
     "SELECT dp_count(*) FROM t WHERE CASE WHEN t.id = 1000001 THEN t.tc = t.tp END"),
    ("conflicting collations in a join on a text key", "ordinary",
     "SELECT dp_count(*) FROM t JOIN pub p ON p.name = t.tc WHERE t.id = 1000001"),
    ("conflicting collations in a join on a text key of the analyst's own table", "ordinary",
     "SELECT dp_count(*) FROM t JOIN mine p ON p.name = t.tc WHERE t.id = 1000001"),
    ("conflicting collations in ILIKE", "ordinary",
     "SELECT dp_count(*) FROM t WHERE CASE WHEN t.id = 1000001 THEN COALESCE(t.tc, t.tp) ILIKE 'a%' END"),
    ("GROUP BY a row source's output of conflicting collations", "ordinary",
     "SELECT s.v AS g1, dp_count(*) AS a1 FROM (SELECT t.*, CASE WHEN t.id IN (1, 1000001) "
     "THEN COALESCE(t.tc, t.tp) END AS v FROM t) s GROUP BY 1"),
    ("ARRAY[] of arrays of other dimensions", "arrays6",
     "SELECT dp_count(CASE WHEN t.id = 1000001 THEN ARRAY[t.ia, ARRAY[1, 2]] END, 0.001) FROM t"),
    ("ARRAY[] of an array of 6 dimensions", "arrays6", "SELECT dp_count(ARRAY[t.ia], 0.001) FROM t"),
    ("ILIKE of a string of 300 MB under a libc collation", "huge",
     "SELECT dp_count(*) FROM t WHERE t.td ILIKE 'a%'"),
]


def probes():
    pairs = [name for name, _, _ in ADVERSARIAL]
    return [Query(i, sql, {("probe", name)}, pairs.index(pair) + 1, probe=name)
            for i, (name, pair, sql) in enumerate(p for p in PROBES if p[1] in pairs)]


class Scope:
    """The FROM of one query level: its SQL, the columns it shows, the id column the secret reads, the
    conditions the WHERE must add (a comma join's key), and what `<alias>.*` selects."""
    __slots__ = ("from_sql", "env", "idref", "where", "exposed", "star", "pub_joined")


def generate(i, rng):
    """Query i: a DP level over the protected table, over row sources (nested up to two deep), joined
    to the public table or not, with generated expressions in every place the grammar has for them."""
    strict = rng.random() < 0.8
    secret_rate = rng.choice([0.0, 0.08, 0.15, 0.3])
    depth = rng.choice([1, 2, 2, 3])
    feats = set()
    unit = rng.random() < 0.25  # tu: the same rows, protected with a privacy unit
    if unit:
        feats.add(("privacy_unit", "-"))

    def gen(env, idref):
        return Gen(rng, env, idref, strict, secret_rate)

    def join_pub(sc, kind):
        """JOIN a public table p on its key (or on its text key), with extra conditions: pub, or mine (the
        analyst's own, which it could write: a join with it may be refused)."""
        left = sc.idref.split(".")[0]
        env = sc.env + pub_env()
        g = gen(env, sc.idref)
        extra = f" AND {g.pred(rng.randint(0, depth))}" if rng.random() < 0.5 else ""
        feats.update(g.feats)
        if extra:
            feats.add(("join_on", kind))
        feats.add((kind, "-"))
        table = "pub"
        if rng.random() < 0.1:
            table = "mine"
            feats.add(("own_table_join", kind))
        if kind == "text_key_join":
            col = rng.choice(["tc", "tp", "ti", "tn", "td", "vc"])
            sc.from_sql += f" JOIN {table} p ON p.name = {left}.{col}{extra}"
        elif kind == "left_join":
            sc.from_sql += f" LEFT JOIN {table} p ON p.id = {left}.k{extra}"
        elif kind == "comma_join":
            sc.from_sql += f", {table} p"
            sc.where.append(f"p.id = {left}.k{extra}")
        else:
            sc.from_sql += f" JOIN {table} p ON p.id = {left}.k{extra}"
        sc.env = env
        sc.pub_joined = True

    def scope(level):
        sc = Scope()
        sc.where, sc.pub_joined = [], False
        if level == 0:
            sc.from_sql = "tu t" if unit else "t"
            sc.env, sc.idref, sc.star = t_env(), "t.id", "t.*"
            sc.exposed = [(n, typ, coll, "t") for n, _, typ, coll in COLUMNS]
        else:
            inner = scope(level - 1)
            g = gen(inner.env, inner.idref)
            alias = f"s{level}"
            cols = list(inner.exposed)
            select = [inner.star]
            if inner.pub_joined:
                for n in rng.sample(["name", "pe", "ptr", "pf", "pd"], 2):
                    select.append(f"p.{n} AS p{level}_{n}")
                    _, _, typ, coll = next(c for c in PUB_COLUMNS if c[0] == n)
                    cols.append((f"p{level}_{n}", typ, coll, "pub"))
            for n in range(1, rng.randint(1, 3) + 1):
                typ = rng.choice(ALL_TYPES + ["text", "text", "text", "int4[]", "text[]"])
                v = g.value(typ, depth)
                g.feat("row_source", v.typ)
                select.append(f"{v.sql} AS v{level}_{n}")
                cols.append((f"v{level}_{n}", v.typ, None, "out"))
            where = list(inner.where)
            if rng.random() < 0.5:
                where.append(g.pred(depth))
                g.feat("row_source_where", "bool")
            order = ""
            if rng.random() < 0.3:
                keys = []
                for _ in range(rng.randint(1, 2)):
                    outs = [c for c in inner.env if c.origin == "out"]
                    if outs and rng.random() < 0.5:
                        c = rng.choice(outs)
                        keys.append(Ex(c.ref, c.typ))
                    else:
                        keys.append(g.value(rng.choice(ALL_TYPES), max(depth - 1, 1)))
                # a literal in ORDER BY names an output column (or is an error): sort by columns instead
                keys = [k if k.sql not in LIT.get(k.typ, ()) else Ex(f"{inner.idref}", "int4") for k in keys]
                order = " ORDER BY " + ", ".join(k.sql for k in keys)
                for k in keys:
                    g.feat("row_source_order_by", k.typ)
            feats.update(g.feats)
            sc.from_sql = (f"(SELECT {', '.join(select)} FROM {inner.from_sql}"
                           + (f" WHERE {' AND '.join(where)}" if where else "") + f"{order}) {alias}")
            sc.env = [Col(f"{alias}.{n}", typ, coll, origin == "pub", origin) for n, typ, coll, origin in cols]
            sc.idref, sc.star, sc.exposed = f"{alias}.id", f"{alias}.*", cols
            feats.add(("row_source_depth", str(level)))
        if rng.random() < 0.45:
            join_pub(sc, rng.choice(["join", "join", "left_join", "comma_join", "text_key_join"]))
        return sc

    sc = scope(rng.choice([0, 0, 0, 1, 1, 2]))
    g = gen(sc.env, sc.idref)
    # GROUP BY keys: values, and often a row source's output as it is
    keys = []
    for _ in range(rng.choice([0, 0, 0, 1, 1, 2])):
        outs = [c for c in sc.env if c.origin == "out"]
        if outs and rng.random() < 0.4:
            c = rng.choice(outs)
            v = Ex(c.ref, c.typ)
        elif rng.random() < 0.15:
            c = rng.choice([c for c in sc.env if c.ref.split(".")[1] in DECLARED_DOMAINS] or sc.env)
            v = Ex(c.ref, c.typ)
            g.feat("declared_domain_key", c.typ)
        else:
            v = g.value(rng.choice(ALL_TYPES + ["text", "text", "int4"]), rng.randint(0, depth))
        g.feat("group_by", v.typ)
        keys.append(v)
    # the DP aggregates
    aggs = []
    for _ in range(rng.randint(1, 3)):
        func = rng.choice(["dp_count", "dp_count", "dp_count_star", "dp_sum", "dp_sum", "dp_avg", "dp_median",
                           "dp_variance", "dp_stddev", "dp_percentile"])
        declared = [c for c in sc.env if c.ref.split(".")[1] in DECLARED_BOUNDS]
        if func == "dp_count_star":
            call = "dp_count(*)"
            g.feat("agg", "dp_count(*)")
        elif func == "dp_count":
            v = g.value(rng.choice(ALL_TYPES), depth)
            # dp_count("any") takes no literal of unknown type
            unknown = v.sql.startswith("'") and v.sql.endswith("'")
            call = f"dp_count({v.sql}{'::text' if unknown else ''}, {EPS})"
            g.feat("agg:dp_count", v.typ)
        elif declared and func in ("dp_sum", "dp_avg", "dp_median") and rng.random() < 0.2:
            c = rng.choice(declared)
            call = f"{func}({c.ref}{rng.choice(['', ', ' + EPS])})"
            g.feat("agg:declared_bounds", f"{func}({c.typ})")
        else:
            # numeric → float8 (dp_median's and dp_percentile's argument) can fail: mostly left to the
            # queries that are not strict
            types = [t for t in AGG_TYPES[func] if not (strict and t == "numeric" and func in FLOAT8_ONLY)]
            typ = rng.choice(types)
            v = g.value(typ, depth)
            p = "0.9, " if func == "dp_percentile" else ""
            call = f"{func}({v.sql}, {p}{bounds(func, typ, rng)}, {EPS})"
            g.feat(f"agg:{func}", typ)
        if rng.random() < 0.3:
            call += f" FILTER (WHERE {g.pred(depth)})"
            g.feat("filter", "bool")
        aggs.append(call)
    where = list(sc.where)
    if rng.random() < 0.6:
        where.append(g.pred(depth))
        g.feat("where", "bool")
    feats.update(g.feats)
    having = ""
    if keys and rng.random() < 0.2:
        hg = Gen(rng, [Col(f"({k.sql})", k.typ, None) for k in keys], None, strict, 0)
        having = f" HAVING {hg.pred(1)}"
        feats.update(hg.feats)
        feats.add(("having", "bool"))
    select = [f"{k.sql} AS g{n}" for n, k in enumerate(keys, 1)] + [f"{a} AS a{n}" for n, a in enumerate(aggs, 1)]
    sql = f"SELECT {', '.join(select)} FROM {sc.from_sql}"
    if where:
        sql += f" WHERE {' AND '.join(where)}"
    if keys:
        positions = ", ".join(str(n) for n in range(1, len(keys) + 1))
        # grouping sets are refused over a table with a privacy unit
        sets = rng.choice([None] * 6 + ([] if strict and unit else ["ROLLUP", "CUBE", "GROUPING SETS"]))
        if sets is None:
            sql += f" GROUP BY {positions}"
        else:
            # grouping sets sort their keys (GroupAggregate) where plain keys are often hashed
            feats.add(("grouping_sets", sets))
            sql += f" GROUP BY {sets}(({positions}), ())" if sets == "GROUPING SETS" else f" GROUP BY {sets}({positions})"
    sql += having
    # the session's settings, chosen by the analyst: the same for both runs
    settings = {k: rng.choice(v) for k, v in SETTINGS.items()} if rng.random() < 0.3 else {}
    return Query(i, sql, feats, i % K + 1, settings)


# ----- running --------------------------------------------------------------------------------------

class Outcome(tuple):
    """(status, sqlstate, message, fail-closed warnings): status ok, error, timeout or crash."""

    @property
    def status(self):
        return self[0]

    def brief(self):
        if self[0] == "ok":
            s = "ok"
        elif self[0] in ("timeout", "crash", "unreachable"):
            s = f"{self[0]} ({self[2]})"
        else:
            s = f"ERROR {self[1]}: {self[2]}"
        return s + (f" + WARNING {self[3][0]}" if self[3] else "")


GRANT_LOCK = threading.Lock()
SERVER_GONE = threading.Event()


def regrant():
    """More budget for the analyst, after what it spent."""
    with GRANT_LOCK, connect() as c:
        c.execute(f"SELECT dp.grant_budget('{ANALYST}', 1000000)")


SESSION_DEFAULTS = {"TimeZone": "UTC", "DateStyle": "ISO, MDY", "IntervalStyle": "postgres", "extra_float_digits": "1"}


class Session:
    """The analyst's connection; reconnects after a lost connection."""

    OPTIONS = (f"-c statement_timeout=5000 -c dp.default_epsilon={EPS} -c dp.group_selection_epsilon=0.01 "
               "-c dp.group_selection_delta=1e-12 -c client_min_messages=warning")

    def __init__(self):
        self.conn = None
        self.warnings = []
        self.search_path = None

    def open(self, wait=60):
        deadline = time.time() + wait
        while True:
            if SERVER_GONE.is_set():
                raise psycopg.OperationalError("the server did not come back after a crash")
            try:
                self.conn = connect(ANALYST, options=self.OPTIONS)
                break
            except psycopg.OperationalError:
                if time.time() > deadline:
                    SERVER_GONE.set()  # the remaining queries fail at once, as crashes
                    raise
                time.sleep(0.5)
        self.conn.add_notice_handler(self.notice)
        self.search_path = None

    def notice(self, diag):
        if FAIL_WARNING in (diag.message_primary or "") or FAIL_WARNING in (diag.message_detail or ""):
            self.warnings.append(f"{diag.severity}: {diag.message_primary}")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def run(self, sql, params=None, search_path=None, settings=None):
        out = self.run_once(sql, params, search_path, settings)
        for _ in range(3):
            if out.status != "error" or out[1] != "53000":
                break
            # the budget ran out: spent by a query that forfeited it (pg_dp's fail-closed rule, reported
            # through its WARNING, in this session or another), or by many queries. Renew it and run the
            # statement again.
            regrant()
            out = self.run_once(sql, params, search_path, settings)
        return out

    def run_once(self, sql, params, search_path, settings):
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.open()
        self.warnings = []
        try:
            want = (search_path, tuple(sorted((settings or {}).items())))
            if search_path and want != self.search_path:
                values = dict(SESSION_DEFAULTS, **(settings or {}), search_path=f"{search_path}, an, public")
                self.conn.execute("SELECT " + ", ".join(f"set_config('{k}', %s, false)" for k in values),
                                  list(values.values()))
                self.search_path = want
            cur = self.conn.execute(sql, params)
            if cur.description is not None:
                try:
                    cur.fetchall()
                except (NotImplementedError, psycopg.DataError):
                    pass  # the server answered; psycopg cannot parse a date in a DateStyle other than ISO
            return Outcome(("ok", None, None, tuple(self.warnings)))
        except psycopg.errors.QueryCanceled as e:
            return Outcome(("timeout", e.sqlstate, e.diag.message_primary, tuple(self.warnings)))
        except psycopg.Error as e:
            if self.conn.broken or self.conn.closed or isinstance(e, (psycopg.errors.AdminShutdown,
                                                                      psycopg.errors.CrashShutdown)):
                self.close()
                return Outcome(("crash", e.sqlstate, str(e).strip().splitlines()[0] if str(e) else "", ()))
            msg = e.diag.message_primary or str(e)
            return Outcome(("error", e.sqlstate, msg, tuple(self.warnings)))


class Result:
    __slots__ = ("q", "preview", "a", "b", "empty")

    @property
    def admitted(self):
        return self.preview.status == "ok"

    @property
    def verdict(self):
        if self.preview.status == "ok":
            return "admitted"
        if self.preview[1] == "42501":
            return "refused"
        if self.preview.status in ("crash", "unreachable"):
            return "not run"
        return "invalid"  # the generator wrote a query PostgreSQL rejects (a type error, say)


def run_query(s, q):
    r = Result()
    r.q = q
    r.preview = s.run("SELECT * FROM dp.preview(%s)", (q.sql,), search_path="a", settings=q.settings)
    r.a = s.run(q.sql, search_path="a", settings=q.settings)
    r.b = s.run(q.sql, search_path=pair_schema(q.pair), settings=q.settings)
    r.empty = None
    if r.admitted and r.a.status == "error" and r.b.status == "error" and r.a[1:3] == r.b[1:3]:
        # the same error on both tables: raised by the query's text (a constant expression the planner
        # folds), or by the rows of a.t? The empty table tells them apart.
        r.empty = s.run(q.sql, search_path=EMPTY, settings=q.settings)
    return r


def run_safely(s, q):
    try:
        return run_query(s, q)
    except Exception as e:  # noqa: BLE001: the server did not come back within a minute, or the client failed
        s.close()
        r = Result()
        r.q, r.empty = q, None
        status = "unreachable" if SERVER_GONE.is_set() else "crash"
        r.preview = r.a = r.b = Outcome((status, None, f"{type(e).__name__}: {e}", ()))
        return r


def failure(r):
    """The failure class of a result (None: no failure), with the criteria of the module's doc."""
    a, b = r.a, r.b
    if "unreachable" in (a.status, b.status, r.preview.status):
        return "not run: the server went down and did not come back"
    if "crash" in (a.status, b.status, r.preview.status):
        return "crash"
    if a[3] or b[3] or r.preview[3]:
        return "fail-closed warning"
    if r.admitted:
        if a.status == "error" or b.status == "error":
            if (a.status == "error" and b.status == "error" and a[1:3] == b[1:3] and r.empty is not None
                    and r.empty[1:3] == a[1:3]):
                return None  # raised from the query text alone, whatever the table holds (counted apart)
            if a.status != b.status:
                return "admitted: error on one table only"
            return "admitted: error on the data"
    if (a.status == "error") != (b.status == "error") or (a.status == b.status == "error" and a[1:3] != b[1:3]):
        return "refusal or error differs between the tables"
    return None


def text_error(r):
    return r.admitted and failure(r) is None and r.a.status == "error"


@functools.lru_cache(maxsize=None)
def campaign():
    rng = random.Random(ARGS.seed)
    queries = probes()
    queries += [generate(i, rng) for i in range(len(queries), len(queries) + ARGS.queries)]
    results = [None] * len(queries)
    work = queue.Queue()
    for q in queries:
        work.put(q)
    t0 = time.time()

    def worker():
        s = Session()
        while True:
            try:
                q = work.get_nowait()
            except queue.Empty:
                break
            results[q.i] = run_safely(s, q)
        s.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(ARGS.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # a crash ends every session: run the queries that saw one again, one at a time, to find the one
    # that caused it
    suspects = [r for r in results if failure(r) == "crash"]
    if suspects:
        s = Session()
        for r in suspects:
            again = run_safely(s, r.q)
            # the first outcome says more than "the server did not come back"
            results[r.q.i] = r if SERVER_GONE.is_set() else again
        s.close()
    elapsed = time.time() - t0
    summarize(results, elapsed, len(suspects))
    return results


def summarize(results, elapsed, suspects):
    verdicts = collections.Counter(r.verdict for r in results)
    n = len(results)
    fails = [r for r in results if failure(r)]
    nprobes = sum(r.q.probe is not None for r in results)
    print(f"totality: seed {ARGS.seed}, {n - nprobes} generated queries and {nprobes} probes in {elapsed:.1f}s "
          f"with {ARGS.jobs} sessions: "
          f"{verdicts['admitted']} admitted ({100 * verdicts['admitted'] / max(n, 1):.0f}%), "
          f"{verdicts['refused']} refused, {verdicts['invalid']} invalid (rejected by PostgreSQL itself), "
          + (f"{verdicts['not run']} not run (a crash), " if verdicts["not run"] else "") +
          f"{len(fails)} failing, {sum(text_error(r) for r in results)} admitted with an error from the query text, "
          f"{sum('timeout' in (r.a.status, r.b.status) for r in results)} timeouts, {suspects} re-run after a crash")
    cov = coverage(results)
    print("totality: coverage of the admitted queries (node kind: queries, types)")
    for kind in sorted(cov):
        types = cov[kind]
        listed = " ".join(f"{t}:{c}" for t, c in sorted(types.items(), key=lambda x: (-x[1], x[0]))[:12])
        more = f" …+{len(types) - 12}" if len(types) > 12 else ""
        print(f"  {kind:20} {sum(types.values()):6} {len(types):3} types  {listed}{more}")
    for verdict in ("refused", "invalid"):
        reasons = collections.Counter(re.sub(r"\d+", "N", r.preview[2]) for r in results if r.verdict == verdict)
        if reasons:
            print(f"totality: the most frequent reasons of the {verdict} queries: " +
                  "; ".join(f"{m} ({c})" for m, c in reasons.most_common(6)))
    texts = [r for r in results if text_error(r)]
    if texts:
        r = min(texts, key=lambda r: len(r.q.sql))
        print(f"totality: admitted, and the same error on every table, the empty one too (raised while planning, "
              f"from the query text): e.g. {r.q.sql} -> {r.a.brief()}")


def coverage(results):
    cov = collections.defaultdict(collections.Counter)
    for r in results:
        if r.admitted:
            for kind, typ in r.q.feats:
                cov[kind][typ] += 1
    return cov


def error_class(r, kind):
    """A failure's class for deduplication: its kind and its error message without values."""
    out = [o for o in (r.a, r.b, r.preview) if o.status in ("crash", "unreachable")] or \
        [o for o in (r.a, r.b) if o.status != "ok"]
    msg = out[0][2] if out else ""
    msg = re.sub(r"\"[^\"]*\"", '"…"', msg or "")
    msg = re.sub(r"\d+", "N", msg)
    return f"{kind}: {msg}"


# ----- the checks -----------------------------------------------------------------------------------

def check_every_admitted_query_is_total():
    results = campaign()
    fails = [(failure(r), r) for r in results if failure(r)]
    if not fails:
        return
    classes = collections.defaultdict(list)
    for kind, r in fails:
        classes[error_class(r, kind)].append(r)
    lines = [f"{len(fails)} of {len(results)} queries failed (seed {ARGS.seed}), in {len(classes)} classes; "
             "the shortest query of each class first:"]
    # the queries that did not run (the server stayed down) last
    ordered = sorted(classes.items(), key=lambda kv: (kv[0].startswith("not run"), min(len(r.q.sql) for r in kv[1]),
                                                      kv[0]))
    for _, rs in ordered:
        rs.sort(key=lambda r: len(r.q.sql))
    # the shortest query of each class, then the second shortest of each, …
    shown = [(n, cls, rs[n]) for n in range(REPORT_MAX) for cls, rs in ordered if n < len(rs)][:REPORT_MAX]
    for n, cls, r in shown:
        lines.append(describe(r, f"{cls} ({len(classes[cls])} queries)" if n == 0 else cls))
    raise AssertionError("\n".join(lines))


def describe(r, title):
    settings = "".join(f"SET {k} = '{v}'; " for k, v in r.q.settings.items())
    what = f"probe \"{r.q.probe}\"" if r.q.probe else f"query {r.q.i}"
    b = pair_schema(r.q.pair)
    return (f"\n[{title}]\n  {what} ({b}.t = a.t + the {ADVERSARIAL[r.q.pair - 1][0]} row): {settings}{r.q.sql}\n"
            f"  preview: {r.preview.brief()}\n  on a.t: {r.a.brief()}\n  on {b}.t: {r.b.brief()}"
            + (f"\n  on the empty table: {r.empty.brief()}" if r.empty is not None else ""))


def check_the_preview_refuses_what_the_query_refuses():
    """dp.preview runs the planner hook's grammar check: a query it refuses is refused when it runs."""
    bad = [r for r in campaign() if r.verdict == "refused" and "ok" in (r.a.status, r.b.status)]
    assert not bad, "\n".join(describe(r, "refused by dp.preview, ran") for r in sorted(bad, key=lambda r: len(r.q.sql))[:5])


def check_a_good_share_of_the_queries_is_admitted():
    results = campaign()
    admitted = sum(r.admitted for r in results)
    invalid = sum(r.verdict == "invalid" for r in results)
    assert admitted >= 0.3 * len(results), f"only {admitted} of {len(results)} queries admitted"
    assert invalid <= 0.2 * len(results), f"{invalid} of {len(results)} queries are invalid: the generator is broken"


# the constructs of the grammar's documented `value` and `predicate` (docs/security.md) and the places
# they go: kind → the least number of types (or type pairs, casts) it must be admitted with. ARRAY[…]
# is generated too, but not required: the grammar may refuse it.
MIN_TYPES = {
    "col": 15, "pubcol": 4, "outcol": 5, "lit": 12, "case": 8, "simplecase": 5, "coalesce": 8, "nullif": 5,
    "greatest": 5, "least": 5, "cast": 8, "div": 3, "mod": 3, "cmp": 12, "in": 6, "any": 4, "between": 6,
    "isnull": 12, "distinct": 6, "istrue": 1, "like": 3, "ilike": 3, "and": 1, "or": 1, "not": 1, "boolcol": 1,
    "secret": 6, "where": 1, "join_on": 3, "filter": 1, "group_by": 10, "declared_domain_key": 2, "having": 1,
    "agg": 1, "agg:dp_count": 10, "agg:dp_sum": 5, "agg:dp_avg": 5, "agg:dp_median": 3, "agg:dp_variance": 3,
    "agg:dp_stddev": 3, "agg:dp_percentile": 3, "agg:declared_bounds": 3, "row_source": 10, "row_source_where": 1,
    "row_source_order_by": 4, "row_source_depth": 2, "join": 1, "left_join": 1, "comma_join": 1,
    "text_key_join": 1, "privacy_unit": 1, "grouping_sets": 2,
}


def at_least(n):
    """A least number of types for 3000 queries, scaled down for a shorter run."""
    return max(1, round(n * min(1.0, ARGS.queries / 3000)))


def check_every_construct_of_the_grammar_is_admitted_with_several_types():
    cov = coverage(campaign())
    needed = {k: at_least(n) for k, n in MIN_TYPES.items()}
    short = {k: (len(cov.get(k, ())), n) for k, n in needed.items() if len(cov.get(k, ())) < n}
    assert not short, "admitted too rarely (kind: types admitted, needed): " + ", ".join(
        f"{k}: {got}/{n}" for k, (got, n) in sorted(short.items()))


def check_cross_type_and_cross_collation_comparisons_are_tried():
    cov = coverage(campaign())
    pairs = [t for t in cov.get("cmp", ()) if "~" in t]
    assert len(pairs) >= at_least(5), f"few cross-type comparisons admitted: {pairs}"
    colls = {t for k in ("col", "pubcol") for t in cov.get(k, ()) if t.startswith("text/")}
    assert len(colls) >= at_least(6), f"few collations admitted: {sorted(colls)}"


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--queries", type=int, default=3000)
    ap.add_argument("--jobs", type=int, default=2, help="concurrent analyst sessions")
    ap.add_argument("--huge", action="store_true", help="add an adversarial row with a string of 300 MB")
    ARGS = ap.parse_args()
    if ARGS.huge:
        global K
        ADVERSARIAL.append(HUGE)
        K = len(ADVERSARIAL)
    setup()
    run_checks(globals(), "totality")


if __name__ == "__main__":
    main()

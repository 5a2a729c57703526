#!/usr/bin/env python3
"""ALTER EXTENSION pg_dp UPDATE keeps the ledger and yields the schema of a fresh install.

Run by scripts/test.sh, against a server with pg_dp preloaded where the install scripts of both
versions and the upgrade path between them are installed:
    /usr/bin/python3 tests/client/test_upgrade.py --host /tmp --port 25433 [--from 0.1.0] [--to 0.2.0]
(--to defaults to the default_version the server offers.) It installs the old version in one
database and uses it as a user would (a protected table with a privacy unit, a domain and declared
bounds, budgets with a period, a cap and a pinned level, receipts, an archived dropped role, a
trusted role), records that data, updates, and checks that the data is unchanged, that the budget
still charges, and that the schema equals a fresh install of the new version in another database.
Prints one line per check and "upgrade: N passed, M failed"; exits non-zero on any failure.
"""
import argparse
import difflib
from decimal import Decimal

import psycopg

from harness import run_checks

ARGS = None
DB = "pg_dp_upgrade"  # installed at the old version, then updated
FRESH = "pg_dp_upgrade_fresh"  # installed at the new version
ANALYST, PINNED, GONE, TRUSTED = "dp_u_analyst", "dp_u_pinned", "dp_u_gone", "dp_u_trusted"
BEFORE = {}  # name -> (query, rows) recorded at the old version
REMAINING = None  # the analyst's remaining epsilon at the old version

# The views users read (their columns at the old version are compared, like the tables').
VIEWS = ["dp.budgets", "dp.ledger", "dp.protected_tables", "dp.domains", "dp.declared_bounds", "dp.trusted_roles"]


def connect(dbname=DB, user="postgres"):
    return psycopg.connect(host=ARGS.host, port=ARGS.port, dbname=dbname, user=user, autocommit=True)


def drop_all():
    with connect("postgres") as c:
        for db in (DB, FRESH):
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        for role in (ANALYST, PINNED, GONE, TRUSTED):
            c.execute(f"DROP ROLE IF EXISTS {role}")


# columns a later version replaces on purpose: (relation, column)
REPLACED_COLUMNS = {("dp.role_budget", "role")}


def data_queries(c):
    """name -> query of everything the old version keeps: each of its config tables and sequences
    (the columns it has now, rows sorted by all of them), the views users read, pg_dp's labels and
    the role settings of pinned levels."""
    cols = lambda rel: [r[0] for r in c.execute(
        "SELECT quote_ident(attname) FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
        " AND NOT attisdropped ORDER BY attnum", (rel,))]
    qs = {}
    config = c.execute("SELECT t::regclass::text, (SELECT relkind FROM pg_class WHERE oid = t) FROM pg_extension,"
                       " unnest(extconfig) t WHERE extname = 'pg_dp'").fetchall()
    for rel, kind in config:
        if kind == "S":
            qs[rel] = f"SELECT last_value, is_called FROM {rel}"
    for rel in [r for r, k in config if k != "S"] + VIEWS:
        # 0.2.0 keys budgets by the role's pg_dp identity, not its OID: the role of each budget is
        # compared through dp.budgets, which names it
        names = [n for n in cols(rel) if (rel, n) not in REPLACED_COLUMNS]
        qs[rel] = f"SELECT {', '.join(names)} FROM {rel} ORDER BY {', '.join(str(i + 1) for i in range(len(names)))}"
    qs["labels"] = ("SELECT objoid::regclass::text, objsubid, label FROM pg_seclabel WHERE provider = 'pg_dp'"
                    " AND classoid = 'pg_class'::regclass"
                    " UNION ALL SELECT objoid::regrole::text, 0, label FROM pg_shseclabel WHERE provider = 'pg_dp'"
                    " AND classoid = 'pg_authid'::regclass AND objoid::regrole::text LIKE 'dp\\_u\\_%' ORDER BY 1, 2")
    qs["role settings"] = ("SELECT setrole::regrole::text, setconfig FROM pg_db_role_setting"
                           " WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY 1")
    return qs


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def setup():
    """A database at the old version, used as a user would; records its data in BEFORE."""
    drop_all()
    with connect("postgres") as c:
        c.execute(f"CREATE DATABASE {DB}")
        for role in (ANALYST, PINNED, GONE, TRUSTED):
            c.execute(f"CREATE ROLE {role} LOGIN")
    with connect() as c:
        c.execute("CREATE EXTENSION pg_dp VERSION %s" % quote(ARGS.from_version))
        c.execute("CREATE TABLE t AS SELECT g AS person, g % 2 = 0 AS even, (g % 10)::float8 AS x"
                  " FROM generate_series(1, 500) g")
        c.execute(f"GRANT SELECT ON t TO {ANALYST}")
        c.execute("SELECT dp.protect_table('t', privacy_unit => 'person', max_groups_contributed => 2)")
        c.execute("SELECT dp.set_domain('t', 'even', ARRAY[true, false])")
        c.execute("SELECT dp.set_bounds('t', 'x', 0, 10)")
        c.execute("SELECT dp.trust_role(%s)", (TRUSTED,))
        c.execute("SELECT dp.grant_budget(%s, 5, 1e-5)", (ANALYST,))
        c.execute("SELECT dp.set_budget_period(%s, '30 days')", (ANALYST,))
        c.execute("SELECT dp.set_budget(%s, 2, 0, 0.5)", (PINNED,))
        c.execute("SELECT dp.pin_privacy_level(%s, 'high')", (PINNED,))
        c.execute("SELECT dp.grant_budget(%s, 1)", (GONE,))
        c.execute(f"DROP ROLE {GONE}")  # archived in dp.dropped_role_budget
    with connect(user=ANALYST) as c:
        for sql in ["SELECT dp_count(x, 0.5) FROM t",
                    "SELECT dp_count(x, 0.5) FROM t",  # the same text: its receipt keeps no text of its own
                    "SELECT dp_count(x, 0.25) FROM t",  # other constants: it keeps its own
                    "SELECT dp_sum(x, 0.3) FROM t",  # the declared bounds
                    "SELECT even, dp_avg(x, 0, 10, 0.4) FROM t GROUP BY even",  # the domain
                    "SELECT dp_median(x, 0, 10, 0.2, 1e-6) FROM t"]:  # a delta
            c.execute(sql).fetchall()
        global REMAINING
        REMAINING = c.execute("SELECT epsilon_remaining FROM dp.my_budget").fetchone()[0]
    assert 0 < REMAINING < 5, REMAINING
    with connect() as c:
        for name, query in data_queries(c).items():
            BEFORE[name] = (query, c.execute(query).fetchall())
    # each kind of data really exists, so that comparing it proves something
    for name, (_, rows) in BEFORE.items():
        assert rows, f"no data in {name} at {ARGS.from_version}"


def version(dbname=DB):
    with connect(dbname) as c:
        return c.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_dp'").fetchone()[0]


def require_updated():
    v = version()
    assert v == ARGS.to_version, f"pg_dp is at {v}, not {ARGS.to_version}: the update failed (check_1)"


def check_1_update_to_the_new_version():
    assert version() == ARGS.from_version
    with connect() as c:
        c.execute("ALTER EXTENSION pg_dp UPDATE TO %s" % quote(ARGS.to_version))
    require_updated()


def check_2_data_is_kept_row_by_row():
    require_updated()
    changed = []
    with connect() as c:
        for name, (query, rows) in BEFORE.items():
            after = c.execute(query).fetchall()
            if after != rows:
                gone, new = [r for r in rows if r not in after], [r for r in after if r not in rows]
                changed.append(f"{name}: {len(rows)} rows before, {len(after)} after; "
                               f"before only {gone[:3]}; after only {new[:3]}")
    assert not changed, "the update changed data:\n" + "\n".join(changed)


def check_3_budget_still_charges_and_writes_receipts():
    require_updated()
    sql = "SELECT dp_count(x, 0.125) FROM t"
    with connect(user=ANALYST) as c:
        remaining = c.execute("SELECT epsilon_remaining FROM dp.my_budget").fetchone()[0]
        assert remaining == REMAINING, (REMAINING, remaining)
        c.execute(sql).fetchall()
        after = c.execute("SELECT epsilon_remaining FROM dp.my_budget").fetchone()[0]
        assert after == remaining - Decimal("0.125"), (remaining, after)
        last = c.execute("SELECT id, query_text, epsilon FROM dp.my_ledger ORDER BY id DESC LIMIT 1").fetchone()
    old_ids = [r[0] for r in BEFORE["dp.ledger"][1]]
    assert last[0] > max(old_ids) and last[1] == sql and last[2] == Decimal("0.125"), last


# One line per fact about the extension's objects (no OIDs: they differ between databases).
# Multi-line definitions are one entry; entries are sorted.
SCHEMA = r"""
WITH ext AS (SELECT e.* FROM pg_extension e WHERE e.extname = 'pg_dp'),
member AS (SELECT d.classid, d.objid FROM pg_depend d, ext
            WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
proc AS (SELECT p.* FROM pg_proc p JOIN member m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid),
typ AS (SELECT t.* FROM pg_type t JOIN member m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid),
-- member relations, and the relations of member composite types
rel AS (SELECT c.* FROM pg_class c WHERE c.oid IN (SELECT objid FROM member WHERE classid = 'pg_class'::regclass)
                                      OR c.oid IN (SELECT typrelid FROM typ))
SELECT format('extension pg_dp %s: schema %s, relocatable %s, owner %s', extversion, extnamespace::regnamespace,
              extrelocatable, extowner::regrole) FROM ext
UNION ALL
SELECT format('config table %s: condition %L', x.rel::regclass, x.cond)
  FROM ext, unnest(extconfig, extcondition) AS x(rel, cond)
UNION ALL
SELECT 'member ' || pg_describe_object(classid, objid, 0) FROM member
UNION ALL
-- comments of the members and of their columns, and of their constraints, indexes and triggers
SELECT format('comment on %s: %s', pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description)
  FROM pg_description d
 WHERE (d.classoid, d.objoid) IN (SELECT classid, objid FROM member)
    OR (d.classoid = 'pg_constraint'::regclass AND d.objoid IN (SELECT oid FROM pg_constraint WHERE conrelid IN (SELECT oid FROM rel) OR contypid IN (SELECT oid FROM typ)))
    OR (d.classoid = 'pg_class'::regclass AND d.objoid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM rel)))
    OR (d.classoid = 'pg_trigger'::regclass AND d.objoid IN (SELECT oid FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM rel)))
UNION ALL
SELECT format('security label on %s: %s %s', pg_describe_object(l.classoid, l.objoid, l.objsubid), l.provider, l.label)
  FROM pg_seclabel l WHERE (l.classoid, l.objoid) IN (SELECT classid, objid FROM member)
UNION ALL
SELECT format('schema %s: owner %s, acl %s', n.nspname, n.nspowner::regrole, n.nspacl)
  FROM pg_namespace n JOIN member m ON m.classid = 'pg_namespace'::regclass AND m.objid = n.oid
UNION ALL
-- functions and aggregates
SELECT format('function %s: returns %s, kind %s, volatility %s, strict %s, parallel %s, security definer %s, leakproof %s, owner %s, acl %s',
              p.oid::regprocedure, pg_get_function_result(p.oid), p.prokind, p.provolatile, p.proisstrict, p.proparallel,
              p.prosecdef, p.proleakproof, p.proowner::regrole, p.proacl)
  FROM proc p
UNION ALL
SELECT format('function %s: %s', p.oid::regprocedure, pg_get_functiondef(p.oid)) FROM proc p WHERE p.prokind <> 'a'
UNION ALL
SELECT format('aggregate %s: arguments (%s), kind %s, direct %s, sfunc %s, stype %s, space %s, finalfunc %s (extra %s, modify %s), '
              'combinefunc %s, serialfunc %s, deserialfunc %s, initval %s, msfunc %s, minvfunc %s, mstype %s, mspace %s, '
              'mfinalfunc %s (extra %s, modify %s), minitval %s, sortop %s',
              p.oid::regprocedure, pg_get_function_arguments(p.oid), a.aggkind, a.aggnumdirectargs, a.aggtransfn::regprocedure,
              a.aggtranstype::regtype, a.aggtransspace, a.aggfinalfn::regprocedure, a.aggfinalextra, a.aggfinalmodify,
              a.aggcombinefn::regprocedure, a.aggserialfn::regprocedure, a.aggdeserialfn::regprocedure, a.agginitval,
              a.aggmtransfn::regprocedure, a.aggminvtransfn::regprocedure, a.aggmtranstype::regtype, a.aggmtransspace,
              a.aggmfinalfn::regprocedure, a.aggmfinalextra, a.aggmfinalmodify, a.aggminitval, a.aggsortop::regoperator)
  FROM proc p JOIN pg_aggregate a ON a.aggfnoid = p.oid
UNION ALL
-- tables, views, sequences and their parts
SELECT format('relation %s: kind %s, persistence %s, owner %s, options %s, acl %s, row security %s, forced %s, replica identity %s',
              c.oid::regclass, c.relkind, c.relpersistence, c.relowner::regrole, c.reloptions, c.relacl, c.relrowsecurity,
              c.relforcerowsecurity, c.relreplident)
  FROM rel c
UNION ALL
-- a column's position among the live ones counts (SELECT * and INSERT without a column list see it);
-- the option pg_attver, which this server stamps on every column, differs between databases
SELECT format('column %s #%s %I: %s, not null %s, default %s, identity %L, generated %L, collation %s, acl %s, options %s',
              a.attrelid::regclass, lpad((row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum))::text, 3, '0'), a.attname,
              format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid), a.attidentity,
              a.attgenerated, CASE WHEN a.attcollation <> t.typcollation THEN a.attcollation::regcollation::text END,
              a.attacl, ARRAY(SELECT o FROM unnest(a.attoptions) o WHERE o NOT LIKE 'pg\_attver=%' ORDER BY o))
  FROM pg_attribute a JOIN rel c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
 WHERE a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT format('constraint %I on %s: %s', co.conname,
              CASE WHEN co.conrelid <> 0 THEN co.conrelid::regclass::text ELSE format_type(co.contypid, NULL) END,
              pg_get_constraintdef(co.oid))
  FROM pg_constraint co WHERE co.conrelid IN (SELECT oid FROM rel) OR co.contypid IN (SELECT oid FROM typ)
UNION ALL
SELECT format('index on %s: %s', i.indrelid::regclass, pg_get_indexdef(i.indexrelid))
  FROM pg_index i WHERE i.indrelid IN (SELECT oid FROM rel)
UNION ALL
SELECT format('view %s: %s', c.oid::regclass, pg_get_viewdef(c.oid)) FROM rel c WHERE c.relkind IN ('v', 'm')
UNION ALL
SELECT format('rule on %s: %s', r.ev_class::regclass, pg_get_ruledef(r.oid))
  FROM pg_rewrite r WHERE r.ev_class IN (SELECT oid FROM rel) AND r.rulename <> '_RETURN'
UNION ALL
SELECT format('trigger on %s: %s (enabled %s)', tg.tgrelid::regclass, pg_get_triggerdef(tg.oid), tg.tgenabled)
  FROM pg_trigger tg WHERE tg.tgrelid IN (SELECT oid FROM rel) AND NOT tg.tgisinternal
UNION ALL
SELECT format('policy %I on %s: command %s, permissive %s, roles %s, using %s, check %s', po.polname, po.polrelid::regclass,
              po.polcmd, po.polpermissive, po.polroles::regrole[], pg_get_expr(po.polqual, po.polrelid),
              pg_get_expr(po.polwithcheck, po.polrelid))
  FROM pg_policy po WHERE po.polrelid IN (SELECT oid FROM rel)
UNION ALL
SELECT format('sequence %s: %s, start %s, increment %s, min %s, max %s, cache %s, cycle %s', s.seqrelid::regclass,
              s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle)
  FROM pg_sequence s WHERE s.seqrelid IN (SELECT oid FROM rel)
UNION ALL
SELECT format('sequence %s owned by %s', d.objid::regclass, pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid))
  FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid IN (SELECT oid FROM rel WHERE relkind = 'S')
   AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
UNION ALL
-- types, casts, operators, event triggers
SELECT format('type %s: type %s, category %s, length %s, by value %s, align %s, storage %s, input %s, output %s, '
              'receive %s, send %s, element %s, base %s, not null %s, default %s, owner %s, acl %s',
              format_type(t.oid, NULL), t.typtype, t.typcategory, t.typlen, t.typbyval, t.typalign, t.typstorage,
              t.typinput::regprocedure, t.typoutput::regprocedure, t.typreceive::regprocedure, t.typsend::regprocedure,
              t.typelem::regtype, format_type(t.typbasetype, t.typtypmod), t.typnotnull, t.typdefault,
              t.typowner::regrole, t.typacl)
  FROM typ t
UNION ALL
SELECT format('enum %s: %s', format_type(e.enumtypid, NULL), string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder))
  FROM pg_enum e WHERE e.enumtypid IN (SELECT oid FROM typ) GROUP BY e.enumtypid
UNION ALL
SELECT format('cast (%s AS %s): function %s, context %s, method %s', ca.castsource::regtype, ca.casttarget::regtype,
              ca.castfunc::regprocedure, ca.castcontext, ca.castmethod)
  FROM pg_cast ca JOIN member m ON m.classid = 'pg_cast'::regclass AND m.objid = ca.oid
UNION ALL
SELECT format('operator %s: returns %s, function %s, commutator %s, negator %s, restrict %s, join %s, merges %s, hashes %s',
              o.oid::regoperator, o.oprresult::regtype, o.oprcode::regprocedure, o.oprcom::regoperator,
              o.oprnegate::regoperator, o.oprrest::regprocedure, o.oprjoin::regprocedure, o.oprcanmerge, o.oprcanhash)
  FROM pg_operator o JOIN member m ON m.classid = 'pg_operator'::regclass AND m.objid = o.oid
UNION ALL
SELECT format('event trigger %I: on %s, function %s, enabled %s, tags %s', ev.evtname, ev.evtevent,
              ev.evtfoid::regprocedure, ev.evtenabled, ev.evttags)
  FROM pg_event_trigger ev JOIN member m ON m.classid = 'pg_event_trigger'::regclass AND m.objid = ev.oid
UNION ALL
-- privileges: those the scripts recorded as the extension's initial ones (pg_dump relies on them),
-- and the built-in functions and relations whose privileges differ from the defaults (the scripts
-- revoke the statistics functions)
SELECT format('initial privileges of %s: %s', pg_describe_object(ip.classoid, ip.objoid, ip.objsubid), ip.initprivs)
  FROM pg_init_privs ip WHERE ip.privtype = 'e'
UNION ALL
SELECT format('built-in function %s: acl %s', p.oid::regprocedure, p.proacl)
  FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proacl IS NOT NULL
UNION ALL
SELECT format('built-in relation %s: acl %s', c.oid::regclass, c.relacl)
  FROM pg_class c WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relacl IS NOT NULL
ORDER BY 1
"""


def describe(dbname):
    """The extension's schema in a database, as text lines (one entry's continuation lines repeat its
    heading, so that a diff names the object)."""
    with connect(dbname) as c:
        c.execute("SET search_path = pg_catalog")  # every other name qualified, whatever the server's settings
        entries = [r[0] for r in c.execute(SCHEMA)]
    lines = []
    for entry in entries:
        first, *rest = entry.split("\n")
        lines.append(first)
        heading = first.split(":", 1)[0]
        lines += [f"{heading}:  | {line}" for line in rest]
    return lines


def check_4_schema_equals_a_fresh_install():
    require_updated()
    with connect("postgres") as c:
        c.execute(f"CREATE DATABASE {FRESH}")
    with connect(FRESH) as c:
        c.execute("CREATE EXTENSION pg_dp VERSION %s" % quote(ARGS.to_version))
    fresh, updated = describe(FRESH), describe(DB)
    # the description sees the whole extension (a broken query would compare nothing)
    for marker in ["member function dp.locked_budget(", "view dp.ledger:", "constraint role_budget_pkey on dp.role_budget:",
                   "aggregate public.dp_count(): arguments ()", "comment on table dp.release_log:", "config table dp.release_log:",
                   "built-in function pg_relation_size(regclass): acl"]:
        assert any(l.startswith(marker) for l in fresh), f"the schema description misses {marker!r}"
    if fresh != updated:
        diff = difflib.unified_diff(fresh, updated, f"fresh install of {ARGS.to_version}",
                                    f"updated from {ARGS.from_version}", lineterm="", n=1)
        raise AssertionError("the updated schema differs from a fresh install:\n" + "\n".join(diff))


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ap.add_argument("--from", dest="from_version", default="0.1.0", help="the released version to update from")
    ap.add_argument("--to", dest="to_version", help="the version to update to (default: the server's default_version)")
    ARGS = ap.parse_args()
    if ARGS.to_version is None:
        with connect("postgres") as c:
            ARGS.to_version = c.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'pg_dp'").fetchone()[0]
    try:
        setup()
        run_checks(globals(), "upgrade")
    finally:
        drop_all()


if __name__ == "__main__":
    main()

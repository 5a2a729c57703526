// Every cast and operator the grammar admits below a DP aggregate (src/query/total.rs) runs on the
// most extreme values each type can store, and none raises an error. The operators are taken from
// the catalog with the grammar's own test (`total::is_comparison`, `total::is_like`), so an
// operator admitted by mistake is exercised here too.

/// Extreme values of every comparable type, as SQL literals.
fn extremes(typ: &str) -> &'static [&'static str] {
    match typ {
        "boolean" => &["true", "false", "NULL"],
        "smallint" => &["32767", "-32768", "0", "-1", "1", "NULL"],
        "integer" => &["2147483647", "-2147483648", "0", "-1", "1", "NULL"],
        "bigint" => &["9223372036854775807", "-9223372036854775808", "0", "-1", "1", "NULL"],
        "real" => &["'3.4028235e38'", "'-3.4028235e38'", "'Infinity'", "'-Infinity'", "'NaN'", "'1e-45'", "'-0'", "NULL"],
        "double precision" => &["'1.7976931348623157e308'", "'-1.7976931348623157e308'", "'Infinity'", "'-Infinity'", "'NaN'", "'5e-324'", "'-0'", "NULL"],
        "numeric" => &["'Infinity'", "'-Infinity'", "'NaN'", "'1e1000'", "'-1e1000'", "'1e-1000'", "0", "NULL"],
        "text" | "character varying" | "character" | "name" => &["''", "'x'", "repeat('ü', 2000)", "NULL"],
        "date" => &["'infinity'", "'-infinity'", "'4713-01-01 BC'", "'5874897-12-31'", "NULL"],
        "timestamp without time zone" => &["'infinity'", "'-infinity'", "'4713-01-01 00:00 BC'", "'294276-12-31 23:59:59'", "NULL"],
        "timestamp with time zone" => &["'infinity'", "'-infinity'", "'4713-01-01 00:00+00 BC'", "'294276-12-31 23:59:59+00'", "NULL"],
        "time without time zone" => &["'00:00'", "'24:00'", "NULL"],
        "interval" => &["'178000000 years'", "'-178000000 years'", "'2147483647 days 2562047788 hours'", "NULL"],
        "uuid" => &["'00000000-0000-0000-0000-000000000000'", "'ffffffff-ffff-ffff-ffff-ffffffffffff'", "NULL"],
        _ => &["NULL"],
    }
}

/// A table `ext_<n>` with one column `v` holding every extreme value of a type.
fn extreme_table(typ: &str, n: usize) -> String {
    let name = format!("ext_{n}");
    let rows: Vec<String> = extremes(typ).iter().map(|v| format!("(({v})::{typ})")).collect();
    Spi::run(&format!("CREATE TABLE {name} (v {typ})")).unwrap();
    Spi::run(&format!("INSERT INTO {name} VALUES {}", rows.join(", "))).unwrap();
    name
}

#[pg_test]
fn every_total_expression_survives_extreme_values() {
    let types: Vec<String> = crate::query::total::COMPARABLE_TYPES.iter().map(|t| unsafe { crate::query::total::type_name(*t) }).collect();
    let mut tables = std::collections::HashMap::new();
    for (i, t) in types.iter().enumerate() {
        tables.insert(t.clone(), extreme_table(t, i));
    }
    let mut checked = 0;

    // casts
    for (f, what) in crate::query::total::TOTAL_CASTS {
        let (name, arg): (String, String) = Spi::get_two_with_args(
            "SELECT proname::text, format_type(proargtypes[0], NULL) FROM pg_proc WHERE oid = $1",
            &[pgrx::pg_sys::Oid::from(*f).into()],
        )
        .map(|(a, b)| (a.unwrap(), b.unwrap()))
        .unwrap();
        let table = tables.get(&arg).unwrap_or_else(|| panic!("no extreme values of {arg} for {what}"));
        Spi::run(&format!("SELECT pg_catalog.{name}(v) FROM {table}")).unwrap();
        checked += 1;
    }

    // comparison and LIKE operators, from the catalog
    let ops: Vec<(pg_sys::Oid, String, String, String)> = Spi::connect(|c| {
        c.select(
            "SELECT oid, oprname::text, format_type(oprleft, NULL), format_type(oprright, NULL)
               FROM pg_operator WHERE oid < 16384 AND oprleft <> 0 AND oprright <> 0 ORDER BY oid",
            None,
            &[],
        )
        .unwrap()
        .map(|r| (r.get::<pg_sys::Oid>(1).unwrap().unwrap(), r.get(2).unwrap().unwrap(), r.get(3).unwrap().unwrap(), r.get(4).unwrap().unwrap()))
        .collect()
    });
    for (opno, name, left, right) in ops {
        let admitted = unsafe { crate::query::total::is_comparison(opno) || crate::query::total::is_like(opno) };
        if !admitted {
            continue;
        }
        let (lt, rt) = (tables.get(&left), tables.get(&right));
        let (Some(lt), Some(rt)) = (lt, rt) else { panic!("admitted operator {name}({left}, {right}) has no extreme values") };
        let sql = if unsafe { crate::query::total::is_like(opno) } {
            // a literal pattern (the grammar requires one), against every extreme value
            format!("SELECT a.v OPERATOR(pg_catalog.{name}) 'x%\\\\_' FROM {lt} a")
        } else {
            format!("SELECT a.v OPERATOR(pg_catalog.{name}) b.v FROM {lt} a, {rt} b")
        };
        Spi::run(&sql).unwrap();
        checked += 1;
    }

    // integer bucketing by the admitted divisors, output casts to text, CASE, COALESCE, GREATEST
    for t in ["smallint", "integer", "bigint"] {
        let table = &tables[t];
        for k in ["1", "2", "-2", "7", "-32768"] {
            Spi::run(&format!("SELECT v / ({k})::{t}, v % ({k})::{t}, v / ({k})::int4, v / ({k})::int8 FROM {table}")).unwrap();
        }
        Spi::run(&format!("SELECT v % (-1)::{t} FROM {table}")).unwrap();
        checked += 1;
    }
    for t in &types {
        let table = &tables[t];
        Spi::run(&format!(
            "SELECT v::text, COALESCE(v, v), GREATEST(v, v), LEAST(v, v), NULLIF(v, v), CASE WHEN v IS NULL THEN v ELSE v END, v IS DISTINCT FROM v FROM {table}"
        ))
        .unwrap();
        checked += 1;
    }
    assert!(checked > 100, "only {checked} expressions checked");
}

// The same expressions below a real DP aggregate: admitted by the grammar, and no error.
#[pg_test]
fn total_expressions_run_inside_dp_aggregates_on_extreme_values() {
    Spi::run(
        "CREATE TABLE ext AS SELECT * FROM (VALUES
            (32767::int2, 2147483647, 9223372036854775807::int8, 'Infinity'::float8, 'NaN'::numeric, 'x'::text, 'infinity'::date),
            ((-32768)::int2, (-2147483648)::int4, (-9223372036854775808)::int8, '-Infinity'::float8, '1e1000'::numeric, ''::text, '-infinity'::date),
            (0::int2, 0, 0::int8, 'NaN'::float8, '-Infinity'::numeric, NULL, '5874897-12-31'::date),
            (NULL, NULL, NULL, '5e-324'::float8, NULL, 'ü', NULL)) v(s, i, b, f, n, t, d)",
    )
    .unwrap();
    Spi::run("SELECT dp.protect_table('ext')").unwrap();
    Spi::run(&format!("CREATE ROLE {ANALYST}")).unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    as_analyst(|| {
        one_text(
            "SELECT concat_ws(' ',
                dp_count(*) FILTER (WHERE f > 0 AND n < 0 AND t LIKE 'x%' AND d > '2000-01-01' AND s::int4 = i AND i::int8 = b),
                dp_sum(COALESCE(s, i % 7), -10, 10), dp_sum(b / 1000, -10, 10), dp_avg(f, -1, 1), dp_avg(n, -1, 1),
                dp_sum(i::float8, -1, 1), dp_sum(b::numeric, -1, 1), dp_sum(GREATEST(f, 0), 0, 1),
                dp_count(CASE WHEN t IS NULL THEN 'null' WHEN t = '' THEN 'empty' ELSE t END))
             FROM ext WHERE (s IS NULL OR s BETWEEN -32768 AND 32767) AND b IN (0, 1, -9223372036854775808) IS NOT FALSE",
        )
    });
}

#[pg_test]
fn the_failure_mode_table_is_in_the_docs() {
    // the totality table is kept twice, in the code beside the grammar and for users in
    // docs/security.md: the two must say the same
    let docs = include_str!("../docs/security.md");
    assert!(crate::query::total::FAILURE_MODES.len() >= 18);
    for f in crate::query::total::FAILURE_MODES {
        let row = format!("| {} | {} | {} |", f.node, f.could_fail_by, f.why_it_cannot);
        assert!(docs.contains(&row), "docs/security.md lacks the failure modes of {}", f.node);
    }
}

// Arithmetic below a DP aggregate (query/arithmetic.rs): every built-in + - * / % (and integer
// unary -) on integers, floats and numeric, on every pair of extreme values, inside a real DP
// aggregate as the DP-only role: admitted, and no error. PostgreSQL's own operators raise an error
// on most of these rows (the negative control at the end).
#[pg_test]
fn total_arithmetic_runs_inside_dp_aggregates_on_every_pair_of_extreme_values() {
    let types = ["smallint", "integer", "bigint", "real", "double precision", "numeric"];
    let ops: Vec<(String, String, String)> = Spi::connect(|c| {
        c.select(
            "SELECT oprname::text, format_type(oprleft, NULL), format_type(oprright, NULL) FROM pg_operator
              WHERE oid < 16384 AND oprname IN ('+', '-', '*', '/', '%') AND oprright <> 0
                AND format_type(oprright, NULL) IN ('smallint', 'integer', 'bigint', 'real', 'double precision', 'numeric')
                AND (oprleft = 0 OR format_type(oprleft, NULL) IN ('smallint', 'integer', 'bigint', 'real', 'double precision', 'numeric'))
              ORDER BY oid",
            None,
            &[],
        )
        .unwrap()
        .map(|r| (r.get(1).unwrap().unwrap(), r.get::<String>(2).unwrap().unwrap_or_default(), r.get(3).unwrap().unwrap()))
        .collect()
    });
    Spi::run(&format!("CREATE ROLE {ANALYST}")).unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let mut checked = 0;
    for (i, l) in types.iter().enumerate() {
        for (j, r) in types.iter().enumerate() {
            let pairs: Vec<&(String, String, String)> = ops.iter().filter(|(_, ol, or)| (ol == l || ol == "-") && or == r).collect();
            if pairs.is_empty() {
                continue;
            }
            let table = format!("arith_{i}_{j}");
            Spi::run(&format!(
                "CREATE TABLE {table} AS SELECT a.v::{l} AS l, b.v::{r} AS r
                   FROM unnest(ARRAY[{}]) a(v), unnest(ARRAY[{}]) b(v)",
                extremes(l).iter().map(|v| format!("({v})::{l}")).collect::<Vec<_>>().join(", "),
                extremes(r).iter().map(|v| format!("({v})::{r}")).collect::<Vec<_>>().join(", ")
            ))
            .unwrap();
            Spi::run(&format!("SELECT dp.protect_table('{table}')")).unwrap();
            for (op, ol, _) in pairs {
                let e = if ol == "-" { format!("{op} r") } else { format!("l {op} r") };
                as_analyst(|| Spi::run(&format!("SELECT dp_count({e}, 1e6), dp_count(*) FILTER (WHERE {e} > 0) FROM {table}")).unwrap());
                checked += 1;
            }
        }
    }
    assert!(checked >= 60, "only {checked} operators checked");
    // the negative control: the same values through PostgreSQL's own operator raise an error
    assert!(error_of("SELECT l * r FROM arith_1_1").is_some());
    // and what the total forms give: saturation, ±Infinity, NULL for a division by 0
    Spi::run("CREATE TABLE arith_cases AS SELECT 2147483647 AS i, 0 AS z, 1e308::float8 AS f, 1e131071::numeric AS n").unwrap();
    Spi::run("SELECT dp.protect_table('arith_cases')").unwrap();
    let shown = as_analyst(|| {
        one_text(
            "SELECT concat_ws(' ', dp_count(i + 1, 1e6) FILTER (WHERE i + 1 = 2147483647),
                                 dp_count(i / z, 1e6), dp_count(true, 1e6) FILTER (WHERE f * 10 = 'Infinity'),
                                 dp_count(true, 1e6) FILTER (WHERE n * n = 'Infinity'), dp_count(true, 1e6) FILTER (WHERE -n * n = '-Infinity'))
               FROM arith_cases",
        )
    });
    // at ε = 1e6 the counts are exact
    assert_eq!(shown, "1 0 1 1 1");
}

// Dates and times below a DP aggregate (query/datetime.rs): date_trunc, extract, date_part, date ±
// integer, date − date, timestamp ± interval, timestamp − timestamp, on every pair of extreme
// values (the ends of the ranges, infinities), under two time zones: admitted, and no error.
// PostgreSQL's own forms raise "out of range" errors on most of these rows (negative control).
#[pg_test]
fn total_date_and_time_forms_run_inside_dp_aggregates_on_extreme_values() {
    Spi::run(&format!("CREATE ROLE {ANALYST}")).unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let vals = |t: &str| extremes(t).iter().map(|v| format!("({v})::{t}")).collect::<Vec<_>>().join(", ");
    Spi::run(&format!(
        "CREATE TABLE dt AS SELECT d, t, z, i, n FROM unnest(ARRAY[{}]) d, unnest(ARRAY[{}]) t,
                unnest(ARRAY[{}]) z, unnest(ARRAY[{}]) i, unnest(ARRAY[2147483647, -2147483648, 0, 7]) n",
        vals("date"),
        vals("timestamp without time zone"),
        vals("timestamp with time zone"),
        vals("interval")
    ))
    .unwrap();
    Spi::run("SELECT dp.protect_table('dt')").unwrap();
    let exprs = [
        "date_trunc('month', t)", "date_trunc('millennium', t)", "date_trunc('week', z)", "date_trunc('day', z)",
        "extract(year FROM t)", "extract(epoch FROM z)", "extract(dow FROM d)", "extract(julian FROM d)",
        "date_part('isoyear', t)", "date_part('hour', z)",
        "d + n", "d - n", "n + d", "d - d", "d - 30", "d + interval '1 month'", "d - i",
        "t + i", "t - i", "i + t", "z + i", "z - interval '1 day'", "t - t", "z - z", "t + interval '100 years'",
        "date_trunc('month', d)", "d::timestamp", "d::timestamptz", "date_trunc('year', d::timestamp)",
        "t::date", "z::date", "date_trunc('month', d)::date",
    ];
    for zone in ["UTC", "Pacific/Kiritimati"] {
        Spi::run(&format!("SET TimeZone = '{zone}'")).unwrap();
        for e in exprs {
            as_analyst(|| {
                Spi::run(&format!("SELECT dp_count({e}, 1e6), dp_count(*) FILTER (WHERE {e} IS NOT NULL) FROM dt")).unwrap();
                // a key of type interval is refused where groups are selected ('1 day' = '24 hours'
                // would print one row's spelling): its total form still runs inside the aggregate
                match error_of(&format!("SELECT {e} AS k, dp_count(true, 1e6) FROM dt GROUP BY 1")) {
                    None => {}
                    Some(err) => assert!(err.starts_with("GROUP BY key of type interval over protected table dt"), "{e}: {err}"),
                }
            });
        }
    }
    Spi::run("RESET TimeZone").unwrap();
    // negative control: PostgreSQL's own forms fail on these rows
    assert!(error_of("SELECT t + i FROM dt").is_some());
    assert!(error_of("SELECT d - d FROM dt").is_some());
    assert!(error_of("SELECT date_trunc('millennium', t) FROM dt").is_some());
    assert!(error_of("SELECT date_trunc('month', d) FROM dt").is_some());
    // what the total forms give
    Spi::run("CREATE TABLE dt_cases AS SELECT '5874897-12-31'::date AS d, 'infinity'::date AS inf, '294276-12-31'::timestamp AS t").unwrap();
    Spi::run("SELECT dp.protect_table('dt_cases')").unwrap();
    let shown = as_analyst(|| {
        one_text(
            "SELECT concat_ws(' ', dp_count(true, 1e6) FILTER (WHERE d + 1 = 'infinity'),
                                 dp_count(d - inf, 1e6), dp_count(t + interval '1 year', 1e6),
                                 dp_count(true, 1e6) FILTER (WHERE d - 1 = '5874897-12-30'))
               FROM dt_cases",
        )
    });
    assert_eq!(shown, "1 0 0 1");
    // an unknown unit is an error from the text, whatever the data
    let e = as_analyst(|| error_of("SELECT dp_count(true, 1e6) FILTER (WHERE date_trunc('fortnight', t) IS NULL) FROM dt_cases")).unwrap();
    assert!(e.contains("fortnight"), "{e}");
    let e = as_analyst(|| error_of("SELECT dp_count(date_trunc(CASE WHEN t > now() THEN 'day' ELSE 'month' END, t), 1e6) FROM dt_cases")).unwrap();
    assert!(e.contains("must be a literal"), "{e}");
}

// The DP query grammar (src/query/grammar.rs): the queries it admits give DP answers and are charged
// once, whatever plan the planner picks; every construct it does not name is refused, before
// anything is charged, with a message that names the construct.

/// Admitted queries for the DP-only role on the protected `patients`: (query, receipts it costs,
/// its result as text at ε = 1e6, where counts are exact). `None`: the result is not checked.
const ADMITTED: &[(&str, i64, Option<&str>)] = &[
    ("SELECT dp_count(id, 1e6) FROM patients", 1, Some("1000")),
    ("SELECT dp_count(*) FROM patients", 1, Some("1000")),
    ("SELECT string_agg(n::text, ',' ORDER BY region) FROM (SELECT region, dp_count(id, 1e6) AS n FROM patients GROUP BY region) s", 1, Some("200,200,200,200,200")),
    ("SELECT dp_count(id, 1e6) FILTER (WHERE smoker) FROM patients", 1, Some("333")),
    ("SELECT dp_count(id, 1e6) FROM patients WHERE region IN (1, 2) AND bmi BETWEEN 20 AND 30 AND name LIKE 'p%' AND born IS NOT NULL", 1, None),
    ("SELECT string_agg(rname || '=' || n, ',' ORDER BY rname) FROM (SELECT r.rname, dp_count(p.id, 1e6) AS n FROM patients p JOIN regions r ON r.id = p.region GROUP BY r.rname) s", 1, Some("region 0=200,region 1=200,region 2=200,region 3=200,region 4=200")),
    ("SELECT dp_count(p.id, 1e6) FROM patients p LEFT JOIN regions r ON r.id = p.region WHERE r.code IS NULL OR r.code > 10", 1, Some("600")),
    ("SELECT dp_count(p.id, 1e6) FROM patients p, regions r WHERE r.id = p.region AND r.code > 10", 1, Some("600")),
    ("SELECT dp_count(p.id, 1e6) FROM patients p JOIN regions r USING (id)", 1, Some("4")),
    ("SELECT count(*) FROM (SELECT region FROM patients GROUP BY region HAVING dp_count(id, 1e6) > 100) s", 1, Some("5")),
    ("SELECT (SELECT dp_count(id, 1e6) FROM patients) - (SELECT dp_count(id, 1e6) FROM patients WHERE smoker)", 2, Some("667")),
    ("SELECT sum(n) FROM (SELECT dp_count(id, 1e6) AS n FROM patients WHERE smoker UNION ALL SELECT dp_count(id, 1e6) FROM patients WHERE NOT smoker) u", 2, Some("1000")),
    ("WITH c AS MATERIALIZED (SELECT region, dp_count(id, 1e6) AS n FROM patients GROUP BY region) SELECT sum(a.n + b.n) FROM c a JOIN c b ON a.region = b.region", 1, Some("2000")),
    ("SELECT max(r) FROM (SELECT region, n, rank() OVER (ORDER BY region) AS r FROM (SELECT region, dp_count(id, 1e6) AS n FROM patients GROUP BY region) s) t", 1, Some("5")),
    ("SELECT max(rn) FROM (SELECT region, dp_count(id, 1e6), row_number() OVER (ORDER BY region) AS rn FROM patients GROUP BY region) s", 1, Some("5")),
    ("SELECT count(*) FROM (SELECT region, dp_count(id, 1e6) AS n FROM patients GROUP BY region ORDER BY n DESC LIMIT 2) s", 1, Some("2")),
    ("SELECT count(*) FROM (SELECT DISTINCT dp_count(id, 1e6) FROM patients GROUP BY region) s", 1, Some("1")),
    // grouping sets and keys without a public domain: each set's groups are chosen by partition
    // selection (one more receipt per set)
    ("SELECT sum(n) FROM (SELECT region, dp_count(id, 1e6) AS n FROM patients GROUP BY ROLLUP (region)) s", 4, Some("2000")),
    ("SELECT sum(n) FROM (SELECT id % 10 AS b, dp_count(id, 1e6) AS n FROM patients GROUP BY 1) s", 2, Some("1000")),
    // big / 100 = 10 holds one patient (id 1000): partition selection drops that group
    ("SELECT sum(n) FROM (SELECT big / 100 AS b, dp_count(id, 1e6) AS n FROM patients GROUP BY 1) s", 2, Some("999")),
    ("SELECT string_agg(n::text, ',' ORDER BY k) FROM (SELECT CASE WHEN income < 50000 THEN 'low' ELSE 'high' END AS k, dp_count(id, 1e6) AS n FROM patients GROUP BY 1) s", 2, None),
    ("SELECT concat_ws(',', dp_sum(big, 0, 2000, 1e6), round(dp_avg(n, 0, 2000, 1e6)), round(dp_sum(COALESCE(income, 0), 0, 1e5, 1e6)), round(dp_sum(GREATEST(bmi, 20), 0, 100, 1e6)), round(dp_sum(region::float8, 0, 10, 1e6)), dp_count(NULLIF(region, 0), 1e6)) FROM patients", 6, None),
    ("SELECT dp_count(id, 1e6) FROM patients WHERE name IS DISTINCT FROM 'Bob' AND smoker IS NOT TRUE AND id::text LIKE '1%' AND income = ANY(ARRAY[1.0, 2.0]::float8[]) IS NOT NULL AND born > date '2000-01-10'", 1, None),
    ("SELECT dp_count(id, 1e6) FROM patient_view", 1, Some("333")),
    ("SELECT sum(n) FROM region_counts", 1, Some("1000")),
    ("SELECT dp_count(id, 1e6) FROM (SELECT id, income FROM (SELECT * FROM patients WHERE smoker) a WHERE income > 10) b", 1, Some("333")),
    ("SELECT round(dp_median(income, 0, 200000, 1e6, 1e-6)) > 0 AND dp_percentile_em(bmi, 0.9, 0, 100, 1e6) > 0 FROM patients", 2, Some("true")),
    ("SELECT dp_count(id, 1e6) FROM patients WHERE false", 1, Some("0")),
    ("SELECT count(*) FROM (SELECT region, dp_count(id, 1e6), (SELECT rname FROM regions r WHERE r.id = patients.region) FROM patients GROUP BY region) s", 1, Some("5")),
    ("SELECT concat_ws(',', dp_count(id, 1e6), round(dp_avg(bmi, 0, 100, 1e6))) FROM patients", 2, None),
    ("SELECT dp_count(id, 1e6) FROM patients_by_region WHERE rname = 'region 1'", 1, Some("200")),
];

/// Objects the corpus reads, created as superuser. `region` has a public domain (its GROUP BY
/// shows every region, as is); other GROUP BY keys of `patients` are chosen by partition selection.
fn corpus_setup() {
    protected_setup();
    Spi::run("SELECT dp.set_domain('patients', 'region', ARRAY[0, 1, 2, 3, 4])").unwrap();
    Spi::run("SET dp.default_epsilon = 1e6").unwrap();
    Spi::run("CREATE VIEW patient_view AS SELECT id, region, income FROM patients WHERE smoker").unwrap();
    Spi::run("CREATE VIEW region_counts AS SELECT region, dp_count(id, 1e6) AS n FROM patients GROUP BY region").unwrap();
    Spi::run("CREATE VIEW patients_by_region AS SELECT p.id, r.rname FROM patients p JOIN regions r ON r.id = p.region").unwrap();
    Spi::run(&format!("GRANT SELECT ON patient_view, region_counts, patients_by_region TO {ANALYST}")).unwrap();
}

/// Runs the corpus as the DP-only role: every query succeeds, costs its receipts, and gives its
/// result. Returns the results.
fn run_corpus(setting: &str) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for (sql, cost, expect) in ADMITTED {
        // one text column, whatever the query returns
        let run = format!("SELECT ({sql})::text");
        let before = receipts_of(&run);
        let got = as_analyst(|| Spi::get_one::<String>(&run).unwrap());
        let charged = receipts_of(&run) - before;
        assert_eq!(charged, *cost, "[{setting}] {sql} cost {charged} receipts");
        if let Some(e) = expect {
            assert_eq!(got.as_deref(), Some(*e), "[{setting}] {sql}");
        }
        out.push(got);
    }
    out
}

#[pg_test]
fn admitted_queries_give_dp_answers_and_are_charged_once() {
    corpus_setup();
    run_corpus("default plan");
}

// The grammar decides on the query alone: under any planner setting the same queries are admitted,
// the executor-time checks (release nodes, tickets, the permission hook) never fire for them, and
// each costs the same receipts.
#[pg_test]
fn admitted_queries_run_under_every_plan_shape() {
    corpus_setup();
    Spi::run("ANALYZE patients").unwrap();
    let settings: &[(&str, &[&str])] = &[
        ("parallel", &["SET max_parallel_workers_per_gather = 2", "SET parallel_setup_cost = 0", "SET parallel_tuple_cost = 0", "SET min_parallel_table_scan_size = 0", "SET parallel_leader_participation = off"]),
        ("nested loops, sorted aggregation", &["RESET ALL", "SET dp.require_budget = off", "SET dp.default_epsilon = 1e6", "SET enable_hashagg = off", "SET enable_hashjoin = off", "SET enable_mergejoin = off", "SET enable_material = off"]),
        ("index scans", &["RESET ALL", "SET dp.require_budget = off", "SET dp.default_epsilon = 1e6", "SET enable_seqscan = off", "SET enable_bitmapscan = off"]),
        ("forced parallel mode", &["RESET ALL", "SET dp.require_budget = off", "SET dp.default_epsilon = 1e6", "SET force_parallel_mode = on"]),
        ("jit", &["RESET ALL", "SET dp.require_budget = off", "SET dp.default_epsilon = 1e6", "SET jit = on", "SET jit_above_cost = 0", "SET jit_inline_above_cost = 0", "SET jit_optimize_above_cost = 0"]),
    ];
    let reference = run_corpus("default plan");
    for (name, sets) in settings {
        for s in *sets {
            Spi::run(s).unwrap();
        }
        let got = run_corpus(name);
        for ((sql, _, expect), (a, b)) in ADMITTED.iter().zip(reference.iter().zip(&got)) {
            if expect.is_some() {
                assert_eq!(a, b, "[{name}] {sql}");
            }
        }
    }
}

#[pg_test]
fn bind_parameters_and_generic_plans_are_admitted() {
    corpus_setup();
    as_analyst(|| {
        Spi::run("PREPARE q(float8, float8, int) AS SELECT dp_sum(income, 0, $1, $2) FROM patients WHERE region = $3").unwrap();
        Spi::run("SET plan_cache_mode = force_generic_plan").unwrap();
        for _ in 0..3 {
            let v = one_f64("EXECUTE q(100000, 1e6, 1)");
            assert!(v > 0.0, "{v}");
        }
        Spi::run("PREPARE c(float8) AS SELECT dp_count(id, $1) FROM patients").unwrap();
        assert_eq!(one_i64("EXECUTE c(1e6)"), 1000);
    });
}

#[pg_test]
fn a_scrollable_cursor_replays_its_one_release() {
    corpus_setup();
    let q = "DECLARE c SCROLL CURSOR FOR SELECT region || ':' || dp_count(id, 0.1) FROM patients GROUP BY region ORDER BY region";
    let before = receipts_of(q);
    as_analyst(|| {
        Spi::run(q).unwrap();
        let first = column("FETCH ALL FROM c");
        assert_eq!(first.len(), 5);
        let again: Vec<Option<String>> = column("FETCH ABSOLUTE 1 FROM c").into_iter().chain(column("FETCH ALL FROM c")).collect();
        assert_eq!(first, again, "a rewound cursor released new values");
        Spi::run("MOVE ABSOLUTE 0 IN c").unwrap();
        assert_eq!(column("FETCH ALL FROM c"), first);
        let back = column("FETCH BACKWARD ALL FROM c");
        assert_eq!(back.len(), 5);
        Spi::run("CLOSE c").unwrap();
        // implicitly scrollable (no SCROLL, a plan that can run backwards), and WITH HOLD
        Spi::run("DECLARE d CURSOR WITH HOLD FOR SELECT dp_count(id, 0.1)::text FROM patients").unwrap();
        let a = column("FETCH ALL FROM d");
        Spi::run("MOVE ABSOLUTE 0 IN d").unwrap();
        assert_eq!(column("FETCH ALL FROM d"), a);
        Spi::run("CLOSE d").unwrap();
    });
    assert_eq!(receipts_of(q), before + 1);
}

// A DP level read again by a nested loop, a hash join's rescans or a SubPlan replays the rows
// of its one release: the same values, one charge.
#[pg_test]
fn a_dp_level_read_many_times_is_released_once() {
    corpus_setup();
    Spi::run("CREATE TABLE many AS SELECT g FROM generate_series(1, 50) g").unwrap();
    Spi::run(&format!("GRANT SELECT ON many TO {ANALYST}")).unwrap();
    Spi::run("SET enable_hashjoin = off").unwrap();
    Spi::run("SET enable_mergejoin = off").unwrap();
    Spi::run("SET enable_material = off").unwrap();
    // a LEFT JOIN keeps `many` on the outer side: the DP level is the inner side, read 50 times
    let q = "SELECT count(DISTINCT n) FROM many m LEFT JOIN (SELECT dp_count(id, 0.01) AS n FROM patients) s ON m.g > 0";
    let before = receipts_of(q);
    assert_eq!(as_analyst(|| one_i64(q)), 1, "one release, one value");
    assert_eq!(receipts_of(q), before + 1);
    let q2 = "SELECT count(DISTINCT x) FROM (SELECT g, (SELECT dp_count(id, 0.01) FROM patients) AS x FROM many) t";
    let before = receipts_of(q2);
    assert_eq!(as_analyst(|| one_i64(q2)), 1);
    assert_eq!(receipts_of(q2), before + 1);
}

/// Constructs below a DP aggregate that the grammar refuses: (query, words of the refusal).
const REFUSED: &[(&str, &str)] = &[
    ("SELECT dp_avg(b, 0, 200000, 0.01) FROM (SELECT max(income) OVER () AS b FROM patients) s", "window function in the input of dp_avg"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE income > (SELECT avg(code) FROM regions)", "subquery in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE EXISTS (SELECT 1 FROM regions WHERE code > 30)", "subquery in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE region IN (SELECT id FROM regions)", "subquery in the input of dp_count"),
    ("SELECT dp_sum((SELECT max(code) FROM regions), 0, 10, 0.1) FROM patients", "subquery in the input of dp_sum"),
    ("SELECT dp_count(id, 0.1) FILTER (WHERE region = (SELECT min(id) FROM regions)) FROM patients", "subquery in the input of dp_count"),
    ("SELECT k, dp_count(id, 0.1) FROM (SELECT id, (SELECT 1) AS k FROM patients) s GROUP BY k", "subquery in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM (SELECT id FROM patients ORDER BY income DESC LIMIT 10) s", "LIMIT in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM (SELECT id FROM patients OFFSET 10) s", "OFFSET in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM (SELECT DISTINCT region AS id FROM patients) s", "DISTINCT in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM (SELECT DISTINCT ON (region) id FROM patients) s", "DISTINCT ON in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM (SELECT id FROM patients UNION ALL SELECT id FROM patients) s", "set operation (UNION, INTERSECT, EXCEPT) in the input of dp_count"),
    ("SELECT dp_count(g, 0.1) FROM (SELECT generate_series(1, 10) AS g, id FROM patients) s", "set-returning function in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM patients CROSS JOIN generate_series(1, 10) k", "function in FROM in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM patients TABLESAMPLE BERNOULLI (50)", "TABLESAMPLE of patients in the input of dp_count"),
    ("SELECT dp_count(a.id, 0.1) FROM patients a JOIN patients b ON a.id = b.id", "join of protected tables patients and patients"),
    ("SELECT dp_count(p.id, 0.1) FROM patients p JOIN regions r ON r.code = p.region", "join of patients with regions in the input of dp_count: each row of patients must match at most one row of regions"),
    ("SELECT dp_count(p.id, 0.1) FROM patients p JOIN regions r ON r.id > p.region", "join of patients with regions"),
    ("SELECT dp_count(p.id, 0.1) FROM patients p FULL JOIN regions r ON r.id = p.region", "FULL JOIN in the input of dp_count"),
    ("SELECT dp_count(p.id, 0.1) FROM regions r LEFT JOIN patients p ON r.id = p.region", "protected table patients on the nullable side of an outer join"),
    ("WITH c AS (SELECT * FROM patients) SELECT dp_count(id, 0.1) FROM c", "WITH query in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM (VALUES (1), (2)) v(id)", "VALUES in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM (SELECT region, count(*) AS id FROM patients GROUP BY region) s", "aggregation (another aggregate or GROUP BY) in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE lower(name) = 'bob'", "function lower(text) in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE random() < 0.5", "function random() in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE pg_sleep(0) IS NULL", "function pg_sleep(double precision) in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE income ^ 2 > 5", "operator ^ (double precision, double precision)"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE make_interval(days => id) > '1 day'", "function make_interval"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE id::int2 > 5", "cast from integer to smallint in the input of dp_count"),
    ("SELECT dp_sum(n::float8, 0, 10, 0.1) FROM patients", "cast from numeric to double precision"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE name::int > 5", "cast from text to integer"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE name ~ '^B'", "operator ~ (text, text)"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE name LIKE name", "LIKE with a pattern that is not a literal"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE name LIKE 'B\\'", "LIKE pattern in the input of dp_count must not end with the escape character"),
    ("SELECT dp_count(ctid, 0.1) FROM patients", "system column in the input of dp_count"),
    ("SELECT dp_count(id, 0.1) FROM patients WHERE ctid = '(0,1)'", "operator = (tid, tid) in the input of dp_count"),
    ("SELECT dp_count(p, 0.1) FROM patients p", "whole-row reference in the input of dp_count"),
    ("SELECT dp_count(DISTINCT region, 0.1) FROM patients", "DISTINCT inside dp_count"),
    ("SELECT dp_count(id, 0.1 ORDER BY id) FROM patients", "ORDER BY inside dp_count"),
    ("SELECT dp_count(id, 0.1), count(*) FROM patients", "count next to dp_count over protected table patients"),
    ("SELECT dp_count(id, 0.1), max(income) FROM patients", "max next to dp_count over protected table patients"),
    ("SELECT dp_count(*) OVER () FROM patients", "dp_count cannot be used as a window function"),
    ("SELECT r.id, (SELECT dp_count(p.id, 0.1) FROM patients p WHERE p.region = r.id) FROM regions r", "dp_count in a subquery that refers to an outer query or uses LATERAL"),
    ("SELECT * FROM regions r, LATERAL (SELECT dp_count(p.id, 0.1) FROM patients p WHERE p.region = r.id) l", "dp_count in a subquery that refers to an outer query or uses LATERAL"),
    ("SELECT (SELECT dp_sum(r.code, 0, 10, 0.1) FROM patients p) FROM regions r", "dp_sum inside a subquery aggregates columns of an outer query"),
    ("SELECT dp_sum(income, 0, income, 0.1) FROM patients", "upper of dp_sum must be a literal or a bind parameter ($1), not a column"),
    ("SELECT dp_sum(income, 0, 100, 0.5 * 2) FROM patients", "epsilon of dp_sum must be a literal or a bind parameter ($1), not an expression"),
    ("SELECT dp_sum(income, 0, (SELECT max(code) FROM regions), 0.1) FROM patients", "upper of dp_sum must be a literal or a bind parameter ($1), not a subquery"),
    ("SELECT dp_sum(income, 0, abs(-100), 0.1) FROM patients", "upper of dp_sum must be a literal or a bind parameter ($1), not a function call"),
    ("SELECT dp_percentile(income, random(), 0, 100, 0.1) FROM patients", "p of dp_percentile must be a literal or a bind parameter ($1), not a function call"),
    ("SELECT dp_count(p.id, 0.1) FROM patients p, regions r", "join of patients with regions"),
];

#[pg_test]
fn every_construct_outside_the_grammar_is_refused_before_charging() {
    corpus_setup();
    for (sql, expect) in REFUSED {
        refused_as_analyst(sql, expect);
    }
}

// The same constructs over an unprotected table, by its owner: the grammar protects the stated ε
// of every release, so it applies to every role and every table.
#[pg_test]
fn the_grammar_applies_to_unprotected_tables_and_superusers_too() {
    corpus_setup();
    Spi::run("SELECT dp.unprotect_table('patients')").unwrap();
    for (sql, expect) in REFUSED.iter().filter(|(_, e)| !e.contains("protected")) {
        refused_without_charge(sql, expect);
    }
}

#[pg_test]
fn a_refusal_never_depends_on_the_data() {
    corpus_setup();
    for (sql, expect) in REFUSED.iter().take(12) {
        refused_whatever_the_data(sql, expect);
    }
    // the same holds for an empty table
    Spi::run("DELETE FROM patients").unwrap();
    for (sql, expect) in REFUSED.iter().skip(12) {
        refused_as_analyst(sql, expect);
    }
}

#[pg_test]
fn refusals_use_an_ordinary_query_error_state() {
    corpus_setup();
    as_analyst(|| {
        let state = PgTryBuilder::new(|| {
            Spi::run("SELECT dp_count(id, 0.1) FROM (SELECT id FROM patients LIMIT 3) s").unwrap();
            String::new()
        })
        .catch_others(|e| match e {
            pg_sys::panic::CaughtError::PostgresError(r) | pg_sys::panic::CaughtError::ErrorReport(r) | pg_sys::panic::CaughtError::RustPanic { ereport: r, .. } => {
                format!("{:?}", r.sql_error_code())
            }
        })
        .execute();
        // 42501 insufficient_privilege, never 0A000 (which connection pools treat as fatal)
        assert_eq!(state, "ERRCODE_INSUFFICIENT_PRIVILEGE");
    });
}

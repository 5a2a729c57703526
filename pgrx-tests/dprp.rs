// dp.release_projection and dp.release_projection_rows: shapes, units, receipt, charge, the order
// of checks (nothing data-dependent before the charge), sources, privileges, NULLs, the row count,
// memory limits and safe names. Statistical properties of the mechanism are tested in tests/dprp.rs;
// interrupts by statement_timeout and pg_cancel_backend in tests/client.

fn dprp_source() {
    Spi::run(
        "CREATE TABLE src AS SELECT g AS id, (g % 50)::float8 AS a, (g % 7)::int AS b, ((g % 50) * 2 + g % 7)::numeric AS c,
                'v' || g AS t FROM generate_series(1, 1000) g",
    )
    .unwrap();
}

const ARGS: &str = "ARRAY['a', 'b', 'c'], ARRAY[0, 0, 0]::float8[], ARRAY[50, 7, 110]::float8[]";

fn receipt(sql: &str) -> serde_json::Value {
    serde_json::from_str(&one_text(&format!("SELECT ({sql})::text"))).unwrap()
}

/// Receipts of table releases charged by this test: a release's receipt records the statement the
/// client sent (here the test's own call), which `current_query()` returns.
fn dprp_receipts() -> i64 {
    one_i64("SELECT count(*) FROM dp.ledger WHERE mechanism = 'dprp' AND query_text = current_query()")
}

/// Refused with `expect`, nothing charged.
fn refused_uncharged(sql: &str, expect: &str) -> String {
    let before = dprp_receipts();
    let msg = refused(sql, expect);
    assert_eq!(dprp_receipts(), before, "charged although refused: {sql}");
    msg
}

/// As `role`: refused with `expect`, nothing charged (checked as superuser, who reads the ledger).
fn refused_as(role: &str, sql: &str, expect: &str) -> String {
    let before = dprp_receipts();
    Spi::run(&format!("SET ROLE {role}")).unwrap();
    let msg = refused(sql, expect);
    Spi::run("RESET ROLE").unwrap();
    assert_eq!(dprp_receipts(), before, "charged although refused: {sql}");
    msg
}

/// Scans of `rel` so far in this transaction (counted also in rolled-back subtransactions).
fn scans(rel: &str) -> i64 {
    one_i64(&format!("SELECT pg_stat_get_xact_numscans('{rel}'::regclass)"))
}

#[pg_test]
fn release_creates_the_table_in_original_units_and_returns_the_receipt() {
    dprp_source();
    // clip_norm √3 keeps every row unclipped, so the release stays in the data's units
    let r = receipt(&format!("SELECT dp.release_projection('src', 'released', {ARGS}, 1e6, 1e-5, clip_norm => 1.732)"));
    for (k, v) in [("method", "dprp"), ("noise", "discrete_gaussian"), ("target", "released"), ("source", "src"), ("row_norm", "clip")] {
        assert_eq!(r[k], v, "{k} in {r}");
    }
    assert_eq!(r["neighbours"], "add or remove one row");
    assert_eq!(r["null_value"], "midpoint of the bounds");
    assert_eq!(r["d"], 3);
    assert_eq!(r["epsilon"], 1e6);
    assert_eq!(r["delta"], 1e-5);
    assert!(r.get("n").is_none() && r.get("seed").is_none(), "{r}");
    assert!(r["sigma_projection"].as_f64().unwrap() > 0.0 && r["sigma_covariance"].as_f64().unwrap() > 0.0);
    // m = n + K released rows, K ≥ 1 padding rows; at ε = 1e6 the noisy count is n to within a row
    let m = r["rows_released"].as_i64().unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM released"), m);
    assert!(m > 1000 && (m as f64) < 1000.0 + 2.0 * r["padding_offset"].as_f64().unwrap() + 2.0, "{r}");
    assert!((r["noisy_row_count"].as_f64().unwrap() - 1000.0).abs() < 1.0, "{r}");
    // same columns, all float8, within the bounds
    let cols = column("SELECT attname || ' ' || format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'released'::regclass AND attnum > 0 ORDER BY attnum");
    assert_eq!(cols, vec![Some("a double precision".into()), Some("b double precision".into()), Some("c double precision".into())]);
    assert_eq!(one_i64("SELECT count(*) FROM released WHERE a NOT BETWEEN 0 AND 50 OR b NOT BETWEEN 0 AND 7 OR c NOT BETWEEN 0 AND 110"), 0);
    // at ε = 1e6 the release is close to the data, in the original units (a few padding rows sit
    // at the midpoint)
    for col in ["a", "b", "c"] {
        let got = one_f64(&format!("SELECT avg({col}) FROM released"));
        let want = one_f64(&format!("SELECT avg({col})::float8 FROM src"));
        assert!((got - want).abs() < 0.05 * (want.abs() + 1.0), "{col}: {got} vs {want}");
    }
    // the table belongs to the caller
    assert_eq!(one_text("SELECT tableowner::text FROM pg_tables WHERE tablename = 'released'"), one_text("SELECT current_user::text"));
}

#[pg_test]
fn rows_variant_returns_arrays_and_writes_nothing() {
    dprp_source();
    let tables = one_i64("SELECT count(*) FROM pg_class WHERE relkind = 'r'");
    let n = one_i64(&format!("SELECT count(*) FROM dp.release_projection_rows('src', {ARGS}, 1e6, 1e-5) r WHERE array_length(r, 1) = 3"));
    assert!((1001..1100).contains(&n), "{n} rows");
    assert_eq!(one_i64("SELECT count(*) FROM pg_class WHERE relkind = 'r'"), tables);
    let (all, inside) = (
        one_i64(&format!("SELECT count(*) FROM dp.release_projection_rows('src', {ARGS}, 1, 1e-5, row_norm => 'unit') r")),
        one_i64(&format!(
            "SELECT count(*) FROM dp.release_projection_rows('src', {ARGS}, 1, 1e-5, row_norm => 'unit') r
              WHERE r[1] BETWEEN -1 AND 1 AND r[2] BETWEEN -1 AND 1 AND r[3] BETWEEN -1 AND 1"
        )),
    );
    assert!(all > 900 && inside > 900, "unit rows stay in the scaled space: {all} {inside}");
}

#[pg_test]
fn each_release_is_charged_once_as_dprp_before_the_read() {
    dprp_source();
    // tests run concurrently: count only this test's receipts (the query text is the test's call)
    let mine = "FROM dp.ledger WHERE query_text LIKE '%each_release_is_charged_once_as_dprp%'";
    assert_eq!(one_i64(&format!("SELECT count(*) {mine}")), 0);
    Spi::run(&format!("SELECT dp.release_projection('src', 'released', {ARGS}, 2, 1e-5)")).unwrap();
    one_i64(&format!("SELECT count(*) FROM dp.release_projection_rows('src', {ARGS}, 0.5, 1e-6)"));
    assert_eq!(one_i64(&format!("SELECT count(*) {mine}")), 2);
    let rows = column(&format!(
        "SELECT concat_ws('|', aggregate, mechanism, epsilon, delta, details->>'neighbours', details->>'k2', details->>'source') {mine} ORDER BY id DESC"
    ));
    assert_eq!(rows[0].as_deref(), Some("dp.release_projection(src)|dprp|0.5|0.000001|add or remove one row|3|src"));
    assert!(rows[1].as_deref().unwrap().starts_with("dp.release_projection(src)|dprp|2|0.00001|"), "{rows:?}");
    // the ledger's receipt is the one returned, apart from what the release itself produced
    let returned = receipt(&format!("SELECT dp.release_projection('src', 'again', {ARGS}, 2, 1e-5) - 'target' - 'columns' - 'rows_released' - 'noisy_row_count'"));
    let charged: serde_json::Value = serde_json::from_str(&one_text(&format!("SELECT (details - 'execution')::text {mine} ORDER BY id DESC LIMIT 1"))).unwrap();
    assert_eq!(returned, charged);
}

#[pg_test]
fn a_hostile_target_name_is_only_a_name() {
    dprp_source();
    let r = receipt(&format!("SELECT dp.release_projection('src', 'x\"; DROP TABLE src; --', {ARGS}, 1, 1e-5)"));
    assert_eq!(r["target"], "\"x\"\"; DROP TABLE src; --\"");
    assert_eq!(one_i64("SELECT count(*) FROM src"), 1000);
    assert_eq!(one_i64("SELECT count(*) FROM \"x\"\"; DROP TABLE src; --\""), r["rows_released"].as_i64().unwrap());
}

#[pg_test]
fn privileges_are_those_of_select_on_the_table_or_its_columns() {
    dprp_source();
    Spi::run("CREATE ROLE dp_steward_t").unwrap();
    Spi::run("GRANT USAGE, CREATE ON SCHEMA public TO dp_steward_t").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let q = format!("SELECT dp.release_projection('src', 'stolen', {ARGS}, 1, 1e-5)");
    let before = scans("src");
    refused_as("dp_steward_t", &q, "dp.release_projection: permission denied for table src");
    Spi::run("GRANT SELECT (a, b) ON src TO dp_steward_t").unwrap();
    refused_as("dp_steward_t", &q, "permission denied for table src");
    Spi::run("SET ROLE dp_steward_t").unwrap();
    let ok = "SELECT dp.release_projection_rows('src', ARRAY['a', 'b'], ARRAY[0, 0]::float8[], ARRAY[50, 7]::float8[], 1, 1e-5) LIMIT 1";
    assert!(error_of(ok).is_none(), "SELECT on the two columns suffices");
    Spi::run("RESET ROLE").unwrap();
    assert_eq!(scans("src"), before + 1, "only the permitted release read the table");
}

#[pg_test]
fn refused_releases_read_nothing_and_charge_nothing() {
    dprp_source();
    Spi::run("CREATE TABLE taken (x int)").unwrap();
    Spi::run("CREATE TABLE ctid_only (a float8)").unwrap();
    let before = scans("src");
    for (sql, msg) in [
        (format!("SELECT dp.release_projection('src', 'taken', {ARGS}, 1, 1e-5)"), "relation taken already exists"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['t'], ARRAY[0]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "column \"t\" of src is text, not a number"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['zz'], ARRAY[0]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "column \"zz\" of src does not exist"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['ctid'], ARRAY[0]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "column \"ctid\" of src does not exist"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['a', 'a'], ARRAY[0, 0]::float8[], ARRAY[1, 1]::float8[], 1, 1e-5)".into(), "columns must not repeat a column, \"a\" appears twice"),
        ("SELECT dp.release_projection('src', 'o', ARRAY[]::text[], ARRAY[]::float8[], ARRAY[]::float8[], 1, 1e-5)".into(), "columns must be between 1 and 1024 columns, got 0"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['a'], ARRAY[9]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "lower must be less than or equal to upper"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['a', 'b'], ARRAY[0]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "lower must have one entry per column (2), got 1"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 0, 1e-5)"), "epsilon must be a finite number between 1e-9 and 1e6, got 0"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 0)"), "delta must be greater than 0 and less than 1, got 0"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1)"), "delta must be greater than 0 and less than 1, got 1"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, projection_share => 1.5)"), "projection_share"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, k2 => 0)"), "k2"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, k1 => -3)"), "k1 must be a positive integer or NULL, got -3"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, row_norm => 'l2')"), "row_norm must be 'clip' or 'unit', got 'l2'"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, clip_norm => 5)"), "clip_norm must be greater than 0 and at most sqrt(d)"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, row_norm => 'unit', clip_norm => 1)"), "clip_norm must be NULL with unit row normalisation"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, centring => 'median')"), "centring must be 'midpoint' or 'mean', got 'median'"),
        (format!("SELECT dp.release_projection('src', NULL, {ARGS}, 1, 1e-5)"), "target must not be NULL"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, NULL, 1e-5)"), "epsilon must not be NULL"),
        (format!("SELECT dp.release_projection(NULL, 'o', {ARGS}, 1, 1e-5)"), "source must not be NULL"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['a'], ARRAY[NULL]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "every element of lower must not be NULL"),
    ] {
        let got = refused_uncharged(&sql, msg);
        assert!(got.starts_with("dp.release_projection: "), "{got}");
    }
    assert_eq!(scans("src"), before, "a refused release read the source");
    assert_eq!(one_i64("SELECT count(*) FROM pg_class WHERE relname = 'o'"), 0);
}

#[pg_test]
fn only_tables_and_partitioned_tables_are_sources() {
    dprp_source();
    Spi::run("CREATE VIEW north AS SELECT * FROM src WHERE id < 100").unwrap();
    Spi::run("CREATE TEMP VIEW temp_north AS SELECT * FROM src WHERE id < 100").unwrap();
    Spi::run("CREATE MATERIALIZED VIEW frozen AS SELECT * FROM src").unwrap();
    Spi::run("CREATE SEQUENCE seq").unwrap();
    Spi::run("CREATE FOREIGN DATA WRAPPER dp_dummy_fdw").unwrap();
    Spi::run("CREATE SERVER dp_dummy_server FOREIGN DATA WRAPPER dp_dummy_fdw").unwrap();
    Spi::run("CREATE FOREIGN TABLE remote (a float8) SERVER dp_dummy_server").unwrap();
    Spi::run("CREATE TABLE parts (a float8) PARTITION BY RANGE (a)").unwrap();
    Spi::run("CREATE TABLE parts_low PARTITION OF parts FOR VALUES FROM (0) TO (10)").unwrap();
    Spi::run("CREATE FOREIGN TABLE parts_remote PARTITION OF parts FOR VALUES FROM (10) TO (20) SERVER dp_dummy_server").unwrap();
    let one = "ARRAY['a'], ARRAY[0]::float8[], ARRAY[50]::float8[], 1, 1e-5";
    let before = scans("src");
    for (source, what) in [
        ("north", "source north is a view, not a table"),
        ("temp_north", "is a view, not a table"),
        ("frozen", "source frozen is a materialized view, not a table"),
        ("seq", "source seq is a sequence, not a table"),
        ("remote", "source remote is a foreign table, not a table"),
        ("parts", "source parts has a partition or child that is a foreign table, not a table"),
    ] {
        for f in ["dp.release_projection_rows('{s}', {one})", "dp.release_projection('{s}', 'out', {one})"] {
            let sql = format!("SELECT count(*) FROM {}", f.replace("{s}", source).replace("{one}", one));
            refused_uncharged(&sql, what);
        }
    }
    assert_eq!(scans("src"), before, "a refused view read its table");
}

#[pg_test]
fn partitioned_tables_and_inheritance_children_are_read_whole() {
    Spi::run("CREATE TABLE parts (k int, x float8) PARTITION BY LIST (k)").unwrap();
    Spi::run("CREATE TABLE parts_1 PARTITION OF parts FOR VALUES IN (1)").unwrap();
    // a partition whose columns sit at other attribute numbers
    Spi::run("CREATE TABLE parts_2 (pad text, x float8, k int)").unwrap();
    Spi::run("ALTER TABLE parts_2 DROP COLUMN pad").unwrap();
    Spi::run("ALTER TABLE parts ATTACH PARTITION parts_2 FOR VALUES IN (2)").unwrap();
    Spi::run("INSERT INTO parts SELECT 1 + g % 2, CASE WHEN g % 2 = 0 THEN 1 ELSE 9 END FROM generate_series(1, 600) g").unwrap();
    Spi::run("CREATE TABLE parent (x float8)").unwrap();
    Spi::run("CREATE TABLE child () INHERITS (parent)").unwrap();
    Spi::run("INSERT INTO parent SELECT 2 FROM generate_series(1, 300)").unwrap();
    Spi::run("INSERT INTO child SELECT 8 FROM generate_series(1, 300)").unwrap();
    for (source, mean) in [("parts", 5.0), ("parent", 5.0)] {
        let sql = format!(
            "SELECT avg(r[1]), count(*) FROM dp.release_projection_rows('{source}', ARRAY['x'], ARRAY[0]::float8[], ARRAY[10]::float8[], 1e6, 1e-5) r"
        );
        let (avg, n) = Spi::get_two::<f64, i64>(&sql).unwrap();
        let (avg, n) = (avg.unwrap(), n.unwrap());
        assert!((601..700).contains(&n), "{source}: {n} rows");
        assert!((avg - mean).abs() < 0.2, "{source}: mean {avg}");
    }
    // each partition's own rows: parts_1 holds (k, x) = (1, 1), parts_2 (2, 9)
    let pairs = column(
        "SELECT count(*) FILTER (WHERE r[1] < 1.5 AND r[2] < 2) || ' ' || count(*) FILTER (WHERE r[1] > 1.5 AND r[2] > 8)
           FROM dp.release_projection_rows('parts', ARRAY['k', 'x'], ARRAY[0, 0]::float8[], ARRAY[3, 10]::float8[], 1e6, 1e-5, clip_norm => 1.414) r",
    );
    let counts: Vec<i64> = pairs[0].as_deref().unwrap().split(' ').map(|x| x.parse().unwrap()).collect();
    assert!(counts.iter().all(|c| (290..=300).contains(c)), "{pairs:?}");
}

#[pg_test]
fn nulls_and_nan_are_rows_at_the_midpoint_and_no_stored_value_fails() {
    Spi::run(
        "CREATE TABLE odd AS SELECT g AS id,
                CASE WHEN g % 2 = 0 THEN NULL ELSE 'NaN' END::float8 AS a,
                CASE g % 4 WHEN 0 THEN 'Infinity' WHEN 1 THEN '-Infinity' WHEN 2 THEN 1e300 ELSE -1e300 END::float8 AS b,
                CASE WHEN g % 2 = 0 THEN '1e400'::numeric ELSE 'NaN'::numeric END AS c,
                (-32768 + g)::int2 AS s, 9223372036854775807 - g AS big
           FROM generate_series(1, 400) g",
    )
    .unwrap();
    let sql = "SELECT dp.release_projection('odd', 'odd_out', ARRAY['a', 'b', 'c', 's', 'big'], ARRAY[0, -1, 0, 0, 0]::float8[],
                                         ARRAY[10, 1, 1, 1, 1]::float8[], 1e6, 1e-5, clip_norm => 2.236)";
    let r = receipt(sql);
    let m = r["rows_released"].as_i64().unwrap();
    assert!(m > 400, "every row counts, NULL or not: {m}");
    // a: NULL and NaN at the midpoint 5; b: ±∞ and ±1e300 clamped to ±1 (their mean is 0);
    // c: the numeric overflow clamped to the upper bound, NaN at the midpoint; s and big clamped
    let means = Spi::get_three::<f64, f64, f64>("SELECT avg(a), avg(b), avg(c) FROM odd_out").unwrap();
    let (a, b, c) = (means.0.unwrap(), means.1.unwrap(), means.2.unwrap());
    assert!((a - 5.0).abs() < 0.1, "a {a}");
    assert!(b.abs() < 0.1, "b {b}");
    assert!((c - 0.75).abs() < 0.05, "c {c}");
    assert!(one_f64("SELECT avg(big) FROM odd_out") > 0.95);
}

#[pg_test]
fn an_empty_table_releases_padding_rows_only() {
    Spi::run("CREATE TABLE nothing (a float8, b int)").unwrap();
    let r = receipt("SELECT dp.release_projection('nothing', 'nothing_out', ARRAY['a', 'b'], ARRAY[0, 0]::float8[], ARRAY[4, 4]::float8[], 1e6, 1e-5)");
    let m = r["rows_released"].as_i64().unwrap();
    assert!(m >= 1 && one_i64("SELECT count(*) FROM nothing_out") == m, "{r}");
    assert_eq!(one_i64("SELECT count(*) FROM nothing_out WHERE abs(a - 2) > 0.01 OR abs(b - 2) > 0.01"), 0, "padding rows sit at the midpoint");
}

#[pg_test]
fn a_role_without_budget_gets_one_refusal_whatever_the_data_before_any_read() {
    // tables that once failed after reading, each in its own way: NaN, empty, numeric overflow
    Spi::run("CREATE TABLE plain AS SELECT g::float8 AS a, g::numeric AS c FROM generate_series(1, 100) g").unwrap();
    Spi::run("CREATE TABLE with_nan AS SELECT 'NaN'::float8 AS a, g::numeric AS c FROM generate_series(1, 100) g").unwrap();
    Spi::run("CREATE TABLE empty (a float8, c numeric)").unwrap();
    Spi::run("CREATE TABLE overflow AS SELECT g::float8 AS a, '1e400'::numeric AS c FROM generate_series(1, 100) g").unwrap();
    Spi::run("CREATE ROLE dp_poor_t").unwrap();
    Spi::run("GRANT SELECT ON plain, with_nan, empty, overflow TO dp_poor_t").unwrap();
    Spi::run("GRANT USAGE, CREATE ON SCHEMA public TO dp_poor_t").unwrap();
    Spi::run("SET dp.require_budget = on").unwrap();
    let mut messages = Vec::new();
    for t in ["plain", "with_nan", "empty", "overflow"] {
        for f in [
            format!("dp.release_projection('{t}', 'leak', ARRAY['a', 'c'], ARRAY[0, 0]::float8[], ARRAY[1, 1]::float8[], 1e-9, 1e-5)"),
            format!("count(*) FROM dp.release_projection_rows('{t}', ARRAY['a', 'c'], ARRAY[0, 0]::float8[], ARRAY[1, 1]::float8[], 1e-9, 1e-5)"),
        ] {
            let before = scans(t);
            Spi::run("SET ROLE dp_poor_t").unwrap();
            let msg = refused(&format!("SELECT {f}"), "has no privacy budget");
            Spi::run("RESET ROLE").unwrap();
            assert_eq!(scans(t), before, "{t} was read before the charge");
            messages.push(msg);
        }
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "{messages:#?}");
    assert_eq!(one_i64("SELECT count(*) FROM pg_class WHERE relname = 'leak'"), 0);
}

#[pg_test]
fn failures_after_the_charge_are_uniform_and_charged() {
    // 1 MB of maintenance_work_mem holds a few thousand rows of 3 columns: the check before the
    // charge passes (it needs room for 1024), the released row count does not fit
    Spi::run("CREATE TABLE big AS SELECT g::float8 AS a, (g % 7)::float8 AS b, 'NaN'::float8 AS c FROM generate_series(1, 200000) g").unwrap();
    Spi::run("CREATE TABLE big_other AS SELECT (g % 3)::float8 AS a, NULL::float8 AS b, 1e300::float8 AS c FROM generate_series(1, 200000) g").unwrap();
    Spi::run("SET maintenance_work_mem = '1MB'").unwrap();
    let mut messages = Vec::new();
    for t in ["big", "big_other"] {
        let sql = format!("SELECT count(*) FROM dp.release_projection_rows('{t}', ARRAY['a', 'b', 'c'], ARRAY[0, 0, 0]::float8[], ARRAY[1, 1, 1]::float8[], 1, 1e-5)");
        let before = dprp_receipts();
        messages.push(refused(&sql, "dp.release_projection: the released table does not fit in maintenance_work_mem; the release was charged"));
        assert_eq!(dprp_receipts(), before + 1, "not charged: {sql}");
    }
    assert_eq!(messages[0], messages[1]);
}

#[pg_test]
fn a_huge_projection_is_refused_before_the_charge_and_the_server_stays_up() {
    dprp_source();
    let sql = format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1e-9, 1e-5, k1 => 1000000000)");
    refused_uncharged(&sql, "k1 must be an integer between 1 and");
    Spi::run("SET maintenance_work_mem = '1MB'").unwrap();
    let wide = "SELECT count(*) FROM dp.release_projection_rows('src', ARRAY['a', 'b', 'c'], ARRAY[0, 0, 0]::float8[], ARRAY[1, 1, 1]::float8[], 1, 1e-5, k1 => 4096)";
    refused_uncharged(wide, "k1 must be small enough for the memory limit of 1048576 bytes");
    assert_eq!(one_i64("SELECT 1"), 1);
}

#[pg_test]
fn row_security_that_applies_to_the_caller_is_refused() {
    dprp_source();
    Spi::run("CREATE ROLE dp_rls_t").unwrap();
    Spi::run("GRANT SELECT ON src TO dp_rls_t").unwrap();
    Spi::run("ALTER TABLE src ENABLE ROW LEVEL SECURITY").unwrap();
    Spi::run("CREATE POLICY few ON src FOR SELECT USING (id < 10)").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let sql = format!("SELECT count(*) FROM dp.release_projection_rows('src', {ARGS}, 1, 1e-5)");
    refused_as("dp_rls_t", &sql, "source src has row security that applies to role \"dp_rls_t\"");
    // the owner (a superuser here) is not subject to the policy
    assert!(one_i64(&sql) > 1000);
}

#[pg_test]
fn a_dp_only_role_releases_a_protected_table_without_a_grant() {
    protected_setup();
    let sql = "SELECT count(*) FROM dp.release_projection_rows('patients', ARRAY['income', 'bmi', 'n'], ARRAY[0, 0, 0]::float8[], ARRAY[200000, 100, 1000]::float8[], 1e6, 1e-5)";
    let before = dprp_receipts();
    let m = as_analyst(|| one_i64(sql));
    assert!(m > 1000, "{m}");
    assert_eq!(dprp_receipts(), before + 1);
    // the table itself stays closed to the role
    refused_as(ANALYST, "SELECT count(*) FROM patients", "it is protected by pg_dp");
    // a view over it is not a source
    Spi::run("CREATE VIEW bobs AS SELECT * FROM patients WHERE name = 'Bob'").unwrap();
    Spi::run(&format!("GRANT SELECT ON bobs TO {ANALYST}")).unwrap();
    refused_as(
        ANALYST,
        "SELECT count(*) FROM dp.release_projection_rows('bobs', ARRAY['income'], ARRAY[0]::float8[], ARRAY[200000]::float8[], 1e-9, 1e-5)",
        "source bobs is a view, not a table",
    );
}

// Found by attacking the release as an analyst: sources that would escape a rule of the catalog.
#[pg_test]
fn catalog_rules_hold_for_every_way_of_naming_a_source() {
    protected_setup();
    // a partition of a table whose row security limits the role
    Spi::run("CREATE TABLE rp (region text, v float8) PARTITION BY LIST (region)").unwrap();
    Spi::run("CREATE TABLE rp_north PARTITION OF rp FOR VALUES IN ('north')").unwrap();
    Spi::run("CREATE TABLE rp_south PARTITION OF rp FOR VALUES IN ('south')").unwrap();
    Spi::run("INSERT INTO rp SELECT CASE WHEN g % 4 = 0 THEN 'north' ELSE 'south' END, 10 FROM generate_series(1, 400) g").unwrap();
    Spi::run("ALTER TABLE rp ENABLE ROW LEVEL SECURITY").unwrap();
    Spi::run(&format!("CREATE POLICY north_only ON rp FOR SELECT TO {ANALYST} USING (region = 'north')")).unwrap();
    Spi::run(&format!("GRANT SELECT ON rp TO {ANALYST}")).unwrap();
    Spi::run("SELECT dp.protect_table('rp')").unwrap();
    let one = "ARRAY['v'], ARRAY[0]::float8[], ARRAY[100]::float8[], 1, 1e-6";
    refused_as(ANALYST, &format!("SELECT count(*) FROM dp.release_projection_rows('rp_south', {one})"), "public.rp, a parent of source rp_south, has row security that applies to role \"dp_only_t\"");
    refused_as(ANALYST, &format!("SELECT count(*) FROM dp.release_projection_rows('rp', {one})"), "source rp has row security");
    // the same hole for DP aggregates
    refused_as(ANALYST, "SELECT dp_count(v, 1) FROM rp_south", "rp_south is a partition or child of rp, which has row security for role \"dp_only_t\"");
    // system catalogs (pg_class holds the row counts the statistics rules hide)
    refused_as(ANALYST, "SELECT count(*) FROM dp.release_projection_rows('pg_catalog.pg_class', ARRAY['reltuples'], ARRAY[0]::float8[], ARRAY[1e6]::float8[], 1, 1e-6)", "source pg_class is a system catalog, not a table");
    // a table named by its OID in a schema the role may not use
    Spi::run("CREATE SCHEMA hidden").unwrap();
    Spi::run("CREATE TABLE hidden.t AS SELECT g::float8 AS v FROM generate_series(1, 10) g").unwrap();
    Spi::run("SELECT dp.protect_table('hidden.t')").unwrap();
    let oid = one_i64("SELECT 'hidden.t'::regclass::oid::int8");
    refused_as(ANALYST, &format!("SELECT count(*) FROM dp.release_projection_rows({oid}::regclass, {one})"), "permission denied for schema hidden");
}

#[pg_test]
fn several_row_releases_in_one_query_each_charge_and_return_their_rows() {
    dprp_source();
    Spi::run("SET dp.require_budget = off").unwrap();
    let mark = one_i64("SELECT coalesce(max(id), 0) FROM dp.ledger");
    let n = one_i64(&format!(
        "SELECT count(*) FROM (SELECT dp.release_projection_rows('src', {ARGS}, 1e6, 1e-5) a, dp.release_projection_rows('src', {ARGS}, 1e6, 1e-5) b) s"
    ));
    assert!(n > 1000, "{n}");
    assert_eq!(one_i64(&format!("SELECT count(*) FROM dp.ledger WHERE id > {mark}")), 2);
    // a cursor over a release keeps its rows, read forwards and backwards
    Spi::run(&format!("DECLARE c SCROLL CURSOR FOR SELECT r[1]::text FROM dp.release_projection_rows('src', {ARGS}, 1e6, 1e-5) r")).unwrap();
    let first = column("FETCH 5 FROM c");
    Spi::run("MOVE ABSOLUTE 0 IN c").unwrap();
    assert_eq!(column("FETCH 5 FROM c"), first);
    assert_eq!(one_i64(&format!("SELECT count(*) FROM dp.ledger WHERE id > {mark}")), 3);
}

#[pg_test]
fn a_table_with_a_privacy_unit_is_refused_before_anything_is_read_or_charged() {
    // DPRP protects one row: on a table with many rows per person it would release a person's every
    // row at the epsilon of one
    dprp_source();
    Spi::run("ALTER TABLE src ADD COLUMN person int").unwrap();
    Spi::run("UPDATE src SET person = id % 10").unwrap();
    Spi::run("SELECT dp.protect_table('src', privacy_unit => 'person')").unwrap();
    let before = scans("src");
    let msg = refused_uncharged(
        &format!("SELECT dp.release_projection('src', 'per_person', {ARGS}, 1, 1e-5)"),
        "source src declares the privacy unit src.person: a person may have many rows",
    );
    assert!(msg.contains("one row per person"), "{msg}");
    refused_uncharged(&format!("SELECT count(*) FROM dp.release_projection_rows('src', {ARGS}, 1, 1e-5)"), "declares the privacy unit src.person");
    assert_eq!(scans("src"), before, "the source was read before the refusal");
    // a partition read on its own keeps its parent's unit
    Spi::run("CREATE TABLE parted (id int, a float8, b int, c numeric, person int) PARTITION BY RANGE (id)").unwrap();
    Spi::run("CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100000)").unwrap();
    Spi::run("SELECT dp.protect_table('parted', privacy_unit => 'person')").unwrap();
    refused_uncharged(&format!("SELECT dp.release_projection('parted', 'p2', {ARGS}, 1, 1e-5)"), "declares the privacy unit parted.person");
    refused_uncharged(&format!("SELECT dp.release_projection('parted_1', 'p3', {ARGS}, 1, 1e-5)"), "declares the privacy unit parted_1.person");
}

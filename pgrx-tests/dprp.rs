// dp.release_projection and dp.release_projection_rows: shapes, units, receipt, charge, errors,
// privileges and safe names. Statistical properties of the mechanism are tested in tests/dprp.rs.

fn dprp_source() {
    Spi::run(
        "CREATE TABLE src AS SELECT g AS id, (g % 50)::float8 AS a, (g % 7)::int AS b, ((g % 50) * 2 + g % 7)::numeric AS c,
                'v' || g AS t FROM generate_series(1, 1000) g",
    )
    .unwrap();
}

const ARGS: &str = "ARRAY['a', 'b', 'c'], ARRAY[0, 0, 0]::float8[], ARRAY[50, 7, 110]::float8[]";

#[pg_test]
fn release_creates_the_table_in_original_units_and_returns_the_receipt() {
    dprp_source();
    let receipt = one_text(&format!("SELECT dp.release_projection('src', 'released', {ARGS}, 1e6, 1e-5)::text"));
    let r: serde_json::Value = serde_json::from_str(&receipt).unwrap();
    for (k, v) in [("method", "dprp"), ("noise", "discrete_gaussian"), ("target", "released"), ("source", "src"), ("row_norm", "clip")] {
        assert_eq!(r[k], v, "{k} in {receipt}");
    }
    assert_eq!(r["neighbours"], "replace one row; the row count is released");
    assert_eq!(r["n"], 1000);
    assert_eq!(r["d"], 3);
    assert_eq!(r["epsilon"], 1e6);
    assert_eq!(r["delta"], 1e-5);
    assert!(r["sigma_projection"].as_f64().unwrap() > 0.0 && r["sigma_covariance"].as_f64().unwrap() > 0.0);
    assert!(r.get("seed").is_none());
    // same columns, all float8, same row count, within the bounds
    let cols = column("SELECT attname || ' ' || format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'released'::regclass AND attnum > 0 ORDER BY attnum");
    assert_eq!(cols, vec![Some("a double precision".into()), Some("b double precision".into()), Some("c double precision".into())]);
    assert_eq!(one_i64("SELECT count(*) FROM released"), 1000);
    assert_eq!(one_i64("SELECT count(*) FROM released WHERE a NOT BETWEEN 0 AND 50 OR b NOT BETWEEN 0 AND 7 OR c NOT BETWEEN 0 AND 110"), 0);
    // at ε = 1e6 the release is close to the data, in the original units
    for (col, exact) in [("a", "avg(a)::float8"), ("b", "avg(b)::float8"), ("c", "avg(c)::float8")] {
        let got = one_f64(&format!("SELECT avg({col}) FROM released"));
        let want = one_f64(&format!("SELECT {exact} FROM src"));
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
    assert_eq!(n, 1000);
    assert_eq!(one_i64("SELECT count(*) FROM pg_class WHERE relkind = 'r'"), tables);
    let unit = one_i64(&format!(
        "SELECT count(*) FROM dp.release_projection_rows('src', {ARGS}, 1, 1e-5, row_norm => 'unit') r
          WHERE r[1] BETWEEN -1 AND 1 AND r[2] BETWEEN -1 AND 1 AND r[3] BETWEEN -1 AND 1"
    ));
    assert_eq!(unit, 1000, "unit rows stay in the scaled space");
}

#[pg_test]
fn each_release_is_charged_once_as_dprp() {
    dprp_source();
    // tests run concurrently: count only this test's receipts (the query text is the test's call)
    let mine = "FROM dp.ledger WHERE query_text LIKE '%each_release_is_charged_once_as_dprp%'";
    assert_eq!(one_i64(&format!("SELECT count(*) {mine}")), 0);
    Spi::run(&format!("SELECT dp.release_projection('src', 'released', {ARGS}, 2, 1e-5)")).unwrap();
    one_i64(&format!("SELECT count(*) FROM dp.release_projection_rows('src', {ARGS}, 0.5, 1e-6)"));
    assert_eq!(one_i64(&format!("SELECT count(*) {mine}")), 2);
    let rows = column(&format!(
        "SELECT concat_ws('|', aggregate, mechanism, epsilon, delta, details->>'neighbours', details->>'k2') {mine} ORDER BY id DESC"
    ));
    assert_eq!(rows[0].as_deref(), Some("dp.release_projection(src)|dprp|0.5|0.000001|replace one row; the row count is released|1"));
    assert!(rows[1].as_deref().unwrap().starts_with("dp.release_projection(src)|dprp|2|0.00001|"), "{rows:?}");
}

#[pg_test]
fn a_hostile_target_name_is_only_a_name() {
    dprp_source();
    let t = one_text(&format!("SELECT dp.release_projection('src', 'x\"; DROP TABLE src; --', {ARGS}, 1, 1e-5)->>'target'"));
    assert_eq!(t, "\"x\"\"; DROP TABLE src; --\"");
    assert_eq!(one_i64("SELECT count(*) FROM src"), 1000);
    assert_eq!(one_i64("SELECT count(*) FROM \"x\"\"; DROP TABLE src; --\""), 1000);
}

#[pg_test(error = "permission denied for table src")]
fn a_role_without_select_cannot_release_and_pays_nothing() {
    dprp_source();
    Spi::run("CREATE ROLE dp_steward_t").unwrap();
    Spi::run("GRANT USAGE, CREATE ON SCHEMA public TO dp_steward_t").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SET ROLE dp_steward_t").unwrap();
    Spi::run(&format!("SELECT dp.release_projection('src', 'stolen', {ARGS}, 1, 1e-5)")).unwrap();
}

#[pg_test]
fn refused_releases_charge_nothing() {
    dprp_source();
    Spi::run("CREATE TABLE taken (x int)").unwrap();
    Spi::run("CREATE TABLE nothing (a float8)").unwrap();
    Spi::run(
        "CREATE FUNCTION dp_try_sql(q text) RETURNS text LANGUAGE plpgsql AS
         $$ BEGIN EXECUTE q; RETURN NULL; EXCEPTION WHEN OTHERS THEN RETURN SQLERRM; END $$",
    )
    .unwrap();
    let mine = "SELECT count(*) FROM dp.ledger WHERE query_text LIKE '%refused_releases_charge_nothing%'";
    for (sql, msg) in [
        (format!("SELECT dp.release_projection('src', 'taken', {ARGS}, 1, 1e-5)"), "relation taken already exists"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['t'], ARRAY[0]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "column \"t\" of src is text, not a number"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['zz'], ARRAY[0]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "column \"zz\" of src does not exist"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['a'], ARRAY[9]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "lower must be less than or equal to upper"),
        ("SELECT dp.release_projection('src', 'o', ARRAY['a', 'b'], ARRAY[0]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "lower must have one entry per column (2), got 1"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 0, 1e-5)"), "epsilon must be a finite number between 1e-9 and 1e6, got 0"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 0)"), "delta must be greater than 0 and less than 1, got 0"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1)"), "delta must be greater than 0 and less than 1, got 1"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, projection_share => 1.5)"), "projection_share"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, k2 => 0)"), "k2"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, k1 => -3)"), "k1 must be a positive integer or NULL, got -3"),
        (format!("SELECT dp.release_projection('src', 'o', {ARGS}, 1, 1e-5, row_norm => 'l2')"), "row_norm must be 'clip' or 'unit', got 'l2'"),
        (format!("SELECT dp.release_projection('src', NULL, {ARGS}, 1, 1e-5)"), "target must not be NULL"),
        ("SELECT dp.release_projection('nothing', 'o', ARRAY['a'], ARRAY[0]::float8[], ARRAY[1]::float8[], 1, 1e-5)".into(), "source must be a table with at least one row, got 0 rows"),
    ] {
        // each attempt in its own subtransaction (plpgsql's exception block), error text returned
        let err = Spi::get_one_with_args::<String>("SELECT dp_try_sql($1)", &[sql.as_str().into()]).unwrap();
        let err = err.unwrap_or_else(|| panic!("not refused: {sql}"));
        assert!(err.contains(msg), "{sql}: {err}");
    }
    assert_eq!(one_i64(mine), 0);
    assert_eq!(one_i64("SELECT count(*) FROM pg_class WHERE relname = 'o'"), 0);
}

// Every bad parameter gives a clear error naming the argument and its valid range.
// (SQLSTATEs are asserted by the client test, tests/client/test_client.py, which sees them.)

#[pg_test(error = "dp_sum: lower must be less than or equal to upper (0), got 10")]
fn lower_above_upper_real() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 10, 0, 1) FROM s").unwrap();
}

#[pg_test(error = "dp_sum: lower must be less than or equal to upper (0), got 10")]
fn lower_above_upper_int() {
    sample_table();
    Spi::run("SELECT dp_sum(i, 10, 0, 1) FROM s").unwrap();
}

#[pg_test(error = "dp_avg: lower must be less than or equal to upper (0), got 10")]
fn lower_above_upper_avg_on_empty_input() {
    sample_table();
    Spi::run("SELECT dp_avg(x, 10, 0, 1) FROM s WHERE false").unwrap();
}

#[pg_test(error = "dp_count: epsilon must be a finite number between 1e-9 and 1e6, got 0")]
fn epsilon_zero() {
    sample_table();
    Spi::run("SELECT dp_count(x, 0) FROM s").unwrap();
}

#[pg_test(error = "dp_sum: epsilon must be a finite number between 1e-9 and 1e6, got -1")]
fn epsilon_negative() {
    sample_table();
    Spi::run("SELECT dp_sum(i, 0, 1, -1) FROM s").unwrap();
}

#[pg_test(error = "dp_avg: epsilon must be a finite number between 1e-9 and 1e6, got NaN")]
fn epsilon_nan() {
    sample_table();
    Spi::run("SELECT dp_avg(x, 0, 1, 'NaN') FROM s").unwrap();
}

#[pg_test(error = "dp_sum: epsilon must be a finite number between 1e-9 and 1e6, got Infinity")]
fn epsilon_infinite() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 0, 1, 'Infinity') FROM s").unwrap();
}

#[pg_test(error = "dp_sum: epsilon must be a finite number between 1e-9 and 1e6, got 10000000")]
fn epsilon_too_large() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 0, 1, 1e7) FROM s").unwrap();
}

#[pg_test(error = "dp_sum: upper must be a finite number between -1e30 and 1e30, got Infinity")]
fn bound_infinite() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 0, 'Infinity', 1) FROM s").unwrap();
}

#[pg_test(error = "dp_sum: lower must be a finite number between -1e30 and 1e30, got NaN")]
fn bound_nan() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 'NaN', 1, 1) FROM s").unwrap();
}

#[pg_test(error = "dp_avg: upper must be a finite number between -1e30 and 1e30, got 1e31")]
fn bound_too_large_for_exact_sums() {
    sample_table();
    Spi::run("SELECT dp_avg(x, 0, 1e31, 1) FROM s").unwrap();
}

// A NaN value is skipped like NULL: an error would tell the caller that a selected row holds a NaN.
#[pg_test]
fn nan_values_are_skipped_like_null() {
    Spi::run("CREATE TABLE nan_t AS SELECT v, v::numeric AS n FROM unnest(ARRAY[1, 'NaN', 3, NULL]::float8[]) v").unwrap();
    // ε = 1e6 and bounds [0, 10]: noise of scale 1e-5 on the grid
    for (q, expect) in [
        ("SELECT dp_sum(v, 0, 10, 1e6) FROM nan_t", 4.0),
        ("SELECT dp_avg(v, 0, 10, 1e6) FROM nan_t", 2.0),
        ("SELECT dp_sum(n, 0, 10, 1e6)::float8 FROM nan_t", 4.0),
        ("SELECT dp_avg(n, 0, 10, 1e6)::float8 FROM nan_t", 2.0),
    ] {
        let v = one_f64(q);
        assert!((v - expect).abs() < 1e-3, "{q}: {v}");
    }
    // a NaN only: as if no row had a value
    Spi::run("CREATE TABLE only_nan AS SELECT 'NaN'::float8 AS v FROM generate_series(1, 50)").unwrap();
    assert!(one_f64("SELECT dp_sum(v, 0, 10, 1e6) FROM only_nan").abs() < 1e-3);
    assert_eq!(one_i64("SELECT dp_count(v, 1e6) FROM only_nan"), 50, "dp_count counts non-NULL values, NaN included");
}

#[pg_test(error = "dp_sum: epsilon must not be NULL")]
fn null_epsilon() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 0, 1, NULL) FROM s").unwrap();
}

#[pg_test(error = "dp_sum: lower must not be NULL")]
fn null_bound() {
    sample_table();
    Spi::run("SELECT dp_sum(i, NULL, 1, 1) FROM s").unwrap();
}

#[pg_test(error = "upper of dp_sum must be a literal or a bind parameter ($1), not a column")]
fn bound_from_a_column() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 0, x, 1) FROM s").unwrap();
}

#[pg_test(error = "epsilon of dp_count must be a literal or a bind parameter ($1), not an expression")]
fn epsilon_from_a_column() {
    sample_table();
    Spi::run("SELECT dp_count(x, x / 1000) FROM s").unwrap();
}

#[pg_test(error = "epsilon of dp_avg must be a literal or a bind parameter ($1), not an expression")]
fn epsilon_volatile() {
    sample_table();
    Spi::run("SELECT dp_avg(x, 0, 1, random() + 0.5) FROM s").unwrap();
}

#[pg_test(error = "dp_sum cannot be used as a window function")]
fn window_use_is_refused() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 0, 1, 1) OVER (ORDER BY i) FROM s").unwrap();
}

#[pg_test(error = "dp_count cannot be used as a window function")]
fn window_count_star_is_refused() {
    sample_table();
    Spi::run("SELECT dp_count(*) OVER () FROM s").unwrap();
}

#[pg_test(error = "-1 is outside the valid range for parameter \"dp.default_epsilon\" (0 .. 1e+06)")]
fn default_epsilon_guc_has_a_range() {
    Spi::run("SET dp.default_epsilon = -1").unwrap();
}

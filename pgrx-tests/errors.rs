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

#[pg_test(error = "dp_sum: value must not be NaN")]
fn nan_value_is_an_error() {
    Spi::run("CREATE TABLE nan_t AS SELECT v FROM unnest(ARRAY[1, 'NaN']::float8[]) v").unwrap();
    Spi::run("SELECT dp_sum(v, 0, 1, 1) FROM nan_t").unwrap();
}

#[pg_test(error = "dp_avg: value must not be NaN")]
fn nan_numeric_value_is_an_error() {
    Spi::run("CREATE TABLE nan_t AS SELECT v FROM unnest(ARRAY[1, 'NaN']::numeric[]) v").unwrap();
    Spi::run("SELECT dp_avg(v, 0, 1, 1) FROM nan_t").unwrap();
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

#[pg_test(error = "dp_sum: upper must be the same for every row of one aggregate call")]
fn bound_from_a_column() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 0, x, 1) FROM s").unwrap();
}

#[pg_test(error = "dp_count: epsilon must be the same for every row of one aggregate call")]
fn epsilon_from_a_column() {
    sample_table();
    Spi::run("SELECT dp_count(x, x / 1000) FROM s").unwrap();
}

#[pg_test(error = "dp_avg: epsilon must be the same for every row of one aggregate call")]
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

#[pg_test(error = "0 is outside the valid range for parameter \"dp.default_epsilon\" (1e-09 .. 1e+06)")]
fn default_epsilon_guc_has_a_range() {
    Spi::run("SET dp.default_epsilon = 0").unwrap();
}

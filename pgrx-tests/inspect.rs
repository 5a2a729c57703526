// Sensitivity inspection functions (values computed by hand in docs/privacy/smooth-sensitivity.md's
// notation: {1,2,3,4,5} in [0,10], p = 0.5, so m = 3 and the median is 3).

#[pg_test]
fn inspection_functions_match_hand_computed_values() {
    let a = "ARRAY[5, 1, NULL, 4, 2, 3]::float8[]"; // unsorted, with a NULL that is skipped
    assert_eq!(one_f64(&format!("SELECT dp.local_sensitivity_percentile({a}, 0.5, 0, 10)")), 1.0);
    let table = column(&format!("SELECT concat(k, ':', local_sensitivity) FROM dp.local_sensitivity_table({a}, 0.5, 0, 10, 3)"));
    assert_eq!(table, vec![Some("0:1".into()), Some("1:2".into()), Some("2:7".into()), Some("3:8".into())]);
    assert_eq!(one_f64(&format!("SELECT dp.smooth_sensitivity_percentile({a}, 0.5, 0, 10, 1)")), 1.0);
    let s = one_f64(&format!("SELECT dp.smooth_sensitivity_percentile({a}, 0.5, 0, 10, 0.1)"));
    assert!((s - 10.0 * (-0.5f64).exp()).abs() < 1e-12, "{s}");
    // no rows: the bounds are the neighbours
    assert_eq!(one_f64("SELECT dp.local_sensitivity_percentile('{}', 0.5, 0, 10)"), 10.0);
    // values are clamped to the bounds, Infinity included
    assert_eq!(one_f64("SELECT dp.local_sensitivity_percentile(ARRAY[-5, 'Infinity', 20]::float8[], 0.5, 0, 10)"), 10.0);
}

#[pg_test(error = "pg_dp sensitivity inspection: p must be a number between 0 and 1, got 1.5")]
fn inspection_rejects_p_outside_0_1() {
    Spi::run("SELECT dp.local_sensitivity_percentile(ARRAY[1]::float8[], 1.5, 0, 10)").unwrap();
}

#[pg_test(error = "pg_dp sensitivity inspection: beta must be a finite number greater than 0, got 0")]
fn inspection_rejects_beta_zero() {
    Spi::run("SELECT dp.smooth_sensitivity_percentile(ARRAY[1]::float8[], 0.5, 0, 10, 0)").unwrap();
}

#[pg_test(error = "pg_dp sensitivity inspection: vals must not be NaN")]
fn inspection_rejects_nan() {
    Spi::run("SELECT dp.local_sensitivity_percentile(ARRAY[1, 'NaN']::float8[], 0.5, 0, 10)").unwrap();
}

#[pg_test(error = "pg_dp sensitivity inspection: lower must be less than or equal to upper (0), got 10")]
fn inspection_rejects_bad_bounds() {
    Spi::run("SELECT dp.local_sensitivity_percentile(ARRAY[1]::float8[], 0.5, 10, 0)").unwrap();
}

#[pg_test]
fn inspection_is_for_dp_admin_only() {
    Spi::run("CREATE ROLE dp_t_plain").unwrap();
    Spi::run("CREATE ROLE dp_t_dba IN ROLE dp_admin").unwrap();
    for f in [
        "dp.local_sensitivity_percentile(float8[], float8, float8, float8)",
        "dp.smooth_sensitivity_percentile(float8[], float8, float8, float8, float8)",
        "dp.local_sensitivity_table(float8[], float8, float8, float8, int)",
    ] {
        assert_eq!(one_text(&format!("SELECT has_function_privilege('dp_t_plain', '{f}', 'EXECUTE')::text")), "false", "{f}");
        assert_eq!(one_text(&format!("SELECT has_function_privilege('dp_t_dba', '{f}', 'EXECUTE')::text")), "true", "{f}");
    }
}

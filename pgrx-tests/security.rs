// Attack tests: support functions are not callable by PUBLIC; the seed is superuser-only.

#[pg_test]
fn support_functions_are_not_executable_by_public() {
    Spi::run("CREATE ROLE dp_analyst_t").unwrap();
    // executable: the table releases (DPRP and synthetic data) and dp.keep_group (charged like the
    // aggregates), the synthetic preview (uncharged, refused on tables the caller may not read), the per-unit
    // aggregates (exact per-group values, refused by the grammar over protected tables except in
    // the queries pg_dp writes), dp.random_order (random numbers) and dp.per_group (its argument), and functions of the catalog
    // only (the privacy levels, whether a table is protected, a preview of a query's receipts, a
    // role's pg_dp identity, which pg_shseclabel shows everyone, what the grammar admits) and of the
    // session's own releases (dp.interval_half_width and dp.interval_bound, which the plans of
    // dp_interval_low/high call as the analyst: the half-width a receipt states, of a release of the
    // same aggregation; the total arithmetic dp.total_*, which refuses to run outside the operator
    // nodes pg_dp swaps it into);
    // their support functions not
    let callable = column(
        "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = 'dp' AND has_function_privilege('dp_analyst_t', p.oid, 'EXECUTE')
            AND p.proname NOT IN ('release_projection', 'release_projection_rows', 'release_synthetic', 'preview_synthetic',
                                  'keep_group', 'random_order', 'per_group',
                                  'privacy_level_epsilon', 'privacy_level_names', 'is_protected', 'preview', 'last_releases',
                                  'current_period_start', 'role_uid', 'distributed_rows', 'grammar',
                                  'interval_bound', 'interval_half_width_final', 'total_int2', 'total_int4',
                                  'total_int8', 'total_float4', 'total_float8', 'total_numeric', 'total_date_trunc_ts', 'total_date_trunc_tstz',
                                  'total_date', 'total_date_diff', 'total_timestamp', 'total_timestamptz', 'total_interval',
                                  'total_date_to_timestamp', 'total_date_to_timestamptz', 'total_timestamp_to_date',
                                  'total_timestamptz_to_date', 'class_stat', 'masked_relation_size', 'masked_table_size',
                                  'masked_total_relation_size', 'masked_indexes_size', 'masked_database_size', 'masked_tablespace_size')
            AND NOT (p.prokind = 'a' AND (p.proname IN ('interval_half_width', 'unit_sum', 'unit_mean', 'unit_count') OR p.proname LIKE 'merge\\_%'))",
    );
    assert!(callable.is_empty(), "callable by an analyst: {callable:?}");
    // dp.distributed_rows and the merge aggregates are executable because the executor checks them
    // for the caller of a DP query over a Citus table; the query check refuses them in any query
    // (distributed_level.rs), and dp.distributed_rows runs only a charged release's exact query
    // the aggregates themselves are usable
    let aggs = one_i64(
        "SELECT count(*) FROM pg_proc WHERE proname IN ('dp_count', 'dp_sum', 'dp_avg')
            AND has_function_privilege('dp_analyst_t', oid, 'EXECUTE')",
    );
    // dp_count: 3; dp_sum: 10 with bounds, 10 without; dp_avg: 4 with bounds, 4 without, 2 with a
    // public count
    assert_eq!(aggs, 3 + 10 + 4 + 10 + 4 + 2);
}

// The way to misuse a support function would be to wrap it in one's own aggregate whose final
// function returns the exact state. Two layers stop it: PostgreSQL refuses internal-state aggregates
// from non-superusers (this error), and EXECUTE on every support function is revoked from PUBLIC
// (support_functions_are_not_executable_by_public), which CREATE AGGREGATE also requires.
#[pg_test(error = "aggregate transition data type cannot be internal")]
fn analyst_cannot_build_an_aggregate_that_leaks_the_exact_state() {
    Spi::run("CREATE ROLE dp_analyst_t").unwrap();
    Spi::run("CREATE SCHEMA mine AUTHORIZATION dp_analyst_t").unwrap();
    Spi::run("SET ROLE dp_analyst_t").unwrap();
    Spi::run(
        "CREATE AGGREGATE mine.leak(float8, float8, float8) (
            SFUNC = dp.sum_float8_trans, STYPE = internal, FINALFUNC = dp.serialize)",
    )
    .unwrap();
}

#[pg_test(error = "permission denied to set parameter \"dp.seed\"")]
fn analyst_cannot_set_the_seed() {
    Spi::run("CREATE ROLE dp_analyst_t").unwrap();
    Spi::run("SET ROLE dp_analyst_t").unwrap();
    Spi::run("SET dp.seed = 1").unwrap();
}

#[pg_test(error = "permission denied to set parameter \"dp.seed\"")]
fn analyst_cannot_set_the_seed_with_set_config() {
    Spi::run("CREATE ROLE dp_analyst_t").unwrap();
    Spi::run("SET ROLE dp_analyst_t").unwrap();
    Spi::run("SELECT set_config('dp.seed', '1', false)").unwrap();
}

#[pg_test]
fn analyst_can_run_the_aggregates() {
    sample_table();
    Spi::run("CREATE ROLE dp_analyst_t").unwrap();
    Spi::run("GRANT SELECT ON s TO dp_analyst_t").unwrap();
    // the role exists only in this test's open transaction, invisible to the ledger worker:
    // run it without a budget (budget tests run against a real server, tests/client/test_ledger.py)
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SET ROLE dp_analyst_t").unwrap();
    assert_eq!(one_i64("SELECT dp_count(x, 1e6) FROM s"), 1000);
    Spi::run("SET dp.default_epsilon = 0.5").unwrap();
    one_f64("SELECT dp_avg(x, 0, 1000) FROM s");
}

#[pg_test]
fn nothing_is_charged_when_the_caller_may_not_read_the_table() {
    sample_table();
    Spi::run("CREATE ROLE dp_mallory").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let q = "SELECT dp_count(x, 0.5) AS not_readable FROM s";
    let before = receipts_of(q);
    Spi::run("SET ROLE dp_mallory").unwrap();
    refused(q, "permission denied for table s");
    Spi::run("RESET ROLE").unwrap();
    assert_eq!(receipts_of(q), before);
}

#[pg_test]
fn the_seed_is_hidden_from_and_ignored_for_non_superusers() {
    sample_table();
    Spi::run("CREATE ROLE dp_mallory").unwrap();
    Spi::run("GRANT SELECT ON s TO dp_mallory").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let q = "SELECT dp_sum(x, 0, 1000, 0.1)::text FROM s";
    Spi::run("SET dp.seed = 5").unwrap();
    Spi::run("SET ROLE dp_mallory").unwrap();
    let a = one_text(q);
    Spi::run("RESET ROLE").unwrap();
    Spi::run("SET dp.seed = 5").unwrap();
    Spi::run("SET ROLE dp_mallory").unwrap();
    let b = one_text(q);
    assert_ne!(a, b, "a non-superuser's noise followed the seed");
    let shown = PgTryBuilder::new(|| Some(one_text("SELECT current_setting('dp.seed')")))
        .catch_others(|_| None)
        .execute();
    assert!(shown.is_none(), "a non-superuser read dp.seed: {shown:?}");
}

#[pg_test]
fn my_budget_matches_the_role_by_name_not_by_a_regrole_cast() {
    Spi::run("CREATE ROLE dp_victim").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_victim', 7)").unwrap();
    let oid = one_text("SELECT 'dp_victim'::regrole::oid::text");
    // a role whose name is the victim's OID, and one whose name differs only in case
    Spi::run(&format!("CREATE ROLE \"{oid}\"")).unwrap();
    Spi::run("CREATE ROLE \"DP_VICTIM\"").unwrap();
    for r in [format!("\"{oid}\""), "\"DP_VICTIM\"".to_string()] {
        Spi::run(&format!("SET ROLE {r}")).unwrap();
        assert_eq!(one_i64("SELECT count(*) FROM dp.my_budget"), 0, "{r} sees another role's budget");
        Spi::run("RESET ROLE").unwrap();
    }
    Spi::run("SET ROLE dp_victim").unwrap();
    assert_eq!(one_text("SELECT epsilon_remaining::text FROM dp.my_budget"), "7");
}

// A subquery in the aggregated value or in FILTER is computed in the Agg node itself, above the
// input the hook checks: it could make every row's value depend on one person's row.

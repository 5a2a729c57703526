// The ledger, as far as one test transaction can see it. Receipts are committed by the ledger
// worker in its own transaction, so each statement here sees the ones written before it. Attacks
// that need real transactions (ROLLBACK, savepoints, concurrency, crashes) are in
// tests/client/test_ledger.py against a real server.

fn receipts() -> i64 {
    one_i64("SELECT count(*) FROM dp.ledger")
}

/// Receipts of one query text: tests run side by side and the ledger is shared, so counting every
/// receipt would count other tests' too.
fn receipts_for(sql: &str) -> i64 {
    Spi::get_one_with_args::<i64>("SELECT count(*) FROM dp.ledger WHERE query_text = $1", &[sql.into()]).unwrap().unwrap()
}

#[pg_test]
fn every_release_writes_one_receipt_with_its_mechanism_and_scale() {
    sample_table();
    let before = receipts();
    one_i64("SELECT dp_count(x, 0.5) FROM s");
    assert_eq!(receipts(), before + 1);
    let row = one_text(
        "SELECT concat_ws('|', aggregate, mechanism, sensitivity, round(noise_scale::numeric, 9), epsilon, delta,
                          query_text LIKE '%dp_count(x, 0.5)%')
           FROM dp.ledger ORDER BY id DESC LIMIT 1",
    );
    assert_eq!(row, "dp_count(\"any\",double precision)|discrete_laplace|1|2.000000000|0.5|0|t");
    one_f64("SELECT dp_sum(x, -10, 20, 0.25) FROM s");
    let row = one_text("SELECT concat_ws('|', sensitivity, round(noise_scale::numeric, 6), epsilon) FROM dp.ledger ORDER BY id DESC LIMIT 1");
    assert_eq!(row, "20|80.000000|0.25");
}

#[pg_test]
fn aggregates_add_up_and_disjoint_groups_cost_once() {
    sample_table();
    let before = receipts();
    // two aggregates: two receipts; four GROUP BY groups do not multiply them
    let n = column("SELECT dp_count(x, 0.5)::text || dp_avg(x, 0, 1000, 0.25)::text FROM s GROUP BY i % 4").len();
    assert_eq!(n, 4);
    assert_eq!(receipts(), before + 2);
    let total = one_text("SELECT sum(epsilon)::text FROM (SELECT epsilon FROM dp.ledger ORDER BY id DESC LIMIT 2) l");
    assert_eq!(total, "0.75");
}

#[pg_test]
fn grouping_sets_cost_once_per_set() {
    sample_table();
    let before = receipts();
    // ROLLUP(k): the groups of k, and the grand total: every row is counted twice
    let n = column("SELECT dp_count(x, 0.25)::text FROM s GROUP BY ROLLUP (i % 3)").len();
    assert_eq!(n, 4);
    assert_eq!(receipts(), before + 2);
    let before = receipts();
    column("SELECT dp_count(x, 0.25)::text FROM s GROUP BY GROUPING SETS ((i % 2), (i % 3), ())");
    assert_eq!(receipts(), before + 3);
}

#[pg_test]
fn explain_without_analyze_charges_nothing() {
    sample_table();
    let before = receipts();
    column("EXPLAIN SELECT dp_count(*) FROM s");
    assert_eq!(receipts(), before);
    column("EXPLAIN ANALYZE SELECT dp_count(*) FROM s");
    assert_eq!(receipts(), before + 1);
}

#[pg_test]
fn a_prepared_statement_is_charged_at_each_execution_at_its_bound_epsilon() {
    sample_table();
    Spi::run("SET plan_cache_mode = force_generic_plan").unwrap();
    Spi::run("PREPARE q(float8) AS SELECT dp_count(x, $1) FROM s").unwrap();
    let before = receipts();
    one_i64("EXECUTE q(0.125)");
    one_i64("EXECUTE q(0.5)");
    assert_eq!(receipts(), before + 2);
    let eps = column("SELECT epsilon::text FROM dp.ledger ORDER BY id DESC LIMIT 2");
    assert_eq!(eps, vec![Some("0.5".into()), Some("0.125".into())]);
}

#[pg_test]
fn a_with_query_runs_once_and_is_allowed() {
    sample_table();
    let before = receipts();
    let n = column("WITH c AS MATERIALIZED (SELECT dp_count(x, 0.5) AS n FROM s) SELECT s.i::text FROM s, c WHERE s.i <= 3").len();
    assert_eq!(n, 3);
    assert_eq!(receipts(), before + 1);
}

#[pg_test(error = "dp_count in a subquery that refers to an outer query or uses LATERAL: it would be computed again, with new noise, for every outer row")]
fn a_correlated_subquery_is_refused_before_charging() {
    sample_table();
    Spi::run("SELECT i, (SELECT dp_count(x, 0.1) FROM s s2 WHERE s2.i < s.i) FROM s").unwrap();
}

#[pg_test(error = "dp_sum in a subquery that refers to an outer query or uses LATERAL: it would be computed again, with new noise, for every outer row")]
fn a_lateral_subquery_is_refused_before_charging() {
    sample_table();
    Spi::run("SELECT * FROM s, LATERAL (SELECT dp_sum(x, 0, s.i, 0.1) FROM s s2 WHERE s2.i < s.i) l WHERE s.i < 5").unwrap();
}

#[pg_test]
fn refusals_charge_nothing() {
    sample_table();
    let before = receipts();
    let refused = PgTryBuilder::new(|| {
        Spi::run("SELECT i, (SELECT dp_count(x, 0.1) FROM s s2 WHERE s2.i < s.i) FROM s").unwrap();
        false
    })
    .catch_others(|_| true)
    .execute();
    assert!(refused);
    assert_eq!(receipts(), before);
}

// A bound computed from the data by a subquery would leak through the release and its errors.
#[pg_test(error = "upper of dp_sum must be a literal or a bind parameter ($1), not a subquery")]
fn a_bound_from_a_subquery_is_refused() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 0, (SELECT max(x) FROM s), 1) FROM s").unwrap();
}

#[pg_test(error = "dp_sum: epsilon must be a finite number between 1e-9 and 1e6, got 0")]
fn a_bad_epsilon_is_refused_before_charging() {
    sample_table();
    Spi::run("SELECT dp_sum(x, 0, 1, 0) FROM s").unwrap();
}

#[pg_test]
fn admin_api_keeps_exact_numeric_amounts() {
    Spi::run("CREATE ROLE dp_budget_t").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_budget_t', 0.1)").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_budget_t', 0.2, 1e-6)").unwrap();
    assert_eq!(one_text("SELECT epsilon_granted::text FROM dp.budgets WHERE role = 'dp_budget_t'::regrole"), "0.3");
    assert_eq!(one_text("SELECT delta_granted::text FROM dp.budgets WHERE role = 'dp_budget_t'::regrole"), "0.000001");
    Spi::run("SELECT dp.set_budget('dp_budget_t', 2, 0, 0.5)").unwrap();
    assert_eq!(
        one_text("SELECT concat_ws('|', epsilon_granted, epsilon_remaining, max_epsilon_per_query) FROM dp.budgets WHERE role = 'dp_budget_t'::regrole"),
        "2|2|0.5"
    );
    Spi::run("SELECT dp.revoke_budget('dp_budget_t')").unwrap();
    assert_eq!(
        one_text("SELECT concat_ws('|', epsilon_granted, epsilon_spent, epsilon_remaining) FROM dp.budgets WHERE role = 'dp_budget_t'::regrole"),
        "0|0|0",
        "a revoke keeps the row and what was spent"
    );
}

#[pg_test(error = "epsilon must be a finite number between 0 and 1e6, got NaN")]
fn admin_api_rejects_nan() {
    Spi::run("CREATE ROLE dp_budget_t").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_budget_t', 'NaN')").unwrap();
}

#[pg_test(error = "delta must be at least 0 and less than 1, got 1")]
fn admin_api_rejects_delta_one() {
    Spi::run("CREATE ROLE dp_budget_t").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_budget_t', 1, 1)").unwrap();
}

/// True if a new role without privileges fails to run `sql`.
fn refused_for_a_plain_role(sql: &str) -> bool {
    Spi::run("CREATE ROLE dp_mallory").unwrap();
    Spi::run("SET ROLE dp_mallory").unwrap();
    // refused for want of a privilege, not for any other error (a misspelt call fails too)
    error_of(sql).is_some_and(|e| e.contains("permission denied"))
}

#[pg_test]
fn analyst_cannot_write_budgets() {
    assert!(refused_for_a_plain_role("UPDATE dp.role_budget SET epsilon_granted = 1e6"));
}

#[pg_test]
fn analyst_cannot_insert_a_budget() {
    assert!(refused_for_a_plain_role("INSERT INTO dp.role_budget (role_uid, role_name, epsilon_granted) VALUES (gen_random_uuid(), current_user, 1e6)"));
}

#[pg_test]
fn analyst_cannot_delete_receipts() {
    assert!(refused_for_a_plain_role("DELETE FROM dp.release_log"));
}

#[pg_test]
fn analyst_cannot_read_other_receipts() {
    assert!(refused_for_a_plain_role("SELECT count(*) FROM dp.ledger"));
}

#[pg_test]
fn analyst_cannot_grant_a_budget() {
    assert!(refused_for_a_plain_role("SELECT dp.grant_budget(current_user::regrole, 1e6)"));
}

#[pg_test]
fn analyst_cannot_call_the_ledger_workers_functions() {
    let uid = "'00000000-0000-4000-8000-000000000000'::uuid";
    for sql in [
        format!("SELECT * FROM dp.locked_budget({uid})"),
        "SELECT * FROM dp.forfeit(current_user::regrole::oid, 'x', 0, '', '22012')".to_string(),
        "SELECT dp.ensure_role_uid(current_user::regrole)".to_string(),
        "SELECT dp.reuse_refusal(current_user::regrole::oid, true, '{}', '{}')".to_string(),
    ] {
        Spi::run("RESET ROLE; DROP ROLE IF EXISTS dp_mallory").unwrap();
        assert!(refused_for_a_plain_role(&sql), "{sql}");
    }
    Spi::run("RESET ROLE").unwrap();
    // the debit itself is no SQL function: only the ledger worker runs it (src/budget/debit.rs)
    assert_eq!(one_i64("SELECT count(*) FROM pg_proc WHERE proname IN ('debit', 'debit_batch') AND pronamespace = 'dp'::regnamespace"), 0);
}

#[pg_test]
fn analyst_cannot_turn_require_budget_off() {
    assert!(refused_for_a_plain_role("SET dp.require_budget = off"));
}

#[pg_test]
fn analyst_can_read_only_their_own_budget() {
    Spi::run("CREATE ROLE dp_other").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_other', 5)").unwrap();
    assert!(!refused_for_a_plain_role("SELECT * FROM dp.my_budget"));
    assert_eq!(one_i64("SELECT count(*) FROM dp.my_budget"), 0);
    assert_eq!(one_i64("SELECT count(*) FROM dp.my_ledger"), 0);
}

#[pg_test]
fn dp_admin_members_can_grant_and_read() {
    Spi::run("CREATE ROLE dp_dba_t IN ROLE dp_admin").unwrap();
    Spi::run("CREATE ROLE dp_budget_t").unwrap();
    Spi::run("SET ROLE dp_dba_t").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_budget_t', 1.5)").unwrap();
    assert_eq!(one_text("SELECT epsilon_remaining::text FROM dp.budgets WHERE role = 'dp_budget_t'::regrole"), "1.5");
    one_i64("SELECT count(*) FROM dp.ledger");
}

#[pg_test]
fn epsilon_from_a_plpgsql_variable_is_charged() {
    sample_table();
    Spi::run(
        "CREATE FUNCTION dp_t_count(e float8) RETURNS bigint LANGUAGE plpgsql AS $$
         DECLARE n bigint;
         BEGIN
             SELECT dp_count(x, e) INTO n FROM s;
             RETURN n;
         END $$",
    )
    .unwrap();
    let before = receipts();
    assert_eq!(one_i64("SELECT dp_t_count(1e6)"), 1000);
    one_i64("SELECT dp_t_count(0.375)");
    assert_eq!(receipts(), before + 2);
    assert_eq!(one_text("SELECT epsilon::text FROM dp.ledger ORDER BY id DESC LIMIT 1"), "0.375");
}

#[pg_test]
fn a_cursor_fetched_in_pieces_is_one_paid_release_per_group() {
    sample_table();
    let q = "DECLARE c CURSOR FOR SELECT (i % 10)::text AS k, dp_count(x, 0.5) FROM s GROUP BY 1";
    let before = receipts_for(q);
    Spi::run(q).unwrap();
    assert_eq!(receipts_for(q), before + 1);
    let mut rows = 0;
    for _ in 0..4 {
        rows += column("FETCH 3 FROM c").len();
    }
    assert_eq!(rows, 10);
    Spi::run("CLOSE c").unwrap();
    assert_eq!(receipts_for(q), before + 1);
}

#[pg_test]
fn limit_zero_releases_nothing_and_charges_nothing() {
    sample_table();
    for sql in [
        "SELECT dp_count(x, 1) FROM s LIMIT 0",
        "SELECT * FROM (SELECT i % 3 AS k, dp_sum(x, 0, 10, 1) FROM s GROUP BY 1) q LIMIT 0",
        "SELECT dp_avg(x, 0, 10, 1) FROM s LIMIT 0 OFFSET 5",
    ] {
        assert!(column(sql).is_empty(), "{sql}");
        assert_eq!(receipts_for(sql), 0, "a LIMIT 0 probe was charged: {sql}");
    }
    // LIMIT 1 releases, and is charged
    let sql = "SELECT dp_count(x, 1) FROM s LIMIT 1";
    one_i64(sql);
    assert_eq!(receipts_for(sql), 1);
}

#[pg_test]
fn the_same_call_twice_is_one_release_charged_once() {
    sample_table();
    // select list twice: one receipt, one value (at ε = 0.01 two releases would differ by noise of scale 100)
    let sql = "SELECT dp_count(x, 0.01)::text || '|' || dp_count(x, 0.01)::text FROM s";
    for _ in 0..5 {
        let v = one_text(sql);
        let (a, b) = v.split_once('|').unwrap();
        assert_eq!(a, b, "two values for one call");
    }
    assert_eq!(receipts_for(sql), 5, "one receipt per execution");
    // HAVING on the shown value: every shown value passes the filter, whatever the noise
    let sql = "SELECT i % 3, dp_count(x, 0.01) FROM s GROUP BY 1 HAVING dp_count(x, 0.01) > 333";
    for _ in 0..10 {
        for v in column(&format!("SELECT n::text FROM ({sql}) q(k, n)")) {
            assert!(v.unwrap().parse::<i64>().unwrap() > 333, "a shown value disagrees with its HAVING");
        }
    }
    // other parameters are another release
    let sql = "SELECT dp_count(x, 0.5)::text || '|' || dp_count(x, 0.25)::text FROM s";
    one_text(sql);
    assert_eq!(receipts_for(sql), 2);
    // the session list shows one release for the twin calls
    Spi::run("SELECT * FROM dp.last_releases(0)").unwrap();
    let before = one_i64("SELECT count(*) FROM dp.last_releases(100)");
    one_text("SELECT dp_sum(x, 0, 10, 1)::text || dp_sum(x, 0, 10, 1)::text FROM s");
    assert_eq!(one_i64("SELECT count(*) FROM dp.last_releases(100)") - before, 1);
}

#[pg_test]
fn the_same_call_twice_over_privacy_units_is_one_release() {
    Spi::run("CREATE TABLE v AS SELECT g AS id, g % 300 AS person, g % 3 AS ward FROM generate_series(1, 3000) g").unwrap();
    Spi::run("SELECT dp.protect_table('v', privacy_unit => 'person')").unwrap();
    Spi::run("SELECT dp.set_domain('v', 'ward', ARRAY[0, 1, 2])").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    let sql = "SELECT n::text FROM (SELECT ward, dp_count(id, 0.01) FROM v GROUP BY ward HAVING dp_count(id, 0.01) > 100) q(k, n)";
    for _ in 0..10 {
        for v in column(sql) {
            assert!(v.unwrap().parse::<i64>().unwrap() > 100);
        }
    }
    assert_eq!(receipts_for(sql), 10, "one receipt per execution");
}

#[pg_test]
fn receipts_carry_a_fingerprint_an_execution_and_the_parameters() {
    sample_table();
    let sql = "SELECT dp_sum(x, 0, 100, 0.5), dp_median(x, 0, 100, 0.25, 1e-6) FROM s";
    Spi::run(sql).unwrap();
    Spi::run(sql).unwrap();
    let rows = column(&format!(
        "SELECT concat_ws('|', query_id <> 0, execution_id, parameters::text) FROM dp.ledger
          WHERE query_text = {} ORDER BY id",
        pgrx::spi::quote_literal(sql)
    ));
    assert_eq!(rows.len(), 4);
    let parts: Vec<Vec<String>> = rows.iter().map(|r| r.clone().unwrap().split('|').map(String::from).collect()).collect();
    assert!(parts.iter().all(|p| p[0] == "t"), "a query fingerprint: {rows:?}");
    assert_eq!(parts[0][1], parts[1][1], "one execution id per execution");
    assert_ne!(parts[1][1], parts[2][1], "another execution, another id");
    assert_eq!(parts[0][2], r#"{"lower": 0.0, "upper": 100.0, "epsilon": 0.5}"#);
    assert_eq!(parts[1][2], r#"{"p": 0.5, "delta": 0.000001, "lower": 0.0, "upper": 100.0, "epsilon": 0.25}"#);
    // one fingerprint for both executions
    assert_eq!(one_i64(&format!("SELECT count(DISTINCT query_id) FROM dp.ledger WHERE query_text = {}", pgrx::spi::quote_literal(sql))), 1);
}

#[pg_test]
fn query_texts_are_kept_once_per_fingerprint_and_receipts_can_be_purged_and_exported() {
    sample_table();
    let a = "SELECT dp_count(x, 0.5) FROM s WHERE i > 10";
    let b = "SELECT dp_count(x, 0.5) FROM s WHERE i > 20";
    Spi::run(a).unwrap();
    Spi::run(b).unwrap();
    Spi::run(a).unwrap();
    // one fingerprint (constants aside) and one stored text: receipts of that text keep none of their
    // own, the one with other constants keeps its own, and the ledger shows each its exact text
    let fp = one_i64(&format!("SELECT query_id FROM dp.ledger WHERE query_text = {} LIMIT 1", pgrx::spi::quote_literal(a)));
    assert_eq!(one_i64(&format!("SELECT count(*) FROM dp.query_text WHERE query_id = {fp}")), 1);
    let stored = one_text(&format!("SELECT query_text FROM dp.query_text WHERE query_id = {fp}"));
    let own = if stored == a { b } else { a };
    assert_eq!(one_i64(&format!("SELECT count(*) FROM dp.release_log WHERE query_id = {fp} AND query_text IS NOT NULL AND query_text <> {}", pgrx::spi::quote_literal(own))), 0);
    assert_eq!(one_i64(&format!("SELECT count(*) FROM dp.ledger WHERE query_text = {}", pgrx::spi::quote_literal(a))), 2);
    assert_eq!(one_i64(&format!("SELECT count(*) FROM dp.ledger WHERE query_text = {}", pgrx::spi::quote_literal(b))), 1);
    // export: one JSON object per receipt
    let n = one_i64("SELECT count(*) FROM dp.ledger");
    assert_eq!(one_i64("SELECT count(*) FROM dp.export_ledger()"), n);
    assert_eq!(one_text(&format!("SELECT e->>'query_id' FROM dp.export_ledger() e WHERE (e->>'query_id')::bigint = {fp} LIMIT 1")), fp.to_string());
    // purge: receipts go, budgets keep their spending, unused texts go
    assert_eq!(one_i64("SELECT dp.purge_receipts('0 seconds')"), n);
    assert_eq!(one_i64("SELECT count(*) FROM dp.ledger"), 0);
    assert_eq!(one_i64("SELECT count(*) FROM dp.query_text"), 0);
    let e = error_of("SELECT dp.purge_receipts('-1 day')").unwrap();
    assert!(e.contains("older_than must be an interval of at least 0"), "{e}");
}

/// One debit of a batch, as the ledger worker makes for every charge waiting when it wakes (called in
/// the test's transaction, which can see the roles it created): each request is (role, unlimited, ε);
/// its one release is named `r<i>`, its query text is `text`, and its fingerprint `i` if `fingerprinted`
/// (none otherwise: each receipt then keeps the text). One outcome per request.
fn debit_outcomes(reqs: &[(&str, bool, &str)], text: &str, fingerprinted: bool) -> Vec<pg_dp_core::accounting::charge::ChargeOutcome> {
    use pg_dp_core::accounting::charge::{ChargeRequest, ReleaseRecord};
    let reqs: Vec<ChargeRequest> = reqs
        .iter()
        .enumerate()
        .map(|(i, (role, unlimited, eps))| ChargeRequest {
            role: Spi::get_one_with_args::<pg_sys::Oid>("SELECT $1::regrole::oid", &[(*role).into()]).unwrap().unwrap().to_u32(),
            database_user: role.to_string(),
            unlimited: *unlimited,
            query_id: if fingerprinted { i as i64 + 1 } else { 0 },
            query_text: text.into(),
            releases: vec![ReleaseRecord {
                aggregate: format!("r{}", i + 1),
                mechanism: "discrete_laplace".into(),
                sensitivity: 1.0,
                noise_scale: 1.0,
                epsilon: eps.to_string(),
                delta: "0".into(),
                details: "{}".into(),
            }],
            kind: Default::default(),
            reused: vec![],
        })
        .collect();
    let refs: Vec<&ChargeRequest> = reqs.iter().collect();
    crate::budget::debit::debit_batch(&refs)
}

/// `debit_outcomes` as rows "granted|reason|ε left" (absent parts left out).
fn debit_batch(reqs: &[(&str, bool, &str)]) -> Vec<String> {
    use pg_dp_core::accounting::charge::ChargeOutcome;
    debit_outcomes(reqs, "batch test", true)
        .into_iter()
        .map(|o| match o {
            ChargeOutcome::Granted { epsilon_remaining } => ["t".to_string()].into_iter().chain(epsilon_remaining).collect::<Vec<_>>().join("|"),
            ChargeOutcome::Denied { reason, epsilon_remaining, .. } => {
                ["f".to_string(), reason].into_iter().chain(epsilon_remaining).collect::<Vec<_>>().join("|")
            }
            ChargeOutcome::Failed { message } => format!("failed: {message}"),
        })
        .collect()
}

#[pg_test]
fn a_batch_of_charges_is_decided_request_by_request_in_order() {
    Spi::run("CREATE ROLE dp_batch_a; CREATE ROLE dp_batch_b; CREATE ROLE dp_batch_c").unwrap();
    Spi::run("SELECT dp.set_budget('dp_batch_a', 1.0)").unwrap();
    Spi::run("SELECT dp.set_budget('dp_batch_c', 5.0, 0, 0.5)").unwrap();
    let rows = debit_batch(&[
        ("dp_batch_a", false, "0.6"),
        ("dp_batch_b", false, "0.1"),
        ("dp_batch_a", false, "0.6"),
        ("dp_batch_c", false, "0.6"),
        ("dp_batch_a", false, "0.3"),
        ("dp_batch_b", true, "0.1"),
        ("dp_batch_c", false, "0.5"),
    ]);
    assert_eq!(
        rows,
        [
            "t|0.4",              // a: 1.0 - 0.6
            "f|no budget",        // b has none and is not exempt
            "f|exhausted|0.4",    // a: 0.6 > 0.4, nothing debited
            "f|cap:0.5|5",        // c: above its per-query cap
            "t|0.1",              // a: the refusal above left 0.4
            "t",                  // b, exempt (a superuser): charged without a budget
            "t|4.5",              // c
        ]
    );
    // each role's row is debited once with the sum of what it was granted, exactly
    assert_eq!(one_text("SELECT epsilon_spent::text FROM dp.budgets WHERE role = 'dp_batch_a'::regrole"), "0.9");
    assert_eq!(one_text("SELECT epsilon_spent::text FROM dp.budgets WHERE role = 'dp_batch_c'::regrole"), "0.5");
    // one receipt per granted release, in the order of the batch, named by its own request
    assert_eq!(
        one_text("SELECT string_agg(aggregate || ':' || role_name || ':' || epsilon, ' ' ORDER BY id) FROM dp.release_log WHERE query_text = 'batch test' OR query_id BETWEEN 1 AND 7"),
        "r1:dp_batch_a:0.6 r5:dp_batch_a:0.3 r6:dp_batch_b:0.1 r7:dp_batch_c:0.5"
    );
    // the exempt role was given a pg_dp identity for its receipt
    assert_eq!(one_text("SELECT (role_uid = dp.role_uid('dp_batch_b'))::text FROM dp.release_log WHERE aggregate = 'r6'"), "true");
    // a batch of one request gives the same answers
    assert_eq!(debit_batch(&[("dp_batch_a", false, "0.2")]), ["f|exhausted|0.1"]);
}

#[pg_test]
fn two_roles_with_one_identity_in_one_batch_spend_one_budget() {
    // the label hook refuses a second role with an identity another carries, but two racing labels
    // could both pass its check: their requests are decided together, against the one budget row
    Spi::run("CREATE ROLE dp_twin_a; CREATE ROLE dp_twin_b").unwrap();
    Spi::run("SELECT dp.set_budget('dp_twin_a', 1.0)").unwrap();
    Spi::run(
        "SET allow_system_table_mods = on;
         INSERT INTO pg_shseclabel SELECT 'dp_twin_b'::regrole, classoid, provider, label FROM pg_shseclabel
          WHERE objoid = 'dp_twin_a'::regrole AND provider = 'pg_dp_role';
         RESET allow_system_table_mods",
    )
    .unwrap();
    assert_eq!(one_text("SELECT (dp.role_uid('dp_twin_a') = dp.role_uid('dp_twin_b'))::text"), "true");
    let rows = debit_batch(&[("dp_twin_a", false, "0.75"), ("dp_twin_b", false, "0.75"), ("dp_twin_b", false, "0.25")]);
    assert_eq!(rows, ["t|0.25", "f|exhausted|0.25", "t|0"]);
    assert_eq!(one_text("SELECT epsilon_spent::text FROM dp.role_budget WHERE role_uid = dp.role_uid('dp_twin_a')"), "1.00");
    assert_eq!(
        one_text("SELECT string_agg(role_name || ':' || epsilon, ' ' ORDER BY id) FROM dp.release_log WHERE role_name LIKE 'dp_twin_%'"),
        "dp_twin_a:0.75 dp_twin_b:0.25"
    );
}

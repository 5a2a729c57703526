// Parallel aggregation: partial states merge exactly, so with one seed the serial and the
// parallel plan release bit-identical values.

fn force_parallel() {
    for s in [
        "SET max_parallel_workers_per_gather = 2",
        "SET parallel_setup_cost = 0",
        "SET parallel_tuple_cost = 0",
        "SET min_parallel_table_scan_size = 0",
        "SET parallel_leader_participation = off",
    ] {
        Spi::run(s).unwrap();
    }
}

const QUERY: &str = "SELECT concat_ws(' ', dp_count(*), dp_count(x, 0.5), dp_sum(i, 0, 100000, 0.5), dp_sum(b, 0, 100, 0.5),
                            dp_sum(x, 0, 200000, 0.5), dp_sum(n, 0, 200000, 0.5), dp_avg(x, 0, 200000, 0.5),
                            dp_avg(n, 0, 200000, 0.5)) FROM big";

#[pg_test]
fn parallel_plan_matches_serial_plan_bit_for_bit() {
    Spi::run(
        "CREATE TABLE big AS SELECT g AS i, g::int8 % 150 AS b, g::float8 / 7 AS x, (g::numeric / 7) AS n
           FROM generate_series(1, 200000) g",
    )
    .unwrap();
    Spi::run("ANALYZE big").unwrap();
    force_parallel();
    let plan = column(&format!("EXPLAIN (COSTS OFF) {QUERY}")).into_iter().flatten().collect::<Vec<_>>().join("\n");
    assert!(plan.contains("Partial Aggregate") && plan.contains("Gather"), "no parallel plan:\n{plan}");
    Spi::run("SET dp.seed = 11").unwrap();
    let parallel = one_text(QUERY);
    Spi::run("SET max_parallel_workers_per_gather = 0").unwrap();
    let plan = column(&format!("EXPLAIN (COSTS OFF) {QUERY}")).into_iter().flatten().collect::<Vec<_>>().join("\n");
    assert!(!plan.contains("Partial Aggregate"), "still parallel:\n{plan}");
    Spi::run("SET dp.seed = 11").unwrap();
    let serial = one_text(QUERY);
    assert_eq!(parallel, serial);
}

#[pg_test]
fn parallel_plan_with_empty_input_still_releases() {
    Spi::run("CREATE TABLE big AS SELECT g::float8 AS x, g AS i FROM generate_series(1, 200000) g").unwrap();
    Spi::run("ANALYZE big").unwrap();
    force_parallel();
    let q = "SELECT concat_ws(' ', dp_count(*), dp_sum(x, 0, 10, 0.5), dp_sum(i, 0, 10, 0.5), dp_avg(x, 0, 10, 0.5)) FROM big WHERE x < 0";
    let plan = column(&format!("EXPLAIN (COSTS OFF) {q}")).into_iter().flatten().collect::<Vec<_>>().join("\n");
    assert!(plan.contains("Partial Aggregate"), "no parallel plan:\n{plan}");
    let v = one_text(q);
    assert_eq!(v.split(' ').count(), 4, "{v}");
}

#[pg_test]
fn parallel_group_by_releases_every_group() {
    Spi::run("CREATE TABLE big AS SELECT g % 3 AS k, g::float8 AS x FROM generate_series(1, 300000) g").unwrap();
    Spi::run("ANALYZE big").unwrap();
    force_parallel();
    let rows = column("SELECT dp_count(x, 1e6)::text FROM big GROUP BY k ORDER BY k");
    assert_eq!(rows, vec![Some("100000".into()); 3]);
}

#[pg_test]
fn parallel_plan_of_dp_avg_with_a_public_count_releases_what_was_paid() {
    // the finalizing Aggref of a parallel plan has one argument (the partial state) where the call
    // has five: the public count must still be read from the call, or the final function would
    // release the paid-for call as another one and refuse after the charge
    Spi::run("CREATE TABLE big AS SELECT g::float8 AS x, g % 3 AS k FROM generate_series(1, 200000) g").unwrap();
    Spi::run("ANALYZE big").unwrap();
    force_parallel();
    let q = "SELECT dp_avg(x, 0, 200000, 1e6, 200000) FROM big";
    let plan = column(&format!("EXPLAIN (COSTS OFF) {q}")).into_iter().flatten().collect::<Vec<_>>().join("\n");
    assert!(plan.contains("Partial Aggregate") && plan.contains("Gather"), "no parallel plan:\n{plan}");
    let v = one_f64(q);
    assert!((v - 100000.5).abs() < 1.0, "{v}");
    let grouped = column("SELECT round(dp_avg(x, 0, 200000, 1e6, 66667))::text FROM big GROUP BY k ORDER BY k");
    assert_eq!(grouped.len(), 3, "{grouped:?}");
    assert_eq!(receipts_of(q), 1);
}

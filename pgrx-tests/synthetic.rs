// dp.release_synthetic: the target's columns and types, the public encodings (domains, declared
// bounds, bin edges in the call, booleans), the report, the receipt and the charge, the order of
// checks (nothing data-dependent before the charge), values that never fail, and the answers at a
// huge ε. The engine's statistics (noise distributions, empirical privacy of the structure choice,
// accuracy) are tested in core/tests/synthetic.rs.

/// A table of 2000 people: a region with a declared domain, an age with declared bounds, an income
/// binned in the call, a flag, and a score that depends on the region (a 2-way dependence the model
/// must keep).
fn synthetic_source() {
    Spi::run(
        "CREATE TABLE people AS
           SELECT g AS id, (ARRAY['north', 'south', 'east', 'west'])[1 + g % 4] AS region,
                  (18 + g % 60)::int AS age, (g % 100) * 1000.0::float8 AS income, g % 3 = 0 AS member,
                  CASE g % 4 WHEN 0 THEN 10 WHEN 1 THEN 30 WHEN 2 THEN 50 ELSE 70 END + (g % 5)::int AS score
             FROM generate_series(1, 2000) g",
    )
    .unwrap();
    Spi::run("SELECT dp.set_domain('people', 'region', ARRAY['north', 'south', 'east', 'west'])").unwrap();
    Spi::run("SELECT dp.set_bounds('people', 'age', 18, 77)").unwrap();
    Spi::run("SELECT dp.set_bounds('people', 'score', 0, 79)").unwrap();
}

const SYN_COLUMNS: &str = "ARRAY['region', 'age', 'income', 'member', 'score']";
const SYN_EDGES: &str = r#"'{"income": [0, 25000, 50000, 75000, 100000]}'"#;

fn synthetic_receipts() -> i64 {
    one_i64("SELECT count(*) FROM dp.ledger WHERE mechanism = 'synthetic' AND query_text = current_query()")
}

fn synthetic_refused(sql: &str, expect: &str) -> String {
    let before = synthetic_receipts();
    let msg = refused(sql, expect);
    assert_eq!(synthetic_receipts(), before, "charged although refused: {sql}");
    assert_eq!(one_i64("SELECT count(*) FROM pg_class WHERE relname IN ('syn', 'syn_report')"), 0, "tables left by a refusal: {sql}");
    msg
}

#[pg_test]
fn a_synthetic_copy_has_the_sources_columns_and_types_and_a_public_report() {
    synthetic_source();
    let r: serde_json::Value = serde_json::from_str(&one_text(&format!(
        "SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 1e4, bins => 8, bin_edges => {SYN_EDGES})::text"
    )))
    .unwrap();
    assert_eq!(r["target"], "syn");
    assert_eq!(r["report"], "syn_report");
    assert_eq!(r["neighbours"], "add or remove one row");
    let cols = column("SELECT attname || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'syn'::regclass AND attnum > 0 ORDER BY attnum");
    assert_eq!(
        cols,
        ["region text", "age integer", "income double precision", "member boolean", "score integer"].map(|s| Some(s.to_string())).to_vec()
    );
    // the released row count is the noisy one; at ε = 1e4 it is n to within a few rows
    let m = one_i64("SELECT count(*) FROM syn");
    assert_eq!(m, r["rows_released"].as_i64().unwrap());
    assert!((m - 2000).abs() <= 5, "{m} rows");
    // every value comes from the public encoding: domain values, bins, NULL
    assert_eq!(one_i64("SELECT count(*) FROM syn WHERE region NOT IN ('north', 'south', 'east', 'west')"), 0);
    assert_eq!(one_i64("SELECT count(*) FROM syn WHERE age NOT BETWEEN 18 AND 77 OR income NOT BETWEEN 0 AND 100000 OR score NOT BETWEEN 0 AND 79"), 0);
    // the report: the receipt, the row count, the structure and one row per column
    let kinds = column("SELECT kind || ':' || item FROM syn_report ORDER BY kind, item");
    for k in [
        "breakdown:epsilon",
        "column:age",
        "column:income",
        "column:member",
        "column:region",
        "column:score",
        "model part:one_way",
        "model part:selection",
        "model part:two_way",
        "model:structure",
        "receipt:privacy",
        "released:rows",
    ] {
        assert!(kinds.contains(&Some(k.to_string())), "{k} missing from {kinds:?}");
    }
    assert_eq!(one_i64("SELECT jsonb_array_length(detail->'edges') FROM syn_report WHERE item = 'structure'"), 4, "a tree on five columns");
    assert_eq!(one_text("SELECT detail->>'kind' FROM syn_report WHERE item = 'age'"), "integer_bins");
    assert_eq!(one_text("SELECT (detail->'values')::text FROM syn_report WHERE item = 'region'"), r#"["north", "south", "east", "west"]"#);
    // both tables belong to the caller
    assert_eq!(one_i64("SELECT count(*) FROM pg_tables WHERE tablename IN ('syn', 'syn_report') AND tableowner = current_user"), 2);
}

#[pg_test]
fn at_a_huge_epsilon_the_synthetic_margins_and_a_strong_dependence_match_the_source() {
    synthetic_source();
    Spi::run(&format!("SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 1e4, bins => 8, bin_edges => {SYN_EDGES})")).unwrap();
    // 1-way: the regions' shares
    for region in ["north", "south", "east", "west"] {
        let share = one_f64(&format!("SELECT avg((region = '{region}')::int)::float8 FROM syn"));
        assert!((share - 0.25).abs() < 0.05, "{region}: {share}");
    }
    let member = one_f64("SELECT avg(member::int)::float8 FROM syn");
    assert!((member - 1.0 / 3.0).abs() < 0.05, "member share {member}");
    // 2-way: the score depends on the region (its bin of 10 is fixed by the region); the tree keeps
    // it, so the mean score per region is close to the source's
    for (region, want) in [("north", 12.0), ("south", 32.0), ("east", 52.0), ("west", 72.0)] {
        let got = one_f64(&format!("SELECT avg(score)::float8 FROM syn WHERE region = '{region}'"));
        assert!((got - want).abs() < 6.0, "{region}: mean score {got}, source {want}");
    }
}

#[pg_test]
fn the_synthetic_release_is_charged_once_before_the_read_with_the_returned_receipt() {
    synthetic_source();
    let before = one_i64("SELECT pg_stat_get_xact_numscans('people'::regclass)");
    let returned: serde_json::Value = serde_json::from_str(&one_text(&format!(
        "SELECT (dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 2, 1e-6, bin_edges => {SYN_EDGES}) - 'rows_released' - 'report' - 'structure')::text"
    )))
    .unwrap();
    assert_eq!(one_i64("SELECT pg_stat_get_xact_numscans('people'::regclass)"), before + 1, "one scan");
    // the receipt records the statement the client sent: this test's own call
    let mine = "FROM dp.ledger WHERE mechanism = 'synthetic' AND query_text LIKE '%synthetic_release_is_charged_once_before%'";
    assert_eq!(one_i64(&format!("SELECT count(*) {mine}")), 1);
    assert_eq!(one_text(&format!("SELECT concat_ws('|', aggregate, epsilon, delta) {mine}")), "dp.release_synthetic(people)|2|0.000001");
    let charged: serde_json::Value = serde_json::from_str(&one_text(&format!("SELECT (details - 'execution')::text {mine}"))).unwrap();
    assert_eq!(returned, charged);
    assert_eq!(charged["epsilon"], 2.0);
}

#[pg_test]
fn synthetic_releases_are_refused_from_public_information_before_anything_is_charged_or_read() {
    synthetic_source();
    Spi::run("CREATE TABLE notes AS SELECT g AS id, 'note ' || g AS body, g::float8 AS x FROM generate_series(1, 50) g").unwrap();
    let before = one_i64("SELECT pg_stat_get_xact_numscans('people'::regclass)");
    let call = |args: &str| format!("SELECT dp.release_synthetic({args})");
    synthetic_refused(&call("'notes', 'syn', ARRAY['body'], 1"), "column \"body\" of notes has no public values");
    synthetic_refused(&call("'notes', 'syn', ARRAY['x'], 1"), "column \"x\" of notes has no public values");
    synthetic_refused(&call(&format!("'people', 'syn', {SYN_COLUMNS}, 1")), "column \"income\" of people has no public values");
    synthetic_refused(&call(&format!("'people', 'syn', {SYN_COLUMNS}, 0, bin_edges => {SYN_EDGES}")), "epsilon must be");
    synthetic_refused(&call(&format!("'people', 'syn', {SYN_COLUMNS}, 1, 1, bin_edges => {SYN_EDGES}")), "delta must be");
    synthetic_refused(&call(&format!("'people', 'syn', {SYN_COLUMNS}, 1, bins => 0, bin_edges => {SYN_EDGES}")), "bins must be between 1 and 4096, got 0");
    synthetic_refused(&call("'people', 'syn', ARRAY['age'], 1, method => 'gan'"), "method must be 'mst', 'tree2' or 'privbayes', got 'gan'");
    synthetic_refused(&call("'people', 'syn', ARRAY['age'], 1, bin_edges => '{\"income\": [0, 1]}'"), "bin_edges names \"income\", which is not among columns");
    synthetic_refused(&call("'people', 'syn', ARRAY['income'], 1, bin_edges => '{\"income\": [5, 1]}'"), "strictly increasing, got 5 then 1");
    synthetic_refused(&call("'people', 'syn', ARRAY['age'], 1, bin_edges => '{\"age\": [0, 1.5, 3]}'"), "must hold integers for an integer column");
    synthetic_refused(&call("'people', 'syn', ARRAY['age'], 1, bin_edges => '{\"age\": [0, 3000000000]}'"), "do not fit its type integer");
    synthetic_refused(&call("'people', 'syn', ARRAY['region'], 1, bin_edges => '{\"region\": [0, 1]}'"), "which is pg_catalog.text, not a number");
    synthetic_refused(&call("'people', 'syn', ARRAY['age', 'age'], 1"), "columns must not repeat a column");
    synthetic_refused(&call("'people', 'syn', ARRAY['nope'], 1"), "column \"nope\" of people does not exist");
    synthetic_refused(&call("'people', 'syn', ARRAY[]::text[], 1"), "columns must name between 1 and 64 columns");
    synthetic_refused(&call("'people', NULL, ARRAY['age'], 1"), "target must not be NULL");
    Spi::run("CREATE VIEW people_view AS SELECT * FROM people").unwrap();
    synthetic_refused(&call("'people_view', 'syn', ARRAY['age'], 1"), "is a view, not a table");
    // a privacy unit: many rows per person, and the model protects one row
    Spi::run("CREATE TABLE visits AS SELECT g % 10 AS person, (g % 7)::int AS ward FROM generate_series(1, 100) g").unwrap();
    Spi::run("SELECT dp.protect_table('visits', 'person')").unwrap();
    Spi::run("SELECT dp.set_bounds('visits', 'ward', 0, 6)").unwrap();
    synthetic_refused(&call("'visits', 'syn', ARRAY['ward'], 1"), "declares the privacy unit");
    // a target that exists already
    Spi::run("CREATE TABLE syn_report (x int)").unwrap();
    let before_report = synthetic_receipts();
    refused(&call("'people', 'syn', ARRAY['age'], 1"), "relation syn_report already exists");
    assert_eq!(synthetic_receipts(), before_report);
    Spi::run("DROP TABLE syn_report").unwrap();
    assert_eq!(one_i64("SELECT pg_stat_get_xact_numscans('people'::regclass)"), before, "a refused release read the table");
}

#[pg_test]
fn synthetic_values_outside_the_encoding_are_released_as_null_or_clamped_and_never_fail() {
    Spi::run(
        "CREATE TABLE odd (region text, x float8, n numeric, k int8, flag bool);
         INSERT INTO odd VALUES ('north', 'NaN', 'NaN', 9223372036854775807, NULL), ('mars', 'Infinity', 1e300, -9223372036854775808, true),
                                (NULL, '-Infinity', NULL, NULL, false), ('south', 1e308, -1e300, 0, true);
         INSERT INTO odd SELECT 'south', 5, 5, 5, true FROM generate_series(1, 300)",
    )
    .unwrap();
    Spi::run("SELECT dp.set_domain('odd', 'region', ARRAY['north', 'south'])").unwrap();
    Spi::run("SELECT dp.set_bounds('odd', 'k', -10, 10)").unwrap();
    Spi::run("SELECT dp.set_bounds('odd', 'n', 0, 10)").unwrap();
    let r: serde_json::Value = serde_json::from_str(&one_text(
        r#"SELECT dp.release_synthetic('odd', 'syn', ARRAY['region', 'x', 'n', 'k', 'flag'], 1e4, bins => 4, bin_edges => '{"x": [0, 5, 10]}')::text"#,
    ))
    .unwrap();
    let m = r["rows_released"].as_i64().unwrap();
    assert!((m - 304).abs() <= 3, "{m}");
    assert_eq!(one_i64("SELECT count(*) FROM syn WHERE region NOT IN ('north', 'south') OR x NOT BETWEEN 0 AND 10 OR n NOT BETWEEN 0 AND 10 OR k NOT BETWEEN -10 AND 10"), 0);
    // the common row is kept: region south, x and n in the bin of 5, k in the bin of 5
    assert!(one_i64("SELECT count(*) FROM syn WHERE region = 'south' AND x BETWEEN 5 AND 10 AND flag") > 250);
}

#[pg_test]
fn a_synthetic_copy_of_an_empty_table_is_empty_and_a_report() {
    Spi::run("CREATE TABLE nobody (age int, flag bool)").unwrap();
    Spi::run("SELECT dp.set_bounds('nobody', 'age', 0, 100)").unwrap();
    let r: serde_json::Value = serde_json::from_str(&one_text("SELECT dp.release_synthetic('nobody', 'syn', ARRAY['age', 'flag'], 1e4)::text")).unwrap();
    assert_eq!(r["rows_released"], 0);
    assert_eq!(one_i64("SELECT count(*) FROM syn"), 0);
    assert!(one_i64("SELECT count(*) FROM syn_report") >= 4);
}

#[pg_test]
fn a_synthetic_release_without_budget_is_refused_before_the_read_whatever_the_data() {
    synthetic_source();
    Spi::run("CREATE TABLE people_empty (LIKE people)").unwrap();
    Spi::run("SELECT dp.set_domain('people_empty', 'region', ARRAY['north', 'south', 'east', 'west'])").unwrap();
    Spi::run("CREATE ROLE dp_poor_syn").unwrap();
    Spi::run("GRANT SELECT ON people, people_empty TO dp_poor_syn").unwrap();
    Spi::run("GRANT USAGE, CREATE ON SCHEMA public TO dp_poor_syn").unwrap();
    Spi::run("SET dp.require_budget = on").unwrap();
    let mut messages = Vec::new();
    for t in ["people", "people_empty"] {
        let before = one_i64(&format!("SELECT pg_stat_get_xact_numscans('{t}'::regclass)"));
        Spi::run("SET ROLE dp_poor_syn").unwrap();
        messages.push(refused(&format!("SELECT dp.release_synthetic('{t}', 'leak', ARRAY['region'], 1)"), "has no privacy budget"));
        Spi::run("RESET ROLE").unwrap();
        assert_eq!(one_i64(&format!("SELECT pg_stat_get_xact_numscans('{t}'::regclass)")), before, "{t} read before the charge");
    }
    assert_eq!(messages[0], messages[1]);
    assert_eq!(one_i64("SELECT count(*) FROM pg_class WHERE relname IN ('leak', 'leak_report')"), 0);
}

#[pg_test]
fn a_dp_only_role_releases_a_synthetic_copy_of_a_protected_table_and_owns_it() {
    synthetic_source();
    Spi::run("SELECT dp.protect_table('people')").unwrap();
    Spi::run("CREATE ROLE dp_syn_analyst").unwrap();
    Spi::run("GRANT USAGE, CREATE ON SCHEMA public TO dp_syn_analyst").unwrap();
    Spi::run("SET dp.require_budget = off").unwrap();
    Spi::run("SET ROLE dp_syn_analyst").unwrap();
    refused("SELECT count(*) FROM people", "it is protected by pg_dp");
    Spi::run("SELECT dp.release_synthetic('people', 'syn', ARRAY['region', 'age'], 1)").unwrap();
    assert!(one_i64("SELECT count(*) FROM syn") > 1000);
    Spi::run("RESET ROLE").unwrap();
    assert_eq!(one_text("SELECT tableowner::text FROM pg_tables WHERE tablename = 'syn'"), "dp_syn_analyst");
}

const SYN_CRITERIA: &str = r#"'[{"criterion": "max_marginal_error", "k": 2, "threshold": 0.05, "epsilon": 10},
                               {"criterion": "one_way_relative_error", "threshold": 1, "epsilon": 10},
                               {"criterion": "conditional_means", "group": "region", "value": "score", "threshold": 0.1, "epsilon": 10},
                               {"criterion": "regression_coefficients", "target": "score", "features": ["age"], "threshold": 0.5, "epsilon": 10},
                               {"criterion": "train_synthetic_test_real", "target": "score", "features": ["age"], "threshold": 1, "epsilon": 10},
                               {"criterion": "faithfulness", "threshold": 0.9, "epsilon": 10}]'"#;

#[pg_test]
fn synthetic_acceptance_criteria_pass_at_a_huge_epsilon_and_the_report_states_each_one() {
    synthetic_source();
    let r: serde_json::Value = serde_json::from_str(&one_text(&format!(
        "SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 1e4, bins => 8, bin_edges => {SYN_EDGES}, criteria => {SYN_CRITERIA})::text"
    )))
    .unwrap();
    assert_eq!(r["accepted"], true, "{r}");
    // the plan: model + hoisted (3 criteria released once) + 2 × per candidate (3 criteria) + ε₀ = ε
    let s = &r["selection"];
    assert_eq!(s["tries"], 53, "γ = 0.1 and ε₀ = 0.01 give T = 53");
    assert_eq!(s["refit"], false);
    let model = s["epsilon_model"].as_f64().unwrap();
    assert!(model <= 1e4 - 30.0 - 60.0 - 0.01 && model > 1e4 - 30.0 - 60.0 - 0.011, "{s}");
    assert_eq!(r["criteria"]["epsilon_hoisted"], 30.0);
    assert_eq!(r["criteria"]["epsilon_per_candidate"], 30.0);
    // one row per criterion in the report, each passed, with its DP value, threshold, ε and noise
    let rows = column("SELECT item || ':' || (detail->>'passed') || ':' || (detail->>'epsilon') FROM syn_report WHERE kind = 'criterion' ORDER BY item");
    assert_eq!(
        rows,
        [
            "conditional_means:true:10.0",
            "faithfulness:true:10.0",
            "max_marginal_error:true:10.0",
            "one_way_relative_error:true:10.0",
            "regression_coefficients:true:10.0",
            "train_synthetic_test_real:true:10.0"
        ]
        .map(|s| Some(s.to_string()))
        .to_vec()
    );
    assert_eq!(one_i64("SELECT count(*) FROM syn"), r["rows_released"].as_i64().unwrap());
    // one receipt, at the total ε
    assert_eq!(one_text("SELECT epsilon::text FROM dp.ledger WHERE mechanism = 'synthetic' AND query_text LIKE '%acceptance_criteria_pass_at_a_huge%'"), "10000");
}

#[pg_test]
fn a_synthetic_release_whose_criteria_no_candidate_passes_says_so_writes_nothing_and_is_charged() {
    synthetic_source();
    // a threshold of 0 on the max marginal error needs every 2-way cell exact: never at ε = 10
    let r: serde_json::Value = serde_json::from_str(&one_text(&format!(
        r#"SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 10, bin_edges => {SYN_EDGES},
                   criteria => '[{{"criterion": "max_marginal_error", "k": 2, "threshold": 0, "epsilon": 1}}]')::text"#
    )))
    .unwrap();
    assert_eq!(r["accepted"], false, "{r}");
    assert_eq!(r["rows_released"], 0);
    assert!(r["structure"].is_null() && r["evaluation"].is_null(), "nothing about the tries: {r}");
    assert_eq!(one_i64("SELECT count(*) FROM syn"), 0);
    assert_eq!(one_i64("SELECT count(*) FROM syn_report WHERE kind = 'no candidate passed'"), 1);
    assert_eq!(one_i64("SELECT count(*) FROM syn_report WHERE kind IN ('criterion', 'model')"), 0);
    assert_eq!(one_i64("SELECT count(*) FROM dp.ledger WHERE mechanism = 'synthetic' AND query_text LIKE '%criteria_no_candidate_passes%'"), 1);
    // nothing in the receipt or the report counts tries beyond the public cap
    let report = one_text("SELECT string_agg(detail::text, ' ') FROM syn_report");
    assert!(!report.contains("tried") && !report.contains("attempt"), "{report}");
}

#[pg_test]
fn synthetic_criteria_are_checked_from_the_call_before_anything_is_charged() {
    synthetic_source();
    let call = |criteria: &str, extra: &str| {
        format!("SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 5, bin_edges => {SYN_EDGES}, criteria => '{criteria}'{extra})")
    };
    let mm = r#"[{"criterion": "max_marginal_error", "k": 2, "threshold": 0.1, "epsilon": 1}]"#;
    synthetic_refused(&call(r#"[{"criterion": "max_marginal_error", "k": 2, "threshold": 0.1, "epsilon": 3}]"#, ""), "epsilon must be more than 6.01");
    // refitting pays the model twice: (5 - 0.5)/2 - 1 leaves 1.25, (2 - 0.5)/2 - 1 nothing
    synthetic_refused(
        &format!("SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 2, bin_edges => {SYN_EDGES}, criteria => '{mm}', refit => true, epsilon0 => 0.5)"),
        "epsilon must be more than 2.5",
    );
    synthetic_refused(&call(mm, ", gamma => 0"), "gamma must be");
    synthetic_refused(&call(mm, ", epsilon0 => 2"), "epsilon0 must be");
    synthetic_refused(&call(r#"[{"criterion": "max_marginal_error", "k": 4, "threshold": 0.1, "epsilon": 1}]"#, ""), "k must be 1, 2 or 3, got 4");
    synthetic_refused(&call(r#"[{"criterion": "conditional_means", "group": "region", "value": "region", "threshold": 0.1, "epsilon": 1}]"#, ""), "is not a numeric column");
    synthetic_refused(&call(r#"[{"criterion": "conditional_means", "group": "nope", "value": "age", "threshold": 0.1, "epsilon": 1}]"#, ""), "group names \"nope\", which is not among columns");
    synthetic_refused(&call(r#"[{"criterion": "fidelity", "threshold": 0.1, "epsilon": 1}]"#, ""), "criterion must be one of");
    synthetic_refused(&call(r#"[{"criterion": "max_marginal_error", "k": 2, "threshold": -1, "epsilon": 1}]"#, ""), "threshold must be");
    synthetic_refused(&call("[]", ""), "criteria must hold at least one criterion");
    synthetic_refused(&call(r#"{"criterion": "max_marginal_error"}"#, ""), "criteria must be a JSON array");
    // refitting in the loop is for pure ε tries only
    synthetic_refused(&format!("SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 5, 1e-6, bin_edges => {SYN_EDGES}, criteria => '{mm}', refit => true)"), "refit must be false when delta > 0");
}

#[pg_test]
fn synthetic_post_processing_draws_the_rows_asked_keeps_the_constraints_and_drops_rare_rows() {
    synthetic_source();
    // a requested number of rows, each satisfying the caller's public rule
    let r: serde_json::Value = serde_json::from_str(&one_text(&format!(
        "SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 1e4, bin_edges => {SYN_EDGES}, rows => 700,
                                     constraints => 'age >= 30 AND region <> ''north'' AND (member OR income < 50000)')::text"
    )))
    .unwrap();
    assert_eq!(r["rows_released"], 700);
    assert_eq!(r["post_processing"]["rows"], 700);
    assert_eq!(one_i64("SELECT count(*) FROM syn"), 700);
    assert_eq!(one_i64("SELECT count(*) FROM syn WHERE NOT (age >= 30 AND region <> 'north' AND (member OR income < 50000))"), 0);
    // every combination of the two categorical columns that is kept occurs at least min_count times
    Spi::run("SELECT dp.release_synthetic('people', 'syn2', ARRAY['region', 'member'], 1, rows => 400, min_count => 60)").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM (SELECT region, member FROM syn2 GROUP BY 1, 2 HAVING count(*) < 60) s"), 0);
    assert!(one_i64("SELECT count(*) FROM syn2") > 0);
    // a rule nothing satisfies releases nothing, without an error
    Spi::run("SELECT dp.release_synthetic('people', 'syn3', ARRAY['region', 'age'], 1, rows => 50, constraints => 'age < 0')").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM syn3"), 0);
}

#[pg_test]
fn synthetic_post_processing_arguments_are_checked_before_the_charge() {
    synthetic_source();
    let call = |extra: &str| format!("SELECT dp.release_synthetic('people', 'syn', ARRAY['region', 'age'], 1{extra})");
    synthetic_refused(&call(", rows => -1"), "rows must be between 0 and");
    synthetic_refused(&call(", min_count => 0"), "min_count must be at least 1, got 0");
    // PostgreSQL's own errors for the expression, raised while it is prepared
    synthetic_refused(&call(", constraints => 'nope > 1'"), "column \"nope\" does not exist");
    synthetic_refused(&call(", constraints => 'true; DROP TABLE people'"), "syntax error at or near \";\"");
    synthetic_refused(&call(", constraints => 'region'"), "COALESCE types text and boolean cannot be matched");
    synthetic_refused(&call(", constraints => 'id > 3'"), "column \"id\" does not exist");
    Spi::run("SET maintenance_work_mem = '1MB'").unwrap();
    synthetic_refused(&call(", rows => 100000001"), "rows must be between 0 and 100000000");
    // rows held at once: all of them for min_count's projection (and twice for criteria)
    synthetic_refused(&call(", rows => 10000000, min_count => 2"), "10000000 rows of these columns do not fit in the memory for samples");
    // faithfulness: a threshold above 1 is refused, and its flow's memory counts with the rows held:
    // a memory that holds two candidates of 5,000 rows, and not the flow's 128 bytes a row besides
    let faith = |crit: &str| format!(r#", rows => 5000, criteria => '[{{"criterion": "{crit}", "threshold": 0.5, "epsilon": 0.2}}]'"#);
    synthetic_refused(&call(r#", criteria => '[{"criterion": "faithfulness", "threshold": 1.5, "epsilon": 0.5}]'"#), "threshold must be a fraction between 0 and 1 for faithfulness");
    let held = 2 * 5000 * pg_dp_core::release::synthesis::candidate_row_bytes(2);
    Spi::run(&format!("SET maintenance_work_mem = '{}kB'", (held + 64 * 5000) / 1024)).unwrap();
    synthetic_refused(&call(&faith("faithfulness")), "5000 rows of these columns do not fit in the memory for samples");
    // control: the same rows with a criterion that needs no flow are released
    let before = synthetic_receipts();
    Spi::run(&call(&faith("one_way_relative_error"))).unwrap();
    assert_eq!(synthetic_receipts(), before + 1);
    assert_eq!(one_i64("SELECT count(*) FROM people"), 2000);
}

// Found by attacking the synthetic release as an analyst: ways to make it fail after the charge, run
// the analyst's code inside it, exhaust memory, or lose declared values.

#[pg_test]
fn attack_synthetic_bins_wider_than_a_numeric_typmod_are_refused_and_the_top_bin_writes() {
    Spi::run("CREATE TABLE money AS SELECT CASE WHEN g % 2 = 0 THEN 9.99 ELSE (g % 10) / 10.0 END::numeric(3,2) AS n32,
                     (g % 7)::float4 AS r4 FROM generate_series(1, 2000) g").unwrap();
    // declared bounds wider than numeric(3,2): refused before the charge, whatever the data
    Spi::run("SELECT dp.set_bounds('money', 'n32', 0, 10)").unwrap();
    synthetic_refused("SELECT dp.release_synthetic('money', 'syn', ARRAY['n32'], 1, bins => 4096)", "do not fit its type numeric(3,2)");
    // bounds that fit: half the rows in the top bin, every value written as it is
    Spi::run("SELECT dp.set_bounds('money', 'n32', 0, 9.99)").unwrap();
    Spi::run("SELECT dp.release_synthetic('money', 'syn', ARRAY['n32'], 1e4, bins => 4096)").unwrap();
    assert!(one_i64("SELECT count(*) FROM syn WHERE n32 >= 9.98") > 900);
    // two adjacent doubles around 9.995: written rounded to the scale, never rounded up past it
    Spi::run(r#"SELECT dp.release_synthetic('money', 'syn2', ARRAY['n32'], 1, bin_edges => '{"n32": [9.994999999999997, 9.995]}')"#).unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM syn2 WHERE n32 <> 9.99"), 0);
    // float4 bins below its smallest number: tiny values are written as 0, not refused by float4in
    Spi::run("DROP TABLE syn, syn_report").unwrap();
    synthetic_refused(r#"SELECT dp.release_synthetic('money', 'syn', ARRAY['r4'], 1e4, bin_edges => '{"r4": [0, 1e-45, 1e-46, 10]}')"#, "strictly increasing");
    Spi::run(r#"SELECT dp.release_synthetic('money', 'syn4', ARRAY['r4'], 1e4, bin_edges => '{"r4": [0, 1e-45, 10]}')"#).unwrap();
    assert!(one_i64("SELECT count(*) FROM syn4") > 1900);
}

#[pg_test]
fn attack_synthetic_types_named_like_built_in_ones_on_the_search_path_are_not_used() {
    synthetic_source();
    Spi::run(
        "CREATE FUNCTION public.spy(v pg_catalog.text) RETURNS boolean LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'the caller''s code ran inside the release'; END $$;
         CREATE DOMAIN public.text AS pg_catalog.text CHECK (public.spy(VALUE));
         CREATE DOMAIN public.float8 AS pg_catalog.float8 CHECK (public.spy(VALUE::pg_catalog.text))",
    )
    .unwrap();
    Spi::run("SET search_path = public, pg_catalog").unwrap();
    Spi::run(&format!("SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 1, bin_edges => {SYN_EDGES})")).unwrap();
    let types = column("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'syn'::regclass AND attnum > 0 ORDER BY attnum");
    assert_eq!(types[0].as_deref(), Some("pg_catalog.text"), "{types:?}");
    assert_eq!(types[2].as_deref(), Some("double precision"), "{types:?}");
}

#[pg_test]
fn attack_synthetic_domains_of_booleans_and_padded_characters_match_the_stored_values() {
    Spi::run("CREATE TABLE flags AS SELECT ('c' || (g % 3))::char(4) AS ch, g % 2 = 0 AS flag FROM generate_series(1, 1000) g").unwrap();
    Spi::run("SELECT dp.set_domain('flags', 'ch', ARRAY['c0', 'c1', 'c2'])").unwrap();
    Spi::run("SELECT dp.set_domain('flags', 'flag', ARRAY['true', 'false'])").unwrap();
    Spi::run("SELECT dp.release_synthetic('flags', 'syn', ARRAY['ch', 'flag'], 1e4)").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM syn WHERE ch IS NULL OR flag IS NULL"), 0);
    for v in ["c0", "c1", "c2"] {
        let n = one_i64(&format!("SELECT count(*) FROM syn WHERE ch = '{v}'"));
        // a third of 1,000 rows drawn: sd about 15; a value that matched no stored one would get 0 or 1,000
        assert!((250..420).contains(&n), "{v}: {n}");
    }
}

#[pg_test]
fn attack_synthetic_count_tables_are_bounded_whatever_maintenance_work_mem_says() {
    Spi::run("CREATE TABLE wide AS SELECT g AS a, g AS b, g AS c FROM generate_series(1, 100) g").unwrap();
    for c in ["a", "b", "c"] {
        Spi::run(&format!("SELECT dp.set_bounds('wide', '{c}', 0, 4096)")).unwrap();
    }
    Spi::run("SET maintenance_work_mem = '2147483647kB'").unwrap();
    synthetic_refused(
        "SELECT dp.release_synthetic('wide', 'syn', ARRAY['a', 'b', 'c'], 1, bins => 4096)",
        "more than the release's limit of 268435456 bytes",
    );
}

#[pg_test]
fn a_synthetic_preview_runs_the_pipeline_uncharged_on_readable_tables_only() {
    synthetic_source();
    let ledger = one_i64("SELECT count(*) FROM dp.ledger");
    let p: serde_json::Value = serde_json::from_str(&one_text(&format!(
        "SELECT dp.preview_synthetic('people', {SYN_COLUMNS}, 1e4, bin_edges => {SYN_EDGES}, criteria => {SYN_CRITERIA}, runs => 3)::text"
    )))
    .unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM dp.ledger"), ledger, "a preview is not charged");
    assert_eq!(p["runs"], 3);
    assert_eq!(p["accepted"], 3, "{p}");
    assert_eq!(p["charged"], false);
    assert!(p["mean_tvd_2way"].as_f64().unwrap() < 0.05, "{p}");
    assert_eq!(p["criteria"].as_array().unwrap().len(), 6, "{p}");
    assert!((p["mean_rows"].as_f64().unwrap() - 2000.0).abs() < 10.0, "{p}");
    // at a tiny epsilon the copies are far from the table: the preview says so
    let low: serde_json::Value =
        serde_json::from_str(&one_text(&format!("SELECT dp.preview_synthetic('people', {SYN_COLUMNS}, 0.01, bin_edges => {SYN_EDGES}, runs => 3)::text"))).unwrap();
    assert!(low["mean_tvd_2way"].as_f64().unwrap() > p["mean_tvd_2way"].as_f64().unwrap(), "{low} vs {p}");
    // a protected table is previewed only by those who may read it directly
    Spi::run("SELECT dp.protect_table('people')").unwrap();
    Spi::run("CREATE ROLE dp_syn_previewer").unwrap();
    Spi::run("SET ROLE dp_syn_previewer").unwrap();
    refused("SELECT dp.preview_synthetic('people', ARRAY['region'], 1)", "dp.preview_synthetic: source people is protected by pg_dp");
    Spi::run("RESET ROLE").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM dp.ledger"), ledger);
    refused("SELECT dp.preview_synthetic('people', ARRAY['region'], 1, runs => 0)", "dp.preview_synthetic: runs must be between 1 and 100, got 0");
    // the preview's errors name the preview, not the release it previews
    refused("SELECT dp.preview_synthetic('people', ARRAY['region'], -1, runs => 1)", "dp.preview_synthetic: epsilon");
    refused("SELECT dp.preview_synthetic('people', ARRAY['nope'], 1, runs => 1)", "dp.preview_synthetic:");
    refused(&format!("SELECT dp.release_synthetic('people', 'syn_x', {SYN_COLUMNS}, -1)"), "dp.release_synthetic: epsilon");
}

#[pg_test]
fn a_synthetic_release_with_a_fixed_seed_is_reproducible() {
    synthetic_source();
    // dp.seed (superusers only) makes every noise draw reproducible: two releases with the same seed
    // write the same rows, and another seed other rows
    let digest = |t: &str| one_text(&format!("SELECT md5(string_agg(row({t}.*)::text, ',' ORDER BY row({t}.*)::text)) FROM {t}"));
    for (t, seed) in [("s1", 42), ("s2", 42), ("s3", 7)] {
        Spi::run(&format!("SET dp.seed = {seed}")).unwrap();
        Spi::run(&format!("SELECT dp.release_synthetic('people', '{t}', {SYN_COLUMNS}, 1, bin_edges => {SYN_EDGES})")).unwrap();
    }
    assert_eq!(digest("s1"), digest("s2"));
    assert_ne!(digest("s1"), digest("s3"));
    // pinned: a change of the model, its noise or its sampling changes these rows (update the pin
    // when that is intended, and say so in the changelog)
    assert_eq!(digest("s1"), "65e383b483cbf9864d0ee197e923f329", "the seeded release changed");
    Spi::run("RESET dp.seed").unwrap();
}

#[pg_test]
fn a_synthetic_copy_with_3_column_cliques_keeps_a_dependence_of_three_columns() {
    // c is the exclusive or of a and b: every pair is independent, so a tree of pairs loses it,
    // and a 2-tree of 3-column cliques keeps it
    Spi::run("CREATE TABLE xor AS SELECT g % 2 = 0 AS a, (g / 2) % 2 = 0 AS b, ((g % 2) + (g / 2) % 2) % 2 = 0 AS c, g % 5 AS e
                FROM generate_series(1, 4000) g").unwrap();
    Spi::run("SELECT dp.set_bounds('xor', 'e', 0, 4)").unwrap();
    let r: serde_json::Value = serde_json::from_str(&one_text("SELECT dp.release_synthetic('xor', 'syn', ARRAY['a', 'b', 'c', 'e'], 1e4, method => 'tree2')::text")).unwrap();
    assert_eq!(r["method"], "tree2");
    assert_eq!(r["structure"].as_array().unwrap().len(), 5, "a 2-tree on 4 columns: the first pair and two edges per clique: {r}");
    assert_eq!(one_i64("SELECT count(*) FROM syn_report WHERE kind = 'model part' AND item = 'cliques'"), 1);
    let broken = one_f64("SELECT avg((c <> (a = b))::int)::float8 FROM syn");
    assert!(broken < 0.05, "the exclusive or holds in {:.3} of the rows only", 1.0 - broken);
    Spi::run("SELECT dp.release_synthetic('xor', 'tree', ARRAY['a', 'b', 'c', 'e'], 1e4)").unwrap();
    let tree_broken = one_f64("SELECT avg((c <> (a = b))::int)::float8 FROM tree");
    assert!(tree_broken > 0.3, "a tree of pairs cannot keep it: {tree_broken}");
}

// Found by attacking the synthetic release a second time.

#[pg_test]
fn attack_synthetic_constraints_cannot_watch_the_candidates_of_the_selection_loop() {
    synthetic_source();
    // the caller's expression would run on every candidate, released or not: refused with criteria
    synthetic_refused(
        &format!(
            r#"SELECT dp.release_synthetic('people', 'syn', {SYN_COLUMNS}, 5, bin_edges => {SYN_EDGES},
                   criteria => '[{{"criterion": "max_marginal_error", "k": 1, "threshold": 0.5, "epsilon": 0.1}}]', constraints => 'true')"#
        ),
        "constraints cannot be combined with criteria",
    );
}

#[pg_test]
fn attack_synthetic_constraints_are_one_expression_and_cannot_close_the_query() {
    synthetic_source();
    // parsed alone: a syntax error there, or more than one expression
    for (expr, expect) in [
        ("true), false) AS z FROM (SELECT 1) q; CREATE TABLE pwned(x int); SELECT COALESCE((true", "syntax error"),
        ("true), false) FROM generate_series(1, 50) --", "syntax error"),
        ("true) FROM people --", "constraints must be one boolean expression"),
        ("true), (false", "constraints must be one boolean expression"),
        ("true); CREATE TABLE pwned(x int); SELECT (true", "constraints must be one boolean expression"),
    ] {
        synthetic_refused(
            &format!("SELECT dp.release_synthetic('people', 'syn', ARRAY['member'], 1, rows => 5, constraints => $c${expr}$c$)"),
            expect,
        );
    }
    assert_eq!(one_i64("SELECT count(*) FROM pg_class WHERE relname = 'pwned'"), 0);
    // a set-returning constraint would give more answers than rows: refused while it is prepared
    synthetic_refused(
        "SELECT dp.release_synthetic('people', 'syn', ARRAY['member'], 1, rows => 5, constraints => 'generate_series(1, 2) > 0')",
        "set-returning functions are not allowed",
    );
}

#[pg_test]
fn attack_synthetic_samples_held_at_once_are_bounded_whatever_maintenance_work_mem_says() {
    Spi::run("CREATE TABLE b8 AS SELECT g % 2 = 0 AS a, g % 3 = 0 AS b FROM generate_series(1, 100) g").unwrap();
    Spi::run("SET maintenance_work_mem = '1TB'").unwrap();
    synthetic_refused("SELECT dp.release_synthetic('b8', 'syn', ARRAY['a', 'b'], 1, rows => 40000000, min_count => 2)", "do not fit in the memory for samples");
}

#[pg_test]
fn attack_synthetic_a_huge_stored_value_is_outside_the_domain_without_being_printed() {
    Spi::run("CREATE TABLE blobs AS SELECT '\\x00'::bytea AS blob FROM generate_series(1, 300)").unwrap();
    Spi::run("INSERT INTO blobs SELECT decode(repeat('ab', 3000000), 'hex')").unwrap();
    Spi::run("SELECT dp.set_domain('blobs', 'blob', ARRAY['\\x00'::bytea, '\\x01'::bytea])").unwrap();
    Spi::run("SELECT dp.release_synthetic('blobs', 'syn', ARRAY['blob'], 1e4)").unwrap();
    assert!(one_i64("SELECT count(*) FROM syn WHERE blob = '\\x00'::bytea") >= 295);
}

#[pg_test]
fn a_dp_query_inside_a_synthetic_constraint_draws_its_own_noise() {
    synthetic_source();
    Spi::run("CREATE TABLE open_counts AS SELECT g AS x FROM generate_series(1, 10) g").unwrap();
    Spi::run("CREATE FUNCTION peek() RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT dp_count(x, 1.0) > -1000 FROM open_counts'").unwrap();
    Spi::run("SELECT dp.release_synthetic('people', 'syn', ARRAY['member'], 1, rows => 20, constraints => 'peek()')").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM syn"), 20);
}

#[pg_test]
fn private_bin_edges_are_chosen_after_the_charge_between_the_declared_bounds() {
    synthetic_source();
    Spi::run("SELECT dp.set_bounds('people', 'income', 0, 100000)").unwrap();
    let before = one_i64("SELECT pg_stat_get_xact_numscans('people'::regclass)");
    let returned: serde_json::Value = serde_json::from_str(&one_text(
        r#"SELECT dp.release_synthetic('people', 'syn', ARRAY['region', 'income', 'score'], 1e4, bins => 4,
                  bin_edges => '{"income": "private", "score": "private"}')::text"#,
    ))
    .unwrap();
    // one scan counts the fine bins, one the model's tables
    assert_eq!(one_i64("SELECT pg_stat_get_xact_numscans('people'::regclass)"), before + 2);
    // charged before either: the whole ε, a tenth of it for the 6 inner edges
    let charged: serde_json::Value = serde_json::from_str(&one_text(
        "SELECT (details - 'execution')::text FROM dp.ledger WHERE mechanism = 'synthetic' ORDER BY id DESC LIMIT 1",
    ))
    .unwrap();
    assert_eq!(charged["epsilon"], 1e4);
    let pe = &charged["private_edges"];
    assert_eq!(pe["epsilon"], 1e3);
    assert_eq!(pe["inner_edges"], 6);
    assert!((pe["epsilon_per_edge"].as_f64().unwrap() - 1e3 / 6.0).abs() < 1e-6, "{pe}");
    assert!(pe.get("chosen").is_none(), "the charged receipt knows no edges: {pe}");
    let income = charged["columns"].as_array().unwrap().iter().find(|c| c["column"] == "income").unwrap().clone();
    assert_eq!(income["kind"], "private_bins");
    assert_eq!(income["bins"], 4);
    // the edges: income is uniform on 0, 1000, …, 99000 (20 rows each), so at this ε the quartile edges
    // lie where 500, 1000 and 1500 rows are below them
    let edges: Vec<f64> = returned["private_edges"]["chosen"]["income"]["edges"].as_array().unwrap().iter().map(|e| e.as_f64().unwrap()).collect();
    assert_eq!(edges.len(), 5, "{edges:?}");
    assert_eq!((edges[0], edges[4]), (0.0, 100000.0));
    for (k, e) in edges[1..4].iter().enumerate() {
        let want = 25000.0 * (k + 1) as f64;
        assert!(*e > want - 1000.0 && *e <= want, "income edge {}: {e}", k + 1);
    }
    // score, an integer column: 10…14, 30…34, 50…54, 70…74 by region; the first quartile's edge lies
    // between the first and second cluster
    let score: Vec<i64> = returned["private_edges"]["chosen"]["score"]["edges"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().parse().unwrap()).collect();
    assert_eq!(score.len(), 5, "{score:?}");
    assert!((15..=30).contains(&score[1]), "{score:?}");
    // the report states them, and the rows stay within the bounds
    assert_eq!(one_i64("SELECT count(*) FROM syn_report WHERE kind = 'private edges'"), 2);
    assert_eq!(one_f64("SELECT (detail->>'private_edges')::float8 FROM syn_report WHERE kind = 'breakdown'"), 1e3);
    assert_eq!(one_i64("SELECT count(*) FROM syn WHERE income < 0 OR income > 100000 OR score < 0 OR score > 79"), 0);
    assert!(one_i64("SELECT count(*) FROM syn") > 1900);
}

#[pg_test]
fn private_bin_edges_are_refused_from_public_information_before_the_charge() {
    synthetic_source();
    Spi::run("CREATE TABLE notes AS SELECT g AS id, g::float8 AS x FROM generate_series(1, 50) g").unwrap();
    let call = |args: &str| format!("SELECT dp.release_synthetic({args})");
    synthetic_refused(&call(r#"'notes', 'syn', ARRAY['x'], 1, bin_edges => '{"x": "private"}'"#), "needs a numeric column with declared bounds");
    synthetic_refused(&call(r#"'people', 'syn', ARRAY['region'], 1, bin_edges => '{"region": "private"}'"#), "needs a numeric column with declared bounds");
    synthetic_refused(&call(r#"'people', 'syn', ARRAY['age'], 1, bin_edges => '{"age": "public"}'"#), "must be an array of numbers or the string 'private'");
    synthetic_refused(&call(r#"'people', 'syn', ARRAY['age', 'score'], 1e-9, bins => 50, bin_edges => '{"age": "private", "score": "private"}'"#), "epsilon is too small for private bin edges");
    // as many bins as integers (age: 60 between its bounds): the edges are forced, nothing is spent
    let r: serde_json::Value = serde_json::from_str(&one_text(r#"SELECT dp.release_synthetic('people', 'syn', ARRAY['age'], 1, bins => 64, bin_edges => '{"age": "private"}')::text"#)).unwrap();
    assert!(r.get("private_edges").is_none(), "{r}");
    assert_eq!(r["model"]["epsilon"], 1.0, "{r}");
}

// Named privacy levels: dp.privacy_level chooses the ε of aggregates called without one, unless
// dp.default_epsilon is set; the mapping is the core's; unknown levels list the valid ones.

/// ε of the newest receipt.
fn last_epsilon() -> String {
    one_text("SELECT epsilon::text FROM dp.ledger ORDER BY id DESC LIMIT 1")
}

#[pg_test]
fn the_level_sets_the_default_epsilon_and_default_epsilon_overrides_it() {
    sample_table();
    Spi::run("SET dp.require_budget = off").unwrap();
    assert_eq!(one_text("SHOW dp.privacy_level"), "medium");
    assert_eq!(one_text("SHOW dp.default_epsilon"), "0");
    one_i64("SELECT dp_count(*) FROM s");
    assert_eq!(last_epsilon(), "1");
    for (level, eps) in pg_dp_core::accounting::levels::PRIVACY_LEVELS {
        Spi::run(&format!("SET dp.privacy_level = '{level}'")).unwrap();
        one_f64("SELECT dp_avg(x, 0, 1000) FROM s");
        assert_eq!(last_epsilon(), eps.to_string(), "{level}");
    }
    Spi::run("SET dp.default_epsilon = 0.25").unwrap();
    one_f64("SELECT dp_sum(x, 0, 1000) FROM s");
    assert_eq!(last_epsilon(), "0.25");
    // an explicit epsilon is used as given, whatever the level
    one_f64("SELECT dp_median(x, 0, 1000, 0.125) FROM s");
    assert_eq!(last_epsilon(), "0.125");
    Spi::run("SET dp.default_epsilon = 0").unwrap();
    one_i64("SELECT dp_count(x) FROM s");
    assert_eq!(last_epsilon(), "10", "back to the level (very_low)");
}

#[pg_test]
fn an_unknown_level_is_refused_with_the_valid_ones() {
    let e = error_of("SET dp.privacy_level = 'extreme'").unwrap();
    assert!(e.contains("very_high, high, medium, low, very_low"), "{e}");
    let e = error_of("SELECT dp.privacy_level_epsilon('extreme')").unwrap();
    assert_eq!(e, "dp.privacy_level_epsilon: level must be one of very_high, high, medium, low, very_low, got 'extreme' (hint: )");
    let e = error_of("SET dp.default_epsilon = -1").unwrap();
    assert!(e.contains("dp.default_epsilon"), "{e}");
}

#[pg_test]
fn the_levels_view_shows_the_core_mapping_and_the_session_level() {
    Spi::run("SET dp.privacy_level = 'low'").unwrap();
    let rows = column("SELECT concat_ws('|', level, epsilon_per_query, current) FROM dp.privacy_levels");
    let want: Vec<Option<String>> = pg_dp_core::accounting::levels::PRIVACY_LEVELS
        .iter()
        .map(|(l, e)| Some(format!("{l}|{e}|{}", if *l == "low" { "t" } else { "f" })))
        .collect();
    assert_eq!(rows, want);
}

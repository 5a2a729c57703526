// Attacks of an untrusted analyst with a DP-only role, out to learn one patient's income (Bob,
// id 7, income 123456) from the protected `patients`. Each attack was reproduced against the
// plan-shape checks that the grammar replaced. Each must now be refused before planning, charge
// nothing, and fail with the same message whatever the data (refused_whatever_the_data).

#[pg_test]
fn attack_window_function_spreads_one_value_over_every_row() {
    protected_setup();
    refused_whatever_the_data(
        "SELECT dp_avg(b, 0, 2000000, 0.01) FROM (SELECT max(CASE WHEN name = 'Bob' THEN income END) OVER () AS b FROM patients) s",
        "window function in the input of dp_avg: each input row must come from one row of patients",
    );
}

#[pg_test]
fn attack_a_dba_view_with_a_window_function() {
    protected_setup();
    Spi::run("CREATE VIEW ranked AS SELECT id, rank() OVER (ORDER BY income) AS r FROM patients").unwrap();
    Spi::run(&format!("GRANT SELECT ON ranked TO {ANALYST}")).unwrap();
    refused_whatever_the_data("SELECT dp_sum(r, 0, 1000, 0.01) FROM ranked WHERE id = 7", "window function in the input of dp_sum");
}

#[pg_test]
fn attack_division_by_zero_answers_a_yes_no_question() {
    protected_setup();
    refused_whatever_the_data(
        "SELECT dp_count(id, 1e-9) FROM patients WHERE 1/(CASE WHEN name = 'Bob' AND income > 100000 THEN 0 ELSE 1 END) = 1",
        "operator / (integer, integer) with a divisor that is not a literal other than 0 and -1 in the input of dp_count",
    );
}

#[pg_test]
fn attack_integer_overflow_in_a_cast() {
    protected_setup();
    refused_whatever_the_data(
        "SELECT dp_count(id, 1e-9) FROM patients WHERE (CASE WHEN name = 'Bob' AND income > 100000 THEN 100000 ELSE 1 END)::int2 > 0",
        "cast from integer to smallint",
    );
}

#[pg_test]
fn attack_nan_arithmetic() {
    protected_setup();
    refused_whatever_the_data(
        "SELECT dp_sum(CASE WHEN name = 'Bob' AND income > 100000 THEN 'NaN'::float8 ELSE 1 END * income, 0, 1, 1e-9) FROM patients",
        "operator * (double precision, double precision)",
    );
    // a NaN stored in the table is skipped, never an error
    Spi::run("UPDATE patients SET income = 'NaN' WHERE name = 'Bob'").unwrap();
    as_analyst(|| one_f64("SELECT dp_sum(income, 0, 200000, 1e-9) FROM patients WHERE name = 'Bob'"));
}

#[pg_test]
fn attack_statement_timeout_with_pg_sleep() {
    protected_setup();
    refused_whatever_the_data(
        "SELECT dp_count(id, 1e-9) FROM patients WHERE CASE WHEN name = 'Bob' AND income > 100000 THEN pg_sleep(10) IS NULL ELSE true END",
        "function pg_sleep(double precision) in the input of dp_count",
    );
}

#[pg_test]
fn attack_a_one_time_filter_lets_the_whole_table_in_or_out() {
    protected_setup();
    refused_whatever_the_data(
        "SELECT dp_count(id, 1e-9) FROM patients WHERE (SELECT income FROM patients WHERE name = 'Bob') > 100000",
        "subquery in the input of dp_count",
    );
    refused_whatever_the_data(
        "SELECT dp_count(id, 1e-9) FROM patients WHERE EXISTS (SELECT 1 FROM patients p WHERE p.name = 'Bob' AND p.income > 100000)",
        "subquery in the input of dp_count",
    );
    refused_whatever_the_data(
        "SELECT dp_count(id, 1e-9) FROM patients WHERE id <= (SELECT CASE WHEN income > 100000 THEN 1000 ELSE 0 END FROM patients WHERE name = 'Bob')",
        "subquery in the input of dp_count",
    );
}

#[pg_test]
fn attack_limit_computed_from_the_protected_table() {
    protected_setup();
    // the LIMIT is above the aggregate, but it reads the protected table directly
    refused_whatever_the_data(
        "SELECT dp_count(id, 1e-9) FROM patients LIMIT (SELECT CASE WHEN income > 100000 THEN 1 ELSE 0 END FROM patients WHERE name = 'Bob')",
        "it is protected by pg_dp",
    );
}

#[pg_test]
fn attack_order_by_limit_picks_the_richest() {
    protected_setup();
    refused_whatever_the_data(
        "SELECT dp_avg(income, 0, 200000, 0.01) FROM (SELECT income FROM patients ORDER BY income DESC LIMIT 1) s",
        "LIMIT in the input of dp_avg",
    );
}

#[pg_test]
fn attack_distinct_on_and_union_all_double_a_person() {
    protected_setup();
    refused_whatever_the_data(
        "SELECT dp_sum(income, 0, 200000, 0.01) FROM (SELECT DISTINCT ON (region) income FROM patients ORDER BY region, income DESC) s",
        "DISTINCT ON in the input of dp_sum",
    );
    Spi::run("CREATE TABLE patients_copy AS SELECT * FROM patients").unwrap();
    Spi::run("SELECT dp.protect_table('patients_copy')").unwrap();
    refused_whatever_the_data(
        "SELECT dp_sum(income, 0, 200000, 0.01) FROM (SELECT income, name FROM patients UNION ALL SELECT income, name FROM patients_copy) s WHERE name = 'Bob'",
        "set operation (UNION, INTERSECT, EXCEPT) in the input of dp_sum",
    );
}

#[pg_test]
fn attack_planner_statistics() {
    protected_setup();
    Spi::run("ANALYZE patients").unwrap();
    Spi::run(&format!("GRANT SELECT ON patients TO {ANALYST}")).unwrap();
    refused_whatever_the_data(
        "EXPLAIN SELECT dp_count(id, 1e-9) FROM patients WHERE income > 100000",
        "EXPLAIN of a query on protected table patients",
    );
    refused_whatever_the_data(
        "SELECT histogram_bounds::text FROM pg_stats WHERE tablename = 'patients' AND attname = 'income'",
        "permission denied for pg_stats (pg_statistic)",
    );
}

// An IMMUTABLE function that reads the table used to be folded into a bound by the planner, and
// the refusal printed its value. The grammar sees the call before any folding, and never prints a
// value the caller did not type.
#[pg_test]
fn attack_an_immutable_function_echoes_a_value_in_a_refusal() {
    protected_setup();
    Spi::run("CREATE FUNCTION bob_income() RETURNS float8 LANGUAGE sql IMMUTABLE AS $$ SELECT income FROM patients WHERE name = 'Bob' $$").unwrap();
    let sql = "SELECT dp_sum(income, 0, bob_income(), 1e-9) FROM patients";
    refused_whatever_the_data(sql, "upper of dp_sum must be a literal or a bind parameter ($1), not a function call");
    let msg = refused_as_analyst(sql, "not a function call");
    assert!(!msg.contains("123456"), "{msg}");
    refused_as_analyst("SELECT dp_count(id, bob_income()) FROM patients", "epsilon of dp_count must be a literal or a bind parameter");
}

#[pg_test]
fn attack_select_star() {
    protected_setup();
    Spi::run(&format!("GRANT SELECT ON patients TO {ANALYST}")).unwrap();
    refused_whatever_the_data("SELECT * FROM patients WHERE name = 'Bob'", "it is protected by pg_dp");
    refused_whatever_the_data("SELECT income, dp_count(id, 0.1) FROM patients GROUP BY income HAVING max(income) > 0", "max next to dp_count");
    refused_whatever_the_data("SELECT min(income), max(income) FROM patients", "it is protected by pg_dp");
}

// Error messages never repeat a value the caller did not type: a bad parameter names the
// argument and the value typed; refusals name tables, columns and constructs only.
#[pg_test]
fn refusals_never_print_stored_values() {
    protected_setup();
    for (sql, expect) in REFUSED {
        let msg = refused_as_analyst(sql, expect);
        for stored in ["123456", "Bob"] {
            assert!(!msg.contains(stored) || sql.contains(stored), "{sql}: {msg}");
        }
    }
}

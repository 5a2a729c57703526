// Protected tables: who may read them directly, who may label, and what a DP-only role sees of
// them. Raw reads are refused by every path, whatever the reader's grants.

#[pg_test]
fn protect_table_labels_the_table_and_lists_it() {
    protected_setup();
    assert_eq!(one_text("SELECT table_name::text FROM dp.protected_tables"), "patients");
    assert_eq!(
        one_text("SELECT label FROM pg_seclabels WHERE provider = 'pg_dp' AND objname = 'patients'"),
        "protected"
    );
    Spi::run("SELECT dp.unprotect_table('patients')").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM dp.protected_tables"), 0);
}

#[pg_test]
fn raw_reads_are_refused_whatever_the_grants() {
    protected_setup();
    Spi::run(&format!("GRANT SELECT, INSERT, UPDATE, DELETE ON patients TO {ANALYST}")).unwrap();
    for sql in [
        "SELECT * FROM patients",
        "TABLE patients",
        "SELECT name FROM patients WHERE false",
        "SELECT count(*) FROM patients",
        "SELECT max(income) FROM patients",
        "SELECT 1 FROM patients LIMIT 0",
        "WITH c AS (SELECT * FROM patients) SELECT count(*) FROM c",
        "SELECT r.rname FROM regions r WHERE EXISTS (SELECT 1 FROM patients p WHERE p.region = r.id)",
        "SELECT * FROM patients FOR UPDATE",
        "CREATE TEMP TABLE copy_of AS SELECT * FROM patients",
        "SELECT * INTO TEMP copy_into FROM patients",
    ] {
        refused_as_analyst(sql, "it is protected by pg_dp");
    }
    for sql in [
        "INSERT INTO patients (id) VALUES (100000)",
        "UPDATE patients SET income = 0 WHERE name = 'Bob'",
        "DELETE FROM patients WHERE income > 100000",
        "MERGE INTO patients p USING regions r ON p.id = r.id WHEN MATCHED THEN UPDATE SET income = 0",
    ] {
        refused_as_analyst(sql, "may not insert into, update or delete from it");
    }
}

#[pg_test]
fn views_functions_cursors_and_prepared_statements_cannot_read_raw_rows() {
    protected_setup();
    Spi::run("CREATE VIEW patient_names AS SELECT name, income FROM patients").unwrap();
    Spi::run(&format!("GRANT SELECT ON patient_names TO {ANALYST}")).unwrap();
    Spi::run("CREATE FUNCTION bob_sql() RETURNS float8 LANGUAGE sql STABLE AS $$ SELECT income FROM patients WHERE name = 'Bob' $$").unwrap();
    Spi::run("CREATE FUNCTION bob_plpgsql() RETURNS float8 LANGUAGE plpgsql AS $$ BEGIN RETURN (SELECT income FROM patients WHERE name = 'Bob'); END $$").unwrap();
    Spi::run("CREATE FUNCTION bob_set() RETURNS SETOF patients LANGUAGE sql AS $$ SELECT * FROM patients $$").unwrap();
    refused_as_analyst("SELECT * FROM patient_names", "it is protected by pg_dp");
    refused_as_analyst("SELECT bob_sql()", "it is protected by pg_dp");
    refused_as_analyst("SELECT bob_plpgsql()", "it is protected by pg_dp");
    refused_as_analyst("SELECT * FROM bob_set()", "it is protected by pg_dp");
    refused_as_analyst("DECLARE c CURSOR FOR SELECT * FROM patients", "it is protected by pg_dp");
    // PREPARE only parses: the plan is made, and refused, at EXECUTE
    as_analyst(|| {
        Spi::run("PREPARE raw AS SELECT income FROM patients WHERE name = $1").unwrap();
        refused("EXECUTE raw('Bob')", "it is protected by pg_dp");
    });
    // a DO block's queries are checked one by one
    refused_as_analyst(
        "DO $$ DECLARE v float8; BEGIN SELECT income INTO v FROM patients WHERE name = 'Bob'; RAISE NOTICE '%', v; END $$",
        "it is protected by pg_dp",
    );
}

#[pg_test]
fn a_dp_only_role_needs_no_select_grant() {
    protected_setup();
    Spi::run(&format!("REVOKE ALL ON patients FROM {ANALYST}")).unwrap();
    let n = as_analyst(|| one_i64("SELECT dp_count(id, 1e6) FROM patients"));
    assert_eq!(n, 1000);
    // the public table it joins still needs its grant
    Spi::run(&format!("REVOKE SELECT ON regions FROM {ANALYST}")).unwrap();
    as_analyst(|| refused("SELECT dp_count(p.id, 1e6) FROM patients p JOIN regions r ON r.id = p.region", "permission denied for table regions"));
}

#[pg_test]
fn the_owner_superusers_and_trusted_roles_read_directly() {
    protected_setup();
    Spi::run("CREATE ROLE dp_owner_t").unwrap();
    Spi::run("CREATE TABLE owned AS SELECT g AS id FROM generate_series(1, 10) g").unwrap();
    Spi::run("ALTER TABLE owned OWNER TO dp_owner_t").unwrap();
    Spi::run("SELECT dp.protect_table('owned')").unwrap();
    Spi::run("SET ROLE dp_owner_t").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM owned"), 10);
    Spi::run("RESET ROLE").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM patients"), 1000, "superuser");

    Spi::run(&format!("GRANT SELECT ON patients TO {ANALYST}")).unwrap();
    refused_as_analyst("SELECT count(*) FROM patients", "it is protected by pg_dp");
    Spi::run(&format!("SELECT dp.trust_role('{ANALYST}')")).unwrap();
    assert_eq!(one_text("SELECT role_name::text FROM dp.trusted_roles"), ANALYST);
    assert_eq!(as_analyst(|| one_i64("SELECT count(*) FROM patients")), 1000);
    // a member of a trusted role is trusted; the trust ends with distrust_role
    Spi::run("CREATE ROLE dp_member_t").unwrap();
    Spi::run(&format!("GRANT {ANALYST} TO dp_member_t")).unwrap();
    Spi::run("SET ROLE dp_member_t").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM patients"), 1000);
    Spi::run("RESET ROLE").unwrap();
    Spi::run(&format!("SELECT dp.distrust_role('{ANALYST}')")).unwrap();
    refused_as_analyst("SELECT count(*) FROM patients", "it is protected by pg_dp");
}

#[pg_test]
fn unprotected_tables_behave_as_before() {
    protected_setup();
    Spi::run("CREATE TABLE open_t AS SELECT g AS i FROM generate_series(1, 20) g").unwrap();
    Spi::run(&format!("GRANT SELECT ON open_t TO {ANALYST}")).unwrap();
    assert_eq!(as_analyst(|| one_i64("SELECT count(*) FROM open_t")), 20);
    assert_eq!(as_analyst(|| one_i64("SELECT dp_count(i, 1e6) FROM open_t")), 20);
    // without SELECT, PostgreSQL's own check refuses as always
    Spi::run("CREATE TABLE closed_t AS SELECT 1 AS i").unwrap();
    as_analyst(|| refused("SELECT dp_count(i, 1e6) FROM closed_t", "permission denied for table closed_t"));
    // unprotecting restores plain SQL semantics
    Spi::run(&format!("GRANT SELECT ON patients TO {ANALYST}")).unwrap();
    Spi::run("SELECT dp.unprotect_table('patients')").unwrap();
    assert_eq!(as_analyst(|| one_i64("SELECT count(*) FROM patients")), 1000);
}

#[pg_test]
fn partitions_and_inheritance_children_share_the_protection() {
    protected_setup();
    Spi::run("CREATE TABLE visits (pid int, day int) PARTITION BY RANGE (day)").unwrap();
    Spi::run("CREATE TABLE visits_a PARTITION OF visits FOR VALUES FROM (0) TO (100)").unwrap();
    Spi::run("CREATE TABLE visits_b PARTITION OF visits FOR VALUES FROM (100) TO (200)").unwrap();
    Spi::run("INSERT INTO visits SELECT g, g % 200 FROM generate_series(1, 400) g").unwrap();
    Spi::run(&format!("GRANT SELECT ON visits, visits_a, visits_b TO {ANALYST}")).unwrap();
    Spi::run("SELECT dp.protect_table('visits')").unwrap();
    refused_as_analyst("SELECT * FROM visits_b", "it is protected by pg_dp");
    refused_as_analyst("SELECT count(*) FROM visits WHERE day < 50", "it is protected by pg_dp");
    assert_eq!(as_analyst(|| one_i64("SELECT dp_count(pid, 1e6) FROM visits")), 400);
    assert_eq!(as_analyst(|| one_i64("SELECT dp_count(pid, 1e6) FROM visits_a")), 200);
    // protecting one partition protects reads through its parent
    Spi::run("SELECT dp.unprotect_table('visits')").unwrap();
    Spi::run("SELECT dp.protect_table('visits_a')").unwrap();
    refused_as_analyst("SELECT count(*) FROM visits", "it is protected by pg_dp");
    assert_eq!(as_analyst(|| one_i64("SELECT count(*) FROM visits_b")), 200);
    // inheritance: a child of a protected parent is protected
    Spi::run("CREATE TABLE parent_t (v int)").unwrap();
    Spi::run("CREATE TABLE child_t () INHERITS (parent_t)").unwrap();
    Spi::run(&format!("GRANT SELECT ON parent_t, child_t TO {ANALYST}")).unwrap();
    Spi::run("SELECT dp.protect_table('parent_t')").unwrap();
    refused_as_analyst("SELECT * FROM child_t", "it is protected by pg_dp");
}

#[pg_test]
fn only_superusers_and_dp_admin_change_labels() {
    protected_setup();
    // a role that owns a table still cannot protect or unprotect it
    Spi::run("CREATE ROLE dp_owner_t").unwrap();
    Spi::run("CREATE TABLE mine AS SELECT 1 AS v").unwrap();
    Spi::run("ALTER TABLE mine OWNER TO dp_owner_t").unwrap();
    Spi::run("SET ROLE dp_owner_t").unwrap();
    refused("SECURITY LABEL FOR pg_dp ON TABLE mine IS 'protected'", "only superusers and members of dp_admin can set or remove pg_dp labels");
    refused("SELECT dp.protect_table('mine')", "permission denied for function protect_table");
    Spi::run("RESET ROLE").unwrap();
    // the analyst can neither unprotect nor trust itself
    as_analyst(|| {
        refused("SECURITY LABEL FOR pg_dp ON TABLE patients IS NULL", "must be owner of table patients");
        refused("SELECT dp.unprotect_table('patients')", "permission denied for function unprotect_table");
        refused(&format!("SELECT dp.trust_role('{ANALYST}')"), "permission denied for function trust_role");
        refused(&format!("SECURITY LABEL FOR pg_dp ON ROLE {ANALYST} IS 'trusted'"), "must have CREATEROLE privilege");
    });
    // a dp_admin member protects a table it does not own
    Spi::run("CREATE ROLE dp_dba_t").unwrap();
    Spi::run("GRANT dp_admin TO dp_dba_t").unwrap();
    Spi::run("SET ROLE dp_dba_t").unwrap();
    Spi::run("SELECT dp.protect_table('mine')").unwrap();
    Spi::run("RESET ROLE").unwrap();
    assert_eq!(one_i64("SELECT count(*) FROM dp.protected_tables WHERE table_name = 'mine'::regclass"), 1);
}

#[pg_test]
fn labels_are_checked() {
    protected_setup();
    refused("SECURITY LABEL FOR pg_dp ON TABLE regions IS 'secret'", "invalid pg_dp label for a table: \"secret\" (valid: 'protected', 'no_release_cache' and 'public_count=<n>' with n from 1 to 2^53, separated by commas)");
    refused("SECURITY LABEL FOR pg_dp ON TABLE regions IS 'protected, protected'", "invalid pg_dp label for a table");
    refused("SECURITY LABEL FOR pg_dp ON TABLE regions IS 'protected, secret'", "invalid pg_dp label for a table");
    Spi::run("SECURITY LABEL FOR pg_dp ON TABLE regions IS 'no_release_cache, protected'").unwrap();
    assert_eq!(Spi::get_one::<bool>("SELECT dp.is_protected('regions'::regclass)").unwrap(), Some(true));
    Spi::run("SELECT dp.unprotect_table('regions')").unwrap();
    assert_eq!(Spi::get_one::<bool>("SELECT dp.is_protected('regions'::regclass)").unwrap(), Some(false));
    assert_eq!(Spi::get_one::<i64>("SELECT count(*) FROM dp.uncached_tables WHERE table_name = 'regions'::regclass").unwrap(), Some(1));
    Spi::run("SELECT dp.set_release_cache('regions', true)").unwrap();
    assert_eq!(Spi::get_one::<i64>("SELECT count(*) FROM pg_seclabel WHERE objoid = 'regions'::regclass").unwrap(), Some(0));
    refused(&format!("SECURITY LABEL FOR pg_dp ON ROLE {ANALYST} IS 'protected'"), "invalid pg_dp label for a role");
    refused("SECURITY LABEL FOR pg_dp ON COLUMN regions.rname IS 'protected'", "invalid pg_dp label for column \"rname\"");
    refused(r#"SECURITY LABEL FOR pg_dp ON COLUMN regions.rname IS '{"privacy_unit": {"max_groups_contributed": 0}}'"#, "max_groups_contributed must be an integer between 1 and 1000000, got 0");
    refused(r#"SECURITY LABEL FOR pg_dp ON COLUMN regions.code IS '{"domain": ["1", "x"]}'"#, "invalid input syntax for type integer");
    refused(r#"SECURITY LABEL FOR pg_dp ON COLUMN regions.code IS '{"domain": []}'"#, "a domain must list between 1 and 100000 values, got 0");
    refused(r#"SECURITY LABEL FOR pg_dp ON COLUMN regions.code IS '{"domain": {"table": "patients", "column": "region"}}'"#, "domain table patients is protected");
    refused(r#"SECURITY LABEL FOR pg_dp ON COLUMN regions.code IS '{"domain": {"table": "nowhere", "column": "x"}}'"#, "domain table nowhere does not exist");
    refused(r#"SECURITY LABEL FOR pg_dp ON COLUMN regions.code IS '{"secret": 1}'"#, "invalid pg_dp label for column \"code\"");
    Spi::run("SELECT dp.protect_table('patients', privacy_unit => 'id')").unwrap();
    refused(r#"SECURITY LABEL FOR pg_dp ON COLUMN patients.region IS '{"privacy_unit": {}}'"#, "table patients already has privacy unit column \"id\"");
    Spi::run("CREATE VIEW rv AS SELECT * FROM regions").unwrap();
    refused("SECURITY LABEL FOR pg_dp ON VIEW rv IS 'protected'", "pg_dp can protect only tables and partitioned tables");
    refused("SELECT dp.set_release_cache('rv', false)", "the release cache can be turned off only for tables, partitioned tables and materialized views");
    refused("SECURITY LABEL FOR pg_dp ON SCHEMA public IS 'protected'", "pg_dp labels only tables and roles");
}

#[pg_test]
fn explain_of_a_protected_table_is_refused_to_dp_only_roles() {
    protected_setup();
    for sql in [
        "EXPLAIN SELECT dp_count(id, 0.1) FROM patients WHERE income > 100000",
        "EXPLAIN (COSTS OFF) SELECT dp_count(id, 0.1) FROM patients",
        "EXPLAIN ANALYZE SELECT dp_count(id, 0.1) FROM patients WHERE income > 100000",
    ] {
        refused_as_analyst(sql, "EXPLAIN of a query on protected table patients: the plan shows estimates computed from its data");
    }
    // a prepared statement too
    as_analyst(|| {
        Spi::run("PREPARE q(float8) AS SELECT dp_count(id, 0.1) FROM patients WHERE income > $1").unwrap();
        refused("EXPLAIN EXECUTE q(100000)", "EXPLAIN of a query on protected table patients");
    });
    // the owner (here a superuser) sees the plan, with its DP Release node
    let plan = column("EXPLAIN (COSTS OFF) SELECT dp_count(id, 0.1) FROM patients").into_iter().flatten().collect::<Vec<_>>().join("\n");
    assert!(plan.contains("Custom Scan (DP Release)") && plan.contains("Source: public.patients"), "{plan}");
    // debug_print_plan would print the same estimates
    Spi::run("SET debug_print_plan = on").unwrap();
    refused_as_analyst("SELECT dp_count(id, 0.1) FROM patients", "debug_print_plan would print what PostgreSQL computed from a protected table's data");
}

#[pg_test]
fn statistics_of_the_data_are_hidden_from_dp_only_roles() {
    protected_setup();
    Spi::run("ANALYZE patients").unwrap();
    Spi::run(&format!("GRANT SELECT ON patients TO {ANALYST}")).unwrap();
    for sql in [
        "SELECT * FROM pg_stats WHERE tablename = 'patients'",
        "SELECT histogram_bounds FROM pg_stats WHERE attname = 'income'",
        "SELECT * FROM pg_stats_ext",
        "SELECT c FROM pg_class c WHERE relname = 'patients'",
        "SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'patients'",
        "SELECT pg_stat_get_tuples_returned('patients'::regclass)",
        "SELECT pg_stat_get_xact_tuples_returned('patients'::regclass)",
        "SELECT tup_returned FROM pg_stat_database",
    ] {
        refused_as_analyst(sql, "statistics of their data are hidden from roles that are not trusted");
    }
    // pg_class's counts and the sizes are masked, not refused: NULL for the protected table and its
    // index, the real value for the public table (psql's \dt+, JDBC metadata, pg_dump)
    assert_eq!(as_analyst(|| column("SELECT reltuples::text FROM pg_class WHERE relname IN ('patients', 'patients_pkey') ORDER BY 1")), vec![None, None]);
    assert_eq!(as_analyst(|| column("SELECT pg_relation_size('patients')::text")), vec![None]);
    assert_eq!(as_analyst(|| column("SELECT (x).reltuples::text FROM (SELECT * FROM pg_class WHERE relname = 'patients') x")), vec![None]);
    assert!(as_analyst(|| one_i64("SELECT pg_total_relation_size('regions')")) > 0);
    assert!(as_analyst(|| one_i64("SELECT relpages::int8 FROM pg_class WHERE relname = 'regions'")) >= 0);
    // in a join too
    assert_eq!(
        as_analyst(|| column("SELECT relpages::text FROM pg_class JOIN pg_namespace ON pg_namespace.oid = relnamespace WHERE relname = 'patients'")),
        vec![None]
    );
    // members of pg_read_all_stats (pg_monitor) read statistics as PostgreSQL intends
    Spi::run(&format!("GRANT pg_read_all_stats TO {ANALYST}")).unwrap();
    as_analyst(|| one_i64("SELECT count(*) FROM pg_stats WHERE tablename = 'patients'"));
    Spi::run(&format!("REVOKE pg_read_all_stats FROM {ANALYST}")).unwrap();
    // the catalog itself stays readable, and so does session activity
    assert_eq!(as_analyst(|| one_text("SELECT relname::text FROM pg_class WHERE relname = 'patients'")), "patients");
    as_analyst(|| one_i64("SELECT count(*) FROM pg_stat_activity"));
    // trusted roles read statistics
    Spi::run(&format!("SELECT dp.trust_role('{ANALYST}')")).unwrap();
    as_analyst(|| one_i64("SELECT count(*) FROM pg_stats WHERE tablename = 'patients'"));
}

#[pg_test]
fn statistics_are_readable_where_nothing_is_protected() {
    sample_table();
    Spi::run("CREATE ROLE dp_plain_t").unwrap();
    Spi::run("SET ROLE dp_plain_t").unwrap();
    one_i64("SELECT count(*) FROM pg_stats");
    one_f64("SELECT reltuples::float8 FROM pg_class WHERE relname = 's'");
    Spi::run("RESET ROLE").unwrap();
}

// Role identities: budgets and receipts belong to a role's pg_dp identity (its pg_dp_role label),
// not to its OID. The ledger worker cannot see roles created in a test's transaction, so these tests
// run the worker's debit (src/budget/debit.rs) in the test's own transaction; tests/client/test_roles.py
// covers the worker, pg_dumpall and pg_restore into another cluster, OID reuse and several databases.

/// Debits `epsilon` from `role` as the ledger worker does (budget required); "t" or "f|reason".
fn debit_as(role: &str, epsilon: &str) -> String {
    use pg_dp_core::accounting::charge::ChargeOutcome;
    match debit_outcomes(&[(role, false, epsilon)], "roles test", false).remove(0) {
        ChargeOutcome::Granted { .. } => "t".into(),
        ChargeOutcome::Denied { reason, .. } => format!("f|{reason}"),
        ChargeOutcome::Failed { message } => format!("failed: {message}"),
    }
}

/// The SQLSTATE `sql` fails with (None if it succeeds). The first call creates a helper function,
/// so it is made as the test's superuser.
fn sqlstate_of(sql: &str) -> Option<String> {
    if Spi::get_one::<bool>("SELECT to_regprocedure('public.roles_test_sqlstate(text)') IS NULL").unwrap().unwrap() {
        Spi::run(
            "CREATE FUNCTION public.roles_test_sqlstate(q text) RETURNS text LANGUAGE plpgsql AS $$
             BEGIN EXECUTE q; RETURN NULL; EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE; END $$",
        )
        .unwrap();
    }
    Spi::get_one_with_args::<String>("SELECT public.roles_test_sqlstate($1)", &[sql.into()]).unwrap()
}

/// `SET ROLE role`, `f`, `RESET ROLE`.
fn as_role<T>(role: &str, f: impl FnOnce() -> T) -> T {
    Spi::run(&format!("SET ROLE {role}")).unwrap();
    let r = f();
    Spi::run("RESET ROLE").unwrap();
    r
}

#[pg_test]
fn a_budget_gives_the_role_an_identity_that_names_its_budget_and_receipts() {
    Spi::run("CREATE ROLE dp_ident_t").unwrap();
    assert!(Spi::get_one::<String>("SELECT dp.role_uid('dp_ident_t')::text").unwrap().is_none());
    Spi::run("SELECT dp.grant_budget('dp_ident_t', 1)").unwrap();
    let uid = one_text("SELECT dp.role_uid('dp_ident_t')::text");
    // the label of provider pg_dp_role, in the shared catalog
    assert_eq!(
        one_text("SELECT label FROM pg_shseclabel WHERE provider = 'pg_dp_role' AND objoid = 'dp_ident_t'::regrole"),
        uid
    );
    assert_eq!(one_text("SELECT role_uid::text FROM dp.budgets WHERE role = 'dp_ident_t'::regrole"), uid);
    // a second grant keeps the identity
    Spi::run("SELECT dp.set_budget('dp_ident_t', 2)").unwrap();
    assert_eq!(one_text("SELECT dp.role_uid('dp_ident_t')::text"), uid);
    assert_eq!(debit_as("dp_ident_t", "0.5"), "t");
    assert_eq!(one_text("SELECT string_agg(role_uid::text, ',') FROM dp.release_log WHERE query_text = 'roles test'"), uid);
}

#[pg_test]
fn a_rename_keeps_the_budget_and_the_receipts() {
    Spi::run("CREATE ROLE dp_before_t").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_before_t', 1)").unwrap();
    assert_eq!(debit_as("dp_before_t", "0.25"), "t");
    Spi::run("ALTER ROLE dp_before_t RENAME TO dp_after_t").unwrap();
    assert_eq!(debit_as("dp_after_t", "0.25"), "t");
    as_role("dp_after_t", || {
        assert_eq!(one_text("SELECT concat_ws('|', role, epsilon_spent, epsilon_remaining) FROM dp.my_budget"), "dp_after_t|0.50|0.50");
        assert_eq!(one_i64("SELECT count(*) FROM dp.my_ledger WHERE query_text = 'roles test'"), 2);
    });
    // both receipts name the renamed role; each keeps the name it was charged under
    assert_eq!(
        one_text("SELECT string_agg(role::text || ':' || role_name, ',' ORDER BY id) FROM dp.ledger WHERE query_text = 'roles test'"),
        "dp_after_t:dp_before_t,dp_after_t:dp_after_t"
    );
    // a new role with the old name is someone else
    Spi::run("CREATE ROLE dp_before_t").unwrap();
    as_role("dp_before_t", || {
        assert_eq!(one_i64("SELECT count(*) FROM dp.my_budget"), 0);
        assert_eq!(one_i64("SELECT count(*) FROM dp.my_ledger"), 0);
    });
    assert_eq!(debit_as("dp_before_t", "0.25"), "f|no budget");
}

#[pg_test]
fn a_role_without_a_label_has_no_budget() {
    Spi::run("CREATE ROLE dp_unlabelled_t").unwrap();
    assert_eq!(debit_as("dp_unlabelled_t", "0.25"), "f|no budget");
    Spi::run("SELECT dp.grant_budget('dp_unlabelled_t', 1)").unwrap();
    assert_eq!(debit_as("dp_unlabelled_t", "0.25"), "t");
    let uid = one_text("SELECT dp.role_uid('dp_unlabelled_t')::text");
    // without its label (a role restored by pg_dumpall --no-security-labels, or recreated by hand),
    // the role is a stranger to its old budget and receipts
    Spi::run("SECURITY LABEL FOR pg_dp_role ON ROLE dp_unlabelled_t IS NULL").unwrap();
    assert_eq!(debit_as("dp_unlabelled_t", "0.25"), "f|no budget");
    as_role("dp_unlabelled_t", || {
        assert_eq!(one_i64("SELECT count(*) FROM dp.my_budget"), 0);
        assert_eq!(one_i64("SELECT count(*) FROM dp.my_ledger"), 0);
    });
    // the budget stays, belonging to no role, under its last known name
    assert_eq!(
        one_text(&format!("SELECT concat_ws('|', role IS NULL, role_name, epsilon_spent) FROM dp.budgets WHERE role_uid = '{uid}'")),
        "t|dp_unlabelled_t|0.25"
    );
    assert_eq!(one_i64("SELECT count(*) FROM dp.budgets WHERE role = 'dp_unlabelled_t'::regrole"), 0);
    // the admin functions that read a budget find none; a grant starts a new identity
    Spi::run("SELECT dp.revoke_budget('dp_unlabelled_t')").unwrap();
    assert_eq!(one_text(&format!("SELECT epsilon_granted::text FROM dp.role_budget WHERE role_uid = '{uid}'")), "1");
    refused("SELECT dp.set_budget_period('dp_unlabelled_t', '1 day')", "has no privacy budget");
    Spi::run("SELECT dp.grant_budget('dp_unlabelled_t', 3)").unwrap();
    assert_ne!(one_text("SELECT dp.role_uid('dp_unlabelled_t')::text"), uid);
    assert_eq!(one_text("SELECT epsilon_remaining::text FROM dp.budgets WHERE role = 'dp_unlabelled_t'::regrole"), "3");
}

#[pg_test]
fn the_role_label_accepts_only_a_uuid_on_a_role_from_an_admin() {
    Spi::run("CREATE ROLE dp_label_a").unwrap();
    Spi::run("CREATE ROLE dp_label_b").unwrap();
    Spi::run("CREATE TABLE dp_label_tab (i int)").unwrap();
    let bad = "SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_a IS 'trusted'";
    refused(bad, "the label must be a uuid such as");
    assert_eq!(sqlstate_of(bad).as_deref(), Some("22023"));
    refused("SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_a IS '{0b5f8a4e-3c2d-4e1f-9a7b-6c5d4e3f2a1b}'", "must be a uuid");
    refused("SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_a IS '0b5f8a4e3c2d4e1f9a7b6c5d4e3f2a1b'", "must be a uuid");
    let table = "SECURITY LABEL FOR pg_dp_role ON TABLE dp_label_tab IS '0b5f8a4e-3c2d-4e1f-9a7b-6c5d4e3f2a1b'";
    refused(table, "pg_dp_role labels only roles");
    assert_eq!(sqlstate_of(table).as_deref(), Some("42809"));
    // a uuid in either case is accepted; the same value again is a no-op
    Spi::run("SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_a IS '0B5F8A4E-3C2D-4E1F-9A7B-6C5D4E3F2A1B'").unwrap();
    Spi::run("SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_a IS '0b5f8a4e-3c2d-4e1f-9a7b-6c5d4e3f2a1b'").unwrap();
    assert_eq!(one_text("SELECT dp.role_uid('dp_label_a')::text"), "0b5f8a4e-3c2d-4e1f-9a7b-6c5d4e3f2a1b");
    // one identity per role, one role per identity
    let taken = "SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_b IS '0b5f8a4e-3c2d-4e1f-9a7b-6c5d4e3f2a1b'";
    refused(taken, "is the pg_dp identity of role \"dp_label_a\"");
    assert_eq!(sqlstate_of(taken).as_deref(), Some("22023"));
    refused("SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_a IS '11111111-2222-4333-8444-555555555555'", "already has pg_dp identity");
    // a non-admin who may label roles (CREATEROLE) may not set or remove this label
    Spi::run("CREATE ROLE dp_label_creator CREATEROLE").unwrap();
    let by_creator = "SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_b IS '11111111-2222-4333-8444-555555555555'";
    as_role("dp_label_creator", || {
        refused(by_creator, "only superusers and members of dp_admin");
        assert_eq!(sqlstate_of(by_creator).as_deref(), Some("42501"));
        refused("SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_a IS NULL", "only superusers and members of dp_admin");
    });
    assert_eq!(one_text("SELECT dp.role_uid('dp_label_a')::text"), "0b5f8a4e-3c2d-4e1f-9a7b-6c5d4e3f2a1b");
    // the same role as a member of dp_admin may
    Spi::run("GRANT dp_admin TO dp_label_creator").unwrap();
    as_role("dp_label_creator", || Spi::run(by_creator).unwrap());
    assert_eq!(one_text("SELECT dp.role_uid('dp_label_b')::text"), "11111111-2222-4333-8444-555555555555");
    // NULL removes it
    Spi::run("SECURITY LABEL FOR pg_dp_role ON ROLE dp_label_a IS NULL").unwrap();
    assert!(Spi::get_one::<String>("SELECT dp.role_uid('dp_label_a')::text").unwrap().is_none());
}

#[pg_test]
fn adopt_budget_gives_a_role_restored_without_its_label_its_budget_back() {
    Spi::run("CREATE ROLE dp_adopt_t").unwrap();
    Spi::run("CREATE ROLE dp_adopt_other").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_adopt_t', 1)").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_adopt_other', 1)").unwrap();
    assert_eq!(debit_as("dp_adopt_t", "0.25"), "t");
    let uid = one_text("SELECT dp.role_uid('dp_adopt_t')::text");
    let other = one_text("SELECT dp.role_uid('dp_adopt_other')::text");
    // the role as restored without its label
    Spi::run("SECURITY LABEL FOR pg_dp_role ON ROLE dp_adopt_t IS NULL").unwrap();
    // refused: NULL arguments, an identity another role carries, one with nothing in this database
    refused(&format!("SELECT dp.adopt_budget(NULL, '{uid}')"), "dp.adopt_budget: role must not be NULL");
    refused("SELECT dp.adopt_budget('dp_adopt_t', NULL)", "dp.adopt_budget: role_uid must not be NULL");
    let held = format!("SELECT dp.adopt_budget('dp_adopt_t', '{other}')");
    refused(&held, "is the pg_dp identity of role dp_adopt_other");
    assert_eq!(sqlstate_of(&held).as_deref(), Some("22023"));
    refused("SELECT dp.adopt_budget('dp_adopt_t', '11111111-2222-4333-8444-555555555555')", "has no budget and no receipt in database");
    // non-admins may not call it
    Spi::run("CREATE ROLE dp_adopt_plain").unwrap();
    let adopt = format!("SELECT dp.adopt_budget('dp_adopt_t', '{uid}')");
    as_role("dp_adopt_plain", || assert_eq!(sqlstate_of(&adopt).as_deref(), Some("42501")));
    assert!(!Spi::get_one::<bool>("SELECT has_function_privilege('public', 'dp.adopt_budget(regrole, uuid)', 'EXECUTE')").unwrap().unwrap());
    // adopted: the budget, its spending and the receipts are the role's again
    assert_eq!(one_text(&format!("SELECT concat_ws('|', role, epsilon_spent) FROM dp.adopt_budget('dp_adopt_t', '{uid}')")), "dp_adopt_t|0.25");
    assert_eq!(one_text("SELECT dp.role_uid('dp_adopt_t')::text"), uid);
    as_role("dp_adopt_t", || {
        assert_eq!(one_text("SELECT epsilon_remaining::text FROM dp.my_budget"), "0.75");
        assert_eq!(one_i64("SELECT count(*) FROM dp.my_ledger WHERE query_text = 'roles test'"), 1);
    });
    assert_eq!(debit_as("dp_adopt_t", "0.25"), "t");
    // again with the same identity: nothing to do; another one: refused
    Spi::run(&adopt).unwrap();
    refused(&format!("SELECT dp.adopt_budget('dp_adopt_t', '{other}')"), "already has pg_dp identity");
}

#[pg_test]
fn drop_role_archives_the_budget_with_its_identity_and_frees_nothing_for_a_new_role() {
    Spi::run("CREATE ROLE dp_gone_t").unwrap();
    Spi::run("SELECT dp.grant_budget('dp_gone_t', 1)").unwrap();
    assert_eq!(debit_as("dp_gone_t", "0.25"), "t");
    let uid = one_text("SELECT dp.role_uid('dp_gone_t')::text");
    let oid = one_text("SELECT 'dp_gone_t'::regrole::oid::text");
    Spi::run("DROP ROLE dp_gone_t").unwrap();
    assert_eq!(
        one_text("SELECT concat_ws('|', role, role_name, epsilon_spent, role_uid) FROM dp.dropped_role_budget WHERE role_name = 'dp_gone_t'"),
        format!("{oid}|dp_gone_t|0.25|{uid}")
    );
    assert_eq!(one_i64(&format!("SELECT count(*) FROM dp.role_budget WHERE role_uid = '{uid}'")), 0);
    // PostgreSQL removed the label with the role
    assert_eq!(one_i64(&format!("SELECT count(*) FROM dp.role_identities WHERE role_uid = '{uid}'")), 0);
    // the receipts stay, belonging to no role
    assert_eq!(one_i64(&format!("SELECT count(*) FROM dp.ledger WHERE role_uid = '{uid}' AND role IS NULL AND role_name = 'dp_gone_t'")), 1);
}

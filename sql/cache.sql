-- pg_dp: the release cache (hand-written; loaded after bounds.sql). src/budget/cache.rs explains it.

CREATE FUNCTION dp.set_release_cache(tbl regclass, enabled bool) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_release_cache', ARRAY['tbl', 'enabled'], ARRAY[tbl IS NULL, enabled IS NULL]);
    PERFORM dp.relabel_table(tbl, 'no_release_cache', NOT enabled);
END
$$;
COMMENT ON FUNCTION dp.set_release_cache(regclass, bool) IS 'pg_dp: turns the release cache off (false) or back on (true) for a table, partitioned table (with its partitions) or materialized view: DP queries that read it then always release afresh, paid for (dp_admin)';
REVOKE EXECUTE ON FUNCTION dp.set_release_cache(regclass, bool) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.set_release_cache(regclass, bool) TO dp_admin;

CREATE VIEW dp.uncached_tables AS
SELECT l.objoid::pg_catalog.regclass AS table_name
  FROM pg_catalog.pg_seclabel l
 WHERE l.provider = 'pg_dp' AND l.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND l.objsubid = 0
   AND 'no_release_cache' = ANY (pg_catalog.string_to_array(pg_catalog.replace(l.label, ' ', ''), ','));
COMMENT ON VIEW dp.uncached_tables IS 'pg_dp: the tables of this database whose DP queries never reuse a release (dp.set_release_cache)';
GRANT SELECT ON dp.uncached_tables TO PUBLIC;

-- Reuses of cached releases: one row per role and released execution, with a counter, never the
-- query text again (a reuse costs nothing, so it writes no receipt to dp.release_log).
CREATE TABLE dp.release_reuse (
    role            oid NOT NULL,
    role_name       name NOT NULL,
    role_uid        uuid,
    -- the execution whose releases were reused (dp.ledger.execution_id of its receipts)
    execution       text NOT NULL,
    reuses          bigint NOT NULL DEFAULT 1,
    first_reused_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    last_reused_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    PRIMARY KEY (role, execution)
);
COMMENT ON TABLE dp.release_reuse IS 'pg_dp: how often each role reused the cached releases of a paid execution (one row per role and execution); read it through dp.reuses';
SELECT pg_catalog.pg_extension_config_dump('dp.release_reuse', '');

CREATE VIEW dp.reuses AS
SELECT r.role::pg_catalog.regrole AS role, r.role_name, r.role_uid, r.execution, r.reuses, r.first_reused_at, r.last_reused_at
  FROM dp.release_reuse r;
COMMENT ON VIEW dp.reuses IS 'pg_dp: reuses of cached releases, per role and paid execution (the execution_id of its receipts in dp.ledger), with their count and first and last time; a reuse is free and writes no receipt (superusers and dp_admin)';
GRANT SELECT ON dp.reuses TO dp_admin;

CREATE VIEW dp.my_reuses WITH (security_barrier) AS
SELECT r.execution, r.reuses, r.first_reused_at, r.last_reused_at
  FROM dp.release_reuse r
 WHERE r.role = (SELECT o.oid FROM pg_catalog.pg_roles o WHERE o.rolname = CURRENT_USER);
COMMENT ON VIEW dp.my_reuses IS 'pg_dp: the current role''s reuses of cached releases, per paid execution';
GRANT SELECT ON dp.my_reuses TO PUBLIC;

-- Whether a role could have bought the cached releases it asks for (epsilons and deltas of their
-- receipts): a budget (unless unlimited) with that much epsilon and delta remaining, and their total
-- within its per-query cap and pinned level. NULL when it could, else the reason, as the debit gives
-- it. Called only by the ledger worker.
CREATE FUNCTION dp.reuse_refusal(role oid, unlimited bool, epsilons numeric[], deltas numeric[]) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b         dp.role_budget;
    eps_total numeric := (SELECT coalesce(sum(e), 0) FROM unnest(epsilons) e);
    del_total numeric := (SELECT coalesce(sum(d), 0) FROM unnest(deltas) d);
BEGIN
    SELECT * INTO b FROM dp.role_budget r WHERE r.role_uid = dp.role_uid(reuse_refusal.role);
    IF NOT FOUND THEN
        RETURN CASE WHEN unlimited THEN NULL ELSE 'no budget' END;
    END IF;
    IF b.max_epsilon_per_query IS NOT NULL AND eps_total > b.max_epsilon_per_query THEN
        RETURN 'cap:' || b.max_epsilon_per_query::text;
    END IF;
    IF b.privacy_level IS NOT NULL AND eps_total > dp.privacy_level_epsilon(b.privacy_level)::numeric THEN
        RETURN 'level:' || b.privacy_level || ':' || dp.privacy_level_epsilon(b.privacy_level)::numeric::text;
    END IF;
    -- a budget period that has ended renews at the next debit: what remains is what it will renew to
    IF NOT (b.period IS NOT NULL AND pg_catalog.now() >= b.period_start + b.period)
       AND (eps_total > b.epsilon_granted - b.epsilon_spent OR del_total > b.delta_granted - b.delta_spent) THEN
        RETURN 'exhausted';
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dp.reuse_refusal(oid, bool, numeric[], numeric[]) IS 'pg_dp internal: NULL if a role could have bought cached releases of these epsilons and deltas (a budget with that much remaining, the per-query cap, the pinned level), else why not; run only by the ledger worker';
REVOKE EXECUTE ON FUNCTION dp.reuse_refusal(oid, bool, numeric[], numeric[]) FROM PUBLIC;

-- Counts one reuse of each execution's releases by a role. Called only by the ledger worker.
CREATE FUNCTION dp.record_reuse(role oid, executions text[]) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO dp.release_reuse AS r (role, role_name, role_uid, execution)
    SELECT record_reuse.role, coalesce((SELECT o.rolname FROM pg_catalog.pg_roles o WHERE o.oid = record_reuse.role), record_reuse.role::text),
           dp.role_uid(record_reuse.role), e
      FROM (SELECT DISTINCT unnest(executions) AS e) x
    ON CONFLICT (role, execution) DO UPDATE
       SET reuses = r.reuses + 1, last_reused_at = pg_catalog.clock_timestamp();
$$;
COMMENT ON FUNCTION dp.record_reuse(oid, text[]) IS 'pg_dp internal: counts a role''s reuse of cached releases, one row per role and execution; run only by the ledger worker';
REVOKE EXECUTE ON FUNCTION dp.record_reuse(oid, text[]) FROM PUBLIC;

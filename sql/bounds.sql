-- pg_dp: bounds without guesswork (hand-written; loaded after variance.sql).
-- Declared bounds: dp.set_bounds stores a column's public bounds as a column label of provider pg_dp
-- ({"bounds": {"lower": "0", "upper": "120"}}); dp.learn_bounds declares them from a public table.
-- The aggregates below take no bounds: the query grammar (src/query/grammar.rs) rewrites a call over a
-- column with declared bounds into the bounded aggregate before planning, and refuses the others.

CREATE FUNCTION dp.set_bounds(tbl regclass, col name, lower numeric, upper numeric) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_bounds', ARRAY['tbl', 'col'], ARRAY[tbl IS NULL, col IS NULL]);
    IF lower IS NULL OR upper IS NULL THEN
        RAISE EXCEPTION 'lower and upper must not be NULL (dp.drop_bounds removes bounds)' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON COLUMN %s.%I IS %L', tbl, col,
        pg_catalog.json_build_object('bounds', pg_catalog.json_build_object('lower', pg_catalog.trim_scale(lower)::text, 'upper', pg_catalog.trim_scale(upper)::text))::text);
END
$$;
COMMENT ON FUNCTION dp.set_bounds(regclass, name, numeric, numeric) IS 'pg_dp: declares public bounds [lower, upper] of a numeric column: dp_sum, dp_avg, dp_variance, dp_stddev, dp_median, dp_percentile and dp_percentile_em called on the column without bounds use them (dp_admin). Bounds must be public knowledge, not read from the data';

CREATE FUNCTION dp.drop_bounds(tbl regclass, col name) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT dp.refuse_nulls('dp.drop_bounds', ARRAY['tbl', 'col'], ARRAY[tbl IS NULL, col IS NULL]);
    SELECT dp.drop_column_declaration(tbl, col, 'bounds');
$$;
COMMENT ON FUNCTION dp.drop_bounds(regclass, name) IS 'pg_dp: removes the declared bounds of a column (dp_admin)';

CREATE FUNCTION dp.learn_bounds(public_table regclass, public_column name, target_table regclass, target_column name,
                                lower_quantile float8 DEFAULT 0, upper_quantile float8 DEFAULT 1,
                                OUT lower numeric, OUT upper numeric)
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.learn_bounds', ARRAY['public_table', 'public_column', 'target_table', 'target_column', 'lower_quantile', 'upper_quantile'],
                            ARRAY[public_table IS NULL, public_column IS NULL, target_table IS NULL, target_column IS NULL,
                                  lower_quantile IS NULL, upper_quantile IS NULL]);
    IF lower_quantile IS NULL OR upper_quantile IS NULL OR NOT (0 <= lower_quantile AND lower_quantile < upper_quantile AND upper_quantile <= 1) THEN
        RAISE EXCEPTION 'lower_quantile and upper_quantile must satisfy 0 <= lower_quantile < upper_quantile <= 1, got % and %',
            coalesce(lower_quantile::text, 'NULL'), coalesce(upper_quantile::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF dp.is_protected(public_table) THEN
        RAISE EXCEPTION 'table % is protected: bounds are learned from a public table only', public_table
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'use a public reference table (a census extract, a published dataset), or let the aggregates choose DP bounds';
    END IF;
    -- a plain table without row security, and a column of a built-in numeric type: a view (over a
    -- protected table, say) or a policy function would read other data, or run someone else's code,
    -- with the caller's rights
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = public_table AND c.relkind IN ('r', 'p') AND NOT c.relrowsecurity) THEN
        RAISE EXCEPTION 'table % must be a plain table without row security to learn bounds from', public_table
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = public_table AND a.attname = public_column
                      AND NOT a.attisdropped AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype,
                                                              'float4'::regtype, 'float8'::regtype, 'numeric'::regtype)) THEN
        RAISE EXCEPTION 'column % of table % must be a column of type smallint, integer, bigint, real, double precision or numeric', public_column, public_table
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    -- the caller reads the public table with its own privileges; set_bounds checks dp_admin
    EXECUTE pg_catalog.format(
        'SELECT pg_catalog.percentile_disc(%s) WITHIN GROUP (ORDER BY v)::numeric, pg_catalog.percentile_disc(%s) WITHIN GROUP (ORDER BY v)::numeric
           FROM (SELECT %I::numeric AS v FROM %s) s WHERE v IS NOT NULL AND v <> ''NaN''::numeric',
        lower_quantile, upper_quantile, public_column, public_table) INTO lower, upper;
    IF lower IS NULL THEN
        RAISE EXCEPTION 'column % of table % has no values to learn bounds from', public_column, public_table
            USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM dp.set_bounds(target_table, target_column, lower, upper);
END
$$;
COMMENT ON FUNCTION dp.learn_bounds(regclass, name, regclass, name, float8, float8) IS 'pg_dp: declares the bounds of target_table.target_column as quantiles (default: the minimum and maximum) of a column of a public, unprotected table; reads no protected data and charges nothing (dp_admin, with SELECT on the public table)';

CREATE FUNCTION dp.is_protected(tbl regclass) RETURNS bool
    LANGUAGE c STABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_is_protected';
COMMENT ON FUNCTION dp.is_protected(regclass) IS 'pg_dp: whether a table is protected, itself, through a parent or through a partition or child it reads';

CREATE VIEW dp.declared_bounds AS
SELECT l.objoid::regclass AS table_name, a.attname AS column_name,
       ((l.label::jsonb)->'bounds'->>'lower')::numeric AS lower,
       ((l.label::jsonb)->'bounds'->>'upper')::numeric AS upper
  FROM pg_catalog.pg_seclabel l
  JOIN pg_catalog.pg_attribute a ON a.attrelid = l.objoid AND a.attnum = l.objsubid
 WHERE l.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND l.provider = 'pg_dp' AND l.objsubid > 0
   AND l.label LIKE '{"bounds"%';
COMMENT ON VIEW dp.declared_bounds IS 'pg_dp: the public bounds declared for columns (dp.set_bounds, dp.learn_bounds)';
GRANT SELECT ON dp.declared_bounds TO PUBLIC;

REVOKE EXECUTE ON FUNCTION dp.set_bounds(regclass, name, numeric, numeric) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.drop_bounds(regclass, name) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.learn_bounds(regclass, name, regclass, name, float8, float8) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.set_bounds(regclass, name, numeric, numeric) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.drop_bounds(regclass, name) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.learn_bounds(regclass, name, regclass, name, float8, float8) TO dp_admin;

-- The aggregates without bounds. A call over a column with declared bounds reaches the executor as
-- the bounded aggregate (the grammar replaces it). Otherwise dp_sum, dp_avg, dp_median and
-- dp_percentile choose DP bounds themselves (src/aggregates/autobounds.rs, docs/privacy/automatic-bounds.md);
-- the transition and final functions of dp_variance, dp_stddev and dp_percentile_em without bounds
-- only raise (the grammar refuses those calls).
CREATE FUNCTION dp.unbounded_trans(internal, "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unbounded_trans';
CREATE FUNCTION dp.unbounded_trans(internal, "any", float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unbounded_trans';
CREATE FUNCTION dp.unbounded_trans(internal, "any", float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unbounded_trans';
CREATE FUNCTION dp.unbounded_final_float8(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unbounded_final';
CREATE FUNCTION dp.unbounded_final_numeric(internal) RETURNS numeric
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unbounded_final';
CREATE FUNCTION dp.unbounded_final_int8(internal) RETURNS int8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_unbounded_final';
COMMENT ON FUNCTION dp.unbounded_trans(internal, "any") IS 'pg_dp internal: transition function of the aggregates without bounds that need declared ones (never runs: the grammar supplies the bounds or refuses)';
COMMENT ON FUNCTION dp.unbounded_trans(internal, "any", float8) IS 'pg_dp internal: transition function of the aggregates without bounds that need declared ones (never runs: the grammar supplies the bounds or refuses)';
COMMENT ON FUNCTION dp.unbounded_trans(internal, "any", float8, float8) IS 'pg_dp internal: transition function of the aggregates without bounds that need declared ones (never runs: the grammar supplies the bounds or refuses)';
COMMENT ON FUNCTION dp.unbounded_final_float8(internal) IS 'pg_dp internal: final function of the aggregates without bounds that need declared ones (never runs)';
COMMENT ON FUNCTION dp.unbounded_final_numeric(internal) IS 'pg_dp internal: final function of the aggregates without bounds that need declared ones (never runs)';
COMMENT ON FUNCTION dp.unbounded_final_int8(internal) IS 'pg_dp internal: final function of the aggregates without bounds that need declared ones (never runs)';

CREATE FUNCTION dp.auto_trans(internal, "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_auto_trans';
CREATE FUNCTION dp.auto_trans(internal, "any", float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_auto_trans';
CREATE FUNCTION dp.auto_combine(internal, internal) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_auto_combine';
CREATE FUNCTION dp.auto_serialize(internal) RETURNS bytea
    LANGUAGE c STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_auto_serialize';
CREATE FUNCTION dp.auto_deserialize(bytea, internal) RETURNS internal
    LANGUAGE c STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_auto_deserialize';
CREATE FUNCTION dp.auto_final_float8(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_auto_final_float8';
CREATE FUNCTION dp.auto_final_numeric(internal) RETURNS numeric
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_auto_final_numeric';
CREATE FUNCTION dp.auto_final_int8(internal) RETURNS int8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_auto_final_int8';
CREATE FUNCTION dp.median_auto_trans(internal, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_auto_trans';
CREATE FUNCTION dp.median_auto_trans(internal, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_auto_trans';
CREATE FUNCTION dp.percentile_auto_trans(internal, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_auto_trans';
CREATE FUNCTION dp.percentile_auto_trans(internal, float8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_auto_trans';
CREATE FUNCTION dp.median_auto_final(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_auto_final';
CREATE FUNCTION dp.percentile_auto_final(internal) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_auto_final';
COMMENT ON FUNCTION dp.auto_trans(internal, "any") IS 'pg_dp internal: transition function of dp_sum and dp_avg with automatic bounds (a histogram of binary magnitudes)';
COMMENT ON FUNCTION dp.auto_trans(internal, "any", float8) IS 'pg_dp internal: transition function of dp_sum and dp_avg with automatic bounds and an epsilon';
COMMENT ON FUNCTION dp.auto_combine(internal, internal) IS 'pg_dp internal: merges two partial histograms of automatic bounds';
COMMENT ON FUNCTION dp.auto_serialize(internal) IS 'pg_dp internal: serialises a partial histogram of automatic bounds';
COMMENT ON FUNCTION dp.auto_deserialize(bytea, internal) IS 'pg_dp internal: deserialises a partial histogram of automatic bounds';
COMMENT ON FUNCTION dp.auto_final_float8(internal) IS 'pg_dp internal: final function of dp_sum and dp_avg with automatic bounds (float8)';
COMMENT ON FUNCTION dp.auto_final_numeric(internal) IS 'pg_dp internal: final function of dp_sum and dp_avg with automatic bounds (numeric)';
COMMENT ON FUNCTION dp.auto_final_int8(internal) IS 'pg_dp internal: final function of dp_sum with automatic bounds over smallint and integer';
COMMENT ON FUNCTION dp.median_auto_trans(internal, float8) IS 'pg_dp internal: transition function of dp_median with automatic bounds';
COMMENT ON FUNCTION dp.median_auto_trans(internal, float8, float8) IS 'pg_dp internal: transition function of dp_median with automatic bounds and an epsilon';
COMMENT ON FUNCTION dp.percentile_auto_trans(internal, float8, float8) IS 'pg_dp internal: transition function of dp_percentile with automatic bounds';
COMMENT ON FUNCTION dp.percentile_auto_trans(internal, float8, float8, float8) IS 'pg_dp internal: transition function of dp_percentile with automatic bounds and an epsilon';
COMMENT ON FUNCTION dp.median_auto_final(internal) IS 'pg_dp internal: final function of dp_median with automatic bounds';
COMMENT ON FUNCTION dp.percentile_auto_final(internal) IS 'pg_dp internal: final function of dp_percentile with automatic bounds';
REVOKE EXECUTE ON FUNCTION dp.unbounded_trans(internal, "any"), dp.unbounded_trans(internal, "any", float8),
    dp.unbounded_trans(internal, "any", float8, float8), dp.unbounded_final_float8(internal),
    dp.unbounded_final_numeric(internal), dp.unbounded_final_int8(internal),
    dp.auto_trans(internal, "any"), dp.auto_trans(internal, "any", float8), dp.auto_combine(internal, internal),
    dp.auto_serialize(internal), dp.auto_deserialize(bytea, internal), dp.auto_final_float8(internal),
    dp.auto_final_numeric(internal), dp.auto_final_int8(internal), dp.median_auto_trans(internal, float8),
    dp.median_auto_trans(internal, float8, float8), dp.percentile_auto_trans(internal, float8, float8),
    dp.percentile_auto_trans(internal, float8, float8, float8), dp.median_auto_final(internal),
    dp.percentile_auto_final(internal) FROM PUBLIC;

DO $$
DECLARE
    -- name, value type, result type, extra leading arguments (p), what it releases
    a record;
    sig text;
    eps text;
BEGIN
    FOR a IN SELECT * FROM (VALUES
        ('dp_sum', 'int2', 'int8', '', 'exact integer sum'),
        ('dp_sum', 'int4', 'int8', '', 'exact integer sum'),
        ('dp_sum', 'int8', 'numeric', '', 'exact integer sum'),
        ('dp_sum', 'float8', 'float8', '', 'sum on a power-of-two grid'),
        ('dp_sum', 'numeric', 'numeric', '', 'sum on a power-of-two grid'),
        ('dp_avg', 'float8', 'float8', '', 'mean'),
        ('dp_avg', 'numeric', 'numeric', '', 'mean'),
        ('dp_variance', 'float8', 'float8', '', 'sample variance'),
        ('dp_variance', 'numeric', 'numeric', '', 'sample variance'),
        ('dp_stddev', 'float8', 'float8', '', 'sample standard deviation'),
        ('dp_stddev', 'numeric', 'numeric', '', 'sample standard deviation'),
        ('dp_median', 'float8', 'float8', '', 'median (at declared bounds: smooth sensitivity, delta = 0; at automatic bounds: the exponential mechanism)'),
        ('dp_percentile', 'float8', 'float8', ', float8', 'p-quantile (at declared bounds: smooth sensitivity, delta = 0; at automatic bounds: the exponential mechanism)'),
        ('dp_percentile_em', 'float8', 'float8', ', float8', 'p-quantile (exponential mechanism)')
    ) AS t(name, vtype, rtype, extra, what)
    LOOP
        FOREACH eps IN ARRAY ARRAY['', ', float8'] LOOP
            sig := pg_catalog.format('%s(%s%s%s)', a.name, a.vtype, a.extra, eps);
            IF a.name IN ('dp_sum', 'dp_avg') THEN
                EXECUTE pg_catalog.format(
                    'CREATE AGGREGATE %s (SFUNC = dp.auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_%s, '
                    'COMBINEFUNC = dp.auto_combine, SERIALFUNC = dp.auto_serialize, DESERIALFUNC = dp.auto_deserialize, PARALLEL = SAFE)',
                    sig, a.rtype);
            ELSIF a.name IN ('dp_median', 'dp_percentile') THEN
                EXECUTE pg_catalog.format(
                    'CREATE AGGREGATE %s (SFUNC = dp.%s_auto_trans, STYPE = internal, FINALFUNC = dp.%s_auto_final, FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE)',
                    sig, substr(a.name, 4), substr(a.name, 4));
            ELSE
                EXECUTE pg_catalog.format(
                    'CREATE AGGREGATE %s (SFUNC = dp.unbounded_trans, STYPE = internal, FINALFUNC = dp.unbounded_final_%s, PARALLEL = SAFE)',
                    sig, a.rtype);
            END IF;
            EXECUTE pg_catalog.format('COMMENT ON AGGREGATE %s IS %L', sig,
                pg_catalog.format('%s(value%s%s): epsilon-DP %s of the column''s values clamped to its declared bounds (dp.set_bounds)%s%s',
                    a.name, CASE WHEN a.extra <> '' THEN ', p' ELSE '' END, CASE WHEN eps <> '' THEN ', epsilon' ELSE '' END, a.what,
                    CASE WHEN eps = '' THEN ' (epsilon = dp.default_epsilon or dp.privacy_level)' ELSE '' END,
                    CASE WHEN a.name IN ('dp_sum', 'dp_avg', 'dp_median', 'dp_percentile')
                         THEN '; without declared bounds, 20% of epsilon chooses power-of-two bounds from a noisy histogram of magnitudes and the rest releases at them'
                         ELSE '; refused without declared bounds' END));
            -- noisy aggregates are VOLATILE (CREATE AGGREGATE records them as IMMUTABLE)
            EXECUTE pg_catalog.format('UPDATE pg_catalog.pg_proc SET provolatile = ''v'' WHERE oid = %L::regprocedure', sig);
        END LOOP;
    END LOOP;
END
$$;

-- Public row counts (docs/privacy/avg.md, "dp_avg with a public count"): dp.set_public_count adds the word
-- public_count=<n> to the table's pg_dp label; a dp_avg over every row of the table (no WHERE, join,
-- GROUP BY, FILTER or privacy unit) of a NOT NULL column then divides by n and spends all of ε on the sum.
CREATE FUNCTION dp.set_public_count(tbl regclass, n bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_public_count', ARRAY['tbl', 'n'], ARRAY[tbl IS NULL, n IS NULL]);
    IF n < 1 OR n > 9007199254740992 THEN
        RAISE EXCEPTION 'n must be an integer between 1 and 9007199254740992 (2^53), got %', n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the previous count's word first: a table has one
    PERFORM dp.drop_public_count(tbl);
    PERFORM dp.relabel_table(tbl, 'public_count=' || n, true);
END
$$;
COMMENT ON FUNCTION dp.set_public_count(regclass, bigint) IS 'pg_dp: declares the number of rows of a table public (a census, a published size): dp_avg over every row of the table (no WHERE, join, GROUP BY, FILTER or privacy unit) of a NOT NULL column divides by it and spends all of epsilon on the sum. It must be public knowledge, not read from the data for a release (dp_admin)';

CREATE FUNCTION dp.drop_public_count(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w text;
BEGIN
    PERFORM dp.refuse_nulls('dp.drop_public_count', ARRAY['tbl'], ARRAY[tbl IS NULL]);
    FOR w IN SELECT trim(x) FROM pg_catalog.pg_seclabel l, unnest(string_to_array(l.label, ',')) x
              WHERE l.objoid = tbl AND l.classoid = 'pg_catalog.pg_class'::regclass AND l.objsubid = 0
                AND l.provider = 'pg_dp' AND trim(x) LIKE 'public\_count=%' LOOP
        PERFORM dp.relabel_table(tbl, w, false);
    END LOOP;
END
$$;
COMMENT ON FUNCTION dp.drop_public_count(regclass) IS 'pg_dp: removes the public row count of a table (dp_admin)';
REVOKE EXECUTE ON FUNCTION dp.set_public_count(regclass, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.drop_public_count(regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.set_public_count(regclass, bigint) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.drop_public_count(regclass) TO dp_admin;

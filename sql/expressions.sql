-- Expressions around and below the DP aggregates: the error bars of a release, arithmetic that cannot
-- fail, and the clock.

-- Error bars a chart can plot: dp_interval_low(<pg_dp aggregate call>) and dp_interval_high(…), the 95%
-- interval of that very release (query/intervals.rs rewrites them before planning).

CREATE FUNCTION dp_interval_low(value anyelement) RETURNS float8
    LANGUAGE c STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_interval_unbound';
COMMENT ON FUNCTION dp_interval_low(anyelement) IS 'pg_dp: around a pg_dp aggregate call in a DP query (dp_interval_low(dp_avg(x, 0, 100))), the low end of the 95% interval of that release: the released value minus the half-width its receipt states, computed from public parameters only (for dp_avg, dp_variance and dp_stddev from its own noisy statistics); NULL for dp_percentile_em. Free: it releases nothing new';
CREATE FUNCTION dp_interval_high(value anyelement) RETURNS float8
    LANGUAGE c STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_interval_unbound';
COMMENT ON FUNCTION dp_interval_high(anyelement) IS 'pg_dp: around a pg_dp aggregate call in a DP query (dp_interval_high(dp_count(*))), the high end of the 95% interval of that release: the released value plus the half-width its receipt states; NULL for dp_percentile_em. Free: it releases nothing new';

CREATE FUNCTION dp.interval_half_width_final(state int4) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_interval_half_width';
COMMENT ON FUNCTION dp.interval_half_width_final(int4) IS 'pg_dp internal: final function of dp.interval_half_width';
-- reads no row: int4larger keeps the tag; the final function reads the receipt of the release of the
-- call tagged by its argument, in the same aggregation
CREATE AGGREGATE dp.interval_half_width(tag int4) (
    SFUNC = int4larger, STYPE = int4, COMBINEFUNC = int4larger,
    FINALFUNC = dp.interval_half_width_final, PARALLEL = SAFE);
COMMENT ON AGGREGATE dp.interval_half_width(int4) IS 'pg_dp internal: the 95% half-width of the receipt of the release, in the same aggregation and group, of the pg_dp aggregate call tagged tag; for dp_interval_low and dp_interval_high';
CREATE FUNCTION dp.interval_bound(value anyelement, half_width float8, high bool) RETURNS float8
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_interval_bound';
COMMENT ON FUNCTION dp.interval_bound(anyelement, float8, bool) IS 'pg_dp internal: a released value minus (high false) or plus (high true) its half-width, as float8, for dp_interval_low and dp_interval_high';

-- Arithmetic that cannot fail, below a DP aggregate (src/query/arithmetic.rs): the grammar makes the
-- operator nodes of + - * / % it admits there call these instead of their own functions. Each reads
-- its operator and operand types from its node; called directly, it refuses. VOLATILE: the planner
-- never evaluates them outside their node (folding bound parameters, estimating selectivity).
CREATE FUNCTION dp.total_int2("any", "any") RETURNS int2 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int4("any", "any") RETURNS int4 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int8("any", "any") RETURNS int8 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_float4("any", "any") RETURNS float4 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_float8("any", "any") RETURNS float8 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_numeric("any", "any") RETURNS numeric LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int2("any") RETURNS int2 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int4("any") RETURNS int4 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int8("any") RETURNS int8 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
COMMENT ON FUNCTION dp.total_int2("any", "any") IS 'pg_dp internal: smallint + - * / % below a DP aggregate, saturated at the smallint range; division or remainder by 0 gives NULL';
COMMENT ON FUNCTION dp.total_int4("any", "any") IS 'pg_dp internal: integer + - * / % below a DP aggregate, saturated at the integer range; division or remainder by 0 gives NULL';
COMMENT ON FUNCTION dp.total_int8("any", "any") IS 'pg_dp internal: bigint + - * / % below a DP aggregate, saturated at the bigint range; division or remainder by 0 gives NULL';
COMMENT ON FUNCTION dp.total_float4("any", "any") IS 'pg_dp internal: real + - * / below a DP aggregate, IEEE (overflow gives ±Infinity, no underflow error); division by 0 gives NULL';
COMMENT ON FUNCTION dp.total_float8("any", "any") IS 'pg_dp internal: double precision + - * / below a DP aggregate, IEEE (overflow gives ±Infinity, no underflow error); division by 0 gives NULL';
COMMENT ON FUNCTION dp.total_numeric("any", "any") IS 'pg_dp internal: numeric + - * / % below a DP aggregate; overflow gives ±Infinity, division or remainder by 0 gives NULL';
COMMENT ON FUNCTION dp.total_int2("any") IS 'pg_dp internal: smallint unary minus below a DP aggregate, saturated';
COMMENT ON FUNCTION dp.total_int4("any") IS 'pg_dp internal: integer unary minus below a DP aggregate, saturated';
COMMENT ON FUNCTION dp.total_int8("any") IS 'pg_dp internal: bigint unary minus below a DP aggregate, saturated';

-- Plans of DP queries with a date or time read from the clock (current_date - 30, now() - interval '1 day')
-- depend on this view: each execution queues its invalidation, so that the next transaction plans again and
-- reads the clock again (src/query/clock.rs).
CREATE VIEW dp.clock AS SELECT pg_catalog.now() AS now;
COMMENT ON VIEW dp.clock IS 'pg_dp internal: the plans of DP queries with a constant read from the clock depend on this view, and are planned again in each transaction';
GRANT SELECT ON dp.clock TO PUBLIC;

-- Dates and times on columns below a DP aggregate, in total forms (src/query/datetime.rs): date_trunc with a
-- constant unit, and the operators date ± integer, date − date, timestamp ± interval, timestamp − timestamp.
CREATE FUNCTION dp.total_date_trunc_ts(text, timestamp) RETURNS timestamp LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_date_trunc';
CREATE FUNCTION dp.total_date_trunc_tstz(text, timestamptz) RETURNS timestamptz LANGUAGE c STABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_date_trunc';
CREATE FUNCTION dp.total_date("any", "any") RETURNS date LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
CREATE FUNCTION dp.total_date_diff("any", "any") RETURNS int4 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
CREATE FUNCTION dp.total_timestamp("any", "any") RETURNS timestamp LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
CREATE FUNCTION dp.total_timestamptz("any", "any") RETURNS timestamptz LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
CREATE FUNCTION dp.total_interval("any", "any") RETURNS interval LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
COMMENT ON FUNCTION dp.total_date_trunc_ts(text, timestamp) IS 'pg_dp internal: date_trunc below a DP aggregate: infinities stay, values within 1,001 years of the start of the range or 8 days of its end give NULL';
COMMENT ON FUNCTION dp.total_date_trunc_tstz(text, timestamptz) IS 'pg_dp internal: date_trunc below a DP aggregate: infinities stay, values within 1,001 years of the start of the range or 8 days of its end give NULL';
COMMENT ON FUNCTION dp.total_date("any", "any") IS 'pg_dp internal: date ± integer below a DP aggregate, saturated at ±infinity';
COMMENT ON FUNCTION dp.total_date_diff("any", "any") IS 'pg_dp internal: date − date below a DP aggregate; NULL when one is infinite';
COMMENT ON FUNCTION dp.total_timestamp("any", "any") IS 'pg_dp internal: timestamp (or date) ± interval below a DP aggregate; NULL when the result could leave the range';
COMMENT ON FUNCTION dp.total_timestamptz("any", "any") IS 'pg_dp internal: timestamptz ± interval below a DP aggregate; NULL when the result could leave the range';
COMMENT ON FUNCTION dp.total_interval("any", "any") IS 'pg_dp internal: timestamp − timestamp below a DP aggregate; NULL when one is infinite';
CREATE FUNCTION dp.total_date_to_timestamp(date) RETURNS timestamp LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_date_to_timestamp';
CREATE FUNCTION dp.total_date_to_timestamptz(date) RETURNS timestamptz LANGUAGE c STABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_date_to_timestamp';
COMMENT ON FUNCTION dp.total_date_to_timestamp(date) IS 'pg_dp internal: date to timestamp below a DP aggregate; dates past the ends of the timestamp range become ±infinity';
COMMENT ON FUNCTION dp.total_date_to_timestamptz(date) IS 'pg_dp internal: date to timestamptz below a DP aggregate; dates past the ends of the timestamp range become ±infinity';
CREATE FUNCTION dp.total_timestamp_to_date(timestamp) RETURNS date LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_timestamp_to_date';
CREATE FUNCTION dp.total_timestamptz_to_date(timestamptz) RETURNS date LANGUAGE c STABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_timestamp_to_date';
COMMENT ON FUNCTION dp.total_timestamp_to_date(timestamp) IS 'pg_dp internal: timestamp to date below a DP aggregate; values within 8 days of the ends of the range become ±infinity';
COMMENT ON FUNCTION dp.total_timestamptz_to_date(timestamptz) IS 'pg_dp internal: timestamptz to date below a DP aggregate; values within 8 days of the ends of the range become ±infinity';

-- Statistics of relations without protected data, for roles restricted by pg_dp (src/query/statistics_mask.rs):
-- the statistics columns of pg_class and the size functions are rewritten into these, NULL for relations that
-- hold protected data (a protected table, its partitions, indexes and TOAST table).
CREATE FUNCTION dp.class_stat(oid, anyelement) RETURNS anyelement LANGUAGE c STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_class_stat';
COMMENT ON FUNCTION dp.class_stat(oid, anyelement) IS 'pg_dp internal: a statistics column of pg_class (reltuples, relpages, relallvisible), NULL for relations that hold protected data';
CREATE FUNCTION dp.masked_relation_size(regclass) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_relation_size(regclass, text) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_table_size(regclass) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_total_relation_size(regclass) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_indexes_size(regclass) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_database_size(name) RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_null';
CREATE FUNCTION dp.masked_database_size(oid) RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_null';
CREATE FUNCTION dp.masked_tablespace_size(name) RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_null';
CREATE FUNCTION dp.masked_tablespace_size(oid) RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_null';
COMMENT ON FUNCTION dp.masked_relation_size(regclass) IS 'pg_dp internal: pg_relation_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_relation_size(regclass, text) IS 'pg_dp internal: pg_relation_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_table_size(regclass) IS 'pg_dp internal: pg_table_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_total_relation_size(regclass) IS 'pg_dp internal: pg_total_relation_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_indexes_size(regclass) IS 'pg_dp internal: pg_indexes_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_database_size(name) IS 'pg_dp internal: pg_database_size for roles restricted by pg_dp: NULL (a database with protected tables counts their bytes)';
COMMENT ON FUNCTION dp.masked_database_size(oid) IS 'pg_dp internal: pg_database_size for roles restricted by pg_dp: NULL (a database with protected tables counts their bytes)';
COMMENT ON FUNCTION dp.masked_tablespace_size(name) IS 'pg_dp internal: pg_tablespace_size for roles restricted by pg_dp: NULL';
COMMENT ON FUNCTION dp.masked_tablespace_size(oid) IS 'pg_dp internal: pg_tablespace_size for roles restricted by pg_dp: NULL';

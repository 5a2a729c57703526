//! The description of a DP query: what the query grammar (`src/query/grammar.rs`) produces when it
//! admits one level of a query that computes pg_dp aggregates.
//!
//! A *DP level* is one `SELECT … FROM …` whose select list or HAVING holds pg_dp aggregates. The
//! grammar has checked that every row reaching those aggregates comes from exactly one row of one
//! table (the *source*), possibly extended by many-to-one joins with public tables, and selected by
//! predicates that cannot raise an error for any stored value. The description records that shape:
//! the source, the public joins, the filters, the group keys and each aggregate with its parameters.
//!
//! The description travels with the plan (serialized in the plan node that releases the level's
//! values) and is read again when the query runs: charging takes its list of releases from here, and
//! later rewrites (per-person contribution bounding, distributed execution) start from it.
use serde::{Deserialize, Serialize};

/// One admitted DP level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DpLevel {
    /// The role the level was validated for. Plans that admit a protected table depend on the role;
    /// the executor refuses to run a level for any other role.
    pub role: u32,
    /// The table whose rows are aggregated: one input row per row of this table.
    pub source: Relation,
    /// Public tables joined many-to-one to the source (each source row matches at most one row).
    pub joins: Vec<PublicJoin>,
    /// Number of conjuncts in WHERE and ON that select rows (each a row-local predicate).
    pub filters: usize,
    /// The GROUP BY keys, as column names (`table.column`) or `expression`.
    pub group_keys: Vec<String>,
    /// Number of grouping sets (1 without GROUPING SETS, ROLLUP or CUBE): each row belongs to one
    /// group of every set, so every aggregate is released once per set.
    pub grouping_sets: u32,
    /// The pg_dp aggregates of the level, in the order the grammar met them.
    pub aggregates: Vec<DpAggregate>,
    /// The privacy unit of the source, if its table declares one: every aggregate then runs over
    /// per-unit values (docs/privacy/privacy-units.md). None: one row is one person.
    #[serde(default)]
    pub unit: Option<PrivacyUnit>,
    /// How the level releases its GROUP BY keys.
    #[serde(default)]
    pub keys: KeyRelease,
    /// For a level over a Citus table: the exact query the coordinator runs on its behalf (the
    /// analysed query tree as text), whose rows the level's merge aggregates release
    /// (docs/distributed.md). None for a level computed in one server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_query: Option<String>,
    /// The protected tables (OIDs) the level's input reads: the source, and the tables a privacy
    /// unit's foreign-key path joins. Only scans of these, below the level's release node, are
    /// admitted; any other scan of a protected table in the statement is a raw read.
    #[serde(default)]
    pub reads: Vec<u32>,
    /// The GROUP BY keys that are plain columns of a table, as (table OID, column number): the
    /// planner drops from the grouping a column whose table's primary key is grouped too (it is
    /// functionally dependent), and passes it up beside the keys; only these may pass so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_columns: Vec<(u32, i16)>,
}

/// The privacy unit of a level's source: the column that identifies a person, reached from the
/// source through many-to-one foreign keys when the source's own unit column references another
/// protected table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivacyUnit {
    /// The column holding the unit, `table.column`, at the end of the foreign-key path.
    pub column: String,
    /// The foreign keys followed from the source, each `table.column → table.column`.
    pub through: Vec<String>,
    /// A unit contributes to at most this many groups of one grouping set (chosen at random).
    pub max_groups_contributed: u32,
    /// A unit's count in a group is clamped to at most this (dp_count).
    pub max_count_per_unit: u32,
}

/// How a level's GROUP BY keys are released.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub enum KeyRelease {
    /// As they are: no GROUP BY, or a source that is not protected.
    #[default]
    AsStored,
    /// Every combination of public key values gets a row (empty ones included, with noise); the
    /// entries describe where each key's values come from.
    PublicDomain(Vec<String>),
    /// Groups are kept by DP partition selection at (ε, δ) per group.
    Selected { epsilon: f64, delta: f64 },
}

/// A table, as the grammar saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relation {
    pub oid: u32,
    /// Schema-qualified name, for receipts and messages.
    pub name: String,
    /// Protected by pg_dp (`SECURITY LABEL FOR pg_dp … IS 'protected'`).
    pub protected: bool,
}

/// A many-to-one join with a public table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicJoin {
    pub relation: Relation,
    /// Columns of the public table's unique key that the join equates with columns already joined.
    pub key: Vec<String>,
    /// LEFT JOIN (source rows without a match are kept) rather than an inner join.
    pub outer: bool,
}

/// One pg_dp aggregate call of a level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DpAggregate {
    /// The tag the grammar wrote into the call (unique within a statement): the plan's aggregate
    /// nodes carry it, so the executor can find the call the description speaks of.
    pub tag: i32,
    /// The function, e.g. `dp_sum(double precision,double precision,double precision,double precision)`.
    pub function: String,
    /// The aggregated value: a column name (`table.column`), `expression`, or `*` for `dp_count(*)`.
    pub value: String,
    /// Whether the call has a FILTER clause.
    pub filtered: bool,
    /// Where each parameter comes from, in argument order after the value.
    pub params: Vec<ParamSource>,
}

/// Where a parameter (ε, δ, p, a bound) of an admitted call comes from. The grammar admits only
/// these; the value is read when the query runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ParamSource {
    /// A literal in the query text (possibly cast or negated).
    Literal,
    /// A bind parameter `$n` (possibly cast).
    Bind(u32),
    /// A bound declared for the aggregated column by a DBA (`dp.set_bounds`), which the grammar
    /// supplied to a call written without bounds.
    Declared,
    /// The session's default ε (`dp.default_epsilon` or `dp.privacy_level`), which the grammar
    /// supplied as a constant to a call written without ε.
    Default,
    /// The table's row count declared public by a DBA (`dp.set_public_count`), which the grammar
    /// supplied to a mean over every row of the table.
    PublicCount,
}

impl DpLevel {
    /// How many receipts one aggregate of this level produces: one per grouping set, times the
    /// number of groups one unit may contribute to. Disjoint groups within a set cost one release
    /// (parallel composition over units); a unit in k groups is in k of them.
    pub fn releases_per_aggregate(&self) -> u32 {
        self.grouping_sets.max(1) * self.groups_per_unit()
    }

    /// The number of groups of one grouping set a person can contribute to: 1 without GROUP BY or
    /// without a privacy unit (a row is in one group), else the unit's declared bound.
    pub fn groups_per_unit(&self) -> u32 {
        match &self.unit {
            Some(u) if !self.group_keys.is_empty() => u.max_groups_contributed.max(1),
            _ => 1,
        }
    }

    /// The aggregate carrying `tag`, if it belongs to this level.
    pub fn aggregate(&self, tag: i32) -> Option<&DpAggregate> {
        self.aggregates.iter().find(|a| a.tag == tag)
    }

    /// The level as JSON (how it travels inside a plan).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a DpLevel always serializes")
    }

    pub fn from_json(s: &str) -> Option<DpLevel> {
        serde_json::from_str(s).ok()
    }
}

/// Tags the grammar writes into the `location` field of admitted aggregate calls. Parse locations
/// are -1 or offsets into the query text, so a tag (at most [`TAG_BASE`]) can never be mistaken for
/// a location, and no SQL text can produce one.
pub const TAG_BASE: i32 = -1_000_000;

/// The tag of the `i`-th admitted aggregate call of a statement.
pub fn tag(i: usize) -> i32 {
    TAG_BASE - i as i32
}

/// True for a value written by [`tag`].
pub fn is_tag(location: i32) -> bool {
    location <= TAG_BASE
}

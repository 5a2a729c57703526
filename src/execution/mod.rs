//! Running admitted statements: the planner and executor hooks, the DP Release node, per-scan
//! admission, fail closed and the session's list of releases. Imports `budget` and the layers below.
pub mod admission;
pub mod distributed_rows;
pub mod estimates;
pub mod fail_closed;
pub mod intervals;
pub mod lifecycle;
pub mod planner;
pub mod recent;
pub mod release;
pub mod tickets;

//! Private synthetic microdata: the engine (count tables, structure selection, measurement,
//! estimation, sampling) and the public encoding of columns into codes ([`columns`]).
pub mod columns;

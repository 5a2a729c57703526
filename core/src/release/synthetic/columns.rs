//! The public encoding of a column into codes 0..k and back (filled in by the SQL-facing work).

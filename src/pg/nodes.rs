//! PostgreSQL lists and expression trees: iteration over pointer and OID lists, and collecting the
//! nodes of given kinds from an expression.
use crate::pg::error::raise_with;
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;

pub unsafe fn list_nth_ptr<T>(list: *mut pg_sys::List, n: usize) -> *mut T {
    pg_sys::list_nth(list, n as i32) as *mut T
}

pub unsafe fn list_len(list: *mut pg_sys::List) -> usize {
    if list.is_null() {
        0
    } else {
        (*list).length as usize
    }
}

/// The elements of a PostgreSQL pointer list (a NULL list is empty).
pub unsafe fn list_iter<T>(list: *mut pg_sys::List) -> impl Iterator<Item = *mut T> {
    (0..list_len(list)).map(move |i| list_nth_ptr::<T>(list, i))
}

/// The OIDs of a PostgreSQL OID list (a NULL list is empty).
pub unsafe fn list_oids(list: *mut pg_sys::List) -> Vec<pg_sys::Oid> {
    (0..list_len(list)).map(|i| (*(*list).elements.add(i)).oid_value).collect()
}

/// The integers of a PostgreSQL integer list (a NULL list is empty).
pub unsafe fn list_ints(list: *mut pg_sys::List) -> Vec<i32> {
    (0..list_len(list)).map(|i| (*(*list).elements.add(i)).int_value).collect()
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn collect_walker(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let (tags, out, too_deep) = &mut *(ctx as *mut (&[pg_sys::NodeTag], &mut Vec<*mut pg_sys::Node>, bool));
    if pg_sys::stack_is_too_deep() {
        *too_deep = true;
        return true;
    }
    if tags.contains(&(*node).type_) {
        out.push(node);
    }
    pg_sys::expression_tree_walker(node, Some(collect_walker), ctx)
}

/// Every node of one of the types `tags` in an expression tree, in one walk. An expression too
/// deep to walk is one error, raised here rather than deep in the walk.
pub unsafe fn collect_nodes(node: *mut pg_sys::Node, tags: &[pg_sys::NodeTag], out: &mut Vec<*mut pg_sys::Node>) {
    if node.is_null() {
        return;
    }
    let mut ctx = (tags, out, false);
    collect_walker(node, &mut ctx as *mut _ as *mut std::ffi::c_void);
    if ctx.2 {
        raise_with(PgSqlErrorCode::ERRCODE_STATEMENT_TOO_COMPLEX, "expression nested too deeply for pg_dp".into(), None);
    }
}

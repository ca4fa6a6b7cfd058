//! The read verbs (get and list) and the lookups of stored objects the other verbs share.

use std::sync::Arc;

use http::{Response, StatusCode};

use super::pagination::{ListParams, encode_continue, merge_page};
use super::query::{OutputMode, Query};
use super::response::{json_bytes, render, render_list};
use super::route::Route;
use super::selectors::Selectors;
use super::{Body, Shared};
use crate::error::ApiError;
use crate::store::{ObjKey, StoredObject};

/// The object name on the URL, which the verb requires (405 on a collection, as the real
/// server serves no such method there).
pub(crate) fn url_name(route: &Route) -> Result<String, ApiError> {
    route.name.clone().ok_or_else(ApiError::method_not_allowed)
}

/// The stored object named `name` at the route's resource and namespace, if any.
pub(crate) fn stored_object(
    shared: &Shared,
    route: &Route,
    name: &str,
) -> Option<Arc<StoredObject>> {
    shared
        .store
        .lock()
        .get(&crate::convert::storage_key(&route.t), route.ns(), name)
}

/// Like [`stored_object`], or 404 NotFound.
pub(crate) fn existing_object(
    shared: &Shared,
    route: &Route,
    name: &str,
) -> Result<Arc<StoredObject>, ApiError> {
    stored_object(shared, route, name)
        .ok_or_else(|| ApiError::not_found(&route.t.group, &route.t.plural, name))
}

/// A get: the named object, rendered for the output mode (a `resourceVersion` that is not a
/// number or lies in the future is refused, as the real server does).
pub(crate) async fn get(
    shared: &Shared,
    route: &Route,
    q: &Query,
    mode: OutputMode,
) -> Result<Response<Body>, ApiError> {
    let name = route.name.as_deref().unwrap_or_default();
    let current = shared.store.lock().rv();
    super::options::get_rv(q, current)?;
    let obj = existing_object(shared, route, name)?;
    let obj = super::conversion::read_one(route, obj).await?;
    Ok(json_bytes(StatusCode::OK, render(&obj, route, mode)))
}

/// A list: one page of the objects the selectors select, from the snapshot the pagination
/// parameters name ([`super::pagination`]).
pub(crate) async fn list(
    shared: &Shared,
    route: &Route,
    q: &Query,
    mode: OutputMode,
) -> Result<Response<Body>, ApiError> {
    let t = &route.t;
    let sel = Selectors::parse(t, q)?;
    let params = ListParams::parse(q)?;
    let ns = route.namespace.as_deref();
    let resource = crate::convert::storage_key(t);
    let (page, list_rv) = {
        let store = shared.store.lock();
        let (snapshot_rv, after) = params.snapshot(store.rv())?;
        let list_rv = snapshot_rv.unwrap_or(store.rv());
        let overlay = match snapshot_rv {
            Some(at) => store.overlay_at(&resource, at).map_err(|e| {
                ApiError::expired(format!(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. (oldest available resourceVersion {})",
                    e.oldest
                ))
            })?,
            None => Default::default(),
        };
        let in_scope =
            |k: &ObjKey| ns.is_none_or(|ns| k.0 == ns) && after.as_ref().is_none_or(|a| k > a);
        let page = merge_page(
            store.range(&resource, ns, after.as_ref()),
            overlay.iter().filter(|(k, _)| in_scope(k)),
            |obj: &Arc<StoredObject>| sel.is_everything() || sel.matches(&obj.value),
            params.page_limit(),
        );
        (page, list_rv)
    };
    let continue_token = page
        .next
        .map(|k| encode_continue(list_rv, &k))
        .unwrap_or_default();
    // As upstream, the count is given when no selector filters the list.
    let remaining = (page.remaining > 0 && sel.is_everything()).then_some(page.remaining);
    let items = super::conversion::served_list(route, page.items).await?;
    Ok(json_bytes(
        StatusCode::OK,
        render_list(route, &items, list_rv, &continue_token, remaining, mode),
    ))
}
